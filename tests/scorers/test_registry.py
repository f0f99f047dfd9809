"""The scorer registry: the one place names and settings are checked, for every entry point."""

from __future__ import annotations

import argparse

import pytest

from uqlm_bert import BERTScoreSettings, BlackBoxUQ, ConfigurationError
from uqlm_bert.scorers import available_scorers, build_scorers
from uqlm_bert.scorers._bertscore import BERTScoreConsistency
from uqlm_bert.scorers._registry import build_scorer, scorer_spec


def _message(call) -> str:
    with pytest.raises(ConfigurationError) as info:
        call()
    return str(info.value)


def test_every_entry_point_refuses_an_unknown_name_with_the_same_message():
    from uqlm_bert.cli._options import checked_scorers
    from uqlm_bert.distributed._files import score_file

    args = argparse.Namespace(scorers=["bert_scor"], model_type=None, num_layers=None,
                              dtype=None, device=None, batch_size=None, lang=None, idf=None,
                              rescale_with_baseline=False)  # fmt: skip
    messages = {
        _message(lambda: build_scorers(["bert_scor"])),
        _message(lambda: BlackBoxUQ(scorers=["bert_scor"])),
        _message(lambda: checked_scorers(args)),
        _message(lambda: score_file("in.jsonl", "out.jsonl", scorers=["bert_scor"])),
    }
    assert len(messages) == 1
    (message,) = messages
    assert "unknown scorer 'bert_scor'" in message
    assert all(name in message for name in available_scorers())


def test_nli_scorers_say_what_this_package_uses_instead():
    message = _message(lambda: build_scorers(["noncontradiction"]))
    assert "needs an NLI model" in message and "bert_score" in message


def test_each_scorer_takes_only_its_settings():
    assert scorer_spec("exact_match").keywords == {"exact_match_normalize"}
    assert "num_layers" in scorer_spec("bert_score").keywords
    assert "num_layers" not in scorer_spec("cosine_sim").keywords
    # a setting one of the chosen scorers takes goes to that one only
    bert, rouge = build_scorers(["bert_score", "rouge_l"], num_layers=4)
    assert bert.engine.num_layers == 4 and rouge.name == "rouge_l"
    message = _message(lambda: build_scorers(["rouge_l", "bleu"], num_layers=4))
    assert "'num_layers' for scorers rouge_l, bleu" in message


@pytest.mark.parametrize(
    ("metric", "name"), [("F1", "bert_score"), ("Precision", "bert_score_precision")]
)
def test_bertscore_metric_names_are_case_insensitive(metric, name):
    scorer = BERTScoreConsistency(metric=metric)
    assert scorer.name == name
    assert 0 < scorer.score(["Paris is in France."], [["Paris is a French city."]])[0] <= 1


def test_an_unknown_metric_is_refused_when_built_not_when_scoring():
    with pytest.raises(ConfigurationError, match="metric must be one of precision, recall, f1"):
        BERTScoreConsistency(metric="F2")


def test_p_r_f_variants_compute_bertscore_once_per_call(monkeypatch):
    from uqlm_bert.bertscore._engine import BERTScorer
    from uqlm_bert.scorers._base import score_all

    calls = []
    original = BERTScorer.score

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BERTScorer, "score", counting)
    scorers = build_scorers(["bert_score", "bert_score_precision", "bert_score_recall"])
    out = score_all(scorers, ["Paris is in France."], [["Paris is a French city.", None]])
    assert len(calls) == 1 and set(out) == {s.name for s in scorers}
    score_all(scorers, ["Lima is in Peru."], [["Lima is the capital of Peru."]])
    assert len(calls) == 2  # a new call computes again: nothing kept between calls


def test_build_scorer_passes_the_settings_it_takes():
    assert build_scorer("exact_match", exact_match_normalize=False).normalize is False


def test_each_scorer_family_s_settings_are_built_once_and_shared():
    from uqlm_bert.scorers import CosineSettings, ExactMatchSettings
    from uqlm_bert.scorers._registry import scorer_settings

    built = scorer_settings(
        ["bert_score", "bert_score_recall", "cosine_sim", "exact_match", "rouge_l"],
        device="cpu", num_layers=4, sentence_transformer=None, exact_match_normalize=False,
    )  # fmt: skip
    assert sorted(built) == ["bertscore", "cosine_sim", "exact_match"]
    # a flat keyword goes to every family that takes it; None keeps the default
    assert built["bertscore"].device == built["cosine_sim"].device == "cpu"
    assert built["bertscore"].num_layers == 4 and built["bertscore"].idf == "auto"
    assert built["cosine_sim"] == CosineSettings(device="cpu")
    assert built["exact_match"] == ExactMatchSettings(normalize=False)
    # passed on whole, the objects are used as they are
    bert, recall, cosine, exact, _ = build_scorers(
        ["bert_score", "bert_score_recall", "cosine_sim", "exact_match", "rouge_l"], **built
    )
    assert bert.engine.settings is recall.engine.settings is built["bertscore"]
    assert bert.engine is recall.engine  # the built-in BERTScore scorers share one engine
    assert cosine.settings is built["cosine_sim"] and exact.settings is built["exact_match"]


def test_the_built_in_bertscore_scorers_of_one_object_share_one_engine_with_its_settings():
    uq = BlackBoxUQ(
        scorers=["bert_score_recall", "rouge_l", "bert_score"],
        bertscore=BERTScoreSettings(long_texts="truncate", num_layers=4),
    )
    recall, _, f = uq.scorers
    assert recall.engine is f.engine
    assert (f.engine.settings.long_texts, f.engine.num_layers) == ("truncate", 4)
    # the scorers' defaults for what was not set, as a scorer built alone has them
    alone = build_scorer("bert_score_recall", long_texts="truncate", num_layers=4)
    assert alone.engine.settings == recall.engine.settings and alone.engine is not recall.engine
    assert (recall.metric, f.metric, f.default_threshold) == ("recall", "f1", None)


def test_a_custom_scorer_with_the_bertscore_settings_is_built_by_its_own_factory():
    from uqlm_bert.scorers import register_scorer
    from uqlm_bert.scorers._registry import _REGISTRY

    seen = []

    def make(settings):
        seen.append(settings)
        return BERTScoreConsistency("precision", bertscore=settings)

    register_scorer("my_precision", make, BERTScoreSettings)
    try:
        mine, f = build_scorers(["my_precision", "bert_score"], num_layers=4)
        assert seen == [f.engine.settings] and mine.engine is not f.engine
    finally:
        del _REGISTRY["my_precision"]


def test_settings_given_whole_and_flat_for_one_scorer_are_refused():
    from uqlm_bert.scorers import CosineSettings, ExactMatchSettings

    message = _message(
        lambda: build_scorers(
            ["exact_match"], exact_match=ExactMatchSettings(), exact_match_normalize=False
        )
    )
    assert "either as exact_match=ExactMatchSettings(...) or as separate settings" in message
    message = _message(lambda: build_scorers(["cosine_sim"], cosine_sim={"batch_size": 8}))
    assert message == "cosine_sim must be a CosineSettings, got dict"
    cosine = build_scorers(["cosine_sim"], cosine_sim=CosineSettings(batch_size=8))[0]
    assert cosine.batch_size == 8
    # the same setting under its two names
    message = _message(
        lambda: build_scorers(["cosine_sim"], model_type="a", sentence_transformer="b")
    )
    assert "give it once" in message


def test_bad_values_are_refused_by_the_settings_objects():
    from uqlm_bert.scorers import CosineSettings, ExactMatchSettings

    with pytest.raises(
        ConfigurationError, match="exact_match_normalize.* must be True or False, got 1"
    ):
        build_scorer("exact_match", exact_match_normalize=1)
    with pytest.raises(ConfigurationError, match="batch_size must be an int >= 1, got 0"):
        CosineSettings(batch_size=0)
    with pytest.raises(ConfigurationError, match="dtype='int8' is not supported"):
        build_scorer("cosine_sim", dtype="int8")
    assert CosineSettings(dtype="bf16").dtype == "bfloat16"
    with pytest.raises(ConfigurationError, match="must be True or False"):
        ExactMatchSettings(normalize="no")


def test_a_custom_scorer_with_keyword_settings_gets_those_it_takes():
    from uqlm_bert.scorers import register_scorer
    from uqlm_bert.scorers._lexical import ExactMatchScorer
    from uqlm_bert.scorers._registry import _REGISTRY

    register_scorer("loose_match", lambda loose=True: ExactMatchScorer(normalize=loose), ["loose"])
    try:
        loose, bert = build_scorers(["loose_match", "bert_score"], loose=False, num_layers=4)
        assert loose.normalize is False and bert.engine.num_layers == 4
        spec = scorer_spec("loose_match")
        assert spec.settings_type is None and spec.keywords == {"loose"}
    finally:
        del _REGISTRY["loose_match"]
