"""The settings objects of the scorers that have settings, and the shape every one of them has.

A scorer family with settings keeps them as one frozen object, checked at construction, and its
factory in the registry takes that object whole. Every such class follows
:class:`ScorerSettings`: the keyword that passes it whole (``build_scorers(cosine_sim=...)``),
the flat keywords an entry point such as ``BlackBoxUQ`` or ``build_scorers`` takes for it,
:meth:`~ScorerSettings.for_scorers`, which builds it from those keywords on top of the scorers'
defaults, and :meth:`~ScorerSettings.with_scorer_defaults`, which gives an object passed whole
the same defaults for what it leaves unset: flat or whole, a scorer gets the scorers' defaults.
The BERTScore scorers' object is :class:`~uqlm_bert.BERTScoreSettings`.

Example:
    >>> CosineSettings.for_scorers(sentence_transformer="my/model", batch_size=8)
    CosineSettings(model_type='my/model', device=None, dtype='auto', batch_size=8, max_length=None, long_texts='window')
    >>> ExactMatchSettings.for_scorers(exact_match_normalize=False).normalize
    False
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from uqlm_bert._checks import check_int, check_names
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.bertscore._settings import check_long_texts, check_model_type, dtype_name

__all__ = ["CosineSettings", "ExactMatchSettings", "ScorerSettings", "settings_object"]


class ScorerSettings(Protocol):
    """The shape of a scorer family's settings class (see the module doc).

    Register a scorer with such a class (``register_scorer(name, factory, MySettings)``) and
    its factory is called with one instance: the one given whole, or the one built from the
    flat keywords.
    """

    #: The keyword that passes the settings whole.
    keyword: ClassVar[str]

    @classmethod
    def scorer_keywords(cls) -> tuple[str, ...]:
        """The flat keywords entry points take for these settings."""
        ...

    @classmethod
    def for_scorers(cls, **kwargs: Any) -> Any:
        """The settings from flat keywords (``None``: the default), checked."""
        ...

    def with_scorer_defaults(self) -> Any:
        """These settings, given whole, with the scorers' defaults for what they leave unset."""
        ...


def settings_object(kind: Any, whole: Any, flat: Mapping[str, Any]) -> Any:
    """The settings object of one scorer family (a :class:`ScorerSettings` class ``kind``):
    ``whole`` as given, or built from the ``flat`` keywords it takes; either way with the
    scorers' defaults for what is not set. The one derivation of every entry point (the
    registry, and a BERTScore scorer built on its own).

    Raises:
        ConfigurationError: ``whole`` is not a ``kind``, or settings are given both whole and
            flat.

    Example:
        >>> settings_object(CosineSettings, None, {"batch_size": 8}).batch_size
        8
        >>> settings_object(CosineSettings, CosineSettings(), {"batch_size": 8})
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: give the cosine_sim settings either as cosine_sim=CosineSettings(...) or as separate settings (batch_size), not both
    """
    flat = {k: v for k, v in flat.items() if v is not None}
    if whole is None:
        return kind.for_scorers(**flat)
    if not isinstance(whole, kind):
        raise ConfigurationError(
            f"{kind.keyword} must be a {kind.__name__}, got {type(whole).__name__}"
        )
    if flat:
        raise ConfigurationError(
            f"give the {kind.keyword} settings either as {kind.keyword}={kind.__name__}(...) "
            f"or as separate settings ({', '.join(sorted(flat))}), not both"
        )
    return whole.with_scorer_defaults()


def _from_keywords(cls: Any, kwargs: Mapping[str, Any], fields: Mapping[str, str]) -> Any:
    """``cls`` built from flat keywords, each renamed to its field by ``fields``."""
    check_names(kwargs, fields, "setting", f" for {cls.keyword}")
    given: dict[str, Any] = {}
    for name, value in kwargs.items():
        if value is None:
            continue
        if fields[name] in given:
            raise ConfigurationError(
                f"{name} and another name for the same {cls.keyword} setting were both given; "
                "give it once"
            )
        given[fields[name]] = value
    return cls(**given)


@dataclass(frozen=True)
class CosineSettings:
    """Settings of the ``cosine_sim`` scorer.

    Attributes:
        model_type: a Hugging Face name or local directory of a sentence-embedding model;
            ``None`` is the embedded all-MiniLM-L6-v2, loaded offline. Its flat keyword is
            also ``sentence_transformer`` (the name other libraries give it).
        device: ``None`` picks cuda, then mps, then cpu.
        dtype: ``"auto"`` (the default, also for ``None``: the fastest safe dtype for the
            device, as the ``bert_score`` scorers), "float32" (exact), "bfloat16" or
            "float16".
        batch_size: texts per forward pass.
        max_length: the most tokens the model reads at once; ``None`` for the model's
            ``max_seq_length`` (from its sentence-transformers config) or else its maximum.
        long_texts: a text longer than ``max_length`` is read in overlapping windows and its
            vector is the mean over all its tokens (``"window"``), or it is cut there, as
            sentence-transformers does (``"truncate"``). Texts that fit give the same vector
            either way.
    """

    keyword: ClassVar[str] = "cosine_sim"
    # what the model loader reads beside the fields: every layer, English, no remote code
    num_layers: ClassVar[None] = None
    lang: ClassVar[str] = "en"
    trust_remote_code: ClassVar[bool] = False
    _KEYWORDS: ClassVar[dict[str, str]] = {
        "model_type": "model_type",
        "sentence_transformer": "model_type",
        "device": "device",
        "dtype": "dtype",
        "batch_size": "batch_size",
        "max_length": "max_length",
        "long_texts": "long_texts",
    }

    model_type: str | None = None
    device: str | None = None
    dtype: str | None = "auto"
    batch_size: int = 64
    max_length: int | None = None
    long_texts: str = "window"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "model_type", check_model_type(self.model_type))
        if self.device is not None:
            set_(self, "device", str(self.device))
        set_(self, "dtype", dtype_name(self.dtype) or "auto")  # None: the default, as flat
        check_int("batch_size", self.batch_size, 1)
        check_int("max_length", self.max_length, 2, none_ok=True)
        check_long_texts(self.long_texts)

    @classmethod
    def scorer_keywords(cls) -> tuple[str, ...]:
        """The fields' names, and ``sentence_transformer`` for ``model_type``."""
        return tuple(sorted(cls._KEYWORDS))

    @classmethod
    def for_scorers(cls, **kwargs: Any) -> CosineSettings:
        """The settings from flat keywords (``None``: the default)."""
        return _from_keywords(cls, kwargs, cls._KEYWORDS)

    def with_scorer_defaults(self) -> CosineSettings:
        """Itself: its field defaults are the scorers', so nothing is left unset."""
        return self


@dataclass(frozen=True)
class ExactMatchSettings:
    """Settings of the ``exact_match`` scorer.

    Attributes:
        normalize: compare normalised forms (case, punctuation and whitespace ignored) instead
            of the raw strings; its flat keyword is ``exact_match_normalize``.
    """

    keyword: ClassVar[str] = "exact_match"
    _KEYWORDS: ClassVar[dict[str, str]] = {"exact_match_normalize": "normalize"}

    normalize: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.normalize, bool):
            raise ConfigurationError(
                f"normalize (exact_match_normalize) must be True or False, got {self.normalize!r}"
            )

    @classmethod
    def scorer_keywords(cls) -> tuple[str, ...]:
        """``exact_match_normalize``."""
        return tuple(cls._KEYWORDS)

    @classmethod
    def for_scorers(cls, **kwargs: Any) -> ExactMatchSettings:
        """The settings from flat keywords (``None``: the default)."""
        return _from_keywords(cls, kwargs, cls._KEYWORDS)

    def with_scorer_defaults(self) -> ExactMatchSettings:
        """Itself: its field defaults are the scorers', so nothing is left unset."""
        return self
