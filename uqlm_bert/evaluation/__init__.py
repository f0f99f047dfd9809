"""How good a confidence is: ranking, correlation, thresholds, filtering curves, calibration.

Every function takes ``scores`` then ``labels`` (note: the reverse of scikit-learn's
``(y_true, y_score)``), both one value per item, and returns plain floats or a DataFrame. They
are pure numpy, exact, and tested against scikit-learn and scipy.

- :func:`auroc`: ROC AUC for binary labels (equals scikit-learn's ``roc_auc_score``);
- :func:`auc_pr`: average precision for binary labels (``average_precision_score``);
- :func:`prr`: prediction-rejection ratio against answer quality;
- :func:`pearson`: Pearson's r against graded labels (``scipy.stats.pearsonr``);
- :func:`spearman`: Spearman's rho, ties as average ranks (``scipy.stats.spearmanr``);
- :func:`choose_threshold`: the flagging threshold for the best F1 or a target precision;
- :func:`accuracy_vs_fraction_kept`: accuracy of the answers kept at each confidence threshold;
- :func:`rejection_curve`: the quality of the answers kept at each fraction kept (behind
  :func:`prr`);
- :func:`brier_score`: mean squared error of a probability of being correct
  (``brier_score_loss``);
- :func:`expected_calibration_error`: mean gap between probability and observed frequency;
- :func:`reliability_curve`: per probability bin, mean probability, fraction correct and count
  (``calibration_curve``).

The last three judge probabilities, such as those of :class:`~uqlm_bert.ScoreCalibrator`, not raw
scores.

:class:`~uqlm_bert.ScoreCalibrator` (from ``uqlm_bert``) turns confidences into probabilities of
being correct (isotonic or Platt), fitted on labelled answers and saved as JSON.

Reference-based metrics, which compare answers with ground truth rather than judge a confidence:
:func:`evaluate_references` (BLEU, ROUGE and BERTScore against references: what
``uqlm-bert evaluate`` computes).

Missing values: an item whose score or label is NaN (a scorer gives NaN where a prompt had no
samples) is dropped with a warning; pass ``nan_policy="raise"`` to make that an error instead.

Example:
    >>> from uqlm_bert.evaluation import auroc, spearman
    >>> confidence = [0.93, 0.41, 0.88, 0.52, 0.97]
    >>> correct = [1, 0, 1, 0, 1]
    >>> auroc(confidence, correct)
    1.0
    >>> hallucination_degree = [0.0, 0.8, 0.1, 0.5, 0.0]
    >>> round(spearman(confidence, hallucination_degree), 3)
    -0.975
"""

from uqlm_bert.evaluation._classification import auc_pr, auroc, choose_threshold
from uqlm_bert.evaluation._correlation import pearson, spearman
from uqlm_bert.evaluation._references import evaluate_references
from uqlm_bert.evaluation._rejection import accuracy_vs_fraction_kept, prr, rejection_curve
from uqlm_bert.evaluation._reliability import (
    brier_score,
    expected_calibration_error,
    reliability_curve,
)

__all__ = [
    "accuracy_vs_fraction_kept",
    "evaluate_references",
    "auc_pr",
    "auroc",
    "brier_score",
    "choose_threshold",
    "expected_calibration_error",
    "pearson",
    "prr",
    "rejection_curve",
    "reliability_curve",
    "spearman",
]
