"""Sampling until the answer is settled (``GenerationSettings(sampling="until_settled")``, the
default): the rule, which scorer decides, and whole runs through a client and a server: what is
drawn, what it costs, the scores of several rounds against one pass, failures, checkpoints, and
the synchronous face inside a running loop."""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading

import numpy as np
import pandas as pd
import pytest

from fakes.openai_server import FakeOpenAIServer
from tests.helpers.retries import fast
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel
from tests.helpers.tables import read_jsonl
from tests.helpers.texts import LONG, SHORT
from tests.helpers.texts_hostile import random_text
from tests.helpers.waiting import until
from uqlm_bert import BERTScoreSettings, BlackBoxUQ, GenerationSettings
from uqlm_bert._blackbox._settle import SPREAD_FLOOR, Z, decider, settled
from uqlm_bert._inputs import repair_text
from uqlm_bert.generation._rounds import FIRST_ROUND, round_ends
from uqlm_bert.scorers import PairwiseScorer, Scorer
from uqlm_bert.scorers._lexical import ExactMatchScorer
from uqlm_bert.scorers._registry import build_scorer

M = 5


def test_the_rule_stops_high_and_low_and_goes_on_when_undecided():
    t = 0.72
    # by hand: mean 0.96, spread 0.0141 below the floor: 0.24 >= 2 * 0.02 / sqrt(2)
    assert Z == 2.0 and SPREAD_FLOOR == 0.02
    assert settled(np.array([0.95, 0.97]), t)
    # mean 0.40, spread 0.1: 0.32 >= 2 * 0.1 / sqrt(3) = 0.115: clearly below
    assert settled(np.array([0.3, 0.4, 0.5]), t)
    # mean 0.73, spread 0.0424: 0.01 < 2 * 0.0424 / sqrt(2) = 0.06: not yet
    assert not settled(np.array([0.70, 0.76]), t)
    # the floor: identical scores just above the threshold are not settled by their zero spread
    assert not settled(np.array([0.73, 0.73, 0.73]), t)  # 0.01 < 2 * 0.02 / sqrt(3) = 0.023
    assert settled(np.array([0.75, 0.75, 0.75]), t)  # 0.03 >= 0.023
    assert not settled(np.array([t, t, t, t]), t)  # at the threshold: never
    assert not settled(np.array([]), t) and not settled(np.array([np.nan, np.nan]), t)
    assert settled(np.array([0.95, np.nan, 0.97]), t)  # a missing score is no score


class Agree(PairwiseScorer):
    """1 for a sample of a prompt named "high", 0 for "low", 0.5 else; flags below 0.5."""

    name = "agree"
    default_threshold = 0.5

    def score_pairs(self, pairs):
        return np.array([1.0 if "high" in r else 0.0 if "low" in r else 0.5 for r in pairs.refs])


class Batchwise(Agree):
    name = "batchwise"
    batch_invariant = False


class Whole(Scorer):
    """Not pairwise: one number per answer, from all its samples at once."""

    name = "whole"
    default_threshold = 0.5

    def score(self, responses, sampled_responses, show_progress_bars=False):
        return np.zeros(len(responses))


def test_the_first_scorer_with_a_threshold_decides_and_none_means_fixed_sampling():
    assert decider([ExactMatchScorer(), Agree()], use_best=False) == ("agree", 0.5)
    bert = build_scorer("bert_score")
    assert decider([bert, Agree()], use_best=False) == ("bert_score", bert.default_threshold)
    assert decider([ExactMatchScorer()], use_best=False) is None  # no threshold known
    assert decider([Agree()], use_best=True) is None  # best-of chooses among every sample
    assert decider([Batchwise()], use_best=False) is None  # its numbers need the whole batch
    assert decider([Whole()], use_best=False) is None  # no pair scores to combine
    other = build_scorer("bert_score", num_layers=2)  # another layer: no known threshold
    assert other.default_threshold is None and decider([other], use_best=False) is None


def scripted() -> ScriptedChatModel:
    return ScriptedChatModel(temperature=0.0, recorder=Recorder())


def run(llm, scorers, prompts, m=M, **generation):
    generation.setdefault("use_n_param", True)
    uq = BlackBoxUQ(llm, scorers=scorers, show_progress_bars=False, **fast(**generation))
    return uq.generate_and_score_sync(prompts, num_responses=m)


def test_settled_answers_stop_after_the_first_round_and_the_rest_draw_every_sample():
    llm = scripted()
    prompts = ["high one", "low one", "mid one", "high two"]
    result = run(llm, [Agree()], prompts)
    drawn = [len(s) for s in result.data["sampled_responses"]]
    assert drawn == [FIRST_ROUND, FIRST_ROUND, M, FIRST_ROUND]
    assert result.data["agree"] == [1.0, 0.0, 0.5, 1.0]
    # with n: per prompt the answer's call and one call per round it drew
    rounds = [1, 1, len(round_ends(M)), 1]
    calls = llm.recorder.calls
    assert len(calls) == len(prompts) + sum(rounds)
    sampling = result.metadata["sampling"]
    assert sampling["rule"] == "until_settled" and sampling["scorer"] == "agree"
    assert sampling["threshold"] == 0.5
    assert sampling["samples_drawn"] == sum(drawn) and sampling["samples_fixed"] == M * 4
    assert sampling["calls"] == len(calls) == result.metadata["calls"]["attempts"]
    assert sampling["calls_fixed"] == 2 * len(prompts)  # the answer, and the samples with n


def test_fixed_sampling_draws_every_sample_in_one_call_as_before():
    llm = scripted()
    prompts = ["high one", "low one", "mid one"]
    result = run(llm, [Agree()], prompts, sampling="fixed")
    assert [len(s) for s in result.data["sampled_responses"]] == [M] * 3
    assert sorted(c.n for c in llm.recorder.calls) == [1] * 3 + [M] * 3
    sampling = result.metadata["sampling"]
    assert sampling["rule"] == "fixed" and sampling["calls"] == sampling["calls_fixed"] == 6
    assert sampling["samples_drawn"] == sampling["samples_fixed"] == 3 * M


def test_without_a_deciding_scorer_every_prompt_samples_fully():
    result = run(scripted(), ["exact_match"], ["high one", "low one"])
    assert [len(s) for s in result.data["sampled_responses"]] == [M, M]
    assert result.metadata["sampling"]["rule"] == "fixed"


# -- whole runs through ChatOpenAI and the scripted server, scored by BERTScore -----------------


class Texts:
    """The server's answers: per prompt its answer at temperature 0 and its samples in turn."""

    def __init__(self, plan: dict[str, tuple[str, list[str]]]) -> None:
        self.plan = plan
        self._next = {p: 0 for p in plan}
        self._lock = threading.Lock()

    def __call__(self, prompt: str, temperature: float | None) -> str:
        answer, samples = self.plan[prompt]
        if not temperature:
            return answer
        with self._lock:
            k = self._next[prompt]
            self._next[prompt] = k + 1
        return samples[k % len(samples)]


def texts_plan() -> dict[str, tuple[str, list[str]]]:
    """Prompts whose samples agree with the answer, disagree, or are mixed, with hostile text."""
    rng = random.Random(7)
    plan = {
        "Capital of France?": (SHORT[2], [SHORT[2], SHORT[3], SHORT[2], SHORT[3], SHORT[2]]),
        "Who played football?": (SHORT[13], [SHORT[14], SHORT[0], SHORT[9], SHORT[12], SHORT[15]]),
        "A long life?": (LONG[1], [LONG[1], LONG[2], LONG[1], LONG[3], LONG[1]]),
        "Mixed?": (SHORT[0], [SHORT[0], SHORT[1], SHORT[2], SHORT[1], SHORT[0]]),
    }
    for i in range(4):  # hostile: control characters, lone surrogates, RTL, long lines, empty
        plan[f"hostile {i}?"] = (random_text(rng), [random_text(rng) for _ in range(M)])
    return plan


@pytest.fixture(scope="module")
def float32_uq_settings():
    return {"bertscore": BERTScoreSettings(dtype="float32"), "show_progress_bars": False}


def chat(server):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="scripted", base_url=server.base_url, api_key="x", max_retries=0, temperature=0.0
    )


@pytest.mark.network
def test_rounds_scored_as_they_come_give_the_scores_of_one_pass_over_what_was_drawn(
    float32_uq_settings,
):
    plan = texts_plan()
    prompts = list(plan)
    with FakeOpenAIServer(answer=Texts(plan)) as server:
        uq = BlackBoxUQ(chat(server), **fast(), **float32_uq_settings)
        result = uq.generate_and_score_sync(prompts, num_responses=M)
        calls = len(server.log)
    drawn = [len(s) for s in result.data["sampled_responses"]]
    assert min(drawn) >= FIRST_ROUND and max(drawn) <= M
    assert FIRST_ROUND in drawn and M in drawn  # some settled at once, some drew every round
    assert calls == result.metadata["sampling"]["calls"]
    # the confidences and supports gathered round by round are one pass's over the same texts
    again = uq.score(result.data["responses"], result.data["sampled_responses"], prompts=prompts)
    np.testing.assert_allclose(result.data["bert_score"], again.data["bert_score"], atol=1e-6)
    words, words_again = result.words(), again.words()
    assert words[["prompt_index", "start", "end", "word"]].equals(
        words_again[["prompt_index", "start", "end", "word"]]
    )
    np.testing.assert_allclose(words["support"], words_again["support"], atol=1e-5)
    refined = result.refine().drop(columns="samples_drawn")  # a column of generating runs
    pd.testing.assert_frame_equal(refined, again.refine(), check_exact=False, atol=1e-5)
    drawn = result.to_df()["samples_drawn"].tolist()
    assert drawn == [sum(x is not None for x in s) for s in result.data["sampled_responses"]]
    # read back through JSON: the same answers, words and refined answers as the run's
    from uqlm_bert import UQResult

    back = UQResult.from_dict(json.loads(json.dumps(result.to_dict())))
    pd.testing.assert_frame_equal(back.to_df(), result.to_df())
    pd.testing.assert_frame_equal(back.words(), result.words())
    pd.testing.assert_frame_equal(back.refine(), result.refine())
    # each prompt got its own texts, in the order served (lone surrogates repaired, as always)
    for p, samples in zip(prompts, result.data["sampled_responses"], strict=True):
        assert samples == [repair_text(plan[p][1][k % M])[0] for k in range(len(samples))]


@pytest.mark.network
def test_failed_sample_calls_are_not_counted_as_drawn_and_stay_in_their_row(float32_uq_settings):
    plan = texts_plan()
    prompts = list(plan)[:4]
    with FakeOpenAIServer(answer=Texts(plan)) as server:
        server.add_rule("Mixed?", status=400, temperature=1.0)  # every sample call refused
        server.add_rule("A long life?", status=400, temperature=0.0)  # the answer refused
        uq = BlackBoxUQ(chat(server), **fast(max_retries=0), **float32_uq_settings)
        result = uq.generate_and_score_sync(prompts, num_responses=M)
    d = result.data
    mixed, long_life = prompts.index("Mixed?"), prompts.index("A long life?")
    # no sample arrived: the prompt went on to its last round, and scores NaN
    assert d["sampled_responses"][mixed] == [None] * M and math.isnan(d["bert_score"][mixed])
    assert all(e is not None for e in d["sample_errors"][mixed])
    # no answer: nothing to judge, so its first round is all it drew
    assert d["responses"][long_life] is None and d["errors"][long_life] is not None
    assert len(d["sampled_responses"][long_life]) == FIRST_ROUND
    drawn = sum(s is not None for row in d["sampled_responses"] for s in row)
    assert result.metadata["sampling"]["samples_drawn"] == drawn
    others = [i for i in range(len(prompts)) if i not in (mixed, long_life)]
    assert all(not math.isnan(d["bert_score"][i]) for i in others)


@pytest.mark.network
async def test_a_run_killed_between_rounds_resumes_with_no_sample_drawn_twice(
    tmp_path, float32_uq_settings
):
    plan = texts_plan()
    prompts = list(plan)
    path = tmp_path / "run.jsonl"
    with FakeOpenAIServer(answer=Texts(plan)) as server:
        server.add_rule("Mixed?", latency=0.5, temperature=1.0)  # its rounds come late
        uq = BlackBoxUQ(chat(server), **fast(), **float32_uq_settings)
        task = asyncio.ensure_future(
            uq.generate_and_score(prompts, num_responses=M, checkpoint=path)
        )
        # killed once some prompt has stopped while the slow one is still drawing
        await until(lambda: path.exists() and any(r["type"] == "stop" for r in read_jsonl(path)))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        before = {(r["i"], r["slot"]): r["text"] for r in read_jsonl(path) if r["type"] == "slot"}
        stops = {r["i"]: r["drawn"] for r in read_jsonl(path) if r["type"] == "stop"}
        served = len(server.log)
        result = await uq.generate_and_score(prompts, num_responses=M, checkpoint=path)
        again = server.log[served:]
    slots = [(r["i"], r["slot"]) for r in read_jsonl(path) if r["type"] == "slot"]
    assert len(slots) == len(set(slots))  # no slot drawn twice
    d = result.data
    for (i, slot), text in before.items():  # what was drawn before the kill is kept as it was
        assert (d["responses"][i] if slot == -1 else d["sampled_responses"][i][slot]) == text
    assert all(len(d["sampled_responses"][i]) == k for i, k in stops.items())
    # the resumed run asked only for what the file did not hold
    now = {(i, s) for i, row in enumerate(d["sampled_responses"]) for s in range(len(row))}
    now |= {(i, -1) for i in range(len(prompts))}
    assert sum(r.n for r in again) == len(now - set(before))
    # and its scores are one pass's over the texts it ends with
    one_pass = uq.score(d["responses"], d["sampled_responses"], prompts=prompts)
    np.testing.assert_allclose(d["bert_score"], one_pass.data["bert_score"], atol=1e-6)


@pytest.mark.network
async def test_the_synchronous_face_samples_in_rounds_inside_a_running_event_loop(
    float32_uq_settings,
):
    plan = texts_plan()
    prompts = list(plan)[:4]
    with FakeOpenAIServer(answer=Texts(plan)) as server:
        uq = BlackBoxUQ(chat(server), **fast(), **float32_uq_settings)
        asyncio.get_running_loop()  # as in Jupyter: a loop runs in this thread
        result = uq.generate_and_score_sync(prompts, num_responses=M)
        assert len(server.log) == result.metadata["sampling"]["calls"]
    assert result.metadata["sampling"]["rule"] == "until_settled"
    assert all(FIRST_ROUND <= len(s) <= M for s in result.data["sampled_responses"])


def test_generation_settings_refuse_an_unknown_sampling():
    from uqlm_bert import ConfigurationError

    with pytest.raises(ConfigurationError, match="sampling must be one of"):
        GenerationSettings(sampling="adaptive")


def test_the_threshold_the_user_sets_is_the_one_sampling_settles_against_and_flags_use():
    from uqlm_bert import ScoringSettings

    llm = scripted()
    prompts = ["high one", "low one"]
    uq = BlackBoxUQ(llm, scorers=[Agree()], show_progress_bars=False,
                    scoring=ScoringSettings(threshold=1.0), **fast(use_n_param=True))  # fmt: skip
    result = uq.generate_and_score_sync(prompts, num_responses=M)
    # "high" scores exactly 1.0: never clearly above a threshold of 1.0, so it draws every
    # sample; "low" is clearly below it after its first round
    assert [len(s) for s in result.data["sampled_responses"]] == [M, FIRST_ROUND]
    assert result.metadata["sampling"]["threshold"] == 1.0
    assert result.metadata["thresholds"]["agree"]["answer"] == 1.0
    assert result.flag()["flagged"].tolist() == [False, True]  # 1.0 is not below 1.0


def test_scoring_settings_refuse_a_threshold_that_is_not_a_number():
    from uqlm_bert import ConfigurationError, ScoringSettings

    for bad in (True, "0.7", float("nan")):
        with pytest.raises(ConfigurationError, match="threshold"):
            ScoringSettings(threshold=bad)
