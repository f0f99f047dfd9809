"""What users of uqlm's BlackBoxUQ find here: its arguments, use_best, postprocessing, to_dict."""

from __future__ import annotations

import json
import logging
import math

import pytest

from tests.helpers.scripted_chat import Recorder, ScriptedChatModel, answer_text
from uqlm_bert import BERTScoreSettings, BlackBoxUQ, ConfigurationError, ScoringSettings
from uqlm_bert.generation._rounds import FIRST_ROUND
from uqlm_bert.scorers import Scorer, register_scorer


class FirstWordAgreement(Scorer):
    """Fraction of present samples whose first word (punctuation stripped) is the response's."""

    name = "first_word"

    def score(self, responses, sampled_responses, show_progress_bars=False):
        import numpy as np

        out = []
        for r, samples in zip(responses, sampled_responses, strict=True):
            present = [s for s in samples if s is not None]
            if r is None or not present:
                out.append(math.nan)
                continue
            first = r.split()[0].strip(".,")
            out.append(float(np.mean([s.split()[0].strip(".,") == first for s in present])))
        return np.array(out)


register_scorer("first_word", FirstWordAgreement)


def scripted(**kwargs) -> ScriptedChatModel:
    return ScriptedChatModel(temperature=0.25, recorder=Recorder(), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"structured_response": dict}, "postprocessor"),
        ({"scorers": ["noncontradiction"]}, "needs an NLI model"),
        ({"return_responses": "both"}, "return_responses must be one of all, raw, postprocessed"),
        ({"postprocessor": "strip"}, "postprocessor must be a function"),
        ({"sentence_transformer": "all-mpnet-base-v2"}, "cosine_sim is not among the scorers"),
    ],
)
def test_uqlm_arguments_this_package_cannot_honour_are_refused_with_what_to_do(kwargs, fragment):
    with pytest.raises(ConfigurationError, match=fragment):
        BlackBoxUQ(**{"scorers": ["bert_score"], **kwargs})


def test_uqlm_arguments_with_a_meaning_here_are_accepted():
    uq = BlackBoxUQ(
        scripted(),
        scorers=["bert_score", "cosine_sim"],
        use_best=True,
        sentence_transformer="sentence-transformers/all-MiniLM-L6-v2",
        postprocessor=str.strip,
        return_responses="raw",
        verbose=False,
        max_calls_per_min=600,
        sampling_temperature=0.9,
        system_prompt="Answer briefly.",
        use_n_param=False,
    )
    assert uq.use_best and uq.sampling_temperature == 0.9 and uq.max_calls_per_min == 600
    cosine = uq.scorers[1]
    assert cosine.encoder.name == "sentence-transformers/all-MiniLM-L6-v2"  # the shipped copy
    # the default model named with no cosine_sim among the scorers is harmless
    BlackBoxUQ(
        scorers=["bert_score"], sentence_transformer="sentence-transformers/all-MiniLM-L6-v2"
    )


async def test_use_n_param_asks_for_a_prompts_samples_in_one_call():
    llm = scripted()
    uq = BlackBoxUQ(llm, scorers=["exact_match"], use_n_param=True, show_progress_bars=False)
    result = await uq.generate_and_score(["q0", "q1"], num_responses=4)
    assert [len(s) for s in result.data["sampled_responses"]] == [4, 4]
    asked = sorted((c.prompt, c.temperature, c.n) for c in llm.recorder.calls)
    assert asked == [("q0", 0.25, 1), ("q0", 1.0, 4), ("q1", 0.25, 1), ("q1", 1.0, 4)]
    assert result.metadata["generation"]["use_n_param"] is True
    assert result.metadata["calls"]["n_calls"] == 2
    with pytest.raises(ConfigurationError, match='use_n_param must be "auto", True or False'):
        BlackBoxUQ(llm, use_n_param="always")


def test_use_best_returns_the_candidate_the_samples_agree_with_most():
    uq = BlackBoxUQ(scorers=["first_word"], use_best=True, show_progress_bars=False)
    result = uq.score(
        ["Lima is the answer.", "Paris is the capital.", None],
        [
            ["Cusco, I think.", "Cusco it is.", "Cusco."],
            ["Paris, yes.", "Lyon maybe.", "Paris."],
            ["Rome.", "Rome it is.", None],
        ],
    )
    data = result.data
    # prompt 0: "Lima" agrees with no other candidate, each "Cusco" with 2 of its 3 others:
    # the first of the best wins; prompt 1: "Paris" (original) ties with the sampled "Paris"
    # answers at 2 of 3 and is kept; prompt 2: no original, the two "Rome" samples agree
    assert data["best_response_index"] == [0, -1, 0]
    assert data["responses"] == ["Cusco, I think.", "Paris is the capital.", "Rome."]
    assert data["original_responses"] == ["Lima is the answer.", "Paris is the capital.", None]
    # confidences are the chosen candidate's agreement with the other candidates
    assert data["first_word"] == pytest.approx([2 / 3, 2 / 3, 1.0])
    df = result.to_df()
    assert df["best_response_index"].tolist() == [0, -1, 0]
    assert df["original_response"].tolist()[0] == "Lima is the answer."
    assert result.metadata["use_best"] is True


async def test_use_best_through_generation_matches_scoring_the_same_texts():
    llm = scripted(latency=0.002)
    uq = BlackBoxUQ(llm, scorers=["bert_score"], use_best=True, show_progress_bars=False)
    result = await uq.generate_and_score([f"q{i}" for i in range(4)], num_responses=3)
    again = uq.score(result.data["original_responses"], result.data["sampled_responses"])
    assert again.data["best_response_index"] == result.data["best_response_index"]
    assert again.data["bert_score"] == pytest.approx(result.data["bert_score"], abs=1e-6)


def test_postprocessor_and_return_responses():
    def shout(text: str) -> str:
        return text.upper()

    responses = ["paris", "lima"]
    samples = [["Paris", "PARIS"], ["Lima", "cusco"]]
    for mode, shown, raw_kept in (
        ("all", ["PARIS", "LIMA"], True),
        ("postprocessed", ["PARIS", "LIMA"], False),
        ("raw", ["paris", "lima"], False),
    ):
        uq = BlackBoxUQ(
            scorers=["exact_match"],
            postprocessor=shout,
            return_responses=mode,
            show_progress_bars=False,
            scoring=ScoringSettings(scorer_settings={"exact_match_normalize": False}),
        )
        result = uq.score(responses, samples)
        # scored on the postprocessed texts: PARIS == PARIS twice; LIMA == LIMA, not CUSCO
        assert result.data["exact_match"] == [1.0, 0.5]
        assert result.data["responses"] == shown
        assert ("raw_responses" in result.data) is raw_kept
    with pytest.raises(ConfigurationError, match=r"postprocessor failed on responses\[1\]"):
        BlackBoxUQ(scorers=["exact_match"], postprocessor=lambda t: t[10]).score(
            ["long enough text", "short"], [["a long sample"], ["another sample"]]
        )


def test_verbose_shows_progress_and_info_lines_only_during_the_call(capsys):
    uq = BlackBoxUQ(scripted(), scorers=["exact_match"], verbose=True)
    assert uq.show_progress_bars
    logger = logging.getLogger("uqlm_bert")
    handlers, level = list(logger.handlers), logger.level
    uq.generate_and_score_sync(["q0"], num_responses=1)
    assert "Generating" in capsys.readouterr().err
    assert logger.handlers == handlers and logger.level == level


def test_to_dict_is_plain_data_as_uqlm_gives_it():
    uq = BlackBoxUQ(scripted(), scorers=["exact_match"], show_progress_bars=False)
    result = uq.generate_and_score_sync(["q0", "q1"], num_responses=2)
    out = result.to_dict()
    assert set(out) == {"data", "metadata", "index"}
    assert out["data"]["responses"] == [answer_text("q0", 0.25), answer_text("q1", 0.25)]
    assert out["data"]["errors"] == [None, None]
    json.dumps(out)  # ready for a file


def test_prompts_as_messages_read_as_their_text_with_the_messages_kept():
    from langchain_core.messages import HumanMessage, SystemMessage

    uq = BlackBoxUQ(scripted(), scorers=["exact_match"], show_progress_bars=False)
    conversation = [SystemMessage(content="Be brief."), HumanMessage(content="Capital of Peru?")]
    df = uq.generate_and_score_sync([conversation, "plain"], num_responses=1).to_df()
    assert df["prompt"].tolist() == ["Capital of Peru?", "plain"]
    assert df["prompt_messages"].tolist()[0] == conversation


@pytest.mark.parametrize(
    ("scorers", "kwargs", "use_best"),
    [
        (["exact_match", "bert_score"], {}, False),  # scored beside generation
        (["bert_score"], {"bertscore": BERTScoreSettings(idf=True)}, False),  # idf: after it
        (["exact_match", "rouge_l"], {}, True),  # best-of: every scorer together
    ],
    ids=["overlapped", "deferred", "use_best"],
)
def test_the_postprocessor_runs_once_per_text_of_a_run(scorers, kwargs, use_best):
    """Each answer and sample goes through the postprocessor exactly once in a
    generate_and_score run, whichever way it is scored, and the result shows those texts."""
    seen: list[str] = []

    def count(text: str) -> str:
        seen.append(text)
        return text.lower()

    prompts = [f"question {i}" for i in range(7)]
    m = 5
    uq = BlackBoxUQ(
        scripted(),
        scorers=scorers,
        postprocessor=count,
        use_best=use_best,
        show_progress_bars=False,
        scoring=ScoringSettings(batch_size=2),
        **kwargs,
    )
    result = uq.generate_and_score_sync(prompts, num_responses=m)
    generated = [
        t
        for r, s in zip(
            result.data["raw_responses"], result.data["raw_sampled_responses"], strict=True
        )
        for t in (r, *s)
    ]
    assert len(generated) >= len(prompts) * (1 + min(m, FIRST_ROUND))  # a round at least
    assert sorted(seen) == sorted(generated)  # each text once, however many rounds it took
    shown = result.data["original_responses"] if use_best else result.data["responses"]
    assert shown == [t.lower() for t in result.data["raw_responses"]]


@pytest.mark.parametrize(
    "flat",
    [
        {"sampling_temperature": 1.0},  # the default's own value is still a second source
        {"max_concurrency": None},
        {"system_prompt": None},
        {"max_calls_per_min": 60, "use_n_param": False},
    ],
)
def test_a_generation_argument_beside_generation_is_refused(flat):
    from uqlm_bert import GenerationSettings

    with pytest.raises(ConfigurationError, match="not both") as caught:
        BlackBoxUQ(scripted(), generation=GenerationSettings(max_concurrency=2), **flat)
    for name in flat:
        assert name in str(caught.value)


def test_generation_arguments_left_out_take_the_settings_defaults():
    from uqlm_bert import GenerationSettings

    assert BlackBoxUQ(scripted()).generation == GenerationSettings()
    uq = BlackBoxUQ(scripted(), max_concurrency=3, sampling_temperature=0.5)
    assert uq.generation.max_concurrency == 3 and uq.sampling_temperature == 0.5
    assert uq.generation.retry == GenerationSettings().retry
    assert uq.generation.use_n_param == GenerationSettings().use_n_param
