"""Scoring one batch of rows: the work each Ray actor does, with no Ray in sight.

A row is a response and its sampled responses. Rows are checked one by one with
:func:`uqlm_bert.io._rows.check_row`, by the rules the command-line scorer applies to a file: a row
whose response is missing or not a string, or whose samples are missing or not a list of
strings and nulls, gets NaN scores and the reason in the ``score_error`` column (the text the
local engine writes), and the rest of the batch is scored as usual. A missing sample (a failed
LLM call) is skipped, and a row with no sample left scores NaN, with no error.

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
    (True, "field 'response': a int, expected a string")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import InputValidationError
from uqlm_bert.io._rows import ERROR_COLUMN, check_row
from uqlm_bert.scorers._base import Scorer, score_all
from uqlm_bert.scorers._registry import (
    DEFAULT_SCORERS,
    ScorerPlan,
    ScorerSpec,
    register_scorer,
)

__all__ = ["ERROR_COLUMN", "ScoreBatch"]


class ScoreBatch:
    """A callable that scores a pandas batch of rows; one instance per Ray actor.

    Args:
        scorers: scorer names, as for :func:`uqlm_bert.scorers.build_scorers`.
        scorer_kwargs: keyword arguments for the scorers (``model_type``, ``device``,
            ``batch_size``, ``dtype``, ...).
        specs: ``ScorerSpec`` objects to register in this
            process before building, so that scorers registered in the driver exist in the
            worker too.
        response_column: the column holding each response.
        samples_column: the column holding each row's list of sampled responses.
        num_threads: torch threads for this process (None leaves torch's default).
        plan: the scorers as one ``ScorerPlan`` (their names, settings
            and specs), instead of ``scorers``, ``scorer_kwargs`` and ``specs``: what the
            package's own pools send.

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
        scorers: Sequence[str] = DEFAULT_SCORERS,
        scorer_kwargs: Mapping[str, Any] | None = None,
        specs: Sequence[ScorerSpec] = (),
        response_column: str = "response",
        samples_column: str = "sampled_responses",
        num_threads: int | None = None,
        plan: ScorerPlan | None = None,
    ) -> None:
        if check_int("num_threads", num_threads, 1, none_ok=True) is not None:
            import torch

            torch.set_num_threads(num_threads)
        for spec in specs:
            register_scorer(spec.name, spec.factory, spec.settings)
        if plan is None:
            plan = ScorerPlan.of(list(scorers), scorer_kwargs)
        self.scorers: list[Scorer] = plan.build()
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
        checks = [
            check_row(
                response,
                samples,
                response_column=self.response_column,
                samples_column=self.samples_column,
            )
            for response, samples in zip(
                batch[self.response_column], batch[self.samples_column], strict=True
            )
        ]
        ok = [i for i, check in enumerate(checks) if check.ok]
        out = batch.copy(deep=False)
        scores = (
            score_all(
                self.scorers, [checks[i].response for i in ok], [checks[i].samples for i in ok]
            )
            if ok
            else {}
        )
        for scorer in self.scorers:
            values = np.full(len(batch), np.nan, dtype=np.float64)
            if ok:
                values[ok] = scores[scorer.name]
            out[scorer.name] = values
        # a string column even where every row is fine, so all blocks share one schema
        out[ERROR_COLUMN] = pd.Series(
            [check.error for check in checks], index=out.index, dtype="string"
        )
        return out
