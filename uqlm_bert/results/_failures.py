"""Failed LLM calls, grouped: how many, of which kind, in which prompts.

The one grouping behind a run's ``metadata["failures"]``, the warnings ``BlackBoxUQ`` gives when
calls fail for good, :meth:`UQResult.failures <uqlm_bert.UQResult.failures>`, and the lines
``uqlm-bert generate-and-score`` prints. A failure is a
:class:`~uqlm_bert.generation._records.CallFailure` (its ``kind``: ``"server"``,
``"bad_request"``, ``"timeout"``, ...; its message: its ``str``), or any other value, counted as
``"other"``; ``None`` is a call that did not fail.

Example:
    >>> from uqlm_bert.generation._records import CallFailure
    >>> timeout = CallFailure(kind="timeout", message="no reply within 60 s", attempts=6)
    >>> failures = Failures.of([None, timeout], [[None, timeout], [None, None]])
    >>> failures.failed_prompts, failures.as_metadata()["by_kind"]["timeout"]["count"]
    (1, 2)
    >>> failures.lines(lambda i: f"prompts.txt:{i + 1}")
    ['2 call(s) failed for good (timeout) in 2 row(s): prompts.txt:1, prompts.txt:2; first: timeout after 6 attempts: no reply within 60 s']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from uqlm_bert._checks import check_int
from uqlm_bert._warn import warn_user
from uqlm_bert.results._identical_samples import warn_if_identical_share

__all__ = ["FAILED_CALLS_WARNING", "FailureGroup", "Failures", "warn_failures"]

#: What the warning about calls that failed for good starts with, as a regular expression (for
#: ``warnings.filterwarnings``: the command, say, which reports them row by row instead).
FAILED_CALLS_WARNING = r"\d+ LLM call\(s\) failed for good"


@dataclass(frozen=True)
class FailureGroup:
    """The failed calls of one kind.

    Attributes:
        kind: the kind of failure (``"server"``, ``"timeout"``, ...).
        count: how many calls failed so.
        prompts: the prompts they belong to (in a result, their labels: ``prompt_index``),
            distinct, first seen first.
        example: the message of the first of them.
    """

    kind: str
    count: int
    prompts: tuple[int, ...]
    example: str


@dataclass(frozen=True)
class Failures:
    """The failed calls of a run, counted and grouped by kind.

    Attributes:
        responses: prompts whose answer failed.
        samples: samples that failed, over all prompts.
        prompts_with_failures: prompts with at least one failed call.
        failed_prompts: prompts left without a confidence by their calls: the answer failed,
            or every sample did.
        groups: one :class:`FailureGroup` per kind, sorted by kind.
    """

    responses: int
    samples: int
    prompts_with_failures: int
    failed_prompts: int
    groups: tuple[FailureGroup, ...]

    @classmethod
    def of(
        cls,
        response_errors: Sequence[Any],
        sample_errors: Sequence[Sequence[Any]],
        labels: Sequence[int] | None = None,
    ) -> Failures:
        """Group the failures of a run: one entry per prompt in each list, ``None`` where the
        call did not fail; a group names its prompts by ``labels`` (by default their positions)."""
        found: dict[str, list[tuple[int, Any]]] = {}
        with_failures = failed = failed_samples = 0
        for i, (error, errors) in enumerate(zip(response_errors, sample_errors, strict=True)):
            lost = [e for e in errors if e is not None]
            failed_samples += len(lost)
            with_failures += error is not None or bool(lost)
            failed += error is not None or (bool(errors) and len(lost) == len(errors))
            for failure in [error, *errors]:
                if failure is not None:
                    kind = str(getattr(failure, "kind", "other"))
                    found.setdefault(kind, []).append((i if labels is None else labels[i], failure))
        groups = tuple(
            FailureGroup(
                kind,
                len(calls),
                tuple(dict.fromkeys(i for i, _ in calls)),
                str(calls[0][1]),
            )
            for kind, calls in sorted(found.items())
        )
        responses = sum(e is not None for e in response_errors)
        return cls(responses, failed_samples, with_failures, failed, groups)

    def as_metadata(self) -> dict[str, Any]:
        """The counts as a run's ``metadata["failures"]`` holds them (plain data, for JSON)."""
        return {
            "responses": self.responses,
            "samples": self.samples,
            "prompts_with_failures": self.prompts_with_failures,
            "by_kind": {g.kind: {"count": g.count, "example": g.example} for g in self.groups},
        }

    def lines(self, location: Callable[[int], str], shown: int = 3) -> list[str]:
        """One line per kind: how many calls, in how many prompts, where the first ``shown`` of
        them are (``location(i)`` names prompt ``i``), and the first message."""
        check_int("shown", shown, 0)
        out = []
        for g in self.groups:
            where = ", ".join(location(i) for i in g.prompts[:shown])
            more = f" and {len(g.prompts) - shown} more" if len(g.prompts) > shown else ""
            out.append(
                f"{g.count} call(s) failed for good ({g.kind}) in {len(g.prompts)} row(s): "
                f"{where}{more}; first: {g.example}"
            )
        return out


def warn_failures(metadata: Mapping[str, Any]) -> None:
    """Warn, at the caller's line, once per kind of failed call in ``metadata["failures"]``,
    once for the replies repaired (``metadata["calls"]["repaired_replies"]``), and once where
    most prompts' samples are all identical although sampled hot
    (``metadata["identical_samples"]``, see :mod:`uqlm_bert.results._identical_samples`)."""
    identical = metadata.get("identical_samples")
    if identical:
        temperature = metadata.get("sampling_temperature")
        warn_if_identical_share(identical["prompts"], identical["judged"], temperature)
    repaired = metadata.get("calls", {}).get("repaired_replies", 0)
    if repaired:
        warn_user(
            f"{repaired} LLM repl(ies) held characters that are not valid Unicode (lone "
            "surrogates); each was replaced by U+FFFD and the text kept and scored",
            UserWarning,
        )
    by_kind = metadata.get("failures", {}).get("by_kind", {})
    for kind, entry in sorted(by_kind.items()):
        warn_user(
            f"{entry['count']} LLM call(s) failed for good ({kind}; e.g. {entry['example']}); "
            "their slots hold None and the reasons are in the result's error columns "
            "(to_df()['error'], to_df()['sample_errors'])",
            RuntimeWarning,
        )
