"""Sampling in rounds: a prompt's samples come a round at a time and a judge decides between
rounds; the rounds' sizes, the calls they make, failures inside a round, and a checkpoint that
resumes each prompt in the round it stood in."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers.retries import no_wait
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel, answer_text, http_error
from tests.helpers.tables import read_jsonl
from uqlm_bert import ConfigurationError
from uqlm_bert.generation._generator import ResponseGenerator
from uqlm_bert.generation._rounds import FIRST_ROUND, round_ends
from uqlm_bert.generation._settings import GenerationSettings

PROMPTS = [f"q{i}" for i in range(4)]
SAMPLE_T = 1.0  # the sampling temperature


def scripted(**kwargs) -> ScriptedChatModel:
    return ScriptedChatModel(temperature=0.0, recorder=Recorder(), **kwargs)


class Judge:
    """Says, per prompt, whether it goes on (``go_on(index, round)``), and logs what it saw."""

    def __init__(self, go_on=lambda index, round: True, name: str = "test") -> None:
        self.go_on = go_on
        self.name = name
        self.seen: list[tuple[int, str | None, list[str | None]]] = []

    def describe(self) -> dict:
        return {"rule": self.name}

    async def __call__(self, index, response, samples) -> bool:
        self.seen.append((index, response, list(samples)))
        rounds = sum(1 for i, _, _ in self.seen if i == index)
        return self.go_on(index, rounds)


async def generate(llm, judge, m=5, prompts=PROMPTS, checkpoint=None, **settings):
    settings.setdefault("retry", no_wait(0))
    settings.setdefault("use_n_param", True)
    gen = ResponseGenerator(llm, GenerationSettings(**settings))
    return await gen.generate(
        prompts, m, judge=judge, checkpoint=checkpoint, show_progress_bars=False
    )


def test_rounds_double_the_samples_drawn_up_to_num_responses():
    # by hand: the first round, then twice as many at each round, the last cut at m
    assert FIRST_ROUND == 3
    assert round_ends(5) == [3, 5]
    assert round_ends(10) == [3, 6, 10]
    assert round_ends(20) == [3, 6, 12, 20]
    assert round_ends(3) == [3] and round_ends(2) == [2] and round_ends(1) == [1]
    for m in range(1, 40):
        ends = round_ends(m)
        assert ends[-1] == m and ends == sorted(set(ends)) and ends[0] == min(FIRST_ROUND, m)
    with pytest.raises(ConfigurationError, match="num_responses"):
        round_ends(True)


async def test_a_prompt_the_judge_stops_keeps_its_first_round_and_no_more():
    llm = scripted()
    result = await generate(llm, Judge(lambda index, round: False))
    assert result.sampled_responses == [[answer_text(p, SAMPLE_T)] * FIRST_ROUND for p in PROMPTS]
    assert result.sample_errors == [[None] * FIRST_ROUND for _ in PROMPTS]
    samples = llm.recorder.calls_for("q", SAMPLE_T)
    # with n: the round's samples in one call, beside the answer's call
    assert sorted(c.n for c in samples) == [FIRST_ROUND] * len(PROMPTS)
    assert result.stats.attempts == 2 * len(PROMPTS)


async def test_a_prompt_the_judge_lets_go_on_draws_every_round_up_to_num_responses():
    llm = scripted()
    judge = Judge()
    result = await generate(llm, judge, m=10)
    assert result.sampled_responses == [[answer_text(p, SAMPLE_T)] * 10 for p in PROMPTS]
    # one call per round with n = the round's size; the judge asked after each round but the last
    ends = round_ends(10)
    sizes = [b - a for a, b in zip([0, *ends], ends, strict=False)]
    for p in PROMPTS:
        assert sorted(c.n for c in llm.recorder.calls_for(p, SAMPLE_T)) == sorted(sizes)
    assert sorted((i, len(s)) for i, _, s in judge.seen) == sorted(
        (i, e) for i in range(len(PROMPTS)) for e in ends[:-1]
    )
    # the judge saw each prompt's answer and its samples so far, in slot order
    assert all(r == answer_text(PROMPTS[i], 0.0) for i, r, _ in judge.seen)


async def test_without_n_a_round_is_one_call_per_sample():
    llm = scripted()
    result = await generate(llm, Judge(lambda index, round: index == 0), use_n_param=False)
    drawn = [len(s) for s in result.sampled_responses]
    assert drawn == [5, FIRST_ROUND, FIRST_ROUND, FIRST_ROUND]
    assert result.stats.attempts == len(PROMPTS) + sum(drawn)
    assert all(c.n == 1 for c in llm.recorder.calls)


async def test_one_prompts_next_round_does_not_wait_for_another_prompts_judge():
    release = asyncio.Event()

    class Slow(Judge):
        async def __call__(self, index, response, samples) -> bool:
            if index == 0:
                await release.wait()  # prompt 0's round is being scored, slowly
            return await super().__call__(index, response, samples)

    llm = scripted()
    task = asyncio.ensure_future(generate(llm, Slow(), m=10))
    # the other prompts draw all their rounds while prompt 0 waits for its judge
    ends = round_ends(10)
    want = len(ends)  # calls for samples per prompt, one per round with n

    def others_done() -> bool:
        return all(len(llm.recorder.calls_for(p, SAMPLE_T)) == want for p in PROMPTS[1:])

    await llm.recorder.until(others_done, 5.0)
    assert others_done() and len(llm.recorder.calls_for("q0", SAMPLE_T)) == 1
    release.set()
    result = await asyncio.wait_for(task, 10)
    assert [len(s) for s in result.sampled_responses] == [10] * len(PROMPTS)


async def test_a_failed_call_inside_a_round_leaves_its_slots_and_the_rounds_go_on():
    llm = scripted()
    # round 1: the call with n refused, then each sample asked for alone refused too
    errors = [http_error(400) for _ in range(1 + FIRST_ROUND)]
    llm.recorder.add_fault("q1", *errors, temperature=SAMPLE_T)
    judge = Judge()
    result = await generate(llm, judge)
    # the failed round's slots hold the failure; the judge saw them as missing, and the
    # prompt drew its next round all the same
    assert result.sampled_responses[1] == [None] * FIRST_ROUND + [answer_text("q1", SAMPLE_T)] * 2
    kinds = [None if e is None else e.kind for e in result.sample_errors[1]]
    assert kinds == ["bad_request"] * FIRST_ROUND + [None, None]
    assert (1, answer_text("q1", 0.0), [None] * FIRST_ROUND) in judge.seen
    assert [len(s) for s in result.sampled_responses] == [5] * len(PROMPTS)


async def test_a_prompt_whose_answer_failed_still_asks_the_judge_with_no_answer():
    llm = scripted()
    llm.recorder.add_fault("q2", http_error(400), temperature=0.0)
    judge = Judge(lambda index, round: False)
    result = await generate(llm, judge)
    assert result.responses[2] is None and result.response_errors[2].kind == "bad_request"
    assert [r for i, r, _ in judge.seen if i == 2] == [None]


async def test_answers_or_samples_alone_never_draw_rounds():
    llm = scripted()
    gen = ResponseGenerator(llm, GenerationSettings(retry=no_wait(0)))
    judge = Judge()
    samples = await gen.generate(
        PROMPTS, 5, include_original=False, judge=judge, show_progress_bars=False
    )
    assert [len(s) for s in samples.sampled_responses] == [5] * len(PROMPTS) and not judge.seen


async def test_a_run_stopped_between_rounds_resumes_without_drawing_a_sample_twice(tmp_path):
    path = tmp_path / "run.jsonl"
    decisions = {0: False, 1: True, 2: True, 3: True}  # prompt 0 settles after round 1

    class Killed(Exception):
        pass

    class KillAtQ3(Judge):
        async def __call__(self, index, response, samples) -> bool:
            if index == 3:  # the run is killed while prompt 3's round 1 is being judged
                raise Killed
            return await super().__call__(index, response, samples)

    first_llm = scripted()
    with pytest.raises(Killed):
        await generate(
            first_llm, KillAtQ3(lambda i, r: decisions[i]), checkpoint=path, max_concurrency=1
        )
    stops = [r for r in read_jsonl(path) if r["type"] == "stop"]
    assert [(r["i"], r["drawn"]) for r in stops] == [(0, FIRST_ROUND)]
    drawn_before = {(r["i"], r["slot"]) for r in read_jsonl(path) if r["type"] == "slot"}

    again_llm = scripted()
    again = await generate(
        again_llm, Judge(lambda i, r: decisions[i]), checkpoint=path, max_concurrency=1
    )
    asked_again = [(c.prompt, c.n, c.temperature) for c in again_llm.recorder.calls]
    # nothing recorded is asked for again; prompt 0 stays stopped; the others draw their
    # second round (and whatever of their first the first run had not received)
    assert all(p != "q0" for p, _, _ in asked_again)
    drawn_now = {(r["i"], r["slot"]) for r in read_jsonl(path) if r["type"] == "slot"}
    assert len(drawn_now) == len(read_jsonl(path)) - 1 - len(stops)  # each slot once on file
    assert drawn_before <= drawn_now
    assert [len(s) for s in again.sampled_responses] == [FIRST_ROUND, 5, 5, 5]
    clean = await generate(scripted(), Judge(lambda i, r: decisions[i]))
    assert again.sampled_responses == clean.sampled_responses
    assert again.responses == clean.responses
    # the calls of both runs together: what one run without a stop makes
    samples_asked = sum(c.n for c in first_llm.recorder.calls + again_llm.recorder.calls
                        if c.temperature == SAMPLE_T)  # fmt: skip
    assert samples_asked == sum(len(s) for s in clean.sampled_responses)


async def test_a_checkpoint_written_under_one_judge_is_not_resumed_under_another(tmp_path):
    from uqlm_bert import CheckpointError

    path = tmp_path / "run.jsonl"
    await generate(scripted(), Judge(lambda i, r: False, name="one"), checkpoint=path)
    with pytest.raises(CheckpointError, match="sampling"):
        await generate(scripted(), Judge(name="two"), checkpoint=path)
    with pytest.raises(CheckpointError, match="sampling"):
        await generate(scripted(), None, checkpoint=path)  # fixed sampling


async def test_save_checkpoint_keeps_a_stopped_prompts_rounds(tmp_path):
    llm = scripted()
    gen = ResponseGenerator(llm, GenerationSettings(retry=no_wait(0), use_n_param=True))
    judge = Judge(lambda i, r: i % 2 == 0)
    result = await gen.generate(PROMPTS, 5, judge=judge, show_progress_bars=False)
    path = tmp_path / "saved.jsonl"
    gen.save_checkpoint(result, path, 5)
    again_llm = scripted()
    again = await ResponseGenerator(
        again_llm, GenerationSettings(retry=no_wait(0), use_n_param=True)
    ).generate(PROMPTS, 5, judge=judge, checkpoint=path, show_progress_bars=False)
    assert again_llm.recorder.calls == []  # every prompt resumes done: stopped, or drawn all
    assert again.sampled_responses == result.sampled_responses
