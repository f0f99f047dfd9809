"""What a generation run produces: texts in fixed slots, failures beside them, and call counts.

Every prompt has one slot for its original response and ``num_responses`` slots for samples. A
slot holds the text the LLM returned, or ``None`` plus a :class:`CallFailure` saying why not. Slots
never move: a failed call leaves a hole in its own place and nowhere else.

Example:
    >>> from uqlm_bert.generation._records import CallFailure, GenerationResult
    >>> failure = CallFailure(kind="bad_request", message="HTTP 400: prompt too long", attempts=1)
    >>> result = GenerationResult.empty(["p0", "p1"], num_responses=2)
    >>> result.responses[0] = "an answer"
    >>> result.sample_errors[1][0] = failure
    >>> result.num_failed_samples()
    [0, 1]
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallFailure", "CallStats", "GenerationResult", "TRANSIENT_KINDS"]

#: Failure kinds worth trying again later (after backoff, or in a resumed run).
TRANSIENT_KINDS = frozenset({"rate_limit", "server", "timeout", "connection", "malformed"})


@dataclass(frozen=True)
class CallFailure:
    """Why one LLM call (original response or one sample) produced no text.

    Attributes:
        kind: ``"rate_limit"``, ``"server"``, ``"timeout"``, ``"connection"``, ``"malformed"``,
            ``"bad_request"``, ``"auth"`` or ``"other"``.
        message: the provider's error, shortened to one line.
        attempts: how many attempts were made before giving up.
        status_code: the HTTP status of the last attempt, where there was one.

    Example:
        >>> str(CallFailure(kind="timeout", message="no reply within 5 s", attempts=3))
        'timeout after 3 attempts: no reply within 5 s'
    """

    kind: str
    message: str
    attempts: int = 1
    status_code: int | None = None

    @property
    def transient(self) -> bool:
        """Whether a later run could succeed where this one failed."""
        return self.kind in TRANSIENT_KINDS

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the form stored in checkpoint files): the fields by name."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CallFailure:
        """Rebuild a failure from :meth:`to_dict` output."""
        return cls(
            kind=str(d["kind"]),
            message=str(d.get("message", "")),
            attempts=int(d.get("attempts", 1)),
            status_code=None if d.get("status_code") is None else int(d["status_code"]),
        )

    def __str__(self) -> str:
        plural = "attempt" if self.attempts == 1 else "attempts"
        return f"{self.kind} after {self.attempts} {plural}: {self.message}"


@dataclass
class CallStats:
    """Counts of LLM calls in one run.

    Attributes:
        attempts: HTTP calls sent (retries included): what a provider bills and rate-limits.
            A call that asks for several samples with ``n`` is one.
        succeeded: slots filled with text.
        failed: slots left empty after all attempts.
        retries: attempts beyond the first for a slot.
        from_checkpoint: slots taken from a checkpoint file instead of the LLM.
        failures_by_kind: failed slots per failure kind.
        rate_limited: attempts answered with HTTP 429.
        repaired_replies: replies whose text held invalid Unicode (lone surrogates), repaired.
        max_in_flight: the most calls in flight at once.
        concurrency_start: the limit on calls in flight at the start of the run.
        learned_start: whether that start is where an earlier run against the same provider
            ended (it had pushed back), rather than the run's calls up to the cap.
        concurrency_peak: the highest limit on calls in flight that adaptive concurrency reached.
        concurrency_final: that limit at the end of the run (where the next run against the
            same provider starts, once it has pushed back).
        n_calls: calls that asked for several samples with ``n``.
        choices_missing: samples asked for with ``n`` that the provider did not return (asked
            for again).
        samples_per_call: the most samples one call asked for (1: ``n`` not used).
        max_choices: the most samples a call asks for at the end of the run: 1 where ``n`` is
            off, or the provider showed that it ignores or refuses it (kept for later runs
            against it), less than ``max_samples_per_call`` where it returned fewer choices.

    Example:
        >>> stats = CallStats(attempts=7, succeeded=5, failed=1, retries=1)
        >>> stats.as_dict()["attempts"]
        7
    """

    attempts: int = 0
    succeeded: int = 0
    failed: int = 0
    retries: int = 0
    from_checkpoint: int = 0
    failures_by_kind: Counter = field(default_factory=Counter)
    rate_limited: int = 0
    repaired_replies: int = 0
    max_in_flight: int = 0
    concurrency_start: int = 0
    learned_start: bool = False
    concurrency_peak: int = 0
    concurrency_final: int = 0
    n_calls: int = 0
    choices_missing: int = 0
    samples_per_call: int = 1
    max_choices: int = 1

    def as_dict(self) -> dict[str, Any]:
        """A plain dict for result metadata: the fields by name, the failures by kind sorted."""
        out = dataclasses.asdict(self)
        out["failures_by_kind"] = dict(sorted(self.failures_by_kind.items()))
        return out


@dataclass
class GenerationResult:
    """Texts and failures for every prompt, in input order.

    Attributes:
        prompts: the prompts as given (a copy of the caller's list).
        responses: the original response per prompt, ``None`` where its call failed (or was not
            made).
        response_errors: the failure beside each missing response.
        sampled_responses: the samples of each prompt, ``None`` where a call failed:
            ``num_responses`` of them, or where a prompt stopped sampling once its answer was
            settled, the ones it drew.
        sample_errors: the failure beside each missing sample.
        stats: call counts.
        run: the settings that changed what was generated, as a checkpoint's header holds them.

    Example:
        >>> r = GenerationResult.empty(["q"], num_responses=3)
        >>> r.sampled_responses
        [[None, None, None]]
    """

    prompts: list[Any]
    responses: list[str | None]
    response_errors: list[CallFailure | None]
    sampled_responses: list[list[str | None]]
    sample_errors: list[list[CallFailure | None]]
    stats: CallStats = field(default_factory=CallStats)
    run: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def empty(cls, prompts: list[Any], num_responses: int) -> GenerationResult:
        """A result with every slot empty and no failures."""
        n = len(prompts)
        return cls(
            prompts=list(prompts),
            responses=[None] * n,
            response_errors=[None] * n,
            sampled_responses=[[None] * num_responses for _ in range(n)],
            sample_errors=[[None] * num_responses for _ in range(n)],
        )

    def keep_drawn(self, drawn: list[int]) -> None:
        """Keep the first ``drawn[i]`` sample slots of each prompt ``i`` (the slots it asked
        for), dropping the rest."""
        for i, k in enumerate(drawn):
            del self.sampled_responses[i][k:], self.sample_errors[i][k:]

    def num_failed_samples(self) -> list[int]:
        """How many sample slots of each prompt hold a failure."""
        return [sum(e is not None for e in errs) for errs in self.sample_errors]
