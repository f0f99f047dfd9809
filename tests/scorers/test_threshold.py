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
