"""``BERTScoreSettings``: every setting that changes a BERTScore number, in one frozen object.

Each entry point builds one of these from its own arguments (``BERTScorer``'s
``bert_score``-compatible keywords, ``BlackBoxUQ``'s and the registry's flat keywords, the
command's options), written out name by name, and passes it whole down to where the model is
loaded (:func:`~uqlm_bert.bertscore._loading.load_encoder`). Every type and value is checked here,
once; only what needs the model (``num_layers`` against its layer count, ``max_length`` against
its window, the device against this machine) is checked where the model is loaded.

Two sets of defaults, each in one place, for the three settings on which they differ (``idf``,
``dtype``, ``long_texts``): a settings object leaves them unset (``None``) unless given, and
whoever scores with it fills in its own defaults for what was not set:

- :data:`ENGINE_DEFAULTS` are :class:`~uqlm_bert.BERTScorer`'s, which give the reference
  package's numbers;
- :data:`SCORER_DEFAULTS` are those of the ``bert_score`` confidence scorers of ``BlackBoxUQ``,
  the registry and the command: what serves a user best, each choice measured and documented.

So ``BlackBoxUQ(num_layers=4)`` and ``BlackBoxUQ(bertscore=BERTScoreSettings(num_layers=4))``
score alike (the scorers' defaults), and ``BERTScorer.from_settings`` of the same object scores
as ``BERTScorer(num_layers=4)`` (the engine's).

Example:
    >>> s = BERTScoreSettings(num_layers=4, idf=True)
    >>> s.num_layers, s.idf, s.dtype
    (4, True, None)
    >>> s.with_defaults(SCORER_DEFAULTS).dtype, s.with_defaults(ENGINE_DEFAULTS).dtype
    ('auto', 'float32')
    >>> BERTScoreSettings.for_scorers(num_layers=4).idf  # the scorers' default idf
    'auto'
    >>> BERTScoreSettings.from_kwargs({"num_layer": 2})
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: unknown BERTScore setting 'num_layer' (did you mean 'num_layers'?); accepted: baseline_path, batch_size, chunk_size, device, dtype, idf, idf_sents, lang, long_texts, max_length, model_type, num_layers, rescale_with_baseline, trust_remote_code
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from uqlm_bert._checks import check_int, check_names
from uqlm_bert._exceptions import ConfigurationError, InputValidationError

__all__ = [
    "BERTScoreSettings",
    "DTYPE_NAMES",
    "ENGINE_DEFAULTS",
    "IDF_MODES",
    "LONG_TEXT_MODES",
    "ModelSettings",
    "SCORER_DEFAULTS",
    "check_long_texts",
    "check_model_type",
    "dtype_name",
]

#: dtype names the engine accepts, each with its canonical name; ``"auto"`` is the fastest safe dtype for the device and model (see
#: :func:`~uqlm_bert.bertscore._resolve.auto_dtype`).
_DTYPES = {
    "auto": "auto",
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}
#: dtype names the engine accepts (``None`` is "not set": the default of whoever scores).
DTYPE_NAMES = tuple(_DTYPES)
#: The string values of ``idf``: ``"auto"`` is the fixed idf table for the model's tokenizer.
IDF_MODES = ("auto",)
#: The values of ``long_texts``: ``"window"`` reads a text longer than the model's window in
#: overlapping windows and scores it whole; ``"truncate"`` cuts it at the window, as the
#: reference ``bert_score`` package does.
LONG_TEXT_MODES = ("window", "truncate")


def dtype_name(dtype: Any) -> str | None:
    """The canonical name of a dtype setting (``None``, "not set", stays None).

    Takes the names of :data:`DTYPE_NAMES` (``"auto"`` included) and torch dtypes
    (``torch.bfloat16``).

    Raises:
        ConfigurationError: a dtype the engine does not support.

    Example:
        >>> dtype_name("bf16"), dtype_name(None)
        ('bfloat16', None)
    """
    if dtype is None:
        return None
    name = _DTYPES.get(str(dtype).removeprefix("torch."))
    if name is None:
        raise ConfigurationError(
            f"dtype={dtype!r} is not supported; use 'auto' (the fastest safe one for the "
            "device), 'float32' (exact), 'bfloat16' or 'float16'"
        )
    return name


def check_model_type(model_type: Any) -> str | None:
    """A model setting as a string: a Hugging Face name or a local path (``None`` stays None).

    Raises:
        ConfigurationError: neither a string nor a path, or blank.

    Example:
        >>> from pathlib import Path
        >>> check_model_type(Path("models") / "tiny")
        'models/tiny'
    """
    if model_type is None:
        return None
    if not isinstance(model_type, (str, os.PathLike)) or not str(model_type).strip():
        raise ConfigurationError(
            f"model_type must be a Hugging Face model name or a local path, got {model_type!r}"
        )
    return os.fspath(model_type)


class ModelSettings(Protocol):
    """What :func:`~uqlm_bert.bertscore._loading.load_encoder` reads from a settings object:
    :class:`BERTScoreSettings` and the ``cosine_sim`` scorer's settings both provide it."""

    model_type: str | None
    num_layers: int | None
    lang: str
    device: str | None
    dtype: str | None
    max_length: int | None
    trust_remote_code: bool
    long_texts: str | None


@dataclass(frozen=True)
class BERTScoreSettings:
    """The BERTScore settings, validated at construction.

    ``idf``, ``dtype`` and ``long_texts`` are left unset (``None``) unless given: whoever scores
    with the settings fills them in with its own defaults (:data:`ENGINE_DEFAULTS` for
    :class:`~uqlm_bert.BERTScorer`, :data:`SCORER_DEFAULTS` for the confidence scorers: see
    :meth:`with_defaults`). ``None`` means "the default" for every other setting too, and the
    two sets of defaults agree on those.

    Attributes:
        model_type: Hugging Face model name or local path; ``None`` is the model ``lang`` selects
            (the embedded all-MiniLM-L6-v2 for English).
        num_layers: the layer whose embeddings are matched; ``None`` is the published default.
        idf: ``False`` (uniform weights), ``True`` (idf from ``idf_sents``, or from each call's
            references as ``bert_score.score`` does), ``"auto"`` (fixed weights from general
            English word frequencies: batch-invariant) or a ``{token_id: weight}`` mapping.
        idf_sents: documents to compute idf from (with ``idf=True``), as a tuple.
        rescale_with_baseline: rescale as ``(x - b) / (1 - b)`` with the layer's baseline.
        baseline_path: a ``LAYER,P,R,F`` baseline file.
        lang: language of the texts: picks the default model and the packaged baseline.
        device: ``None`` (cuda, then mps, then cpu) or a device string.
        batch_size: ``None`` (forward passes sized by a budget of padded tokens for the
            device: see ``default_token_budget``) or at most
            this many texts per forward pass (speed and memory only).
        max_length: the most tokens the model reads at once (``None``: the model's maximum);
            a longer text is cut there or read in windows of it (see ``long_texts``).
        dtype: ``"float32"`` (exact: the reference's numbers), ``"bfloat16"`` or ``"float16"``
            (fast), or ``"auto"``: the fastest safe one for the device and model
            (``auto_dtype``); kept by its canonical name.
        trust_remote_code: allow models whose code lives in their repository.
        chunk_size: pairs scored per chunk (bounds memory; does not change numbers).
        long_texts: what happens to a text longer than ``max_length``: ``"truncate"`` cuts it
            there, as the reference package does; ``"window"`` reads it in overlapping windows
            and scores it whole (see ``_windows``). Texts that fit give
            the same numbers either way.
    """

    #: The keyword that passes these settings whole (``build_scorers(bertscore=...)``).
    keyword: ClassVar[str] = "bertscore"

    model_type: str | None = None
    num_layers: int | None = None
    idf: Any = field(default=None, hash=False)
    idf_sents: tuple[str, ...] | None = field(default=None, hash=False)
    rescale_with_baseline: bool = False
    baseline_path: str | None = None
    lang: str = "en"
    device: str | None = None
    batch_size: int | None = None
    max_length: int | None = None
    dtype: str | None = None
    trust_remote_code: bool = False
    chunk_size: int = 1024
    long_texts: str | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "model_type", check_model_type(self.model_type))
        check_int("num_layers", self.num_layers, 0, none_ok=True)
        _check_idf(self.idf)
        if self.idf_sents is not None:
            from uqlm_bert._inputs import text_list

            set_(self, "idf_sents", tuple(text_list(self.idf_sents, "idf_sents")))
        for name in ("rescale_with_baseline", "trust_remote_code"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"{name} must be True or False, got {getattr(self, name)!r}"
                )
        if self.baseline_path is not None:
            set_(self, "baseline_path", os.fspath(self.baseline_path))
        if not isinstance(self.lang, str) or not self.lang:
            raise ConfigurationError(
                f"lang must be a language code such as 'en', got {self.lang!r}"
            )
        if self.device is not None:
            set_(self, "device", str(self.device))
        check_int("batch_size", self.batch_size, 1, none_ok=True)
        check_int("chunk_size", self.chunk_size, 1)
        check_int("max_length", self.max_length, 2, none_ok=True)
        set_(self, "dtype", dtype_name(self.dtype))
        if self.long_texts is not None:
            check_long_texts(self.long_texts)

    @classmethod
    def accepted(cls) -> tuple[str, ...]:
        """The names of the settings, sorted.

        Example:
            >>> "num_layers" in BERTScoreSettings.accepted()
            True
        """
        return tuple(sorted(f.name for f in dataclasses.fields(cls)))

    @classmethod
    def scorer_keywords(cls) -> tuple[str, ...]:
        """The flat keywords a scorer entry point (``build_scorers``, ``BlackBoxUQ``) takes for
        these settings: their names."""
        return cls.accepted()

    @classmethod
    def from_kwargs(
        cls, kwargs: Mapping[str, Any], base: BERTScoreSettings | None = None
    ) -> BERTScoreSettings:
        """Settings from keyword arguments (on top of ``base``, by default nothing set);
        ``None`` values keep the base's value.

        Raises:
            ConfigurationError: an unknown name (the message suggests the closest accepted one
                and lists them all) or a bad value.
        """
        check_names(kwargs, cls.accepted(), "BERTScore setting")
        given = {k: v for k, v in kwargs.items() if v is not None}
        return dataclasses.replace(base or cls(), **given)

    @classmethod
    def for_scorers(cls, **kwargs: Any) -> BERTScoreSettings:
        """Settings of the ``bert_score`` confidence scorers: :data:`SCORER_DEFAULTS` with
        ``kwargs`` on top (``None`` keeps the default).

        Example:
            >>> s = BERTScoreSettings.for_scorers(num_layers=3, idf=None)
            >>> s.num_layers, s.idf
            (3, 'auto')
        """
        return cls.from_kwargs(kwargs, base=SCORER_DEFAULTS)

    @classmethod
    def for_engine(cls, **kwargs: Any) -> BERTScoreSettings:
        """Settings of :class:`~uqlm_bert.BERTScorer`: :data:`ENGINE_DEFAULTS` with ``kwargs``
        on top (``None`` keeps the default).

        Example:
            >>> s = BERTScoreSettings.for_engine(num_layers=3, idf=None)
            >>> s.num_layers, s.idf, s.dtype
            (3, False, 'float32')
        """
        return cls.from_kwargs(kwargs, base=ENGINE_DEFAULTS)

    def with_defaults(self, defaults: BERTScoreSettings) -> BERTScoreSettings:
        """These settings with ``defaults``' values for what was not set (``None``): how
        :class:`~uqlm_bert.BERTScorer` (:data:`ENGINE_DEFAULTS`) and the scorers
        (:data:`SCORER_DEFAULTS`) read an object they are given. Itself when nothing is unset.

        Example:
            >>> s = BERTScoreSettings(num_layers=4, dtype="bfloat16")
            >>> done = s.with_defaults(SCORER_DEFAULTS)
            >>> done.num_layers, done.dtype, done.idf, done.long_texts
            (4, 'bfloat16', 'auto', 'window')
            >>> done.with_defaults(ENGINE_DEFAULTS) is done
            True
        """
        unset = {
            f.name: getattr(defaults, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is None and getattr(defaults, f.name) is not None
        }
        return dataclasses.replace(self, **unset) if unset else self

    def with_scorer_defaults(self) -> BERTScoreSettings:
        """These settings as the ``bert_score`` scorers read them: :data:`SCORER_DEFAULTS` for
        what they leave unset (see :meth:`with_defaults`).

        Example:
            >>> BERTScoreSettings(num_layers=4).with_scorer_defaults().long_texts
            'window'
        """
        return self.with_defaults(SCORER_DEFAULTS)

    def replace(self, **changes: Any) -> BERTScoreSettings:
        """A copy with some settings changed (and checked).

        Example:
            >>> SCORER_DEFAULTS.replace(num_layers=2).num_layers
            2
        """
        check_names(changes, self.accepted(), "BERTScore setting")
        return dataclasses.replace(self, **changes)


def check_long_texts(mode: Any) -> None:
    """Check a ``long_texts`` setting.

    Raises:
        ConfigurationError: neither ``"window"`` nor ``"truncate"``.

    Example:
        >>> check_long_texts("windows")
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: long_texts must be 'window' (score a text longer than the model's window whole, in overlapping windows) or 'truncate' (cut it at the window, as bert_score does), got 'windows'
    """
    if not isinstance(mode, str) or mode not in LONG_TEXT_MODES:
        raise ConfigurationError(
            "long_texts must be 'window' (score a text longer than the model's window whole, "
            "in overlapping windows) or 'truncate' (cut it at the window, as bert_score does), "
            f"got {mode!r}"
        )


def _check_idf(idf: Any) -> None:
    if idf is None:  # not set
        return
    if isinstance(idf, str):
        if idf not in IDF_MODES:
            raise ConfigurationError(
                f"idf must be False, True, 'auto' or a {{token_id: weight}} mapping, got {idf!r}"
            )
    elif isinstance(idf, Mapping):
        for k in idf:
            if isinstance(k, bool) or not isinstance(k, int):
                raise InputValidationError(
                    f"idf must map token ids (int) to weights; key {k!r} is a {type(k).__name__}"
                )
    elif not isinstance(idf, bool):
        raise ConfigurationError(
            f"idf must be a bool, 'auto' or a mapping, got {type(idf).__name__}"
        )


#: :class:`~uqlm_bert.BERTScorer`'s defaults for what a settings object leaves unset: the
#: reference package's (no idf, float32, texts cut at the model's window), so that its numbers
#: are the reference's. Change an engine default here, and only here.
ENGINE_DEFAULTS = BERTScoreSettings(idf=False, dtype="float32", long_texts="truncate")

#: The ``bert_score`` confidence scorers' defaults for what a settings object leaves unset
#: (``BlackBoxUQ``, ``build_scorers``, the command), whether the settings come as flat keywords
#: or whole. They differ from :data:`ENGINE_DEFAULTS` where another choice serves the user
#: better, each measured: idf weights come from the fixed table of general English, which ranks
#: answers better and, unlike idf over the call's own samples, keeps a prompt's score
#: independent of the other prompts; the model runs in the fastest safe dtype for the device
#: (``dtype="auto"``: float16 on CUDA, bfloat16 on CPUs whose bfloat16 units beat float32), whose
#: confidences stay within 2e-3 of float32's with the same ranking (the measured differences
#: are in docs/bertscore.md); and a text longer than the model's window is read in overlapping
#: windows and scored whole, not judged by its first 512 tokens (which tells a long answer
#: whose second half is made up from a faithful one no better than chance). Change a scorer
#: default here, and only here.
SCORER_DEFAULTS = BERTScoreSettings(idf="auto", dtype="auto", long_texts="window")
