"""A call's scores, gathered prompt by prompt from the rows the scoring queue gives back.

A prompt whose samples come at once is one row: its scores are that row's. A prompt that draws
its samples in rounds (``sampling="until_settled"``) is one row per round, each scored once: its
confidence under a pairwise scorer is the mean of the pair scores of all its rows (what one pass
over all its samples gives), and its token supports are the rows' pooled by their samples
(:func:`~uqlm_bert.bertscore._token_support.pooled`). A sample is scored once; the answer is
embedded again in each round's batch. Only the scorers that :func:`combines_over_rounds` are
scored round by round.

Example:
    >>> from uqlm_bert.scorers._base import Pass
    >>> g = Gathered(["exact_match"], 1)
    >>> g.add([0], Pass({"exact_match": np.array([1.0])}, None,
    ...                 {"exact_match": [np.array([1.0])]}))
    >>> g.add([0], Pass({"exact_match": np.array([0.5])}, None,
    ...                 {"exact_match": [np.array([1.0, 0.0])]}))
    >>> g.pairs(0, "exact_match").tolist(), g.scores()["exact_match"].round(4).tolist()
    ([1.0, 1.0, 0.0], [0.6667])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uqlm_bert.bertscore._token_support import pooled
from uqlm_bert.scorers._base import PairwiseScorer, Scorer

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport

__all__ = ["Gathered", "Part", "combines_over_rounds"]


def combines_over_rounds(scorer: Scorer) -> bool:
    """Whether ``scorer``'s confidence of a prompt drawn in rounds is the mean of its rows' pair
    scores: it scores each pair on its own (pairwise) and a row's score does not depend on its
    batch. The others are scored once, at the end, and cannot decide when a prompt stops."""
    return scorer.batch_invariant and isinstance(scorer, PairwiseScorer)


@dataclass(frozen=True)
class Part:
    """One row's scores of one prompt: a confidence and (pairwise scorers) the pair scores per
    scorer, the token supports, and the best candidate (``use_best``)."""

    scores: dict[str, float]
    pairs: dict[str, np.ndarray]
    support: TokenSupport | None
    best: int | None


class Gathered:
    """The rows of a call's prompts as they are scored, and the scores they add up to.

    Args:
        names: the scorers whose scores the rows hold.
        n: the call's prompts.
    """

    def __init__(self, names: Sequence[str], n: int) -> None:
        self.names = list(names)
        self._parts: list[list[Part]] = [[] for _ in range(n)]

    def add(self, indices: Sequence[int], scored: Any) -> None:
        """Take the scores of rows of the prompts ``indices``, in order (``scored``: a
        :class:`~uqlm_bert.scorers._base.Pass` or a ``Scored`` of those rows)."""
        supports = scored.supports
        best = getattr(scored, "best", None)
        pairs = getattr(scored, "pairs", None) or {}
        for k, i in enumerate(indices):
            self._parts[i].append(
                Part(
                    {name: float(values[k]) for name, values in scored.scores.items()},
                    {name: values[k] for name, values in pairs.items()},
                    None if supports is None else supports[k],
                    None if best is None else int(best[k]),
                )
            )

    def scored(self, index: int) -> bool:
        """Whether prompt ``index`` has a scored row."""
        return bool(self._parts[index])

    def pairs(self, index: int, name: str) -> np.ndarray:
        """Every pair score of scorer ``name`` for prompt ``index``, in the order drawn."""
        found = [p.pairs[name] for p in self._parts[index] if name in p.pairs]
        return np.concatenate(found) if found else np.empty(0)

    def scores(self) -> dict[str, np.ndarray]:
        """Each scorer's confidence per prompt: a prompt's one row's, or the mean of its rows'
        pair scores; NaN where a prompt has none."""
        out = {name: np.full(len(self._parts), np.nan) for name in self.names}
        for i, parts in enumerate(self._parts):
            for name in self.names:
                if len(parts) == 1:
                    out[name][i] = parts[0].scores.get(name, np.nan)
                elif parts:
                    values = self.pairs(i, name)
                    out[name][i] = values.mean() if values.size else np.nan
        return out

    def supports(self) -> list[TokenSupport | None] | None:
        """Each prompt's token supports, pooled over its rows; None where no row has any."""
        out: list[TokenSupport | None] = []
        for parts in self._parts:
            support = None
            for part in parts:
                support = pooled(support, part.support)
            out.append(support)
        return out if any(s is not None for s in out) else None

    def best(self) -> list[int | None]:
        """Each prompt's best candidate (``use_best``: its one row's), None where unscored."""
        return [parts[-1].best if parts else None for parts in self._parts]
