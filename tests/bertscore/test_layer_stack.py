"""Counting and truncating a model's layers, for each way architectures keep them.

Each model is a tiny random one built from its config (nothing is downloaded). A model truncated
to ``k`` layers must output what the whole model gives as its ``k``-th hidden state: that is
what BERTScore at layer ``k`` matches.
"""

from __future__ import annotations

import pytest
import torch

from uqlm_bert import ConfigurationError
from uqlm_bert.bertscore._layer_truncation import (
    config_layers,
    count_layers,
    layer_stack,
    truncate_layers,
)

transformers = pytest.importorskip("transformers")


def _bert():  # a ModuleList under model.encoder.layer
    config = transformers.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
        intermediate_size=37,
    )  # fmt: skip
    return transformers.BertModel(config)


def _distilbert():  # a ModuleList under model.transformer.layer
    config = transformers.DistilBertConfig(
        vocab_size=50, dim=32, n_layers=4, n_heads=2, hidden_dim=37
    )
    return transformers.DistilBertModel(config)


def _albert():  # one shared layer group, run config.num_hidden_layers times
    config = transformers.AlbertConfig(
        vocab_size=50, embedding_size=16, hidden_size=32, num_hidden_layers=4,
        num_attention_heads=2, intermediate_size=37,
    )  # fmt: skip
    return transformers.AlbertModel(config)


def _xlm():  # the forward runs model.n_layers layers, with no encoder attribute
    config = transformers.XLMConfig(vocab_size=50, emb_dim=32, n_layers=4, n_heads=2)
    return transformers.XLMModel(config)


@pytest.mark.parametrize("build", [_bert, _distilbert, _albert, _xlm], ids=lambda b: b.__name__)
def test_a_truncated_model_outputs_the_layer_asked_for(build):
    torch.manual_seed(0)
    model = build().eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        states = model(ids, output_hidden_states=True).hidden_states
    assert count_layers(model) == layer_stack(model).count == len(states) - 1 == 4
    truncate_layers(model, 2, "tiny")
    assert count_layers(model) == 2
    with torch.no_grad():
        out = model(ids).last_hidden_state
    assert torch.allclose(out, states[2], atol=1e-5)


def test_a_layer_the_model_does_not_have_is_refused_naming_the_range():
    model = _bert()
    with pytest.raises(
        ConfigurationError,
        match=r"num_layers=5 is out of range for 'tiny': it has 4 layers, so use 0..4",
    ):
        truncate_layers(model, 5, "tiny")
    truncate_layers(model, 4, "tiny")  # every layer: nothing to cut
    assert count_layers(model) == 4


def test_a_model_whose_layers_are_not_found_can_only_be_used_whole():
    model = torch.nn.Linear(2, 2)
    model.config = type("Config", (), {"num_hidden_layers": 3})()
    assert layer_stack(model) is None and count_layers(model) == 3
    truncate_layers(model, 3, "odd")
    with pytest.raises(ConfigurationError, match="cannot select a layer of 'odd'"):
        truncate_layers(model, 1, "odd")


def test_config_layers_reads_each_architecture_s_name_for_the_count():
    assert config_layers(_bert().config) == 4
    assert config_layers(_xlm().config) == 4
    assert config_layers(transformers.BartConfig(encoder_layers=3, decoder_layers=2)) == 3
    assert config_layers(object()) is None
