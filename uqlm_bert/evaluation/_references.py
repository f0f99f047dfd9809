"""Reference-based evaluation: how close generated texts are to ground-truth texts.

Unlike the confidence scorers, which compare an answer with samples of the same model, these
compare each prediction with its reference (the ground truth), line by line:

- ``bleu``: corpus BLEU of ``sacrebleu.corpus_bleu`` (13a tokenisation, exponential smoothing), on
  sacrebleu's 0-100 scale, and ``bleu_precisions``: its 1- to 4-gram precisions (0-100);
- ``rouge1``, ``rouge2``, ``rougeL``: F-measures of ``rouge_score.RougeScorer`` (no stemming; its
  tokenizer lowercases and keeps only ASCII letters and digits), averaged over lines (0-1);
- ``bertscore_precision``, ``bertscore_recall``, ``bertscore_f1``: BERTScore of the prediction
  (candidate) against the reference, averaged over lines (0-1).

Needs the ``sacrebleu`` and ``rouge-score`` packages (``pip install 'uqlm-bert[cli]'``).

Example:
    >>> ev = evaluate_references(["The quick brown dog jumps."], ["The quick brown fox jumps."],
    ...                          bertscore_kwargs={"show_progress_bars": False})
    >>> round(ev.summary["rouge2"], 4), [round(p, 2) for p in ev.summary["bleu_precisions"]]
    (0.5, [83.33, 60.0, 25.0, 16.67])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert._inputs import text_list

if TYPE_CHECKING:
    from uqlm_bert.bertscore._engine import BERTScorer

__all__ = ["SUMMARY_KEYS", "ReferenceEvaluation", "evaluate_references"]

#: The keys of :attr:`ReferenceEvaluation.summary`, in order.
SUMMARY_KEYS = (
    "bleu",
    "bleu_precisions",
    "rouge1",
    "rouge2",
    "rougeL",
    "bertscore_precision",
    "bertscore_recall",
    "bertscore_f1",
)

_ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


@dataclass(frozen=True)
class ReferenceEvaluation:
    """Corpus-level scores and the scores of each line.

    Attributes:
        summary: one value per key of :data:`SUMMARY_KEYS` (``bleu_precisions`` is a list of 4).
        per_line: one row per line: ``line`` (1-based), ``prediction``, ``reference``, ``bleu``
            (sentence BLEU, 0-100), ``rouge1``, ``rouge2``, ``rougeL``, ``bertscore_precision``,
            ``bertscore_recall``, ``bertscore_f1``.
    """

    summary: dict[str, Any]
    per_line: pd.DataFrame


def evaluate_references(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    bertscorer: BERTScorer | None = None,
    bertscore_kwargs: dict[str, Any] | None = None,
    show_progress_bars: bool = False,
) -> ReferenceEvaluation:
    """Score each prediction against the reference on the same line, and the corpus as a whole.

    Args:
        predictions: generated texts.
        references: ground-truth texts, one per prediction.
        bertscorer: a loaded :class:`~uqlm_bert.BERTScorer` to reuse; by default one is created
            from ``bertscore_kwargs`` (the embedded model when they name none).
        bertscore_kwargs: arguments for :class:`~uqlm_bert.BERTScorer` (``model_type``,
            ``num_layers``, ``idf``, ``device``, ...).
        show_progress_bars: show BERTScore's progress bar (on stderr).

    Raises:
        InputValidationError: the lists differ in length, are empty, or hold a non-string.
        ConfigurationError: sacrebleu or rouge-score is not installed.

    Example:
        >>> ev = evaluate_references(["a b c d"], ["a b c d"],
        ...                          bertscore_kwargs={"show_progress_bars": False})
        >>> round(ev.summary["bleu"], 6), ev.summary["rougeL"]
        (100.0, 1.0)
    """
    preds = text_list(predictions, "predictions", allow_empty=True)
    refs = text_list(references, "references", allow_empty=True)
    if len(preds) != len(refs):
        raise InputValidationError(
            f"predictions has {len(preds)} texts but references has {len(refs)}; "
            "give one reference per prediction"
        )
    if not preds:
        raise InputValidationError("no texts to evaluate; give at least one prediction")
    sacrebleu, rouge_scorer = _metric_packages()

    corpus = sacrebleu.corpus_bleu(preds, [refs])
    sentence_bleu = [
        sacrebleu.sentence_bleu(p, [r]).score for p, r in zip(preds, refs, strict=True)
    ]

    rouge = rouge_scorer.RougeScorer(list(_ROUGE_TYPES), use_stemmer=False)
    rouge_f = {t: np.empty(len(preds)) for t in _ROUGE_TYPES}
    for i, (p, r) in enumerate(zip(preds, refs, strict=True)):
        scores = rouge.score(r, p)  # rouge-score takes (target, prediction)
        for t in _ROUGE_TYPES:
            rouge_f[t][i] = scores[t].fmeasure

    if bertscorer is None:
        from uqlm_bert.bertscore._engine import BERTScorer

        bertscorer = BERTScorer(**(bertscore_kwargs or {}))
    P, R, F = bertscorer.score(preds, refs, show_progress_bars=show_progress_bars)
    bert = {
        "bertscore_precision": P.double().numpy(),
        "bertscore_recall": R.double().numpy(),
        "bertscore_f1": F.double().numpy(),
    }

    summary: dict[str, Any] = {
        "bleu": float(corpus.score),
        "bleu_precisions": [float(p) for p in corpus.precisions],
    }
    summary.update({t: float(rouge_f[t].mean()) for t in _ROUGE_TYPES})
    summary.update({k: float(v.mean()) for k, v in bert.items()})
    per_line = pd.DataFrame(
        {
            "line": np.arange(1, len(preds) + 1),
            "prediction": pd.Series(preds, dtype=object),
            "reference": pd.Series(refs, dtype=object),
            "bleu": np.asarray(sentence_bleu, dtype=np.float64),
            **rouge_f,
            **bert,
        }
    )
    return ReferenceEvaluation(summary, per_line)


def _metric_packages() -> tuple[Any, Any]:
    try:
        import sacrebleu
        from rouge_score import rouge_scorer
    except ImportError as exc:
        raise ConfigurationError(
            f"reference evaluation needs sacrebleu and rouge-score ({exc}); "
            "install them with: pip install 'uqlm-bert[cli]'"
        ) from exc
    return sacrebleu, rouge_scorer
