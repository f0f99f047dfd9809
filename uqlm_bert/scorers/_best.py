"""The best answer of a prompt: the candidate that agrees most with the others.

A prompt has candidates: its original answer and its samples (the missing ones left out). Each
candidate is scored, by every scorer, against the other candidates as its samples, in one
:func:`~uqlm_bert.scorers._base.score_all` call for all prompts (the BERTScore engine embeds each
text once, so this costs matching, not another pass of the model). The best candidate is the one
with the highest confidence by the first scorer (the medoid of the candidates, for
``bert_score``): what the samples agree on most. Ties go to the original answer, then to the
earlier sample. Its confidences are its agreement with the other candidates.

Example:
    >>> from uqlm_bert.scorers._lexical import ExactMatchScorer
    >>> best = best_of([ExactMatchScorer()], ["Lima."], [["Paris.", "Paris.", "Paris."]])
    >>> best.index, best.responses, best.scores["exact_match"].round(3).tolist()
    ([0], ['Paris.'], [0.667])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from uqlm_bert._inputs import ScoringInputs, as_inputs
from uqlm_bert.scorers._base import Scorer, score_all

__all__ = ["ORIGINAL", "BestOf", "best_of"]

#: The index that names the original answer as the best candidate (samples are 0, 1, ...).
ORIGINAL = -1


@dataclass(frozen=True)
class BestOf:
    """The best candidate of each prompt.

    Attributes:
        index: :data:`ORIGINAL` for the original answer, else the index of the sample chosen
            (also :data:`ORIGINAL` for a prompt with no candidate at all).
        responses: the text chosen (None for a prompt with no candidate).
        scores: ``{scorer name: the chosen candidate's confidence}``, one per prompt.
    """

    index: list[int]
    responses: list[str | None]
    scores: dict[str, np.ndarray]


def best_of(
    scorers: Sequence[Scorer],
    responses: Sequence[str | None] | ScoringInputs,
    sampled_responses: Sequence[Sequence[str | None]] | None = None,
    show_progress_bars: bool = False,
) -> BestOf:
    """Choose each prompt's best candidate and score it (see the module docstring).

    Raises:
        InputValidationError: the input is malformed (see :func:`uqlm_bert._inputs.scoring_lists`).
    """
    inputs = as_inputs(responses, sampled_responses)
    rows_resp: list[str] = []
    rows_samples: list[list[str]] = []
    owner: list[int] = []
    which: list[int] = []
    for i, (resp, samples) in enumerate(zip(inputs.responses, inputs.samples, strict=True)):
        cands = [(ORIGINAL, resp)] + list(enumerate(samples))
        present = [(k, t) for k, t in cands if t is not None]
        for k, text in present:
            rows_resp.append(text)
            rows_samples.append([t for kk, t in present if kk != k])
            owner.append(i)
            which.append(k)
    n = len(inputs)
    scores = {s.name: np.full(n, np.nan) for s in scorers}
    index = [ORIGINAL] * n
    chosen: list[str | None] = [None] * n
    if not rows_resp:
        return BestOf(index, chosen, scores)
    per_row = score_all(scorers, rows_resp, rows_samples, show_progress_bars)
    primary = per_row[scorers[0].name]
    best_row: dict[int, int] = {}
    for row, i in enumerate(owner):
        value = primary[row]
        current = best_row.get(i)
        if current is None or (
            not np.isnan(value) and (np.isnan(primary[current]) or value > primary[current])
        ):
            best_row[i] = row
    for i, row in best_row.items():
        index[i] = which[row]
        chosen[i] = rows_resp[row]
        for name, values in per_row.items():
            scores[name][i] = values[row]
    return BestOf(index, chosen, scores)
