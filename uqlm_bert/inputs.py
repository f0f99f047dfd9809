"""The one normalisation of what users hand in: texts, (response, samples) lists and numbers.

Every entry point (``BlackBoxUQ.score``, the scorers, sentence scoring, the engine, the command,
Ray, evaluation and plots) checks its input here, so one rule holds everywhere:

- **missing** is ``None``, a float NaN (``float("nan")``, ``numpy.nan``), pandas' ``NA`` or
  ``NaT``: what a failed LLM call leaves, and what pandas turns ``None`` into. A missing answer
  or sample is skipped; a missing list of samples is an empty list.
- **text** is a ``str``. Text that cannot be encoded as UTF-8 (a lone surrogate such as
  ``"\\ud800"``, as scraped or mis-decoded text can hold) is repaired: each lone surrogate
  becomes U+FFFD, with one warning per call that counts the repaired texts. The rest of the text,
  and every other row, is scored as usual.
- a **list** is any sized, non-string sequence (list, tuple, pandas Series, numpy array), read
  by position.

Example:
    >>> inputs = scoring_lists(["Paris.", float("nan")], [["Paris.", None], None])
    >>> inputs.responses, inputs.samples
    (['Paris.', None], [['Paris.', None], []])
    >>> present_pairs(inputs)
    ([0], ['Paris.'], ['Paris.'])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from uqlm_bert._warn import warn_user
from uqlm_bert.exceptions import InputValidationError

__all__ = [
    "ScoringInputs",
    "as_inputs",
    "float_vector",
    "is_missing",
    "present_pairs",
    "repair_text",
    "scoring_lists",
    "text_list",
]

#: What a lone surrogate is replaced by.
REPLACEMENT = "\ufffd"


def is_missing(value: object) -> bool:
    """Whether ``value`` marks a missing item: None, a float NaN, pandas' NA or NaT (and
    numpy's NaT).

    Example:
        >>> [is_missing(v) for v in (None, float("nan"), "", 0.0, "nan")]
        [True, True, False, False, False]
    """
    if value is None:
        return True
    if isinstance(value, float):  # numpy.float64 is a float too
        return math.isnan(value)
    if type(value).__name__ in ("NAType", "NaTType"):
        return True
    dtype = getattr(value, "dtype", None)  # numpy scalars: float32, datetime64('NaT'), ...
    if getattr(dtype, "kind", None) in ("f", "c", "m", "M") and getattr(value, "ndim", 1) == 0:
        return bool(value != value)
    return False


def repair_text(text: str) -> tuple[str, bool]:
    """``text`` with each lone surrogate replaced by U+FFFD, and whether anything was replaced.

    A valid surrogate pair written as two code points is joined into the character it encodes.

    Example:
        >>> repair_text("ok")
        ('ok', False)
        >>> repair_text("bad \\ud800 byte")
        ('bad \\ufffd byte', True)
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return fixed, True
    return text, False


class _Repairs:
    """Counts the texts repaired during one normalisation, for a single warning at the end."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None

    def text(self, value: str, where: str) -> str:
        fixed, changed = repair_text(value)
        if changed:
            self.count += 1
            self.first = self.first or where
        return fixed

    def text_or_none(self, value: Any, where: str) -> str | None:
        """A missing value as None, a text repaired; anything else is an error naming ``where``."""
        if is_missing(value):
            return None
        if not isinstance(value, str):
            raise InputValidationError(
                f"{where} is a {type(value).__name__}, expected a string or None"
            )
        return self.text(value, where)

    def warn(self) -> None:
        if self.count:
            warn_user(
                f"{self.count} text(s) held characters that are not valid Unicode (lone "
                f"surrogates; first at {self.first}); each was replaced by U+FFFD and the text "
                "scored",
                UserWarning,
            )


@dataclass(frozen=True)
class ScoringInputs:
    """One response and one list of samples per prompt, normalised.

    Attributes:
        responses: each response, or None where it is missing.
        samples: each prompt's samples, None where a sample is missing.
    """

    responses: list[str | None]
    samples: list[list[str | None]]

    def __len__(self) -> int:
        return len(self.responses)


def _sized_list(value: Any, name: str) -> list[Any]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise InputValidationError(
            f"{name} must be a list with one item per prompt, got {type(value).__name__}"
        )
    return list(value)


def scoring_lists(
    responses: Any,
    sampled_responses: Any,
    prompts: Any = None,
) -> ScoringInputs:
    """Check and normalise ``(responses, sampled_responses)``: the rule every scorer applies.

    Args:
        responses: one response per prompt: a string, or missing.
        sampled_responses: one list of samples per prompt (each a string or missing), or a
            missing value for none.
        prompts: when given, checked to have one item per response.

    Raises:
        InputValidationError: a string where a list belongs, lengths that differ, or an item
            that is neither a string nor missing; the message names the index.

    Example:
        >>> scoring_lists(("a",), [("a", None)]).samples
        [['a', None]]
    """
    resp = _sized_list(responses, "responses")
    groups = _sized_list(sampled_responses, "sampled_responses")
    if len(resp) != len(groups):
        raise InputValidationError(
            f"responses has {len(resp)} items but sampled_responses has {len(groups)}; give "
            "one list of samples per response"
        )
    if prompts is not None and len(_sized_list(prompts, "prompts")) != len(resp):
        raise InputValidationError(
            f"prompts has {len(prompts)} items but responses has {len(resp)}"
        )
    repairs = _Repairs()
    out_resp = [repairs.text_or_none(r, f"responses[{i}]") for i, r in enumerate(resp)]
    out_samples: list[list[str | None]] = []
    for i, group in enumerate(groups):
        if is_missing(group):
            out_samples.append([])
            continue
        if isinstance(group, (str, bytes)) or not hasattr(group, "__len__"):
            raise InputValidationError(
                f"sampled_responses[{i}] must be a list of sampled responses, got "
                f"{type(group).__name__}"
            )
        out_samples.append(
            [repairs.text_or_none(s, f"sampled_responses[{i}][{j}]") for j, s in enumerate(group)]
        )
    repairs.warn()
    return ScoringInputs(out_resp, out_samples)


def as_inputs(
    responses: Any, sampled_responses: Any = None
) -> ScoringInputs:
    """``responses`` if it is already :class:`ScoringInputs`, else :func:`scoring_lists` of the
    two lists.

    Example:
        >>> as_inputs(["a"], [["b"]]) == as_inputs(as_inputs(["a"], [["b"]]))
        True
    """
    if isinstance(responses, ScoringInputs):
        return responses
    return scoring_lists(responses, sampled_responses)


def present_pairs(inputs: ScoringInputs) -> tuple[list[int], list[str], list[str]]:
    """The (response, sample) pairs where both are present: ``(group, cands, refs)``.

    ``group[k]`` is the index of the response of pair ``k``.

    Example:
        >>> present_pairs(ScoringInputs(["a", None], [["x", None, "y"], ["z"]]))
        ([0, 0], ['a', 'a'], ['x', 'y'])
    """
    group: list[int] = []
    cands: list[str] = []
    refs: list[str] = []
    for i, (resp, samples) in enumerate(zip(inputs.responses, inputs.samples, strict=True)):
        if resp is None:
            continue
        for s in samples:
            if s is not None:
                group.append(i)
                cands.append(resp)
                refs.append(s)
    return group, cands, refs


def text_list(
    values: Any, name: str, *, allow_empty: bool = False
) -> list[str]:
    """A list of texts where no item may be missing (the engine's and evaluation's rule).

    Raises:
        InputValidationError: not a list, empty (unless ``allow_empty``), or an item that is
            not a string; the message names the index.

    Example:
        >>> text_list(("a", "b"), "cands")
        ['a', 'b']
    """
    if isinstance(values, (str, bytes)) or not (
        hasattr(values, "__len__") and hasattr(values, "__iter__")
    ):
        raise InputValidationError(f"{name} must be a list of strings, got {type(values).__name__}")
    items = list(values)
    if not items and not allow_empty:
        raise InputValidationError(f"{name} is empty; give at least one text")
    repairs = _Repairs()
    out: list[str] = []
    for i, t in enumerate(items):
        if not isinstance(t, str):
            what = "None" if t is None else f"a {type(t).__name__}"
            raise InputValidationError(f"{name}[{i}] is {what}; every item must be a string")
        out.append(repairs.text(t, f"{name}[{i}]"))
    repairs.warn()
    return out


def float_vector(values: Any, name: str) -> Any:
    """``values`` as a 1-d float64 numpy array (None becomes NaN); infinities are refused.

    Raises:
        InputValidationError: a string, something not numeric, not one-dimensional, or an
            infinite value.

    Example:
        >>> float_vector([0.5, None], "scores").tolist()
        [0.5, nan]
    """
    import numpy as np

    if isinstance(values, (str, bytes)):
        raise InputValidationError(f"{name} must be a sequence of numbers, not a string")
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputValidationError(
            f"{name} must be a sequence of numbers (None or NaN for a missing one): {exc}"
        ) from exc
    if arr.ndim != 1:
        raise InputValidationError(
            f"{name} must be one-dimensional (one number per item), got shape {arr.shape}"
        )
    bad = np.flatnonzero(np.isinf(arr))
    if bad.size:
        raise InputValidationError(
            f"{name}[{bad[0]}] is infinite; give finite numbers (NaN marks a missing one)"
        )
    return arr
