"""``BERTScorer``: BERTScore with the reference package's numbers, embedded once per unique text.

Example:
    >>> from uqlm_bert import BERTScorer
    >>> scorer = BERTScorer(show_progress_bars=False)
    >>> P, R, F = scorer.score(
    ...     ["The cat sat on the mat.", "Paris is in France."],
    ...     [["A cat sat on a mat.", "The dog barked."], "Paris is the capital of France."],
    ... )
    >>> F.shape
    torch.Size([2])
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping, Sequence
from operator import attrgetter
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert._inputs import reference_lists, text_list
from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore._baseline import find_baseline, read_baseline, rescale
from uqlm_bert.bertscore._call_texts import CallTexts, WeightLookup, weight_lookup
from uqlm_bert.bertscore._encoder import Encoder
from uqlm_bert.bertscore._idf import IdfWeights, idf_from_mapping, idf_from_token_ids
from uqlm_bert.bertscore._loading import load_encoder
from uqlm_bert.bertscore._pair_scoring import score_pairs
from uqlm_bert.bertscore._settings import ENGINE_DEFAULTS, BERTScoreSettings
from uqlm_bert.bertscore._token_support import PairMatches

__all__ = ["BERTScorer"]

logger = logging.getLogger("uqlm_bert")


def _delegate(path: str, doc: str) -> property:
    """A read-only property giving ``self.<path>`` (a dotted path), documented by ``doc``."""
    get = attrgetter(path)
    return property(lambda self: get(self), doc=doc)


class BERTScorer:
    """BERTScore between candidates and references, matching ``bert_score.BERTScorer``.

    Takes the reference package's arguments; they are checked and kept as one frozen
    ``BERTScoreSettings`` (:attr:`settings`), with this
    engine's defaults (``ENGINE_DEFAULTS``: the reference's)
    for ``idf``, ``dtype`` and ``long_texts`` where they are None.

    Args:
        model_type: Hugging Face model name or local path. ``None`` is the model ``lang``
            selects: for English the embedded all-MiniLM-L6-v2, loaded with no network; for
            other languages the reference package's choice (see
            ``LANG_MODELS``).
        num_layers: which layer's output to use. ``None`` takes the published default for
            well-known models (roberta-large 17, bert-base-uncased 9, ...) and the last layer,
            with a warning, for models not in the table.
        idf: ``False`` (the default: uniform weights, [CLS]/[SEP] 0), ``True`` (idf weights from
            ``idf_sents``, or from each call's references when ``idf_sents`` is None, as
            ``bert_score.score`` does), ``"auto"`` (fixed idf weights from general English word
            frequencies, the same for every call: see ``_fixed_idf``), or
            a ``{token_id: weight}`` mapping.
        idf_sents: documents to compute idf from (only with ``idf=True``).
        rescale_with_baseline: rescale scores as ``(x - b) / (1 - b)`` with the baseline of the
            model's layer, from ``baseline_path`` or the packaged files for ``lang``.
        baseline_path: a ``LAYER,P,R,F`` baseline file (see :func:`compute_baseline`).
        lang: language of the texts: selects the default model and the packaged baseline.
        device: ``None`` picks cuda, then mps, then cpu.
        batch_size: ``None`` (forward passes sized by a budget of padded tokens for the
            device) or at most this many texts per forward pass (speed and memory only).
        max_length: the most tokens the model reads at once (``None``: the model's maximum).
        dtype: "float32" (the default: exact, matches the reference), "bfloat16" or "float16"
            (fast), or ``"auto"``: the fastest safe one for the device and model (float16 on
            CUDA, bfloat16 on CPUs whose bfloat16 units beat float32; see
            ``auto_dtype``). :attr:`dtype` says which runs.
        trust_remote_code: allow models whose code lives in their repository.
        show_progress_bars: show progress for calls that take more than a second.
        chunk_size: pairs scored per chunk; embeddings are kept only while a chunk needs them,
            so memory stays bounded however many pairs a call has.
        long_texts: ``"truncate"`` (the default, the reference's behaviour) cuts a text longer than
            ``max_length`` there, with a warning; ``"window"`` reads it in overlapping windows
            and matches it whole, token by token, with the same weights (up to 32,768 tokens:
            see ``_windows``). Texts that fit give the same numbers
            either way.

    Raises:
        ModelLoadError: the model cannot be loaded.
        ConfigurationError: invalid settings (layer out of range, no baseline, ...).

    Example:
        >>> scorer = BERTScorer(num_layers=4, show_progress_bars=False)
        >>> scorer.settings.num_layers, scorer.batch_invariant
        (4, True)
    """

    def __init__(
        self,
        model_type: str | os.PathLike[str] | None = None,
        num_layers: int | None = None,
        idf: bool | str | Mapping[int, float] | None = None,
        idf_sents: Sequence[str] | None = None,
        rescale_with_baseline: bool = False,
        baseline_path: str | os.PathLike[str] | None = None,
        lang: str = "en",
        device: str | torch.device | None = None,
        batch_size: int | None = None,
        max_length: int | None = None,
        dtype: str | torch.dtype | None = None,
        trust_remote_code: bool = False,
        show_progress_bars: bool = True,
        chunk_size: int = 1024,
        long_texts: str | None = None,
    ) -> None:
        # one settings object, with the engine's defaults for what is None, passed whole
        self._load(
            BERTScoreSettings.for_engine(
                model_type=model_type,
                num_layers=num_layers,
                idf=idf,
                idf_sents=idf_sents,
                rescale_with_baseline=rescale_with_baseline,
                baseline_path=baseline_path,
                lang=lang,
                device=device,
                batch_size=batch_size,
                max_length=max_length,
                dtype=dtype,
                trust_remote_code=trust_remote_code,
                chunk_size=chunk_size,
                long_texts=long_texts,
            ),
            show_progress_bars,
        )

    @classmethod
    def from_settings(
        cls, settings: BERTScoreSettings, show_progress_bars: bool = True
    ) -> BERTScorer:
        """A scorer for ``settings`` (checked when built), with this engine's defaults
        (``ENGINE_DEFAULTS``) for what they leave unset; the
        model comes from the shared cache when loaded before.

        Example:
            >>> from uqlm_bert import BERTScoreSettings
            >>> scorer = BERTScorer.from_settings(BERTScoreSettings(num_layers=3))
            >>> scorer.num_layers, scorer.settings.dtype, scorer.settings.long_texts
            (3, 'float32', 'truncate')
            >>> settings = BERTScoreSettings.for_scorers(num_layers=3)
            >>> BERTScorer.from_settings(settings).settings is settings  # nothing left unset
            True
        """
        if not isinstance(settings, BERTScoreSettings):
            raise ConfigurationError(
                f"settings must be a BERTScoreSettings, got {type(settings).__name__}"
            )
        scorer = cls.__new__(cls)
        scorer._load(settings.with_defaults(ENGINE_DEFAULTS), show_progress_bars)
        return scorer

    def _load(self, settings: BERTScoreSettings, show_progress_bars: bool) -> None:
        """Load the model, baseline and idf weights ``settings`` (with nothing unset) call
        for."""
        self.settings = settings
        self.show_progress_bars = show_progress_bars
        self._encoder: Encoder = load_encoder(settings)
        tok = self._encoder.tokenizer
        self._uniform_zero = {
            i
            for i in (getattr(tok, "cls_token_id", None), getattr(tok, "sep_token_id", None))
            if i is not None
        }
        self._baseline: list[float] | None = None
        self._baseline_file: str | None = settings.baseline_path
        if settings.rescale_with_baseline:
            path = settings.baseline_path or find_baseline(self._encoder.name, settings.lang)
            self._baseline = read_baseline(path, self._encoder.num_layers)
            self._baseline_file = os.fspath(path)
        self._idf_weights, self._idf_from_refs = self._idf(settings)
        # the token weights of every call, unless idf comes from each call's references
        self._weight_lookup: WeightLookup | None = (
            None if self._idf_from_refs else weight_lookup(self._idf_weights, self._uniform_zero)
        )

    def _idf(self, settings: BERTScoreSettings) -> tuple[IdfWeights | None, bool]:
        """The idf weights ``settings`` call for, and whether they come from each call's
        references instead."""
        idf = settings.idf
        if isinstance(idf, str):  # "auto": the fixed table for this tokenizer
            from uqlm_bert.bertscore._fixed_idf import idf_for_tokenizer

            return idf_for_tokenizer(self._encoder.tokenizer), False
        if settings.idf_sents is not None and idf is not True:
            warn_user(
                f"idf_sents is ignored because idf={idf!r}; pass idf=True to compute idf "
                "weights from them",
                UserWarning,
            )
        if isinstance(idf, Mapping):
            return idf_from_mapping(idf), False
        if idf and settings.idf_sents is not None:
            return idf_from_token_ids(self._encoder.tokenize(settings.idf_sents)), False
        return None, bool(idf)

    # -- properties -----------------------------------------------------------------------------

    model_type = _delegate(
        "_encoder.name",
        "The model's name (the embedded model's hub name when ``model_type`` was None).",
    )
    num_layers = _delegate("_encoder.num_layers", "The layer whose embeddings are matched.")
    device = _delegate("_encoder.device", "Where the model runs.")
    encoder = _delegate("_encoder", "The loaded tokenizer and model.")
    lang = _delegate("settings.lang", "The language of the texts.")
    batch_size = _delegate(
        "settings.batch_size",
        "Texts per forward pass at most, or None: passes sized by a budget of padded tokens.",
    )
    dtype = _delegate("_encoder.dtype", "The dtype the model runs in (what ``dtype`` resolved to).")
    rescale_with_baseline = _delegate(
        "settings.rescale_with_baseline", "Whether scores are rescaled with a baseline."
    )
    baseline_path = _delegate(
        "_baseline_file",
        "The baseline file in use (the packaged one when none was given), or None.",
    )

    @property
    def idf(self) -> bool:
        """Whether idf weighting is on (any kind)."""
        return self.settings.idf is not False

    @property
    def batch_invariant(self) -> bool:
        """Whether a pair's scores are independent of the other pairs of the call: False only
        for ``idf=True`` without ``idf_sents`` (idf from each call's references)."""
        return not self._idf_from_refs

    # -- scoring --------------------------------------------------------------------------------

    def score(
        self,
        cands: Sequence[str],
        refs: Sequence[str] | Sequence[Sequence[str]],
        batch_size: int | None = None,
        show_progress_bars: bool | None = None,
        *,
        zero_weight: Sequence[Collection[int]] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """BERTScore of each candidate against its reference(s).

        Args:
            cands: candidate texts.
            refs: one reference per candidate, or a list of references per candidate (the best
                score over them is kept, per metric, as the reference package does).
            batch_size: texts per forward pass at most (default: the scorer's).
            show_progress_bars: override the scorer's setting for this call.
            zero_weight: per candidate, token ids that weigh 0 in it and in its references
                (still matched against, as [CLS] and [SEP] are): the words of the question
                that an answer and its samples all repeat, say. ``None``: the weights alone.

        Returns:
            ``(P, R, F)``: float32 CPU tensors, one value per candidate.

        Raises:
            InputValidationError: empty lists, mismatched lengths, or items that are not strings;
                the message names the index.
        """
        cands = text_list(cands, "cands")
        groups = reference_lists(refs, len(cands))
        show = self.show_progress_bars if show_progress_bars is None else show_progress_bars
        check_int("batch_size", batch_size, 1, none_ok=True)
        max_texts = self.settings.batch_size if batch_size is None else batch_size

        pair_cand: list[str] = []
        pair_ref: list[str] = []
        pair_group: list[int] = []
        for i, (c, rs) in enumerate(zip(cands, groups, strict=True)):
            for r in rs:
                pair_cand.append(c)
                pair_ref.append(r)
                pair_group.append(i)

        keys_c: list[Any] = [c.strip() for c in pair_cand]
        keys_r: list[Any] = [r.strip() for r in pair_ref]
        zero_sets = None
        if zero_weight is not None:  # a text is weighed apart in each context it appears in
            contexts, zero_sets = _contexts(zero_weight, len(cands))
            keys_c = [(c, contexts[g]) for c, g in zip(keys_c, pair_group, strict=True)]
            keys_r = [(r, contexts[g]) for r, g in zip(keys_r, pair_group, strict=True)]
        scores, _ = self._score_pairs(keys_c, keys_r, pair_group, max_texts, show, zero_sets)
        if len(pair_group) != len(cands):  # the best over each candidate's references
            starts = np.flatnonzero(np.diff(pair_group, prepend=-1))
            scores = np.maximum.reduceat(scores, starts, axis=0)
        out = torch.from_numpy(scores)
        if self._baseline is not None:
            out = rescale(out, self._baseline)
        return out[:, 0].contiguous(), out[:, 1].contiguous(), out[:, 2].contiguous()

    def score_matches(
        self,
        cands: Sequence[str],
        refs: Sequence[str],
        batch_size: int | None = None,
        show_progress_bars: bool | None = None,
        *,
        zero_weight: Sequence[Collection[int]] | None = None,
    ) -> PairMatches:
        """:meth:`score` of (candidate, reference) pairs that also keeps, for each pair, each
        candidate token's best cosine similarity with any token of the reference: the values
        precision averages, from the same pass (no text is embedded again).

        Args:
            cands: candidate texts.
            refs: one reference per candidate.
            batch_size, show_progress_bars, zero_weight: as for :meth:`score`.

        Returns:
            A ``PairMatches``: the P/R/F of each pair (as
            :meth:`score` gives them), the candidate's token ids and normalised weights, and
            its tokens' best similarities; ``sum(weights * best) == P`` per pair, without
            baseline rescaling. The best similarities take a float per candidate token per
            pair.

        Raises:
            InputValidationError: as for :meth:`score`, or a reference that is a list.

        Example:
            >>> scorer = BERTScorer(show_progress_bars=False)
            >>> m = scorer.score_matches(["Paris is in France."], ["Paris is in Spain."])
            >>> best, w = m.best_of(0), m.weights[0]
            >>> bool(abs(float((best * w).sum()) - float(m.scores[0, 0])) < 1e-6)
            True
        """
        cands = text_list(cands, "cands")
        refs = text_list(refs, "refs", allow_empty=True)
        if len(refs) != len(cands):
            raise InputValidationError(
                f"score_matches takes one reference per candidate: {len(cands)} candidates, "
                f"{len(refs)} references"
            )
        show = self.show_progress_bars if show_progress_bars is None else show_progress_bars
        check_int("batch_size", batch_size, 1, none_ok=True)
        max_texts = self.settings.batch_size if batch_size is None else batch_size
        keys_c: list[Any] = [c.strip() for c in cands]
        keys_r: list[Any] = [r.strip() for r in refs]
        zero_sets = None
        if zero_weight is not None:
            contexts, zero_sets = _contexts(zero_weight, len(cands))
            keys_c = [(c, contexts[i]) for i, c in enumerate(keys_c)]
            keys_r = [(r, contexts[i]) for i, r in enumerate(keys_r)]
        best: list[np.ndarray] = []
        scores, texts = self._score_pairs(
            keys_c, keys_r, list(range(len(cands))), max_texts, show, zero_sets, best
        )
        infos = [texts[k] for k in keys_c]
        lens = np.fromiter((len(t.ids) for t in infos), dtype=np.int64, count=len(infos))
        flat = np.concatenate(best) if best else np.zeros(0, dtype=np.float32)
        if self._baseline is not None:
            scores = rescale(torch.from_numpy(scores), self._baseline).numpy()
        return PairMatches(
            scores,
            [t.ids for t in infos],
            [t.weights for t in infos],  # type: ignore[misc]  # weighed once scored
            flat,
            np.concatenate(([0], np.cumsum(lens))),
        )

    # -- internals ------------------------------------------------------------------------------

    def _score_pairs(
        self,
        keys_c: list[str],
        keys_r: list[str],
        pair_group: list[int],
        max_texts: int | None,
        show: bool,
        zero_sets: list[np.ndarray] | None = None,
        best: list[np.ndarray] | None = None,
    ) -> tuple[np.ndarray, CallTexts]:
        """Raw ``[pairs, 3]`` P/R/F of pairs of stripped texts, and the call's texts; warns
        about truncated texts and pairs that score 0 by construction. ``best``: see
        :func:`~uqlm_bert.bertscore._pair_scoring.score_pairs`."""
        enc = self._encoder
        chunk = self.settings.chunk_size
        from_refs = self._idf_from_refs
        weights = self._weight_lookup
        # on an accelerator the next chunk's texts are tokenized while this one's run
        ahead = enc.device.type != "cpu" and not from_refs
        with CallTexts(enc, keys_c, keys_r, chunk, weights, ahead, zero_sets) as texts:
            if from_refs:  # each reference occurrence is a document, as in bert_score.score
                texts.wait_all()
                idf = idf_from_token_ids([texts[r].ids.tolist() for r in keys_r])
                texts.weigh_all(weight_lookup(idf, self._uniform_zero))
            bar = tqdm(
                total=len(texts),
                desc="BERTScore",
                unit="text",
                delay=1.0,
                disable=not show,
                leave=False,
            )
            with bar:
                scores = score_pairs(
                    enc,
                    texts,
                    keys_c,
                    keys_r,
                    chunk,
                    max_texts,
                    on_embedded=bar.update,
                    best=best,
                )
        if texts.truncated and enc.frame is not None:
            limit = enc.token_limit
            warn_user(
                f"{len(texts.truncated)} text(s) are longer than {limit:,} tokens, the most "
                f"scored of one text, and were scored on their first {limit:,} (first: "
                f"{texts.truncated[0][:60]!r}...). Split such texts to score the rest.",
                UserWarning,
            )
        elif texts.truncated:
            warn_user(
                f"{len(texts.truncated)} text(s) are longer than the model's maximum of "
                f"{enc.max_length} tokens and were truncated, as the reference does (first: "
                f"{texts.truncated[0][:60]!r}...). Pass long_texts='window' (--long-texts window "
                "on the command line) to score them whole.",
                UserWarning,
            )
        self._warn_empty(keys_c, keys_r, pair_group, texts)
        return scores, texts

    def _warn_empty(
        self,
        pair_cand: list[str],
        pair_ref: list[str],
        pair_group: list[int],
        texts: CallTexts,
    ) -> None:
        checks = (
            ("empty candidate text (no tokens)", pair_cand, "empty", "raw P, R and F are 0"),
            ("empty reference text (no tokens)", pair_ref, "empty", "raw P, R and F are 0"),
            (
                "candidate whose idf weights are all 0",
                pair_cand,
                "zero_weight",
                "precision and F are 0",
            ),
            (
                "reference whose idf weights are all 0",
                pair_ref,
                "zero_weight",
                "recall and F are 0",
            ),
        )
        for what, side, flag, effect in checks:
            bad = sorted(
                {g for t, g in zip(side, pair_group, strict=True) if getattr(texts[t], flag)}
            )
            if bad:
                shown = ", ".join(map(str, bad[:10])) + (" ..." if len(bad) > 10 else "")
                warn_user(f"{what} at index {shown}: its {effect}", UserWarning)

    def __repr__(self) -> str:
        idf = self.settings.idf if not isinstance(self.settings.idf, Mapping) else "mapping"
        return (
            f"BERTScorer(model_type={self.model_type!r}, num_layers={self.num_layers}, "
            f"idf={idf!r}, rescale_with_baseline={self.rescale_with_baseline}, "
            f"device={str(self.device)!r}, dtype={self._encoder.dtype})"
        )


def _contexts(zero_weight: Sequence[Collection[int]], n: int) -> tuple[list[int], list[np.ndarray]]:
    """Each candidate's context (an index into the distinct sets of ``zero_weight``), and the
    sets as sorted id arrays.

    Raises:
        InputValidationError: not one set per candidate.
    """
    if isinstance(zero_weight, (str, bytes)) or len(zero_weight) != n:
        raise InputValidationError(
            f"zero_weight must hold one collection of token ids per candidate ({n})"
        )
    index: dict[frozenset[int], int] = {}
    contexts = [index.setdefault(frozenset(map(int, ids)), len(index)) for ids in zero_weight]
    sets = [np.array(sorted(ids), dtype=np.int64) for ids in index]
    return contexts, sets
