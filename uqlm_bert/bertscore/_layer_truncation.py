"""Where a model keeps its transformer layers: counting them, and keeping only the first ``k``.

BERTScore at layer ``k`` matches the output of the ``k``-th transformer layer (0: the
embeddings). As in the reference package, the model is truncated to its first ``k`` layers, so
its output is that layer's and the later layers cost nothing. :func:`layer_stack` finds the
layers once per model, whatever the architecture: a ``ModuleList`` (BERT, RoBERTa, DistilBERT,
XLNet, BART, T5, ...), or a count the model's forward reads (XLM's ``n_layers``, ALBERT's shared
layers run ``num_hidden_layers`` times).

Example:
    >>> from uqlm_bert.bertscore._loading import load_model
    >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
    >>> layer_stack(load_model(BERTScoreSettings(device="cpu"), all_layers=True).model).count
    6
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from uqlm_bert._exceptions import ConfigurationError

__all__ = ["LayerStack", "config_layers", "count_layers", "layer_stack", "truncate_layers"]


@dataclass(frozen=True)
class LayerStack:
    """A model's transformer layers: how many it runs, and how to keep only the first ``k``."""

    count: int
    keep: Callable[[int], None]


def layer_stack(model: torch.nn.Module) -> LayerStack | None:
    """The layers of ``model``, or None where this engine does not know where they are.

    Example:
        >>> layer_stack(torch.nn.Linear(2, 2)) is None
        True
    """
    if hasattr(model, "n_layers") and not hasattr(model, "encoder"):  # XLM: a count
        return LayerStack(int(model.n_layers), lambda k: setattr(model, "n_layers", k))
    enc = getattr(model, "encoder", None)
    if enc is not None and hasattr(enc, "albert_layer_groups"):  # ALBERT: shared layers
        config = enc.config
        return LayerStack(
            int(config.num_hidden_layers), lambda k: setattr(config, "num_hidden_layers", k)
        )
    for owner, attr in _containers(model):
        layers = getattr(owner, attr, None)
        if isinstance(layers, torch.nn.ModuleList):
            return LayerStack(len(layers), _slicer(owner, attr))
    return None


def _containers(model: torch.nn.Module) -> list[tuple[Any, str]]:
    """Where architectures keep a ``ModuleList`` of layers, in the order to look."""
    enc = getattr(model, "encoder", None)
    tr = getattr(model, "transformer", None)
    return [
        (model, "layer"),  # XLNet
        *[(enc, attr) for attr in ("layer", "block", "layers") if enc is not None],
        *([(tr, "layer")] if tr is not None else []),  # DistilBERT
        (model, "layers"),  # BART encoder
        (model, "block"),  # T5 stack
    ]


def _slicer(owner: Any, attr: str) -> Callable[[int], None]:
    def keep(k: int) -> None:
        setattr(owner, attr, torch.nn.ModuleList(list(getattr(owner, attr))[:k]))

    return keep


def config_layers(config: Any) -> int | None:
    """The number of layers a model's config declares, if it declares one.

    Example:
        >>> from types import SimpleNamespace
        >>> config_layers(SimpleNamespace(n_layers=12))
        12
    """
    for attr in ("num_hidden_layers", "n_layers", "num_layers", "encoder_layers"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value >= 0:
            return value
    return None


def count_layers(model: torch.nn.Module) -> int | None:
    """How many transformer layers ``model`` runs (from its config where its layers are not
    found).

    Example:
        >>> count_layers(torch.nn.Linear(2, 2)) is None
        True
    """
    return _counted(model)[1]


def _counted(model: torch.nn.Module) -> tuple[LayerStack | None, int | None]:
    stack = layer_stack(model)
    if stack is not None:
        return stack, stack.count
    return None, getattr(getattr(model, "config", None), "num_hidden_layers", None)


def truncate_layers(model: torch.nn.Module, num_layers: int, model_name: str) -> None:
    """Keep the first ``num_layers`` layers of ``model``, so that its output is that layer's.

    The one check of ``num_layers`` against the model: it must be within the model's layers.

    Raises:
        ConfigurationError: ``num_layers`` is more than the model has, or the model keeps its
            layers where this engine does not look.
    """
    stack, total = _counted(model)
    if total is not None and num_layers > total:
        raise ConfigurationError(
            f"num_layers={num_layers} is out of range for {model_name!r}: it has {total} layers, "
            f"so use 0..{total}"
        )
    if num_layers == total:
        return
    if stack is None:
        raise ConfigurationError(
            f"cannot select a layer of {model_name!r}: its architecture "
            f"({type(model).__name__}) keeps its layers where this engine does not look"
        )
    stack.keep(num_layers)
