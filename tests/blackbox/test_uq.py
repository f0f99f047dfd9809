"""BlackBoxUQ with LangChain fake chat models: alignment, failures, overlap, sync face, scoring."""

from __future__ import annotations

import asyncio
import math
import random
import threading
import warnings

import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from tests.helpers.retries import fast
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel, answer_text, http_error
from uqlm_bert import (
    AuthenticationFailedError,
    BERTScoreSettings,
    ConfigurationError,
    GenerationSettings,
    InputValidationError,
    ScoringSettings,
)
from uqlm_bert._blackbox import BlackBoxUQ
from uqlm_bert.generation import RetryPolicy
from uqlm_bert.results._result import UQResult
from uqlm_bert.scorers import Scorer, available_scorers, register_scorer
from uqlm_bert.scorers._bertscore import BERTScoreConsistency


def jaccard(a: str, b: str) -> float:
    x, y = set(a.lower().split()), set(b.lower().split())
    return len(x & y) / len(x | y)


class JaccardScorer(Scorer):
    """Mean token-set Jaccard of the response against each present sample; logs its calls."""

    name = "token_jaccard"

    def __init__(self, recorder: Recorder | None = None, batch_invariant: bool = True) -> None:
        self.batch_invariant = batch_invariant
        self.recorder = recorder
        self.batches: list[list[str | None]] = []
        self.calls_done_at_batch: list[int] = []
        self.threads: set[str] = set()

    def score(self, responses, sampled_responses, show_progress_bars=False):
        self.batches.append(list(responses))
        self.threads.add(threading.current_thread().name)
        if self.recorder is not None:
            self.calls_done_at_batch.append(len(self.recorder.calls))
        out = []
        for r, samples in zip(responses, sampled_responses, strict=True):
            vals = [jaccard(r, s) for s in samples if s is not None] if r is not None else []
            out.append(float(np.mean(vals)) if vals else math.nan)
        return np.array(out)


register_scorer("token_jaccard", lambda **kwargs: JaccardScorer())

# "Answer to 'q' at temperature 0.25." against "Answer to 'q' at temperature 1.0.": the token
# sets share answer/to/'q'/at/temperature (5) out of 7 distinct tokens.
SAME_PROMPT_JACCARD = 5 / 7


def scripted(**kwargs) -> ScriptedChatModel:
    return ScriptedChatModel(temperature=0.25, recorder=Recorder(), **kwargs)


def prompts_n(n: int) -> list[str]:
    return [f"q{i}" for i in range(n)]


def test_hand_computed_jaccard_of_the_fake_answers():
    assert jaccard(answer_text("q", 0.25), answer_text("q", 1.0)) == SAME_PROMPT_JACCARD


async def test_generate_and_score_aligns_answers_samples_and_scores():
    llm = scripted()
    rec = llm.recorder
    rec.add_fault("q1", http_error(400), temperature=0.25, always=True)  # no original
    rec.add_fault(
        "q2", http_error(503), http_error(503), http_error(503), http_error(503), temperature=1.0
    )  # two samples fail (2 attempts each)
    rec.add_fault("q3", http_error(400), temperature=1.0, always=True)  # every sample fails
    # one call at a time, in slot order: q2's first two samples each meet two 503s
    uq = BlackBoxUQ(
        llm,
        scorers=["token_jaccard"],
        show_progress_bars=False,
        **fast(max_concurrency=1, max_retries=1),
    )
    prompts = prompts_n(5)
    with pytest.warns(RuntimeWarning) as caught:
        result = await uq.generate_and_score(prompts, num_responses=3)
    # one warning per kind of failure, pointing at this test's line
    assert sorted(str(w.message).split(" (")[0] for w in caught) == [
        "2 LLM call(s) failed for good",
        "4 LLM call(s) failed for good",
    ]
    assert {w.filename for w in caught} == {__file__}
    assert isinstance(result, UQResult)
    df = result.to_df()
    assert df["prompt"].tolist() == prompts
    for i, p in enumerate(prompts):
        if i != 1:
            assert df["response"][i] == answer_text(p, 0.25)
        for s in df["sampled_responses"][i]:
            assert s is None or s == answer_text(p, 1.0)
    scores = df["token_jaccard"].tolist()
    assert scores[0] == scores[2] == scores[4] == SAME_PROMPT_JACCARD
    assert math.isnan(scores[1]) and math.isnan(scores[3])
    assert df["sampled_responses"][2].count(None) == 2
    assert df["num_failed_samples"].tolist() == [0, 0, 2, 3, 0]
    assert df["error"][1].startswith("bad_request") and df["error"].isna().sum() == 4
    meta = result.metadata
    assert meta["num_prompts"] == 5 and meta["num_responses"] == 3
    assert meta["temperature"] == 0.25 and meta["sampling_temperature"] == 1.0
    assert meta["scorers"] == ["token_jaccard"]
    assert {k: v for k, v in meta["failures"].items() if k != "by_kind"} == {
        "responses": 1,
        "samples": 5,
        "prompts_with_failures": 3,
        "unscored_prompts": 2,
    }
    assert {k: v["count"] for k, v in meta["failures"]["by_kind"].items()} == {
        "bad_request": 4,
        "server": 2,
    }
    # 20 slots; q2's two failing samples took 2 attempts each
    assert meta["calls"]["attempts"] == 22 and meta["calls"]["retries"] == 2
    assert meta["calls"]["failures_by_kind"] == {"bad_request": 4, "server": 2}
    assert set(meta["timings"]) == {
        "generation_s",
        "scoring_s",
        "scoring_after_generation_s",
        "scoring_held_s",
        "total_s",
    }
    assert llm.temperature == 0.25 and llm.max_retries == 2


async def test_scoring_overlaps_generation_in_batches_off_the_event_loop():
    llm = scripted(latency=0.03)  # 96 calls, 4 at a time: generation lasts about 0.7 s
    scorer = JaccardScorer(recorder=llm.recorder)
    uq = BlackBoxUQ(
        llm,
        scorers=[scorer],
        max_concurrency=4,
        scoring=ScoringSettings(batch_size=8),
        show_progress_bars=False,
    )
    n, m = 24, 3
    result = await uq.generate_and_score(prompts_n(n), num_responses=m)
    total_calls = n * (m + 1)
    assert len(llm.recorder.calls) == total_calls
    # scoring started while calls were still outstanding, over more than one batch
    assert len(scorer.batches) > 1
    assert scorer.calls_done_at_batch[0] < total_calls
    assert sum(len(b) for b in scorer.batches) == n and max(map(len, scorer.batches)) <= 8
    assert threading.current_thread().name not in scorer.threads
    assert result.data["token_jaccard"] == [SAME_PROMPT_JACCARD] * n


async def test_batch_dependent_scorers_run_once_over_everything():
    llm = scripted(latency=0.002)
    scorer = JaccardScorer(batch_invariant=False)
    uq = BlackBoxUQ(llm, scorers=[scorer], max_concurrency=4, show_progress_bars=False)
    prompts = prompts_n(10)
    await uq.generate_and_score(prompts, num_responses=2)
    assert scorer.batches == [[answer_text(p, 0.25) for p in prompts]]


async def test_result_is_independent_of_completion_order():
    prompts = prompts_n(16)
    calm = await BlackBoxUQ(
        scripted(), scorers=["token_jaccard"], show_progress_bars=False
    ).generate_and_score(prompts, 3)
    jittery = scripted()
    jittery.recorder.latency_rng = random.Random(3)
    jittery.recorder.max_random_latency = 0.01
    jittery.recorder.slow = {"q0": 0.05}
    mixed = await BlackBoxUQ(
        jittery, scorers=["token_jaccard"], max_concurrency=12, show_progress_bars=False
    ).generate_and_score(prompts, 3)
    for key in ("prompts", "responses", "sampled_responses", "token_jaccard"):
        assert mixed.data[key] == calm.data[key]


async def test_a_failing_scorer_stops_generation_and_leaves_no_tasks():
    class Broken(Scorer):
        name = "broken"

        def score(self, responses, sampled_responses, show_progress_bars=False):
            raise ValueError("scorer exploded")

    # replies at a pace that leaves the event loop mostly idle, as a remote LLM's do: a burst
    # of instant replies keeps the loop busy, and the queue then holds the first batch until
    # generation ends (by design: scoring beside it would only slow it down)
    llm = scripted(latency=0.05)
    uq = BlackBoxUQ(llm, scorers=[Broken()], max_concurrency=2, show_progress_bars=False)
    with pytest.raises(ValueError, match="scorer exploded"):
        await uq.generate_and_score(prompts_n(60), num_responses=2)
    assert len(llm.recorder.calls) < 60 * 3
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_cancelling_generate_and_score_leaves_no_tasks():
    llm = scripted(latency=0.01)
    uq = BlackBoxUQ(llm, scorers=["token_jaccard"], max_concurrency=3, show_progress_bars=False)
    task = asyncio.ensure_future(uq.generate_and_score(prompts_n(80), num_responses=2))
    while len(llm.recorder.calls) < 12:
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert llm.recorder.in_flight == 0


async def test_auth_failure_stops_the_run_and_leaves_the_llm_untouched():
    llm = scripted()
    llm.recorder.add_fault("q2", http_error(401), always=True)
    before = dict(llm.__dict__)
    uq = BlackBoxUQ(llm, scorers=["token_jaccard"], show_progress_bars=False, **fast(max_retries=1))
    with pytest.raises(AuthenticationFailedError, match="credentials"):
        await uq.generate_and_score(prompts_n(20), num_responses=2)
    assert llm.__dict__ == before
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_callers_objects_are_not_modified():
    llm = scripted()
    prompts = prompts_n(3)
    snapshot = list(prompts)
    before = dict(llm.__dict__)
    uq = BlackBoxUQ(
        llm, scorers=["token_jaccard"], sampling_temperature=1.4, show_progress_bars=False
    )
    result = await uq.generate_and_score(prompts, num_responses=2)
    assert prompts == snapshot and llm.__dict__ == before and llm.temperature == 0.25
    assert {c.temperature for c in llm.recorder.calls} == {0.25, 1.4}
    result.data["prompts"].append("extra")
    assert prompts == snapshot


async def test_generate_original_and_candidate_responses():
    llm = scripted()
    llm.recorder.add_fault("q1", http_error(400), temperature=1.0)
    uq = BlackBoxUQ(llm, scorers=["token_jaccard"], show_progress_bars=False, **fast(max_retries=1))
    originals = await uq.generate_original_responses(["q0", "q1"])
    assert originals == [answer_text("q0", 0.25), answer_text("q1", 0.25)]
    with pytest.warns(RuntimeWarning):
        samples = await uq.generate_candidate_responses(["q0", "q1"], num_responses=2)
    assert samples[0] == [answer_text("q0", 1.0)] * 2
    assert samples[1].count(None) == 1
    assert uq.last_generation.sample_errors[1].count(None) == 1
    assert {c.temperature for c in llm.recorder.calls} == {0.25, 1.0}


def test_sync_face_in_a_plain_script():
    uq = BlackBoxUQ(scripted(), scorers=["token_jaccard"], show_progress_bars=False)
    result = uq.generate_and_score_sync(["q0", "q1"], num_responses=2)
    assert result.data["token_jaccard"] == [SAME_PROMPT_JACCARD] * 2


async def test_sync_face_inside_a_running_loop_like_jupyter():
    uq = BlackBoxUQ(scripted(), scorers=["token_jaccard"], show_progress_bars=False)
    result = uq.generate_and_score_sync(["q0"], num_responses=1)
    assert result.data["responses"] == [answer_text("q0", 0.25)]
    assert asyncio.all_tasks() == {asyncio.current_task()}


def test_score_without_an_llm():
    uq = BlackBoxUQ(scorers=["token_jaccard"], show_progress_bars=False)
    responses = ["a b c", None, "x y"]
    samples = [["a b", "a b c d", None], ["z"], [None]]
    snapshot = [list(s) for s in samples]
    result = uq.score(responses, samples, prompts=["p0", "p1", "p2"])
    # a b c vs a b: 2/3; a b c vs a b c d: 3/4
    expected0 = (2 / 3 + 3 / 4) / 2
    got = result.data["token_jaccard"]
    assert got[0] == pytest.approx(expected0) and math.isnan(got[1]) and math.isnan(got[2])
    assert result.to_df()["prompt"].tolist() == ["p0", "p1", "p2"]
    assert samples == snapshot
    with pytest.raises(ConfigurationError, match=r"\.score\("):
        uq.generate_and_score_sync(["q"], 1)


@pytest.mark.parametrize(
    ("responses", "samples", "fragment"),
    [
        ("abc", [["x"]], "responses must be a list"),
        (["a", "b"], [["x"]], "responses has 2 items but sampled_responses has 1"),
        (["a"], ["x"], r"sampled_responses\[0\] must be a list"),
    ],
)
def test_score_validates_its_input(responses, samples, fragment):
    uq = BlackBoxUQ(scorers=["token_jaccard"], show_progress_bars=False)
    with pytest.raises(InputValidationError, match=fragment):
        uq.score(responses, samples)


def test_scorer_names_are_checked():
    with pytest.raises(ConfigurationError) as info:
        BlackBoxUQ(scorers=["bert_scor"])
    assert "bert_score" in str(info.value) and "token_jaccard" in str(info.value)
    assert set(available_scorers()) >= {"bert_score", "token_jaccard"}
    with pytest.raises(ConfigurationError, match="twice"):
        BlackBoxUQ(scorers=["token_jaccard", "token_jaccard"])
    with pytest.raises(ConfigurationError, match="empty"):
        BlackBoxUQ(scorers=[])
    with pytest.raises(ConfigurationError, match="batch_size"):
        BlackBoxUQ(scorers=["token_jaccard"], scoring=ScoringSettings(batch_size=0))
    with pytest.raises(ConfigurationError, match="max_retries"):
        BlackBoxUQ(
            scorers=["token_jaccard"],
            generation=GenerationSettings(retry=RetryPolicy(max_retries=-2)),
        )
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        BlackBoxUQ(scripted(), scorers=["token_jaccard"], max_concurrency=0)


async def test_bad_prompts_fail_before_any_call():
    llm = scripted()
    uq = BlackBoxUQ(llm, scorers=["token_jaccard"], show_progress_bars=False)
    with pytest.raises(InputValidationError, match=r"prompts\[1\]"):
        await uq.generate_and_score(["fine", 7], num_responses=2)
    assert llm.recorder.calls == []


def test_progress_bars_on_and_off(capsys):
    uq = BlackBoxUQ(scripted(), scorers=["token_jaccard"], show_progress_bars=False)
    uq.generate_and_score_sync(["q0"], num_responses=1)
    assert capsys.readouterr().err == ""
    uq.generate_and_score_sync(["q0"], num_responses=1, show_progress_bars=True)
    err = capsys.readouterr().err
    assert "Generating" in err and "Scoring" in err


def test_fake_list_chat_model_end_to_end():
    llm = FakeListChatModel(responses=["Paris is the capital.", "It is Paris."])
    uq = BlackBoxUQ(llm, scorers=["token_jaccard"], max_concurrency=1, show_progress_bars=False)
    result = uq.generate_and_score_sync(["Capital of France?"], num_responses=3)
    # one worker: the original copy answers with the first item; the sampling copy walks the
    # list from the start: first, second, first
    assert result.data["responses"] == ["Paris is the capital."]
    assert result.data["sampled_responses"] == [
        ["Paris is the capital.", "It is Paris.", "Paris is the capital."]
    ]
    # {paris,is,the,capital.} vs {it,is,paris.}: only "is" shared, 6 distinct tokens
    assert result.data["token_jaccard"][0] == pytest.approx((1 + 1 / 6 + 1) / 3)
    assert llm.i == 0


# --- the real BERTScore scorer ----------------------------------------------------------------


@pytest.fixture(scope="module")
def bert_uq():
    return BlackBoxUQ(scorers=None, show_progress_bars=False)


def test_default_scorer_is_bert_score(bert_uq):
    assert [s.name for s in bert_uq.scorers] == ["bert_score"]


def test_bert_score_confidence_is_the_mean_f1_against_present_samples(embedded_model_path):
    """The default scorer in float32 (its dtype, "auto", is the only default that moves numbers
    from the reference's) is the reference package's BERTScore with the fixed idf weights: the
    reference, given those weights as its idf dictionary, gives the same mean F1."""
    bert_score = pytest.importorskip("bert_score")
    from uqlm_bert.bertscore._fixed_idf import embedded_idf, idf_mapping

    responses = ["The Eiffel Tower is in Paris.", "Water boils at 100 degrees Celsius."]
    samples = [
        ["The Eiffel Tower stands in Paris, France.", None, "It is located in Rome."],
        ["At sea level, water boils at 100 C.", "Water freezes at 0 degrees."],
    ]
    # BERTScore's F1 with the scorers' idf weights alone: one setting away from the default
    # (which weighs punctuation and the prompt's tokens 0)
    f1 = BERTScoreConsistency(beta=1.0, zero_weight=None, dtype="float32")
    exact_uq = BlackBoxUQ(scorers=[f1], show_progress_bars=False)
    got = exact_uq.score(responses, samples).data["bert_score"]
    engine = exact_uq.scorers[0].engine
    assert engine.settings.idf == "auto"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = bert_score.BERTScorer(
            model_type=embedded_model_path, num_layers=engine.num_layers, idf=True
        )
    reference._idf_dict = idf_mapping(embedded_idf())  # the weights, through its own idf path
    expected = []
    for r, ss in zip(responses, samples, strict=True):
        # each pair on its own: the reference's batch-independent answer
        f1 = [float(reference.score([r], [s])[2][0]) for s in ss if s is not None]
        expected.append(sum(f1) / len(f1))
    assert got == pytest.approx(expected, abs=1e-5)
    # and without idf, plain BERTScore, as the reference computes it
    plain_f1 = BERTScoreConsistency(beta=1.0, zero_weight=None, idf=False, dtype="float32")
    plain = BlackBoxUQ(scorers=[plain_f1], show_progress_bars=False).score(responses, samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = bert_score.BERTScorer(
            model_type=embedded_model_path, num_layers=engine.num_layers
        )
    expected = [
        np.mean([float(reference.score([r], [s])[2][0]) for s in ss if s is not None])
        for r, ss in zip(responses, samples, strict=True)
    ]
    assert plain.data["bert_score"] == pytest.approx(expected, abs=1e-5)


async def test_bert_score_through_generation_matches_direct_scoring(bert_uq):
    llm = scripted(latency=0.002)
    llm.recorder.add_fault("q3", http_error(400), temperature=1.0, always=True)
    uq = BlackBoxUQ(
        llm,
        scorers=["bert_score"],
        show_progress_bars=False,
        **fast(max_concurrency=3, max_retries=1),
    )
    with pytest.warns(RuntimeWarning):
        result = await uq.generate_and_score(prompts_n(6), num_responses=2)
    direct = bert_uq.score(
        result.data["responses"], result.data["sampled_responses"], prompts=prompts_n(6)
    )
    got, want = result.data["bert_score"], direct.data["bert_score"]
    assert math.isnan(got[3]) and math.isnan(want[3])
    assert [g for i, g in enumerate(got) if i != 3] == pytest.approx(
        [w for i, w in enumerate(want) if i != 3], abs=1e-6
    )
    assert all(0.0 < g <= 1.0 for i, g in enumerate(got) if i != 3)


def test_bertscore_settings_pass_through():
    uq = BlackBoxUQ(
        scorers=["bert_score"],
        bertscore=BERTScoreSettings(num_layers=3, idf=True),
        show_progress_bars=False,
    )
    engine = uq.scorers[0].engine
    assert engine.num_layers == 3 and engine.idf is True


async def test_idf_from_references_is_computed_over_the_whole_run():
    llm = scripted(latency=0.002)
    # the idf weights alone: the scripted answers repeat their prompts' words, which the
    # default weighs 0 (tested in tests/scorers/test_prompt_weights.py)
    scorer = BERTScoreConsistency(idf=True, zero_weight=None)
    uq = BlackBoxUQ(llm, scorers=[scorer], max_concurrency=2, show_progress_bars=False)
    prompts = ["Tell me about cats.", "Tell me about dogs.", "Tell me about the moon."]
    result = await uq.generate_and_score(prompts, num_responses=2)
    # idf over all samples at once: the same as scoring the finished run in one call
    direct = uq.score(result.data["responses"], result.data["sampled_responses"])
    assert result.data["bert_score"] == pytest.approx(direct.data["bert_score"], abs=1e-6)


# --- settings: one object, read at every call ------------------------------------------------


async def test_a_generation_setting_changed_after_construction_is_the_one_used():
    llm = scripted(latency=0.01)
    uq = BlackBoxUQ(llm, scorers=["token_jaccard"], show_progress_bars=False)
    uq.sampling_temperature = 0.3
    uq.max_concurrency = 2
    result = await uq.generate_and_score(prompts_n(6), num_responses=2)
    sample_temps = {c.temperature for c in llm.recorder.calls} - {0.25}
    assert sample_temps == {0.3}  # what was sampled with ...
    assert result.metadata["sampling_temperature"] == 0.3  # ... is what the result says
    assert result.metadata["generation"]["max_concurrency"] == 2
    assert llm.recorder.max_in_flight == 2 and result.metadata["calls"]["max_in_flight"] == 2
    assert uq.generation.sampling_temperature == 0.3
    with pytest.raises(ConfigurationError, match="sampling_temperature"):
        uq.sampling_temperature = -1
    assert uq.sampling_temperature == 0.3  # a refused value changes nothing


def test_generation_settings_as_one_object_or_as_arguments_not_both():
    settings = GenerationSettings(max_concurrency=8, sampling_temperature=0.7)
    uq = BlackBoxUQ(scripted(), scorers=["token_jaccard"], generation=settings)
    assert uq.generation is settings and uq.max_concurrency == 8
    with pytest.raises(ConfigurationError, match="not both"):
        BlackBoxUQ(scripted(), scorers=["token_jaccard"], generation=settings, max_concurrency=1)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        (
            {"scoring": ScoringSettings(scorer_settings={"num_layer": 2})},
            r"'num_layer' .*did you mean 'num_layers'",
        ),
        (
            {"scoring": ScoringSettings(scorer_settings={"idf_sent": ["a"]})},
            r"'idf_sent' .*did you mean 'idf_sents'",
        ),
        (
            {"scorers": ["rouge_l"], "bertscore": BERTScoreSettings(num_layers=3)},
            r"bertscore= holds the settings of the bert_score, bert_score_precision, "
            r"bert_score_recall scorer\(s\), and none of them is among the scorers \(rouge_l\)",
        ),
    ],
)
def test_a_setting_no_scorer_takes_is_refused_naming_it(kwargs, fragment):
    with pytest.raises(ConfigurationError, match=fragment):
        BlackBoxUQ(**{"scorers": ["bert_score"], **kwargs})


@pytest.mark.slow
def test_the_default_scorer_gives_a_prompt_the_same_score_alone_or_among_ten_thousand():
    """Fixed idf weights: a prompt's confidence does not depend on the other prompts scored with
    it (idf over the call's samples, idf=True, does: the check can fail)."""
    colours = ["red", "green", "blue", "black", "white", "yellow", "purple", "orange"]
    pool = [f"The flag has {a} and {b} stripes." for a in colours for b in colours]
    # 10,000 prompts and 20,000 pairs; texts repeat, so the model embeds about 130 of them
    responses = [
        f"Flag {i % 64} is {colours[i % 8]} with {colours[i // 8 % 8]}." for i in range(10_000)
    ]
    samples = [[pool[i % len(pool)], pool[(i * 7) % len(pool)]] for i in range(10_000)]
    target = (
        "The flag is red and white.",
        ["It has red and white stripes.", "Red, blue and white."],
    )
    uq = BlackBoxUQ(show_progress_bars=False)
    alone = uq.score([target[0]], [target[1]]).data["bert_score"][0]
    among = uq.score([*responses, target[0]], [*samples, target[1]]).data["bert_score"][-1]
    assert among == pytest.approx(alone, abs=1e-6)
    call_idf = BlackBoxUQ(bertscore=BERTScoreSettings(idf=True), show_progress_bars=False)
    alone = call_idf.score([target[0]], [target[1]]).data["bert_score"][0]
    among = call_idf.score(responses[:500] + [target[0]], samples[:500] + [target[1]])
    assert abs(among.data["bert_score"][-1] - alone) > 1e-3


def test_the_bertscore_settings_built_once_reach_the_engine_as_they_are():
    """Built once (by the command, say) and passed whole, the settings object is the engine's:
    nothing rebuilds it on the way."""
    from uqlm_bert.scorers._registry import scorer_settings

    built = scorer_settings(["bert_score", "rouge_l"], num_layers=4)
    uq = BlackBoxUQ(scorers=["bert_score", "rouge_l"], bertscore=built["bertscore"])
    assert uq.bertscore_settings is built["bertscore"]
    assert uq.scorers[0].engine.settings is built["bertscore"]
