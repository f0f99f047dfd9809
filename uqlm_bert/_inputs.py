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

Scores and labels, as the evaluation metrics, the calibrator and the plots take them, are
checked here too (:func:`paired_arrays`): both become float64 arrays that must pair up, and a
missing value follows ``nan_policy``:

* ``"omit"`` (the default): an item whose score or label is NaN (or ``None``) is dropped, with a
  :class:`UserWarning` that says how many were dropped and where. Scorers give NaN where a prompt
  had no samples to score against, so this keeps an evaluation running.
* ``"raise"``: a NaN raises :class:`~uqlm_bert.InputValidationError` naming its index.

Infinite values are always an error: no metric can rank or average them meaningfully. The
checks of single parameter values (counts, numbers, setting names) are in
:mod:`uqlm_bert._checks`.

Example:
    >>> inputs = scoring_lists(["Paris.", float("nan")], [["Paris.", None], None])
    >>> inputs.responses, inputs.samples
    (['Paris.', None], [['Paris.', None], []])
    >>> present_pairs(inputs)
    ([0], ['Paris.'], ['Paris.'])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert._warn import warn_user

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "NanPolicy",
    "ScoringInputs",
    "as_inputs",
    "check_binary",
    "check_not_constant",
    "float_vector",
    "is_missing",
    "paired_arrays",
    "present_pairs",
    "prompt_text",
    "reference_lists",
    "repair_text",
    "scoring_lists",
    "text_list",
    "text_problem",
]

#: What to do with an item whose score or label is missing: drop it (with a warning) or fail.
NanPolicy = Literal["omit", "raise"]

_SHOW_AT_MOST = 5


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


def text_problem(value: Any) -> str | None:
    """Why ``value`` is not a usable text (None when it is one): the rule for a table's cell.

    Example:
        >>> text_problem("yes"), text_problem(None), text_problem(3)
        (None, 'missing (empty or null)', 'a int, expected a string')
    """
    if is_missing(value):
        return "missing (empty or null)"
    if not isinstance(value, str):
        return f"a {type(value).__name__}, expected a string"
    return None


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
        prompts: each prompt's text (:func:`prompt_text`), or None where it is not known;
            ``None`` when no prompts were given. The BERTScore scorers weigh the prompt's own
            tokens 0 in its response and samples.
    """

    responses: list[str | None]
    samples: list[list[str | None]]
    prompts: list[str | None] | None = None

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
    texts = None if prompts is None else [prompt_text(p) for p in prompts]
    return ScoringInputs(out_resp, out_samples, texts)


def prompt_text(prompt: Any) -> str | None:
    """The text of a prompt: a string as it is, the text of every message of a list of chat
    messages (LangChain messages, ``(role, text)`` pairs or ``{"content": ...}`` dicts) joined
    by newlines, else None.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> prompt_text([SystemMessage("Be brief."), HumanMessage("Capital of Peru?")])
        'Be brief.\\nCapital of Peru?'
        >>> prompt_text("Capital of Peru?"), prompt_text(None)
        ('Capital of Peru?', None)
    """
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        parts = []
        for message in prompt:
            content = getattr(message, "content", None)
            if isinstance(message, dict):
                content = message.get("content")
            elif isinstance(message, (list, tuple)) and len(message) == 2:
                content = message[1]
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):  # content blocks
                parts += [b["text"] for b in content if isinstance(b, dict) and "text" in b]
        return "\n".join(parts) if parts else None
    return None


def as_inputs(responses: Any, sampled_responses: Any = None) -> ScoringInputs:
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


def text_list(values: Any, name: str, *, allow_empty: bool = False) -> list[str]:
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


def reference_lists(refs: Any, n: int) -> list[list[str]]:
    """References as one non-empty list of texts per candidate (``n`` candidates): each item of
    ``refs`` is one reference or a list of them, as ``bert_score`` takes them.

    Raises:
        InputValidationError: not a list, not ``n`` items, or an item that is neither a text nor
            a non-empty list of texts; the message names the index.

    Example:
        >>> reference_lists(["a", ["b", "c"]], 2)
        [['a'], ['b', 'c']]
    """
    if isinstance(refs, (str, bytes)) or not hasattr(refs, "__len__"):
        raise InputValidationError(
            f"refs must be a list of strings or of lists of strings, got {type(refs).__name__}"
        )
    refs = list(refs)
    if len(refs) != n:
        raise InputValidationError(
            f"cands has {n} items but refs has {len(refs)}; give one reference (or one list of "
            "references) per candidate"
        )
    if all(isinstance(r, str) for r in refs):
        return [[r] for r in text_list(refs, "refs")]
    groups: list[list[str]] = []
    for i, r in enumerate(refs):
        if isinstance(r, str):
            groups.append(text_list([r], f"refs[{i}]"))
        elif r is None or not hasattr(r, "__len__"):
            raise InputValidationError(
                f"refs[{i}] is {'None' if r is None else 'a ' + type(r).__name__}; "
                "expected a string or a list of strings"
            )
        elif len(r) == 0:
            raise InputValidationError(f"refs[{i}] is an empty list; give at least one reference")
        else:
            groups.append(text_list(r, f"refs[{i}]"))
    return groups


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


# -- scores and labels -------------------------------------------------------------------------


def paired_arrays(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[float] | np.ndarray,
    nan_policy: NanPolicy = "omit",
    *,
    min_items: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(scores, labels)`` as 1-D float64 arrays with NaN pairs handled per ``nan_policy``.

    Raises:
        InputValidationError: not 1-D, lengths differ, an infinite value, a NaN under
            ``nan_policy="raise"``, or fewer than ``min_items`` items left.

    Example:
        >>> paired_arrays([0.9, 0.2], [1, 0])
        (array([0.9, 0.2]), array([1., 0.]))
    """
    import numpy as np

    if nan_policy not in ("omit", "raise"):
        raise InputValidationError(f"nan_policy must be 'omit' or 'raise', got {nan_policy!r}")
    s = float_vector(scores, "scores")
    y = float_vector(labels, "labels")
    if s.shape[0] != y.shape[0]:
        raise InputValidationError(
            f"scores has {s.shape[0]} items but labels has {y.shape[0]}; give one label per score"
        )
    missing = np.isnan(s) | np.isnan(y)
    if missing.any():
        where = np.flatnonzero(missing)
        shown = ", ".join(str(i) for i in where[:_SHOW_AT_MOST])
        more = f" and {where.size - _SHOW_AT_MOST} more" if where.size > _SHOW_AT_MOST else ""
        if nan_policy == "raise":
            raise InputValidationError(
                f"scores or labels are NaN at index {shown}{more}; drop those items or pass "
                "nan_policy='omit'"
            )
        warn_user(
            f"dropped {where.size} of {s.shape[0]} items whose score or label is NaN "
            f"(index {shown}{more})",
            UserWarning,
        )
        keep = ~missing
        s, y = s[keep], y[keep]
    if s.shape[0] < min_items:
        raise InputValidationError(
            f"need at least {min_items} scored item(s) with a label, got {s.shape[0]}"
        )
    return s, y


def check_binary(
    labels: np.ndarray,
    *,
    both_classes: bool = True,
    purpose: str = "this metric",
    scores: np.ndarray | None = None,
) -> np.ndarray:
    """Return ``labels`` as a bool array; they must be 0/1 (or bool).

    Args:
        labels: the labels, as :func:`paired_arrays` returns them.
        both_classes: also require at least one 1 and one 0.
        purpose: what needs both classes, for the error message.
        scores: the scores given with them: when those are all 0/1 and the labels are not, the
            message says the arguments look swapped (scikit-learn takes labels first).

    Raises:
        InputValidationError: a label other than 0 or 1, or (with ``both_classes``) only one
            class present.

    Example:
        >>> import numpy as np
        >>> check_binary(np.array([1.0, 0.0])).tolist()
        [True, False]
    """
    import numpy as np

    bad = np.flatnonzero((labels != 0) & (labels != 1))
    if bad.size and scores is not None and np.isin(scores, (0.0, 1.0)).all():
        raise InputValidationError(
            f"labels must be 0/1, got {float(labels[bad[0]])!r} at index {bad[0]}, while the "
            "scores are all 0/1: the arguments look swapped. These functions take (scores, "
            "labels), the reverse of scikit-learn's (y_true, y_score)"
        )
    if bad.size:
        raise InputValidationError(
            f"labels must be 0/1 or bool, got {float(labels[bad[0]])!r} at index {bad[0]}; "
            "binarise graded labels first, e.g. labels >= 0.5"
        )
    y = labels == 1
    n_pos = int(y.sum())
    if both_classes and (n_pos == 0 or n_pos == y.size):
        cls = 1 if n_pos else 0
        raise InputValidationError(
            f"labels contain only class {cls} ({y.size} items); {purpose} needs both "
            "positives (1) and negatives (0)"
        )
    return y


def check_not_constant(values: np.ndarray, name: str) -> None:
    """Raise if every value is the same (a correlation or ratio would be undefined).

    Example:
        >>> import numpy as np
        >>> check_not_constant(np.array([0.5, 0.5]), "scores")
        Traceback (most recent call last):
        ...
        uqlm_bert.InputValidationError: scores are all equal (0.5) over 2 items; the metric is undefined for a constant input
    """
    if values.size and (values == values[0]).all():
        raise InputValidationError(
            f"{name} are all equal ({float(values[0])!r}) over {values.size} items; the metric is "
            "undefined for a constant input"
        )
