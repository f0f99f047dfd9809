"""One ``BERTScoreSettings`` from each entry point to the loaded model, each check made once.

``BlackBoxUQ(...)``, ``BERTScorer(...)`` and the command each turn their own arguments into one
settings object; that object (not a copy rebuilt on the way) reaches ``load_encoder``, and the
model loaded for it has the layer asked for. A bad value fails in the settings object, with the
same message whichever entry it came through; a layer the model does not have fails once, where
the model is loaded.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from uqlm_bert import BERTScorer, BERTScoreSettings, BlackBoxUQ
from uqlm_bert.bertscore import engine, layer_stack, models
from uqlm_bert.bertscore import settings as settings_module
from uqlm_bert.bertscore.layers import EMBEDDED_MODEL_NAME, MODEL_LAYERS
from uqlm_bert.cli import main
from uqlm_bert.exceptions import ConfigurationError

LAYER = 3  # not the embedded model's default (5) and not its last layer (6)
assert LAYER != MODEL_LAYERS[EMBEDDED_MODEL_NAME]
ROW = {"response": "Paris is in France.", "sampled_responses": ["Paris is a French city."]}


class Trace:
    """What happened on the way: the settings objects built, the value checks they made, the
    objects ``load_encoder`` got, and the checks of a layer against a model."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.built: list[BERTScoreSettings] = []
        self.checks: Counter[str] = Counter()
        self.loaded: list[BERTScoreSettings] = []
        self.range_checks = 0
        post_init = BERTScoreSettings.__post_init__
        check_int = settings_module.check_int
        load_encoder = models.load_encoder
        truncate = layer_stack.truncate_layers

        def built(obj: BERTScoreSettings) -> None:
            post_init(obj)
            self.built.append(obj)

        def checked(name: str, *args, **kwargs) -> None:
            self.checks[name] += 1
            check_int(name, *args, **kwargs)

        def loading(settings, **kwargs):
            self.loaded.append(settings)
            return load_encoder(settings, **kwargs)

        def truncating(*args):
            self.range_checks += 1
            truncate(*args)

        monkeypatch.setattr(BERTScoreSettings, "__post_init__", built)
        monkeypatch.setattr(settings_module, "check_int", checked)
        monkeypatch.setattr(engine, "load_encoder", loading)
        monkeypatch.setattr(models, "truncate_layers", truncating)
        models.clear_model_cache()  # so that the model is loaded, and its layer checked, here


def _cli(tmp_path, capsys, num_layers: str) -> tuple[int, str]:
    src = tmp_path / "answers.jsonl"
    src.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    argv = ["score", str(src), "-o", str(tmp_path / "out.jsonl"), "-q", "--num-layers", num_layers]
    code = main(argv)
    return code, capsys.readouterr().err


def _engine_of(entry: str, tmp_path, capsys):
    """Build the ``bert_score`` engine at layer LAYER through ``entry``; the CLI also scores."""
    if entry == "BlackBoxUQ":
        return BlackBoxUQ(num_layers=LAYER, show_progress_bars=False).scorers[0].engine
    if entry == "BERTScorer":
        return BERTScorer(num_layers=LAYER, show_progress_bars=False)
    code, err = _cli(tmp_path, capsys, str(LAYER))
    assert code == 0, err
    assert json.loads((tmp_path / "out.jsonl").read_text())["bert_score"] > 0
    return None


@pytest.mark.parametrize("entry", ["BlackBoxUQ", "BERTScorer", "CLI"])
def test_one_settings_object_travels_from_the_entry_point_to_the_loaded_model(
    entry, tmp_path, capsys, monkeypatch
):
    trace = Trace(monkeypatch)
    scorer = _engine_of(entry, tmp_path, capsys)
    # one settings object was built, with one check of each value ...
    assert len(trace.built) == 1, trace.built
    (settings,) = trace.built
    assert settings.num_layers == LAYER
    assert trace.checks["num_layers"] == 1
    # ... and that very object reached load_encoder (the model is loaded once)
    assert trace.loaded and all(s is settings for s in trace.loaded)
    assert trace.range_checks == 1
    if scorer is not None:
        assert scorer.settings is settings
        # the model loaded has exactly LAYER transformer layers
        assert scorer.num_layers == LAYER
        assert len(scorer.encoder.model.encoder.layer) == LAYER
    # the scorers' defaults come from one place (BlackBoxUQ and the CLI), BERTScorer's from
    # the settings object's own
    expected_idf = "auto" if entry != "BERTScorer" else False
    assert settings.idf == expected_idf


def _messages(value, tmp_path, capsys) -> list[str]:
    out = []
    for build in (
        lambda: BlackBoxUQ(num_layers=value, show_progress_bars=False),
        lambda: BERTScorer(num_layers=value, show_progress_bars=False),
    ):
        with pytest.raises(ConfigurationError) as info:
            build()
        out.append(str(info.value))
    code, err = _cli(tmp_path, capsys, str(value))
    assert code == 2
    out.append(err.strip().removeprefix("uqlm-bert: error: "))
    return out


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "num_layers must be an int >= 0 or None, got -1"),
        (7, f"num_layers=7 is out of range for {EMBEDDED_MODEL_NAME!r}"),
    ],
)
def test_a_bad_layer_fails_with_one_message_from_every_entry(value, message, tmp_path, capsys):
    messages = _messages(value, tmp_path, capsys)
    assert len(set(messages)) == 1, messages
    assert messages[0].startswith(message)


def test_a_bool_is_not_a_layer():
    for build in (BlackBoxUQ, BERTScorer, BERTScoreSettings):
        with pytest.raises(ConfigurationError, match="num_layers must be an int >= 0 or None, got True"):
            build(num_layers=True)


def test_settings_given_whole_reach_the_engine_as_given():
    settings = BERTScoreSettings.for_scorers(num_layers=LAYER)
    uq = BlackBoxUQ(bertscore=settings, show_progress_bars=False)
    assert uq.bertscore_settings is settings
    assert BERTScorer.from_settings(settings).settings is settings
    with pytest.raises(ConfigurationError, match=r"either as bertscore=BERTScoreSettings\(\.\.\.\) or as separate settings \(num_layers\), not both"):
        BlackBoxUQ(bertscore=settings, num_layers=2)
    with pytest.raises(ConfigurationError, match="bertscore must be a BERTScoreSettings, got dict"):
        BlackBoxUQ(bertscore={"num_layers": 2})
    with pytest.raises(ConfigurationError, match="settings must be a BERTScoreSettings"):
        BERTScorer.from_settings({"num_layers": 2})
    with pytest.raises(ConfigurationError, match="unknown setting 'bertscore' for scorers rouge_l"):
        BlackBoxUQ(scorers=["rouge_l"], bertscore=settings)
