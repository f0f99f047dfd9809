"""uqlm-bert: how far to trust an LLM's answer, without seeing inside the model.

For each prompt the LLM is asked once for an answer and m more times for samples; the answer is
scored against each sample with BERTScore, and the mean F1 (the prompt's own tokens and
punctuation weigh 0) is the confidence in [0, 1].

The public names are imported on first use, so ``import uqlm_bert`` is quick and loads neither
torch, transformers nor LangChain until something needs them.

Example:
    >>> from uqlm_bert import BERTScorer
    >>> scorer = BERTScorer()  # the embedded all-MiniLM-L6-v2, no network needed
    >>> P, R, F = scorer.score(["The cat sat on the mat."], ["A cat was sitting on the mat."])
    >>> bool(0.5 < float(F[0]) <= 1.0)
    True
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from uqlm_bert import _exceptions
from uqlm_bert._exceptions import *  # noqa: F403 - every error class is public here
from uqlm_bert._lazy import lazy_exports

if TYPE_CHECKING:
    from uqlm_bert._blackbox import BlackBoxUQ, ScoringSettings
    from uqlm_bert._local_llm import LocalLLM
    from uqlm_bert.bertscore import BERTScorer, BERTScoreSettings
    from uqlm_bert.evaluation._calibration import ScoreCalibrator
    from uqlm_bert.generation._settings import GenerationSettings
    from uqlm_bert.results import UQResult

__version__ = "0.1.0"

logging.getLogger("uqlm_bert").addHandler(logging.NullHandler())

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BlackBoxUQ": "uqlm_bert._blackbox",
        "UQResult": "uqlm_bert.results",
        "BERTScorer": "uqlm_bert.bertscore._engine",
        "BERTScoreSettings": "uqlm_bert.bertscore._settings",
        "GenerationSettings": "uqlm_bert.generation._settings",
        "ScoringSettings": "uqlm_bert._blackbox",
        "ScoreCalibrator": "uqlm_bert.evaluation._calibration",
        "LocalLLM": "uqlm_bert._local_llm",
    },
)

__all__ = [
    "BlackBoxUQ",
    "UQResult",
    "BERTScorer",
    "BERTScoreSettings",
    "GenerationSettings",
    "ScoringSettings",
    "ScoreCalibrator",
    "LocalLLM",
    *_exceptions.__all__,
    "__version__",
]
