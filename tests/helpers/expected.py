"""The ``bert_score`` scorers' confidences computed from the engine's P and R, for tests.

The scorers weigh punctuation and the prompt's own tokens 0 (``zero_weight``, checked against a
hand computation in ``tests/scorers/test_prompt_weights.py``) and ``bert_score`` is the
F-measure of P and R with beta ``F_BETA`` (1: F1): these helpers apply exactly that to the
engine's numbers.
"""

from __future__ import annotations

import math

import numpy as np

from uqlm_bert.bertscore._engine import BERTScorer
from uqlm_bert.scorers._bertscore import F_BETA, f_beta, punctuation_ids


def scorer_pr(
    engine: BERTScorer, response: str, samples: list[str], prompt: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """P and R of ``response`` against each sample, with the scorers' token weights."""
    zero = set(punctuation_ids(engine.encoder.tokenizer))
    if prompt is not None:
        zero |= set(engine.encoder.tokenize([prompt])[0])
    P, R, _ = engine.score([response] * len(samples), samples, zero_weight=[zero] * len(samples))
    return P.double().numpy(), R.double().numpy()


def default_confidence(
    engine: BERTScorer, response: str | None, samples: list, prompt: str | None = None
) -> float:
    """``bert_score``'s confidence: the mean F-measure (beta ``F_BETA``) over the present
    samples."""
    present = [s for s in samples if isinstance(s, str)]
    if response is None or not present:
        return math.nan
    P, R = scorer_pr(engine, response, present, prompt)
    return float(np.mean(f_beta(P, R, F_BETA)))


def precision_confidence(engine: BERTScorer, response: str, samples: list) -> float:
    """``bert_score_precision``'s confidence: the mean P over the present samples."""
    present = [s for s in samples if isinstance(s, str)]
    return float(np.mean(scorer_pr(engine, response, present)[0]))
