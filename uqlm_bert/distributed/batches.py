"""Scoring one batch of rows: the work each Ray actor does, with no Ray in sight.

A row is a response and its sampled responses. Rows are checked one by one: a malformed row (a
response that is not a string, samples that are not a list of strings) gets NaN scores and a
message in the ``score_error`` column, and the rest of the batch is scored as usual. Missing values
(``None``, NaN, ``pd.NA``) are failed LLM calls, exactly as for the scorers themselves: a missing
sample is skipped and a missing response scores NaN, with no error.

:class:`ScoreBatch` builds its scorers once, in its constructor, so a Ray actor that holds one
loads the model once and then scores batch after batch.

Example:
    >>> import pandas as pd
    >>> from uqlm_bert.distributed import ScoreBatch
    >>> score = ScoreBatch(scorers=["bert_score"])
    >>> out = score(pd.DataFrame({
    ...     "response": ["Paris is the capital of France.", 42],
    ...     "sampled_responses": [["The capital of France is Paris.", None], ["forty-two"]],
    ... }))
    >>> bool(0 < out["bert_score"][0] <= 1), out["score_error"][1]
    (True, 'response has type int (42); expected a string or null')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert.exceptions import InputValidationError
from uqlm_bert.scorers import Scorer, available_scorers, build_scorers, register_scorer

__all__ = ["ERROR_COLUMN", "ScoreBatch", "check_row"]

#: The output column that says why a row could not be scored (null where it was).
ERROR_COLUMN = "score_error"


def _is_missing(value: Any) -> bool:
    """None, NaN or pd.NA: how a failed call or an empty cell reaches a batch."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} ({text if len(text) <= 40 else text[:37] + '...'})"


def check_row(
    response: Any,
    samples: Any,
    response_column: str = "response",
    samples_column: str = "sampled_responses",
) -> tuple[str | None, list[str | None], str | None]:
    """Normalise one row for the scorers, or say why it cannot be scored.

    Args:
        response: the row's response: a string, or missing (None, NaN, pd.NA).
        samples: the row's sampled responses: a list, tuple or 1-d array of strings and missing
            values, or missing altogether (no samples).
        response_column: the response's column name, used in messages.
        samples_column: the samples' column name, used in messages.

    Returns:
        ``(response, samples, error)``: the response as a str or None, the samples as a list of
        str or None, and None; or, for a malformed row, ``(None, [], message)``.

    Example:
        >>> import numpy as np
        >>> check_row("yes", np.array(["yes", None], dtype=object))
        ('yes', ['yes', None], None)
        >>> check_row("yes", "yes")[2]
        'sampled_responses is a string; expected a list of sampled responses (in CSV, a JSON list)'
    """
    if _is_missing(response):
        response = None
    elif not isinstance(response, str):
        return (
            None,
            [],
            f"{response_column} has type {_describe(response)}; expected a string or null",
        )
    if _is_missing(samples):
        return response, [], None
    if isinstance(samples, (str, bytes)):
        return (
            None,
            [],
            (
                f"{samples_column} is a string; expected a list of sampled responses "
                "(in CSV, a JSON list)"
            ),
        )
    if isinstance(samples, np.ndarray) and samples.ndim == 1:
        samples = samples.tolist()
    elif isinstance(samples, (list, tuple)):
        samples = list(samples)
    else:
        return (
            None,
            [],
            f"{samples_column} has type {_describe(samples)}; expected a list of strings",
        )
    clean: list[str | None] = []
    for j, sample in enumerate(samples):
        if _is_missing(sample):
            clean.append(None)
        elif isinstance(sample, str):
            clean.append(str(sample))
        else:
            return (
                None,
                [],
                (f"{samples_column}[{j}] has type {_describe(sample)}; expected a string or null"),
            )
    return (None if response is None else str(response)), clean, None


class ScoreBatch:
    """A callable that scores a pandas batch of rows; one instance per Ray actor.

    Args:
        scorers: scorer names, as for :func:`uqlm_bert.scorers.build_scorers`.
        scorer_kwargs: keyword arguments for the scorers (``model_type``, ``device``,
            ``batch_size``, ``dtype``, ...).
        factories: ``{name: factory}`` to register in this process before building, so that
            scorers registered in the driver exist in the worker too.
        response_column: the column holding each response.
        samples_column: the column holding each row's list of sampled responses.
        num_threads: torch threads for this process (None leaves torch's default).

    Calling it with a batch returns a copy of the batch with one float64 column per scorer and
    ``score_error``, a string column: null, or why the row could not be scored.

    Raises:
        InputValidationError: (on call) the batch lacks the response or samples column.

    Example:
        >>> import pandas as pd
        >>> score = ScoreBatch(scorers=["bert_score"])
        >>> batch = pd.DataFrame({"response": ["4"], "sampled_responses": [["4", "four"]]})
        >>> list(score(batch).columns)
        ['response', 'sampled_responses', 'bert_score', 'score_error']
    """

    def __init__(
        self,
        scorers: Sequence[str] = ("bert_score",),
        scorer_kwargs: Mapping[str, Any] | None = None,
        factories: Mapping[str, Callable[..., Scorer]] | None = None,
        response_column: str = "response",
        samples_column: str = "sampled_responses",
        num_threads: int | None = None,
    ) -> None:
        if num_threads is not None:
            import torch

            torch.set_num_threads(max(1, int(num_threads)))
        available_scorers()  # the built-ins first, so shipped factories win over them
        for name, factory in (factories or {}).items():
            register_scorer(name, factory)
        self.scorers: list[Scorer] = build_scorers(list(scorers), **dict(scorer_kwargs or {}))
        self.response_column = response_column
        self.samples_column = samples_column

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        """Score ``batch``; see the class docstring."""
        absent = [c for c in (self.response_column, self.samples_column) if c not in batch.columns]
        if absent:
            raise InputValidationError(
                f"the rows have no column {absent[0]!r} (columns: {list(batch.columns)}); "
                "name the right ones with response_column= and samples_column="
            )
        n = len(batch)
        responses: list[str | None] = []
        samples: list[list[str | None]] = []
        errors: list[str | None] = []
        for response, row_samples in zip(
            batch[self.response_column], batch[self.samples_column], strict=True
        ):
            r, s, e = check_row(response, row_samples, self.response_column, self.samples_column)
            responses.append(r)
            samples.append(s)
            errors.append(e)
        ok = [i for i, e in enumerate(errors) if e is None]
        out = batch.copy(deep=False)
        for scorer in self.scorers:
            values = np.full(n, np.nan, dtype=np.float64)
            if ok:
                values[ok] = scorer.score(
                    [responses[i] for i in ok], [samples[i] for i in ok], show_progress_bars=False
                )
            out[scorer.name] = values
        # a string column even where every row is fine, so all blocks share one schema
        out[ERROR_COLUMN] = pd.Series(errors, index=out.index, dtype="string")
        return out
