"""BERTScore consistency scorers: the answer against each sample, averaged over samples.

- ``bert_score``: mean BERTScore F1 of (response as candidate, sample as reference) over the
  samples (:data:`F_BETA`); ``beta`` weighs precision, how much of the answer the sample
  supports, against recall, how much of the sample the answer covers (``beta=0.5`` counts
  precision four times as much).
- ``bert_score_precision`` / ``bert_score_recall``: the same with P or R.

Token weights (:data:`PROMPT_AND_PUNCTUATION`, on by default): on top of the idf weights, the
prompt's own tokens and punctuation weigh 0 in the answer and in each sample. Every answer and
sample repeats the question's words ("The capital of Peru is ..."), and punctuation ends them
all: neither says whether the samples agree on the fact, and in a short answer they are most of
the tokens. They are still matched against, as [CLS] and [SEP] are. Without prompts (scoring
answers alone), punctuation alone weighs 0. A prompt's score depends on its own texts only.
An answer made only of the prompt's words and punctuation adds nothing to the question: its
precision, and so its F-measure, is 0.

Run together through :func:`~uqlm_bert.scorers._base.score_all` (as ``BlackBoxUQ`` does), the three
compute BERTScore once per call: the pair scores are shared within the call, keyed by the
engine's settings, and dropped when the call ends. Through
:func:`~uqlm_bert.scorers._base.score_with_supports` the same engine call also keeps each answer
token's best match in each sample, and the scorers give each answer's
:class:`~uqlm_bert.bertscore._token_support.TokenSupport` (:meth:`BERTScoreConsistency.token_supports`).

Example:
    >>> from uqlm_bert.scorers._registry import build_scorer
    >>> s = build_scorer("bert_score")
    >>> conf = s.score(["Water boils at 100 C."], [["At sea level water boils at 100 C.", None]])
    >>> bool(0 < conf[0] <= 1)
    True
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Any

import numpy as np

from uqlm_bert._checks import check_number
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert._inputs import ScoringInputs
from uqlm_bert.bertscore._settings import SCORER_DEFAULTS, BERTScoreSettings
from uqlm_bert.bertscore._token_support import (
    SENTENCE_THRESHOLD,
    WEAK_SUPPORT,
    PairMatches,
    TokenSupport,
)
from uqlm_bert.scorers._base import Pairs, PairwiseScorer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uqlm_bert.bertscore._engine import BERTScorer

__all__ = [
    "BERTSCORE_SCORERS",
    "BERTScoreConsistency",
    "DEFAULT_THRESHOLD",
    "F_BETA",
    "PROMPT_AND_PUNCTUATION",
    "SCORER_DEFAULTS",
    "SUPPORT_THRESHOLDS",
    "f_beta",
    "punctuation_ids",
    "supports_from_matches",
]

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
#: disjoint sets of 5 samples (the default ``num_responses``) pooled, rounded to two decimals
#: (``benchmarks/eval_threshold.py`` applies it and checks this value; the figures, and what it
#: flags, are in benchmarks/RESULTS.md and docs/evaluation.md).
DEFAULT_THRESHOLD = 0.72

#: The support thresholds of the scorers' token supports at the default encoder and layer, by
#: level: words below ``"word"`` are weakly supported (marked), sentences below ``"sentence"``
#: unsupported (flagged, and removed by ``UQResult.refine()``). Each rule is at its constant.
SUPPORT_THRESHOLDS = {"word": WEAK_SUPPORT, "sentence": SENTENCE_THRESHOLD}

_COMPONENT = {"precision": 0, "recall": 1, "f1": 2}

#: The ``bert_score`` scorer's F-measure, ``(1 + b^2) P R / (b^2 P + R)``, has this ``b``:
#: 1, BERTScore's F1, the confidence the design names (other values weigh precision, how much of
#: the answer the samples support, against recall, how much of a sample the answer covers; what
#: was measured is in docs/scorers/bert_score.md).
F_BETA = 1.0
#: The token weighting of the scorers: the prompt's tokens and punctuation weigh 0.
PROMPT_AND_PUNCTUATION = "prompt_and_punctuation"


class BERTScoreConsistency(PairwiseScorer):
    """Mean BERTScore (F1, P or R) of the response against each present sample.

    Args:
        metric: ``"f1"`` (the scorer ``bert_score``: the F-measure with ``beta``, F1 by
            default),
            ``"precision"`` or ``"recall"``.
        engine: a loaded :class:`~uqlm_bert.BERTScorer` to use; by default one is made from
            the settings.
        bertscore: the BERTScore settings, whole; what they leave unset takes
            :data:`SCORER_DEFAULTS`' value.
        kwargs: else BERTScore settings (``model_type``, ``num_layers``, ``idf``, ``device``,
            ...) on top of :data:`SCORER_DEFAULTS`; an unknown name is an error.
        beta: the F-measure's ``beta`` (``metric="f1"``): 1.0 (:data:`F_BETA`), BERTScore's
            F1, by default.
        zero_weight: :data:`PROMPT_AND_PUNCTUATION` (the default) weighs the prompt's tokens
            and punctuation 0; ``None`` keeps the idf weights alone (BERTScore's numbers).

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
        beta: float = F_BETA,
        zero_weight: str | None = PROMPT_AND_PUNCTUATION,
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
        if zero_weight not in (None, PROMPT_AND_PUNCTUATION):
            raise ConfigurationError(
                f"zero_weight must be {PROMPT_AND_PUNCTUATION!r} or None, got {zero_weight!r}"
            )
        check_number("beta", beta, strict=True)
        self.metric = key
        self.beta = float(beta)
        self.zero_weight = zero_weight
        self._punctuation: frozenset[int] | None = None
        self.name = BERTSCORE_SCORERS[key]
        if engine is None:
            from uqlm_bert.bertscore._engine import BERTScorer
            from uqlm_bert.scorers._settings import settings_object

            settings = settings_object(BERTScoreSettings, bertscore, kwargs)
            engine = BERTScorer.from_settings(settings, show_progress_bars=True)
        self.engine = engine
        # idf taken from each call's references makes a score depend on the whole call
        self.batch_invariant = engine.batch_invariant
        self.default_threshold = DEFAULT_THRESHOLD if self._at_defaults() else None

    @property
    def model_dtype(self) -> str:
        """The dtype the model runs in, by name (what ``dtype`` resolved to: ``"auto"`` is
        float16 on CUDA, bfloat16 on CPUs whose bfloat16 units beat float32, ...)."""
        return str(self.engine.dtype).removeprefix("torch.")

    def _at_defaults(self) -> bool:
        """Whether this is ``bert_score`` with the number-changing settings of
        :data:`SCORER_DEFAULTS` (device, batch and chunk sizes change no number)."""
        from uqlm_bert.bertscore._known_models import EMBEDDED_MODEL_NAME, MODEL_LAYERS

        s, d = self.engine.settings, SCORER_DEFAULTS
        return (
            self.metric == "f1"
            and self.beta == F_BETA
            and self.zero_weight == PROMPT_AND_PUNCTUATION
            and self.engine.model_type == EMBEDDED_MODEL_NAME
            and self.engine.num_layers == MODEL_LAYERS[EMBEDDED_MODEL_NAME]
            and (s.idf, s.rescale_with_baseline, s.max_length) == (d.idf, False, None)
        )

    @property
    def support_thresholds(self) -> dict[str, float] | None:
        """The support thresholds of this scorer's token supports by level
        (:data:`SUPPORT_THRESHOLDS`), where they are those the thresholds were chosen on: the
        default encoder at its default layer, the prompt's tokens and punctuation left out (the
        metric, idf, dtype and rescaling change no support); else None. Read when a result is
        made (the model is loaded then)."""
        from uqlm_bert.bertscore._known_models import EMBEDDED_MODEL_NAME, MODEL_LAYERS

        at_defaults = (
            self.zero_weight == PROMPT_AND_PUNCTUATION
            and self.engine.model_type == EMBEDDED_MODEL_NAME
            and self.engine.num_layers == MODEL_LAYERS[EMBEDDED_MODEL_NAME]
        )
        return dict(SUPPORT_THRESHOLDS) if at_defaults else None

    def score_pairs(self, pairs: Pairs) -> np.ndarray:
        """The pair scores of this scorer's component, computing all three once per call (and,
        where ``pairs.supports`` asks, each answer token's best match in each sample)."""
        prf = self._pair_scores(pairs)[0]
        if self.metric == "f1" and self.beta != 1.0:
            return f_beta(prf[:, 0], prf[:, 1], self.beta)
        return prf[:, _COMPONENT[self.metric]].astype(np.float64)

    def token_supports(
        self, pairs: Pairs, group: Sequence[int], inputs: ScoringInputs
    ) -> list[TokenSupport | None] | None:
        """Each response's :class:`~uqlm_bert.bertscore._token_support.TokenSupport` from the engine
        call of :meth:`score_pairs` (which must have run on ``pairs`` with ``pairs.supports``;
        else None): each token's best match in each sample, averaged over the samples, with
        the tokens' character spans (the answer tokenized once more, for its offsets: the ids
        are checked against the engine's) and the scorer's weights. None for a missing response
        or one without samples. Use :func:`~uqlm_bert.scorers._base.score_with_supports`.

        Raises:
            ConfigurationError: the tokenizer cannot say where its tokens lie (not a fast
                tokenizer), or its ids for an answer differ from those scored.
        """
        if not pairs.supports:
            return None
        if not pairs.cands:
            return [None] * len(inputs)
        matches = self._pair_scores(pairs)[1]
        if matches is None:
            return None
        return supports_from_matches(self.engine, matches, group, inputs.responses)

    def _pair_scores(self, pairs: Pairs) -> tuple[np.ndarray, PairMatches | None]:
        """P/R/F of every pair, once per call (and the token matches where collected)."""
        key = ("bert_score", self.engine.settings, self.zero_weight, pairs.supports)
        found = pairs.shared.get(key)
        if found is None:
            zero = self._zero_weights(pairs)
            show = pairs.show_progress_bars
            if pairs.supports:
                matches = self.engine.score_matches(
                    pairs.cands, pairs.refs, show_progress_bars=show, zero_weight=zero
                )
                found = (matches.scores, matches)
            else:
                P, R, F = self.engine.score(
                    pairs.cands, pairs.refs, show_progress_bars=show, zero_weight=zero
                )
                found = (np.stack([P.numpy(), R.numpy(), F.numpy()], axis=1), None)
            pairs.shared[key] = found
        return found

    def _zero_weights(self, pairs: Pairs) -> list[frozenset[int]] | None:
        """Per pair, the token ids that weigh 0: punctuation, and the pair's prompt's tokens."""
        if self.zero_weight is None:
            return None
        if self._punctuation is None:
            self._punctuation = punctuation_ids(self.engine.encoder.tokenizer)
        if pairs.prompts is None:
            return [self._punctuation] * len(pairs.cands)
        known = sorted({p for p in pairs.prompts if p is not None})
        tokens = dict(zip(known, self.engine.encoder.tokenize(known), strict=True))
        sets = {p: self._punctuation | frozenset(ids) for p, ids in tokens.items()}
        return [self._punctuation if p is None else sets[p] for p in pairs.prompts]

    def __repr__(self) -> str:
        return f"BERTScoreConsistency(metric={self.metric!r}, engine={self.engine!r})"


def supports_from_matches(
    engine: BERTScorer,
    matches: PairMatches,
    group: Sequence[int],
    responses: Sequence[str | None],
) -> list[TokenSupport | None]:
    """Each response's :class:`~uqlm_bert.bertscore._token_support.TokenSupport` from the engine's
    :meth:`~uqlm_bert.BERTScorer.score_matches` of (response, sample) pairs: pair ``k`` is
    response ``group[k]`` against one of its samples. A token's support is its best match
    averaged over the response's pairs; its characters come from tokenizing the response once
    more for offsets (the ids checked against the engine's). None for a response without pairs.

    Raises:
        ConfigurationError: the tokenizer cannot say where its tokens lie (not a fast
            tokenizer), or its ids for a response differ from those scored.

    Example:
        >>> from uqlm_bert import BERTScorer
        >>> engine = BERTScorer(show_progress_bars=False)
        >>> m = engine.score_matches(["Lima is in Peru.", "Lima is in Peru."],
        ...                          ["Lima is in Peru.", "Quito is in Ecuador."])
        >>> (ts,) = supports_from_matches(engine, m, [0, 0], ["Lima is in Peru."])
        >>> ts.num_samples, bool(abs(ts.precision - float(m.scores[:, 0].mean())) < 1e-6)
        (2, True)
    """
    from uqlm_bert.bertscore._encoder import token_spans
    from uqlm_bert.bertscore._windows import Frame

    by_response: dict[int, list[int]] = {}
    for k, g in enumerate(group):
        by_response.setdefault(int(g), []).append(k)
    out: list[TokenSupport | None] = [None] * len(responses)
    enc = engine.encoder
    texts = sorted({responses[i] for i in by_response})  # type: ignore[type-var]
    spans = dict(zip(texts, token_spans(enc.tokenizer, texts, enc.token_limit), strict=True))
    frame = Frame.of(enc.tokenizer, enc.max_length)
    for i, ks in by_response.items():
        text = str(responses[i])  # a response with pairs is present
        tokens = spans[text]
        ids = matches.ids[ks[0]]
        if not np.array_equal(tokens.ids, ids):
            raise ConfigurationError(
                f"the tokenizer gave response {i} other token ids with offsets than without "
                f"({len(tokens.ids)} against {len(ids)} tokens): its token supports cannot be "
                "placed in the text"
            )
        first, stop = frame.content(ids)
        words = tokens.words[first:stop]
        # a new word wherever the tokenizer's word index changes (or it names none), from 0
        new = np.ones(len(words), dtype=bool)
        new[1:] = (words[1:] != words[:-1]) | (words[1:] < 0)
        out[i] = TokenSupport(
            text,
            tokens.offsets[first:stop, 0].copy(),
            tokens.offsets[first:stop, 1].copy(),
            np.cumsum(new) - 1,
            np.asarray(matches.weights[ks[0]][first:stop], dtype=np.float32),
            matches.mean_best(ks)[first:stop],
            len(ks),
        )
    return out


def f_beta(P: np.ndarray, R: np.ndarray, beta: float) -> np.ndarray:
    """The F-measure ``(1 + b^2) P R / (b^2 P + R)`` (0 where both are 0), in float64.

    Example:
        >>> f_beta(np.array([0.9, 0.0]), np.array([0.6, 0.0]), 1.0).round(4).tolist()
        [0.72, 0.0]
    """
    P = np.asarray(P, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    b2 = beta * beta
    den = b2 * P + R
    return np.divide((1 + b2) * P * R, den, out=np.zeros_like(den), where=den != 0)


def punctuation_ids(tokenizer: Any) -> frozenset[int]:
    """The ids of the tokenizer's tokens made of punctuation only (``.``, ``,``, ``?``, ``##!``,
    ...; a subword marker or a leading-space marker aside).

    Example:
        >>> from uqlm_bert.bertscore._loading import load_encoder
        >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
        >>> tok = load_encoder(BERTScoreSettings(num_layers=5, device="cpu")).tokenizer
        >>> ids = punctuation_ids(tok)
        >>> [i in ids for i in tok.convert_tokens_to_ids([".", ",", "paris", "##s"])]
        [True, True, False, False]
    """
    found = set()
    for token, index in tokenizer.get_vocab().items():
        text = token.removeprefix("##").lstrip("\u0120\u2581")  # WordPiece, BPE, SentencePiece
        if text and all(unicodedata.category(c).startswith("P") for c in text):
            found.add(int(index))
    return frozenset(found)
