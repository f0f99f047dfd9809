"""When a prompt's answer is settled: the rule that stops its sampling, and the judge that
applies it between rounds (``GenerationSettings(sampling="until_settled")``).

A prompt's confidence is the mean, over its samples, of the deciding scorer's score of the answer
against each sample. After each round but the last, with the ``k`` pair scores of the samples
drawn so far (failed calls drew none), their mean ``mean`` and spread ``s`` (standard
deviation), the answer is **settled** when

    |mean - threshold| >= Z * max(s, SPREAD_FLOOR) / sqrt(k)

that is, when the confidence is clearly above or clearly below the flag threshold: by ``Z``
standard errors of the mean, from the answer's own spread with a floor (two samples that happen
to agree say little about a third). A settled prompt stops; the others draw the next round
(:func:`~uqlm_bert.generation._rounds.round_ends`), at most ``num_responses`` samples in all.
A prompt whose answer failed stops after its first round: there is nothing to judge.

The scorer that decides is the first scorer with a threshold (``bert_score`` at its default
settings has one, :data:`~uqlm_bert.scorers._bertscore.DEFAULT_THRESHOLD`; the one the user sets
with ``ScoringSettings(threshold=...)`` is the first scorer's); where none has one,
or it cannot score a round on its own (a scorer whose numbers depend on the whole batch, a
scorer that is not pairwise, or ``use_best``, which chooses among all the samples), every
prompt samples fully. One rule and one set of constants for short answers and long passages
alike; how they were chosen and what they cost and save is in docs/black_box.md.

Example:
    >>> import numpy as np
    >>> settled(np.array([0.95, 0.97]), 0.72), settled(np.array([0.70, 0.76]), 0.72)
    (True, False)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from uqlm_bert._blackbox._gathered import Gathered, combines_over_rounds
from uqlm_bert.generation._rounds import FIRST_ROUND
from uqlm_bert.scorers._base import Scorer
from uqlm_bert.scorers._thresholds import first_threshold, thresholds_of

#: Scores a prompt's samples not scored yet and gives what is gathered of the call's prompts
#: (``ScoringPipeline.score_round``).
ScoreRound = Callable[[int, str | None, list[str | None]], Awaitable[Gathered]]

__all__ = ["SPREAD_FLOOR", "Z", "SettleJudge", "decider", "settled"]

#: How many standard errors of the mean the confidence must lie from the threshold.
Z = 2.0
#: The least spread of an answer's pair scores the rule assumes (the standard deviation of
#: ``bert_score`` over one answer's samples), so that two samples that agree by chance do not
#: settle an answer near the threshold.
SPREAD_FLOOR = 0.02


def settled(
    values: np.ndarray, threshold: float, z: float = Z, floor: float = SPREAD_FLOOR
) -> bool:
    """Whether pair scores ``values`` (NaN: no score) put their mean clearly above or below
    ``threshold`` (the module's rule, with its constants ``z`` and ``floor``); False with
    none."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    k = values.size
    if k == 0:
        return False
    spread = float(values.std(ddof=1)) if k > 1 else 0.0
    return bool(abs(values.mean() - threshold) >= z * max(spread, floor) / np.sqrt(k))


def decider(
    scorers: Sequence[Scorer], use_best: bool, threshold: float | None = None
) -> tuple[str, float] | None:
    """The scorer that decides when a prompt's answer is settled (its name), with its
    threshold: the first scorer with an answer threshold in the run's table of thresholds
    (:func:`~uqlm_bert.scorers._thresholds.thresholds_of`; ``threshold``, where given, is the
    first scorer's); None (every prompt samples fully) where none has one, where it cannot
    score a round on its own, or with ``use_best``."""
    found = first_threshold(thresholds_of(scorers, threshold), "answer")
    if found is None or use_best:
        return None
    scorer = next(s for s in scorers if s.name == found[0])
    if not combines_over_rounds(scorer):
        return None
    return found


class SettleJudge:
    """Between a prompt's rounds: score the round's samples in the call's scoring pipeline and
    say whether the prompt draws another (its answer is not settled yet).

    Args:
        score_round: the call's scoring pipeline's (made with ``rounds=True``)
            ``score_round``.
        scorer: the name of the scorer that decides.
        threshold: the threshold it decides against.
    """

    def __init__(self, score_round: ScoreRound, scorer: str, threshold: float) -> None:
        self.score_round = score_round
        self.scorer = scorer
        self.threshold = threshold

    def describe(self) -> dict[str, Any]:
        """The rule as plain data (a checkpoint's header and the result's metadata)."""
        return {
            "rule": "until_settled",
            "scorer": self.scorer,
            "threshold": self.threshold,
            "z": Z,
            "spread_floor": SPREAD_FLOOR,
            "first_round": FIRST_ROUND,
        }

    async def __call__(self, index: int, response: str | None, samples: list[str | None]) -> bool:
        if response is None:  # the answer failed: there is nothing to judge against
            return False
        gathered = await self.score_round(index, response, samples)
        return not settled(gathered.pairs(index, self.scorer), self.threshold)
