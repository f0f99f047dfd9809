"""BERTScore consistency scorers: the answer against each sample, averaged over samples.

- ``bert_score``: mean F1 of (response as candidate, sample as reference) over the samples.
- ``bert_score_precision`` / ``bert_score_recall``: the same with P or R.

Run together through :func:`~uqlm_bert.scorers.base.score_all` (as ``BlackBoxUQ`` does), the three
compute BERTScore once per call: the pair scores are shared within the call, keyed by the
engine's settings, and dropped when the call ends.

Example:
    >>> from uqlm_bert.scorers import build_scorer
    >>> s = build_scorer("bert_score")
    >>> conf = s.score(["Water boils at 100 C."], [["At sea level water boils at 100 C.", None]])
    >>> bool(0 < conf[0] <= 1)
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from uqlm_bert.bertscore.settings import SCORER_DEFAULTS, BERTScoreSettings
from uqlm_bert.exceptions import ConfigurationError
from uqlm_bert.scorers.base import Pairs, PairwiseScorer

if TYPE_CHECKING:
    from uqlm_bert.bertscore.engine import BERTScorer

__all__ = ["BERTSCORE_SCORERS", "BERTScoreConsistency", "DEFAULT_THRESHOLD", "SCORER_DEFAULTS"]

#: The names of the BERTScore consistency scorers, by BERTScore component.
BERTSCORE_SCORERS = {
    "f1": "bert_score",
    "precision": "bert_score_precision",
    "recall": "bert_score_recall",
}

#: The default threshold of the ``bert_score`` scorer at its default settings: answers below it
#: are flagged as likely hallucinations by ``UQResult.flag()`` and ``filter()``.
#:
#: The rule that chose it: on the 30 development passages of the WikiBio GPT-3 hallucination
#: set (SelfCheckGPT's data), a passage is a likely hallucination when the mean of its sentence
#: labels (accurate 0, minor 0.5, major 1) is at least 0.5; the threshold maximises Youden's J
#: (true-positive rate minus false-positive rate) of ``confidence < threshold`` over the four
#: disjoint sets of 5 samples (the default ``num_responses``) pooled, rounded to two decimals.
#: There: J 0.43, 57% of the hallucinated passages flagged and 14% of the others (the figures
#: are in benchmarks/RESULTS.md). Unrelated samples score far below it (about 0.3) and
#: paraphrases far above (0.85 and more).
DEFAULT_THRESHOLD = 0.72

_COMPONENT = {"precision": 0, "recall": 1, "f1": 2}


class BERTScoreConsistency(PairwiseScorer):
    """Mean BERTScore (F1, P or R) of the response against each present sample.

    Args:
        metric: ``"f1"`` (the scorer ``bert_score``), ``"precision"`` or ``"recall"``.
        engine: a loaded :class:`~uqlm_bert.BERTScorer` to use; by default one is made from
            the settings.
        bertscore: the BERTScore settings, whole; what they leave unset takes
            :data:`SCORER_DEFAULTS`' value.
        kwargs: else BERTScore settings (``model_type``, ``num_layers``, ``idf``, ``device``,
            ...) on top of :data:`SCORER_DEFAULTS`; an unknown name is an error.

    The engine (torch and the model) loads when the scorer is made, not when this module is
    imported: the registry imports it to know its names.

    Example:
        >>> BERTScoreConsistency("precision", num_layers=4).name
        'bert_score_precision'
    """

    def __init__(
        self,
        metric: str = "f1",
        engine: BERTScorer | None = None,
        *,
        bertscore: BERTScoreSettings | None = None,
        **kwargs: Any,
    ) -> None:
        key = metric.lower() if isinstance(metric, str) else metric
        if key not in _COMPONENT:
            raise ConfigurationError(
                f"metric must be one of {', '.join(_COMPONENT)}, got {metric!r}"
            )
        given = [
            what for what, v in (("engine", engine), ("bertscore", bertscore)) if v is not None
        ]
        if len(given) + bool(kwargs) > 1:
            raise ConfigurationError(
                "give the BERTScore settings once: a BERTScorer as engine, a BERTScoreSettings "
                "as bertscore, or separate settings"
            )
        self.metric = key
        self.name = BERTSCORE_SCORERS[key]
        if engine is None:
            from uqlm_bert.bertscore.engine import BERTScorer

            if isinstance(bertscore, BERTScoreSettings):
                settings = bertscore.with_scorer_defaults()
            elif bertscore is not None:
                raise ConfigurationError(
                    f"bertscore must be a BERTScoreSettings, got {type(bertscore).__name__}"
                )
            else:
                settings = BERTScoreSettings.for_scorers(**kwargs)
            engine = BERTScorer.from_settings(settings, show_progress_bars=True)
        self.engine = engine
        # idf taken from each call's references makes a score depend on the whole call
        self.batch_invariant = engine.batch_invariant
        self.default_threshold = DEFAULT_THRESHOLD if self._at_defaults() else None

    @property
    def model_dtype(self) -> str:
        """The dtype the model runs in, by name (what ``dtype`` resolved to: ``"auto"`` is
        float16 on CUDA, bfloat16 on CPUs with bfloat16 matrix units, ...)."""
        return str(self.engine.dtype).removeprefix("torch.")

    def _at_defaults(self) -> bool:
        """Whether this is ``bert_score`` with the number-changing settings of
        :data:`SCORER_DEFAULTS` (device, batch and chunk sizes change no number)."""
        from uqlm_bert.bertscore.layers import EMBEDDED_MODEL_NAME, MODEL_LAYERS

        s, d = self.engine.settings, SCORER_DEFAULTS
        return (
            self.metric == "f1"
            and self.engine.model_type == EMBEDDED_MODEL_NAME
            and self.engine.num_layers == MODEL_LAYERS[EMBEDDED_MODEL_NAME]
            and (s.idf, s.rescale_with_baseline, s.max_length) == (d.idf, False, None)
        )

    def score_pairs(self, pairs: Pairs) -> np.ndarray:
        """The pair scores of this scorer's component, computing all three once per call."""
        key = ("bert_score", self.engine.settings)
        prf = pairs.shared.get(key)
        if prf is None:
            P, R, F = self.engine.score(
                pairs.cands, pairs.refs, show_progress_bars=pairs.show_progress_bars
            )
            prf = pairs.shared[key] = np.stack([P.numpy(), R.numpy(), F.numpy()], axis=1)
        return prf[:, _COMPONENT[self.metric]].astype(np.float64)

    def __repr__(self) -> str:
        return f"BERTScoreConsistency(metric={self.metric!r}, engine={self.engine!r})"
