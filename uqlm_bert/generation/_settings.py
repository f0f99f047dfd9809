"""``GenerationSettings``: how the LLM is sampled, in one frozen, validated object.

``BlackBoxUQ`` keeps its generation settings as one of these and hands it to the generator at
every call, so a setting changed on the ``BlackBoxUQ`` (``uq.sampling_temperature = 0.3``) is
the one the next call samples with and the one its result reports: nothing is copied into
longer-lived objects that could go stale.

Example:
    >>> s = GenerationSettings(max_calls_per_min=600)
    >>> s.sampling_temperature, s.max_concurrency, s.use_n_param, s.retry.max_retries
    (1.0, 1000, 'auto', 5)
    >>> s.replace(sampling_temperature=0.3).sampling_temperature
    0.3
    >>> GenerationSettings(max_concurrency=0)
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: max_concurrency must be an int >= 1 or None, got 0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from uqlm_bert._checks import check_int, check_names, check_number, given
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.generation._backoff import RetryPolicy
from uqlm_bert.generation._cluster_limits import ClusterLimits
from uqlm_bert.generation._rounds import SAMPLING

__all__ = [
    "NUM_RESPONSES",
    "RETRY_ARGUMENTS",
    "GenerationSettings",
    "checked_generation",
    "generation_settings",
]

#: Samples asked for per prompt when none is said (``generate_and_score``'s ``num_responses``,
#: the command's ``-m``, the web services'): uqlm's default, and the ``m`` the default
#: thresholds were chosen at.
NUM_RESPONSES = 5


@dataclass(frozen=True)
class GenerationSettings:
    """How answers and samples are generated.

    Attributes:
        sampling_temperature: the temperature of the samples (the answer uses the model's own).
        system_prompt: a system message put before each prompt that has none; ``None`` sends
            none.
        max_concurrency: the most LLM calls in flight at once (a hard cap; ``None`` for none).
            Within it the number in flight adapts to the provider (see ``adaptive``).
        initial_concurrency: calls in flight at the start, when ``adaptive``; ``None`` (the
            default) starts with every call of the run, up to ``max_concurrency``.
        adaptive: drop the calls in flight to what the provider was serving on a 429, 5xx or
            timeout, and grow them while it keeps up (no refusals, latency flat), as congestion
            control does; the level reached is kept for the next run against the same provider.
            ``False`` keeps ``max_concurrency`` calls in flight from the start.
        use_n_param: ask for a prompt's samples in one call with the provider's ``n``
            parameter: ``"auto"`` for clients known to accept it (langchain-openai's
            ``ChatOpenAI`` and ``AzureChatOpenAI``), ``True`` for any client, ``False`` for one
            call per sample. A provider that returns fewer choices than asked gets the missing
            samples asked for again, and ``n`` is not used with it from then on.
        max_samples_per_call: the most samples asked for in one call with ``n`` (OpenAI allows
            128); more are split over several calls.
        max_calls_per_min: at most this many calls, retries included, may arrive at the provider
            in any window of ``rate_limit_period`` seconds; ``None`` for no limit.
        rate_limit_period: the window of ``max_calls_per_min``, in seconds.
        retry: retries of transient failures (429, 5xx, timeouts, connection errors,
            unreadable replies).
        request_timeout: seconds one attempt may take before it counts as a timeout; ``None``
            leaves timing to the client.
        disable_client_retries: switch off the client's own retries on the copies of the model
            that are called, so the rate limit and the retry counts see every HTTP call.
        fail_fast: stop the run with an error when the first calls all fail to connect (the
            server is unreachable), instead of retrying every call.
        sampling: ``"until_settled"`` (the default): where a scorer has a flag threshold,
            ``generate_and_score`` draws each prompt's samples in rounds and stops once its
            answer is clearly above or below the threshold, at most ``num_responses`` samples
            (see docs/black_box.md: the rule, what it saves and what it costs in latency);
            ``"fixed"`` draws all ``num_responses`` samples of every prompt at once, as uqlm
            does. Sampling alone (``generate_candidate_responses``) always draws them all.
        cluster_limits: hold ``max_calls_per_min``, ``max_concurrency`` and the adaptive level
            for every process that names the same
            ``ClusterLimits`` (the replicas of a Ray Serve
            deployment, say), through one Ray actor, instead of for this process's
            ``BlackBoxUQ`` alone; ``None`` (the default) keeps them in the process.
    """

    sampling_temperature: float = 1.0
    system_prompt: str | None = None
    max_concurrency: int | None = 1000
    initial_concurrency: int | None = None
    adaptive: bool = True
    use_n_param: bool | str = "auto"
    max_samples_per_call: int = 128
    max_calls_per_min: int | None = None
    rate_limit_period: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    request_timeout: float | None = 60.0
    disable_client_retries: bool = True
    fail_fast: bool = True
    sampling: str = "until_settled"
    cluster_limits: ClusterLimits | None = None

    def __post_init__(self) -> None:
        check_number("sampling_temperature", self.sampling_temperature)
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise ConfigurationError(
                f"system_prompt must be a string or None, got {type(self.system_prompt).__name__}"
            )
        check_int("max_concurrency", self.max_concurrency, 1, none_ok=True)
        check_int("initial_concurrency", self.initial_concurrency, 1, none_ok=True)
        check_int("max_samples_per_call", self.max_samples_per_call, 1)
        if self.use_n_param not in (True, False, "auto") or (
            self.use_n_param in (0, 1) and not isinstance(self.use_n_param, bool)
        ):
            raise ConfigurationError(
                f'use_n_param must be "auto", True or False, got {self.use_n_param!r}'
            )
        check_int("max_calls_per_min", self.max_calls_per_min, 1, none_ok=True)
        check_number("rate_limit_period", self.rate_limit_period, strict=True)
        check_number("request_timeout", self.request_timeout, strict=True, none_ok=True)
        for name in ("adaptive", "disable_client_retries", "fail_fast"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"{name} must be True or False, got {getattr(self, name)!r}"
                )
        if self.cluster_limits is not None and not isinstance(self.cluster_limits, ClusterLimits):
            raise ConfigurationError(
                "cluster_limits must be a ClusterLimits or None, got "
                f"{type(self.cluster_limits).__name__}"
            )
        if self.sampling not in SAMPLING:
            raise ConfigurationError(
                f"sampling must be one of {', '.join(map(repr, SAMPLING))}, got {self.sampling!r}"
            )
        if not isinstance(self.retry, RetryPolicy):
            raise ConfigurationError(
                f"retry must be a RetryPolicy, got {type(self.retry).__name__}"
            )

    @classmethod
    def accepted(cls) -> tuple[str, ...]:
        """The names of the settings, sorted."""
        return tuple(sorted(f.name for f in dataclasses.fields(cls)))

    def replace(self, **changes: Any) -> GenerationSettings:
        """A copy with some settings changed (and checked).

        Raises:
            ConfigurationError: an unknown name or a bad value.
        """
        check_names(changes, self.accepted(), "generation setting")
        return dataclasses.replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        """The settings as plain data, for result metadata and checkpoint headers."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["retry"] = dataclasses.asdict(self.retry)
        if self.cluster_limits is not None:
            out["cluster_limits"] = self.cluster_limits.describe()
        return out


#: Flat arguments of the retry policy, by the name an entry point gives them.
#: The flat arguments of the retry policy an entry point takes, and the policy's field of each.
RETRY_ARGUMENTS = {
    "max_retries": "max_retries",
    "retry_base_delay": "base_delay",
    "retry_max_delay": "max_delay",
}


def generation_settings(
    generation: GenerationSettings | None = None, **arguments: Any
) -> GenerationSettings:
    """An entry point's generation settings, built once: ``generation`` whole, or a
    :class:`GenerationSettings` of the flat ``arguments`` given (the retry policy's as
    ``max_retries``, ``retry_base_delay`` and ``retry_max_delay``); what is left out
    (:data:`~uqlm_bert._checks.NOT_GIVEN`) keeps the settings object's default, which lives there
    only.

    Raises:
        ConfigurationError: ``generation`` is not a :class:`GenerationSettings`, a flat
            argument is given beside it (even with the default's value), or a value is bad.

    Example:
        >>> generation_settings(max_retries=0, sampling_temperature=0.5).retry.max_retries
        0
        >>> generation_settings(GenerationSettings(), max_retries=5)
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: give the generation settings either as generation=GenerationSettings(...) or as separate arguments, not both (given beside it: max_retries)
    """
    flat = given(arguments)
    if generation is not None:
        if flat:
            raise ConfigurationError(
                "give the generation settings either as generation=GenerationSettings(...) or "
                f"as separate arguments, not both (given beside it: {', '.join(sorted(flat))})"
            )
        return checked_generation(generation, "generation")
    retry = {RETRY_ARGUMENTS[k]: flat.pop(k) for k in list(flat) if k in RETRY_ARGUMENTS}
    if retry:
        flat["retry"] = RetryPolicy(**retry)
    check_names(flat, GenerationSettings.accepted(), "generation setting")
    return GenerationSettings(**flat)


def checked_generation(value: Any, name: str) -> GenerationSettings:
    """``value``, after checking that it is a :class:`GenerationSettings`.

    Raises:
        ConfigurationError: it is not; the message names ``name``.
    """
    if not isinstance(value, GenerationSettings):
        raise ConfigurationError(f"{name} must be a GenerationSettings, got {type(value).__name__}")
    return value
