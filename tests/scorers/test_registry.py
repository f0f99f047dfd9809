"""The scorer registry: the one place names and settings are checked, for every entry point."""

from __future__ import annotations

import argparse

import pytest

from uqlm_bert import BlackBoxUQ
from uqlm_bert.exceptions import ConfigurationError
from uqlm_bert.scorers import available_scorers, build_scorer, build_scorers, scorer_spec
from uqlm_bert.scorers.bert import BERTScoreConsistency


def _message(call) -> str:
    with pytest.raises(ConfigurationError) as info:
        call()
    return str(info.value)


def test_every_entry_point_refuses_an_unknown_name_with_the_same_message():
    from uqlm_bert.cli import _checked_scorers
    from uqlm_bert.distributed.files import score_file

    args = argparse.Namespace(scorers=["bert_scor"], model_type=None, num_layers=None,
                              dtype=None, device=None, batch_size=None, lang=None, idf=None,
                              rescale_with_baseline=False)  # fmt: skip
    messages = {
        _message(lambda: build_scorers(["bert_scor"])),
        _message(lambda: BlackBoxUQ(scorers=["bert_scor"])),
        _message(lambda: _checked_scorers(args)),
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
    assert scorer_spec("exact_match").settings == {"exact_match_normalize"}
    assert "num_layers" in scorer_spec("bert_score").settings
    assert "num_layers" not in scorer_spec("cosine_sim").settings
    # a setting one of the chosen scorers takes goes to that one only
    bert, rouge = build_scorers(["bert_score", "rouge_l"], num_layers=4)
    assert bert.engine.num_layers == 4 and rouge.name == "rouge_l"
    message = _message(lambda: build_scorers(["rouge_l", "bleu"], num_layers=4))
    assert "'num_layers' for scorers rouge_l, bleu" in message


@pytest.mark.parametrize(("metric", "name"), [("F1", "bert_score"), ("Precision", "bert_score_precision")])
def test_bertscore_metric_names_are_case_insensitive(metric, name):
    scorer = BERTScoreConsistency(metric=metric)
    assert scorer.name == name
    assert 0 < scorer.score(["Paris is in France."], [["Paris is a French city."]])[0] <= 1


def test_an_unknown_metric_is_refused_when_built_not_when_scoring():
    with pytest.raises(ConfigurationError, match="metric must be one of precision, recall, f1"):
        BERTScoreConsistency(metric="F2")


def test_p_r_f_variants_compute_bertscore_once_per_call(monkeypatch):
    from uqlm_bert.bertscore.engine import BERTScorer
    from uqlm_bert.scorers import score_all

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
