"""``BERTScoreSettings``: every setting that changes a BERTScore number, in one frozen object.

The engine (:class:`~uqlm_bert.BERTScorer`), the ``bert_score`` confidence scorers,
``BlackBoxUQ``, the command and the Ray workers all take their BERTScore settings as this one
object, checked once here: a bad value fails where it is given, and an unknown name is an error
that lists the accepted ones, never silently ignored.

Example:
    >>> s = BERTScoreSettings(num_layers=4, idf=True)
    >>> s.num_layers, s.idf
    (4, True)
    >>> BERTScoreSettings.from_kwargs({"num_layer": 2})
    Traceback (most recent call last):
    ...
    uqlm_bert.exceptions.ConfigurationError: unknown BERTScore setting 'num_layer' (did you mean 'num_layers'?); accepted: baseline_path, batch_size, chunk_size, device, dtype, idf, idf_sents, lang, max_length, model_type, num_layers, rescale_with_baseline, trust_remote_code
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uqlm_bert._warn import warn_user
from uqlm_bert.config import check_int, check_names
from uqlm_bert.exceptions import ConfigurationError, InputValidationError

__all__ = ["BERTScoreSettings", "DTYPE_NAMES", "IDF_MODES"]

#: dtype names the engine accepts (``None`` is float32).
DTYPE_NAMES = ("float32", "fp32", "bfloat16", "bf16", "float16", "fp16")
#: The string values of ``idf``: ``"auto"`` is the fixed idf table for the model's tokenizer.
IDF_MODES = ("auto",)


@dataclass(frozen=True)
class BERTScoreSettings:
    """The BERTScore settings, validated at construction.

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
        batch_size: texts per forward pass.
        max_length: truncate texts to this many tokens (``None``: the model's maximum).
        dtype: ``None``/``"float32"`` (exact), ``"bfloat16"`` or ``"float16"`` (fast).
        trust_remote_code: allow models whose code lives in their repository.
        chunk_size: pairs scored per chunk (bounds memory; does not change numbers).
    """

    model_type: str | None = None
    num_layers: int | None = None
    idf: Any = field(default=False, hash=False)
    idf_sents: tuple[str, ...] | None = field(default=None, hash=False)
    rescale_with_baseline: bool = False
    baseline_path: str | None = None
    lang: str = "en"
    device: str | None = None
    batch_size: int = 64
    max_length: int | None = None
    dtype: str | None = None
    trust_remote_code: bool = False
    chunk_size: int = 1024

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.model_type is not None:
            if (
                not isinstance(self.model_type, (str, os.PathLike))
                or not str(self.model_type).strip()
            ):
                raise ConfigurationError(
                    "model_type must be a Hugging Face model name or a local path, got "
                    f"{self.model_type!r}"
                )
            set_(self, "model_type", os.fspath(self.model_type))
        if self.num_layers is not None:
            check_int("num_layers", self.num_layers, 0)
        if isinstance(self.idf, str):
            if self.idf not in IDF_MODES:
                raise ConfigurationError(
                    f"idf must be False, True, 'auto' or a {{token_id: weight}} mapping, got "
                    f"{self.idf!r}"
                )
        elif isinstance(self.idf, Mapping):
            for k in self.idf:
                if isinstance(k, bool) or not isinstance(k, int):
                    raise InputValidationError(
                        f"idf must map token ids (int) to weights; key {k!r} is a "
                        f"{type(k).__name__}"
                    )
        elif not isinstance(self.idf, bool):
            raise ConfigurationError(
                f"idf must be a bool, 'auto' or a mapping, got {type(self.idf).__name__}"
            )
        if self.idf_sents is not None:
            from uqlm_bert.inputs import text_list

            set_(self, "idf_sents", tuple(text_list(self.idf_sents, "idf_sents")))
            if self.idf is not True:
                warn_user(
                    f"idf_sents is ignored because idf={self.idf!r}; pass idf=True to compute "
                    "idf weights from them",
                    UserWarning,
                )
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
        check_int("batch_size", self.batch_size, 1)
        check_int("chunk_size", self.chunk_size, 1)
        if self.max_length is not None:
            check_int("max_length", self.max_length, 2)
        if self.dtype is not None:
            name = str(self.dtype).removeprefix("torch.")
            if name not in DTYPE_NAMES:
                raise ConfigurationError(
                    f"dtype={self.dtype!r} is not supported; use None/'float32' (exact), "
                    "'bfloat16' or 'float16' (fast modes)"
                )
            set_(self, "dtype", name)

    @classmethod
    def accepted(cls) -> tuple[str, ...]:
        """The names of the settings, sorted.

        Example:
            >>> "num_layers" in BERTScoreSettings.accepted()
            True
        """
        return tuple(sorted(f.name for f in dataclasses.fields(cls)))

    @classmethod
    def from_kwargs(
        cls, kwargs: Mapping[str, Any], base: BERTScoreSettings | None = None
    ) -> BERTScoreSettings:
        """Settings from keyword arguments (on top of ``base``); ``None`` values keep the default.

        Raises:
            ConfigurationError: an unknown name (the message suggests the closest accepted one
                and lists them all) or a bad value.
        """
        check_names(kwargs, cls.accepted(), "BERTScore setting")
        given = {k: v for k, v in kwargs.items() if v is not None}
        return dataclasses.replace(base or cls(), **given)

    def as_kwargs(self) -> dict[str, Any]:
        """The settings as keyword arguments of :class:`~uqlm_bert.BERTScorer`."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> BERTScoreSettings:
        """A copy with some settings changed (and checked)."""
        check_names(changes, self.accepted(), "BERTScore setting")
        return dataclasses.replace(self, **changes)
