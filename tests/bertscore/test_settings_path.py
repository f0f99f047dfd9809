"""One ``BERTScoreSettings`` from each entry point to the loaded model, each check made once.

``BlackBoxUQ(...)``, ``BERTScorer(...)`` and the command each turn their own arguments into one
settings object; that object (not a copy rebuilt on the way) reaches ``load_encoder``, and the
model loaded for it has the layer asked for. A bad value fails in the settings object, with the
same message whichever entry it came through; a layer the model does not have fails once, where
the model is loaded.
"""

from __future__ import annotations

import inspect
import json
from collections import Counter

import numpy as np
import pytest

from uqlm_bert import (
    BERTScorer,
    BERTScoreSettings,
    BlackBoxUQ,
    ConfigurationError,
    ScoringSettings,
)
from uqlm_bert.bertscore import _engine as engine
from uqlm_bert.bertscore import _layer_truncation as layer_stack
from uqlm_bert.bertscore import _loading as models
from uqlm_bert.bertscore import _settings as settings_module
from uqlm_bert.bertscore._known_models import EMBEDDED_MODEL_NAME, MODEL_LAYERS
from uqlm_bert.cli import main

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
    if entry == "BlackBoxUQ(bertscore=...)":
        settings = BERTScoreSettings.for_scorers(num_layers=LAYER)
        return BlackBoxUQ(bertscore=settings, show_progress_bars=False).scorers[0].engine
    if entry == "BERTScorer":
        return BERTScorer(num_layers=LAYER, show_progress_bars=False)
    code, err = _cli(tmp_path, capsys, str(LAYER))
    assert code == 0, err
    assert json.loads((tmp_path / "out.jsonl").read_text())["bert_score"] > 0
    return None


@pytest.mark.parametrize("entry", ["BlackBoxUQ(bertscore=...)", "BERTScorer", "CLI"])
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
        lambda: BlackBoxUQ(bertscore=BERTScoreSettings(num_layers=value), show_progress_bars=False),
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
    for build in (BERTScorer, BERTScoreSettings):
        with pytest.raises(
            ConfigurationError, match="num_layers must be an int >= 0 or None, got True"
        ):
            build(num_layers=True)


def test_settings_given_whole_reach_the_engine_as_given():
    settings = BERTScoreSettings.for_scorers(num_layers=LAYER)
    uq = BlackBoxUQ(bertscore=settings, show_progress_bars=False)
    assert uq.bertscore_settings is settings
    assert BERTScorer.from_settings(settings).settings is settings
    with pytest.raises(
        ConfigurationError, match=r"bertscore=BERTScoreSettings\(num_layers=\.\.\.\)"
    ):
        BlackBoxUQ(bertscore=settings, num_layers=2)
    with pytest.raises(ConfigurationError, match="bertscore must be a BERTScoreSettings, got dict"):
        BlackBoxUQ(bertscore={"num_layers": 2})
    with pytest.raises(ConfigurationError, match="settings must be a BERTScoreSettings"):
        BERTScorer.from_settings({"num_layers": 2})
    with pytest.raises(
        ConfigurationError, match=r"bertscore= holds the settings of the bert_score"
    ):
        BlackBoxUQ(scorers=["rouge_l"], bertscore=settings)


# -- the parameters of every entry point and the settings' fields -----------------------------

#: A valid value, not the default, for every setting: what a test passes to an entry point and
#: finds again, canonical, in the settings object it built.
GIVEN = {
    "model_type": ("some/model", "some/model"),
    "num_layers": (3, 3),
    "idf": (True, True),
    "idf_sents": (["a doc"], ("a doc",)),
    "rescale_with_baseline": (True, True),
    "baseline_path": ("base.tsv", "base.tsv"),
    "lang": ("de", "de"),
    "device": ("cpu", "cpu"),
    "batch_size": (7, 7),
    "max_length": (99, 99),
    "dtype": ("bf16", "bfloat16"),
    "trust_remote_code": (True, True),
    "chunk_size": (5, 5),
    "long_texts": ("window", "window"),
}
assert set(GIVEN) == set(BERTScoreSettings.accepted())

#: BERTScore settings that BlackBoxUQ takes in ``scorer_kwargs`` rather than as arguments of
#: its own, and settings that the command offers no option for.
BLACKBOX_THROUGH_SCORER_KWARGS = {"trust_remote_code", "chunk_size"}
NO_COMMAND_OPTION = {"idf_sents", "baseline_path", "max_length", "trust_remote_code", "chunk_size"}


@pytest.fixture
def loads(monkeypatch):
    """The settings objects engines are made with; no model is loaded."""
    seen: list[BERTScoreSettings] = []

    def load(self, settings, show_progress_bars):
        self.settings = settings
        self._idf_from_refs = False
        seen.append(settings)

    from uqlm_bert.scorers._bertscore import BERTScoreConsistency

    monkeypatch.setattr(engine.BERTScorer, "_load", load)
    monkeypatch.setattr(BERTScoreConsistency, "_at_defaults", lambda self: False)  # no model
    return seen


def _parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters) - {"self"}


def test_every_bertscorer_parameter_is_a_setting_and_reaches_it(loads):
    fields = set(BERTScoreSettings.accepted())
    assert _parameters(BERTScorer.__init__) - {"show_progress_bars"} == fields
    for name, (value, canonical) in GIVEN.items():
        extra = {"idf": True} if name == "idf_sents" else {}  # ignored otherwise, with a warning
        BERTScorer(**{name: value, **extra})
        assert getattr(loads[-1], name) == canonical, name


def test_every_bertscore_setting_reaches_blackboxuq_s_engine(loads):
    """Every BERTScore setting reaches the engine through bertscore=; device and max_length,
    uqlm's arguments, also flat; any other given flat is refused with its place."""
    fields = set(BERTScoreSettings.accepted())
    own = _parameters(BlackBoxUQ.__init__) & fields
    assert own == {"device", "max_length"}
    for name, (value, canonical) in GIVEN.items():
        extra = {"idf": True} if name == "idf_sents" else {}
        given = {name: value, **extra}
        uq = BlackBoxUQ(bertscore=BERTScoreSettings(**given), show_progress_bars=False)
        assert getattr(uq.bertscore_settings, name) == canonical, name
        if name in own:
            uq = BlackBoxUQ(**given, show_progress_bars=False)
            assert getattr(uq.bertscore_settings, name) == canonical, name
        else:
            with pytest.raises(ConfigurationError, match=rf"BERTScoreSettings\({name}="):
                BlackBoxUQ(**given, show_progress_bars=False)


def test_every_bertscore_option_of_the_command_is_a_setting_and_reaches_it():
    from uqlm_bert.cli._options import bertscore_kwargs, bertscore_settings
    from uqlm_bert.cli._parser import build_parser

    parser = build_parser()
    score = parser._subparsers._group_actions[0].choices["score"]
    (group,) = [g for g in score._action_groups if g.title == "BERTScore settings"]
    options = {action.dest: action for action in group._group_actions}
    fields = set(BERTScoreSettings.accepted())
    assert set(options) == fields - NO_COMMAND_OPTION
    base = ["score", "in.jsonl", "-o", "out.jsonl"]
    # the option's word for the value (the canonical dtype name: the only ones it offers)
    words = {"idf": "run", "rescale_with_baseline": None, "dtype": "bfloat16"}
    for name in options:
        value, canonical = GIVEN[name]
        flag = options[name].option_strings[0]
        word = words.get(name, str(value))
        argv = base + [flag] + ([word] if word is not None else [])
        args = parser.parse_args(argv)
        assert set(bertscore_kwargs(args)) == {name}, name
        assert getattr(bertscore_settings(args), name) == canonical, name


# -- what is not set: the scorers' defaults for a scorer, the engine's for BERTScorer ------------


def test_unset_settings_take_the_defaults_of_whoever_scores(loads):
    from uqlm_bert.bertscore._settings import ENGINE_DEFAULTS, SCORER_DEFAULTS
    from uqlm_bert.scorers import build_scorers
    from uqlm_bert.scorers._bertscore import BERTScoreConsistency
    from uqlm_bert.scorers._registry import scorer_settings

    given = BERTScoreSettings(num_layers=LAYER)
    scorer_view = SCORER_DEFAULTS.replace(num_layers=LAYER)
    engine_view = ENGINE_DEFAULTS.replace(num_layers=LAYER)
    # a scorer, whichever way the settings come
    for settings in (
        BlackBoxUQ(
            bertscore=BERTScoreSettings(num_layers=LAYER), show_progress_bars=False
        ).bertscore_settings,
        BlackBoxUQ(bertscore=given, show_progress_bars=False).bertscore_settings,
        build_scorers(["bert_score"], num_layers=LAYER)[0].engine.settings,
        build_scorers(["bert_score"], bertscore=given)[0].engine.settings,
        BERTScoreConsistency(num_layers=LAYER).engine.settings,
        BERTScoreConsistency(bertscore=given).engine.settings,
        scorer_settings(["bert_score"], bertscore=given)["bertscore"],
    ):
        assert settings == scorer_view
    # the engine, whichever way the settings come
    for settings in (
        BERTScorer(num_layers=LAYER).settings,
        BERTScorer.from_settings(given).settings,
    ):
        assert settings == engine_view
    # what is set is kept, either way
    set_ = BERTScoreSettings(num_layers=LAYER, dtype="float32", long_texts="truncate", idf=False)
    assert BlackBoxUQ(bertscore=set_, show_progress_bars=False).bertscore_settings == set_
    assert BERTScorer.from_settings(set_).settings == set_


def test_the_command_gives_score_the_scorers_defaults_and_evaluate_the_engine_s(tmp_path):
    from uqlm_bert.bertscore._settings import ENGINE_DEFAULTS, SCORER_DEFAULTS
    from uqlm_bert.cli._options import bertscore_settings, checked_scorers
    from uqlm_bert.cli._parser import build_parser

    parser = build_parser()
    args = parser.parse_args(["score", "in.jsonl", "-o", "out.jsonl", "--num-layers", "3"])
    assert checked_scorers(args)[1]["bertscore"] == SCORER_DEFAULTS.replace(num_layers=3)
    args = parser.parse_args(["evaluate", "p.txt", "r.txt", "--num-layers", "3"])
    assert BERTScorer.from_settings(bertscore_settings(args)).settings == ENGINE_DEFAULTS.replace(
        num_layers=3
    )


@pytest.mark.slow
def test_flat_arguments_and_a_settings_object_score_identically():
    """The flat settings (``device="cpu"`` and the scorers' ``num_layers=4``) and
    ``BlackBoxUQ(bertscore=BERTScoreSettings(num_layers=4, device="cpu"))``: one set of
    settings, one model, the same confidences (long answers included)."""
    from tests.helpers.texts import LONG, OVERLONG, SHORT

    responses = [SHORT[0], OVERLONG[0], LONG[1]]
    samples = [[SHORT[1], SHORT[2]], [OVERLONG[0][::-1], LONG[2]], [LONG[1], None]]
    flat = BlackBoxUQ(
        device="cpu",
        scoring=ScoringSettings(scorer_settings={"num_layers": 4}),
        show_progress_bars=False,
    )
    whole = BlackBoxUQ(
        bertscore=BERTScoreSettings(num_layers=4, device="cpu"), show_progress_bars=False
    )
    assert flat.bertscore_settings == whole.bertscore_settings
    got = [uq.score(responses, samples).data["bert_score"] for uq in (flat, whole)]
    np.testing.assert_array_equal(got[0], got[1])
    # and they are the scorers' numbers (windows for the long answer), not the engine's
    engine = BERTScorer(num_layers=4, device="cpu", show_progress_bars=False)
    with pytest.warns(UserWarning, match="truncated"):
        P, R, F = engine.score([responses[1]] * 2, samples[1])
    assert got[0][1] != pytest.approx(float(F.mean()), abs=1e-6)
