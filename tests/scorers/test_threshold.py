"""The default threshold: where it applies, and that it separates what it should."""

from __future__ import annotations

import pytest

from uqlm_bert import BERTScoreSettings, BlackBoxUQ, ConfigurationError, UQResult
from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD

ANSWERS = [
    "The Eiffel Tower is in Paris and was finished in 1889.",
    "Marie Curie won two Nobel Prizes, in physics and in chemistry.",
    "Water boils at 100 degrees Celsius at sea level.",
]
PARAPHRASES = [
    [
        "The Eiffel Tower, completed in 1889, stands in Paris.",
        "Paris is home to the Eiffel Tower, which was finished in 1889.",
        "Built by 1889, the Eiffel Tower is located in Paris.",
    ],
    [
        "Marie Curie received two Nobel Prizes: one in physics and one in chemistry.",
        "Curie was awarded the Nobel Prize twice, for physics and for chemistry.",
        "She won Nobel Prizes in both physics and chemistry.",
    ],
    [
        "At sea level, water boils at 100 °C.",
        "The boiling point of water at sea level is 100 degrees Celsius.",
        "Water reaches its boiling point, 100 C, at sea level.",
    ],
]
UNRELATED = [
    [
        "Bananas are a good source of potassium.",
        "The stock market fell sharply on Monday.",
        "She practiced the violin every evening.",
    ],
    [
        "The recipe calls for two eggs and a cup of flour.",
        "Mount Everest is the highest mountain on Earth.",
        "He parked the car behind the old barn.",
    ],
    [
        "Shakespeare wrote Hamlet around 1600.",
        "The team won the championship after extra time.",
        "Penguins live mostly in the Southern Hemisphere.",
    ],
]


def test_paraphrases_score_clearly_above_and_unrelated_samples_clearly_below(default_uq):
    agree = default_uq.score(ANSWERS, PARAPHRASES)
    unrelated = default_uq.score(ANSWERS, UNRELATED)
    assert min(agree.data["bert_score"]) > DEFAULT_THRESHOLD + 0.1
    assert max(unrelated.data["bert_score"]) < DEFAULT_THRESHOLD - 0.2
    assert not agree.flag()["flagged"].any()
    assert unrelated.flag()["flagged"].all()
    assert len(agree.filter()) == 3 and len(unrelated.filter()) == 0


def test_the_default_threshold_is_the_default_scorers_only(default_uq):
    result = default_uq.score(ANSWERS, PARAPHRASES)
    assert result.threshold() == DEFAULT_THRESHOLD
    assert result.metadata["thresholds"]["bert_score"]["answer"] == DEFAULT_THRESHOLD
    for other in (
        BlackBoxUQ(scorers=["rouge_l"], show_progress_bars=False),
        BlackBoxUQ(bertscore=BERTScoreSettings(num_layers=3), show_progress_bars=False),
        BlackBoxUQ(bertscore=BERTScoreSettings(idf=False), show_progress_bars=False),
    ):
        scored = other.score(ANSWERS[:1], PARAPHRASES[:1])
        with pytest.raises(ConfigurationError, match="no default threshold"):
            scored.threshold()
        with pytest.raises(ConfigurationError, match="no default threshold"):
            scored.filter()
        assert scored.flag()["flagged"].isna().all()  # no default: nothing is said
        # an explicit one still works
        assert scored.flag(threshold=0.5)["flagged"].tolist() == [False]
    # settings that change no number keep the default
    same = BlackBoxUQ(
        bertscore=BERTScoreSettings(batch_size=8, device="cpu"), show_progress_bars=False
    )
    assert same.score(ANSWERS[:1], PARAPHRASES[:1]).threshold() == DEFAULT_THRESHOLD


def test_a_result_built_by_hand_has_no_default_threshold():
    r = UQResult({"prompts": ["a"], "bert_score": [0.9]})
    with pytest.raises(ConfigurationError, match="choose_threshold"):
        r.filter()


def test_every_entry_point_s_result_reads_the_one_table_of_thresholds(default_uq, tmp_path):
    """score, generate_and_score (fresh, and resumed from its checkpoint) and the command's
    file scoring keep the scorers' table, the one ``thresholds_of`` gives, and a result read
    back from its plain form keeps it too; the constants are the scorers' rules."""
    import argparse

    from tests.helpers.scripted_chat import Recorder, ScriptedChatModel
    from uqlm_bert.bertscore._token_support import SENTENCE_THRESHOLD, WEAK_SUPPORT
    from uqlm_bert.cli._score import _result_scorer
    from uqlm_bert.scorers._registry import scorer_settings
    from uqlm_bert.scorers._thresholds import first_threshold, thresholds_of

    table = thresholds_of(default_uq.scorers)
    assert table == {
        "bert_score": {"answer": DEFAULT_THRESHOLD, "sentence": SENTENCE_THRESHOLD,
                       "word": WEAK_SUPPORT},
    }  # fmt: skip
    assert first_threshold(table, "answer") == ("bert_score", DEFAULT_THRESHOLD)
    results = [default_uq.score(ANSWERS[:1], PARAPHRASES[:1])]
    llm = ScriptedChatModel(temperature=0.25, recorder=Recorder())
    uq = BlackBoxUQ(llm, show_progress_bars=False)
    checkpoint = tmp_path / "run.jsonl"
    for _ in range(2):  # the second run reads every answer from the checkpoint
        results.append(uq.generate_and_score_sync(["q0"], num_responses=2, checkpoint=checkpoint))
    assert results[-1].metadata["calls"]["from_checkpoint"] > 0
    kept: list = []
    args = argparse.Namespace(quiet=True, words=True, refine=None, explain=False)
    settings = scorer_settings(["bert_score"])  # as the command builds them from its options
    _result_scorer(args, ["bert_score"], settings, kept)(ANSWERS[:1], PARAPHRASES[:1])
    results += [*kept, UQResult.from_dict(results[0].to_dict())]
    for result in results:
        assert result.metadata["thresholds"] == table
