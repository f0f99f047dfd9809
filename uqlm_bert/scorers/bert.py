"""BERTScore consistency scorers: the answer against each sample, averaged over samples.

- ``bert_score``: mean F1 of (response as candidate, sample as reference) over the samples.
- ``bert_score_precision`` / ``bert_score_recall``: the same with P or R.

All three share one engine and one computation when used together.

Example:
    >>> from uqlm_bert.scorers import build_scorer
    >>> s = build_scorer("bert_score", show_progress_bars=False)
    >>> conf = s.score(["Water boils at 100 C."], [["At sea level water boils at 100 C.", None]])
    >>> bool(0 < conf[0] <= 1)
    True
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from uqlm_bert.bertscore.scorer import BERTScorer
from uqlm_bert.scorers.base import Scorer, mean_by_group, present_pairs, register_scorer

__all__ = ["BERTScoreConsistency", "ENGINE_ARGS"]

#: The keyword arguments passed through to :class:`~uqlm_bert.BERTScorer`.
ENGINE_ARGS = (
    "model_type",
    "num_layers",
    "idf",
    "idf_sents",
    "rescale_with_baseline",
    "baseline_path",
    "lang",
    "device",
    "batch_size",
    "max_length",
    "dtype",
    "trust_remote_code",
    "chunk_size",
)

_METRIC_INDEX = {"precision": 0, "recall": 1, "f1": 2}


class _SharedRun:
    """One BERTScorer plus the last call's pair scores, so P/R/F scorers compute once."""

    def __init__(self, engine: BERTScorer) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._value: np.ndarray | None = None

    def pair_scores(self, cands: list[str], refs: list[str], show: bool) -> np.ndarray:
        key = (tuple(cands), tuple(refs))
        with self._lock:
            if key != self._key:
                P, R, F = self.engine.score(cands, refs, show_progress_bars=show)
                self._value = np.stack([P.numpy(), R.numpy(), F.numpy()], axis=1).astype(
                    np.float64
                )
                self._key = key
            return self._value


_RUNS: dict[tuple, _SharedRun] = {}
_RUNS_LOCK = threading.Lock()


def _shared_run(engine_kwargs: dict[str, Any]) -> _SharedRun:
    key = tuple(sorted((k, _freeze(v)) for k, v in engine_kwargs.items()))
    with _RUNS_LOCK:
        run = _RUNS.get(key)
        if run is None:
            run = _SharedRun(BERTScorer(show_progress_bars=True, **engine_kwargs))
            if len(_RUNS) >= 4:
                _RUNS.pop(next(iter(_RUNS)))
            _RUNS[key] = run
        return run


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted(v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(v)
    return v


class BERTScoreConsistency(Scorer):
    """Mean BERTScore (F1, P or R) of the response against each present sample."""

    def __init__(self, metric: str = "f1", **kwargs: Any) -> None:
        self.metric = metric
        self.name = "bert_score" if metric == "f1" else f"bert_score_{metric}"
        engine_kwargs = {k: v for k, v in kwargs.items() if k in ENGINE_ARGS and v is not None}
        self._run = _shared_run(engine_kwargs)
        # idf taken from each call's references makes a score depend on the whole call
        self.batch_invariant = not self._run.engine._idf_from_refs

    @property
    def engine(self) -> BERTScorer:
        """The underlying BERTScorer."""
        return self._run.engine

    def score(
        self,
        responses: Sequence[str | None],
        sampled_responses: Sequence[Sequence[str | None]],
        show_progress_bars: bool = False,
    ) -> np.ndarray:
        group, cands, refs = present_pairs(responses, sampled_responses)
        if not cands:
            return np.full(len(responses), np.nan)
        values = self._run.pair_scores(cands, refs, show_progress_bars)[:, _METRIC_INDEX[self.metric]]
        return mean_by_group(values, group, len(responses))


def _factory(metric: str):
    def make(**kwargs: Any) -> BERTScoreConsistency:
        return BERTScoreConsistency(metric=metric, **kwargs)

    return make


register_scorer("bert_score", _factory("f1"))
register_scorer("bert_score_precision", _factory("precision"))
register_scorer("bert_score_recall", _factory("recall"))
