"""Samples asked for in one call with the provider's ``n``: slots, failures, resume, short replies.

The scripted model returns as many choices as a call's ``n`` asks (one where it ignores ``n``, a
400 beyond its ``max_n``); its recorder logs every call with its arguments.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.helpers.retries import no_wait
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel, answer_text, http_error
from tests.helpers.waiting import until
from uqlm_bert.generation import _learned_limits as memory
from uqlm_bert.generation._checkpoint import Checkpoint
from uqlm_bert.generation._clients import accepts_n, provider_key
from uqlm_bert.generation._generator import ResponseGenerator
from uqlm_bert.generation._settings import GenerationSettings

FAST = no_wait(3)
PROMPTS = [f"q{i}" for i in range(6)]


def scripted(**kwargs) -> ScriptedChatModel:
    return ScriptedChatModel(temperature=0.25, recorder=Recorder(), **kwargs)


async def generate(llm, prompts=PROMPTS, m=5, **settings):
    settings.setdefault("use_n_param", True)
    settings.setdefault("retry", FAST)
    gen = ResponseGenerator(llm, GenerationSettings(**settings))
    return await gen.generate(prompts, m, show_progress_bars=False)


def complete(result, prompts=PROMPTS, m=5, temperature=1.0) -> bool:
    """Every prompt has its answer and its m samples, each in its own prompt's slots."""
    return result.responses == [answer_text(p, 0.25) for p in prompts] and all(
        samples == [answer_text(p, temperature)] * m
        for p, samples in zip(prompts, result.sampled_responses, strict=True)
    )


async def test_a_prompts_samples_are_one_call_with_n_and_the_answer_its_own():
    llm = scripted()
    result = await generate(llm, m=5)
    assert complete(result)
    calls = llm.recorder.calls
    answers = [c for c in calls if c.temperature == 0.25]
    samples = [c for c in calls if c.temperature == 1.0]
    # the answer at the model's temperature, without n; the samples in one call at the sampling
    # temperature with n = num_responses
    assert sorted(c.prompt for c in answers) == PROMPTS and all(c.n == 1 for c in answers)
    assert sorted(c.prompt for c in samples) == PROMPTS and all(c.n == 5 for c in samples)
    stats = result.stats
    assert stats.attempts == 12 and stats.n_calls == 6 and stats.succeeded == 36
    assert stats.samples_per_call == 5 and stats.choices_missing == 0 and stats.max_choices == 128
    assert llm.temperature == 0.25 and "n" not in llm.model_fields_set  # the caller's model


async def test_n_is_not_used_when_off_or_for_clients_not_known_to_accept_it():
    for setting in (False, "auto"):
        llm = scripted()
        assert not accepts_n(llm)
        result = await generate(llm, m=3, use_n_param=setting)
        assert complete(result, m=3)
        assert len(llm.recorder.calls) == 6 * 4 and all(c.n == 1 for c in llm.recorder.calls)
        assert result.stats.n_calls == 0 and result.stats.samples_per_call == 1
        assert result.stats.max_choices == 1


async def test_more_samples_than_one_call_may_ask_for_are_split_over_several_calls():
    llm = scripted(max_n=3)  # the provider refuses n > 3
    result = await generate(llm, m=7, max_samples_per_call=3)
    assert complete(result, m=7)
    sizes = sorted(c.n for c in llm.recorder.calls if c.temperature == 1.0)
    assert sizes == sorted([3, 3, 1] * len(PROMPTS))
    assert result.stats.failed == 0 and result.stats.attempts == len(PROMPTS) * 4


async def test_a_provider_that_ignores_n_still_gives_every_prompt_all_its_samples(caplog):
    llm = scripted(ignore_n=True)
    with caplog.at_level(logging.INFO, logger="uqlm_bert"):
        result = await generate(llm, m=5, max_concurrency=2)
    assert complete(result)
    stats = result.stats
    # the first calls asked with n; once a reply came short, n was dropped and the missing
    # samples asked for one call each
    asked_n = [c for c in llm.recorder.calls if c.n > 1]
    assert 1 <= len(asked_n) <= 2 and stats.choices_missing == 4 * len(asked_n)
    assert stats.max_choices == 1 and stats.samples_per_call == 5 and stats.failed == 0
    assert stats.attempts == 6 + 6 * 5 and stats.succeeded == 36
    # said once in the log (not a warning per call), and remembered for this provider
    notes = [r for r in caplog.records if "ignores n" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.INFO
    assert memory.recall(provider_key(llm)).max_choices == 1
    # the next run against the same provider asks one call per sample from the start
    llm.recorder.calls.clear()
    again = await generate(llm, m=5)
    assert complete(again) and all(c.n == 1 for c in llm.recorder.calls)
    assert again.stats.choices_missing == 0


async def test_a_provider_that_caps_n_gets_no_more_per_call_than_it_returned():
    class Capped(ScriptedChatModel):
        def _choices(self, kwargs):
            return min(2, int(kwargs.get("n") or 1))

    llm = Capped(temperature=0.25, recorder=Recorder())
    result = await generate(llm, m=5, max_concurrency=1)
    assert complete(result)
    sizes = [c.n for c in llm.recorder.calls if c.temperature == 1.0]
    # asked 5, got 2: the rest in calls of 2 (and the last 1), for every prompt
    assert sizes[0] == 5 and all(n <= 2 for n in sizes[1:])
    assert result.stats.max_choices == 2 and result.stats.failed == 0


async def test_a_transient_failure_of_a_call_with_n_retries_the_whole_call():
    llm = scripted()
    llm.recorder.add_fault("q2", http_error(503), http_error(429), temperature=1.0)
    result = await generate(llm, m=5)
    assert complete(result)
    retried = [c for c in llm.recorder.calls if c.prompt == "q2" and c.temperature == 1.0]
    assert [c.n for c in retried] == [5, 5, 5] and result.stats.retries == 2


async def test_a_call_with_n_that_fails_for_good_fails_its_own_samples_only():
    llm = scripted()
    llm.recorder.add_fault("q1", http_error(400), always=True)  # a prompt the provider refuses
    llm.recorder.add_fault("q4", http_error(503), temperature=1.0, always=True)
    result = await generate(llm, m=4)
    for i, p in enumerate(PROMPTS):
        if p == "q1":
            assert result.responses[i] is None and result.sampled_responses[i] == [None] * 4
            assert [e.kind for e in result.sample_errors[i]] == ["bad_request"] * 4
        elif p == "q4":
            assert result.responses[i] == answer_text(p, 0.25)
            assert result.sampled_responses[i] == [None] * 4
            assert [(e.kind, e.attempts) for e in result.sample_errors[i]] == [("server", 4)] * 4
        else:
            assert result.sampled_responses[i] == [answer_text(p, 1.0)] * 4
            assert result.sample_errors[i] == [None] * 4
    # the refused prompt's samples were asked once more one by one (a provider may refuse n
    # itself); they failed the same way, so n stays in use for the others
    q1 = [c.n for c in llm.recorder.calls if c.prompt == "q1" and c.temperature == 1.0]
    assert sorted(q1) == [1, 1, 1, 1, 4] and result.stats.max_choices == 128
    assert result.stats.failed == 1 + 4 + 4 and result.stats.failures_by_kind == {
        "bad_request": 5,
        "server": 4,
    }


async def test_a_provider_that_refuses_n_gets_the_samples_one_call_each():
    llm = scripted(max_n=1)  # HTTP 400 for any n above 1
    result = await generate(llm, m=3, max_concurrency=1)
    assert complete(result, m=3)
    with_n = [c for c in llm.recorder.calls if c.n > 1]
    assert len(with_n) == 1 and result.stats.max_choices == 1
    assert memory.recall(provider_key(llm)).max_choices == 1


async def test_resume_asks_with_n_only_for_the_samples_that_are_missing(tmp_path):
    path = tmp_path / "run.jsonl"
    slow = scripted()
    slow.recorder.slow["q3"] = 30.0  # never finishes before the run is stopped
    settings = GenerationSettings(use_n_param=True, retry=FAST)
    task = asyncio.ensure_future(
        ResponseGenerator(slow, settings).generate(
            PROMPTS, 5, checkpoint=path, show_progress_bars=False
        )
    )
    done = 1 + 6 * (len(PROMPTS) - 1)  # the header, and every slot but q3's answer and samples
    await until(lambda: path.exists() and len(path.read_text().splitlines()) >= done)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    # each sample was recorded on its own line
    assert len(path.read_text().splitlines()) == done
    llm = scripted()
    resumed = await ResponseGenerator(llm, settings).generate(
        PROMPTS, 5, checkpoint=Checkpoint(path), show_progress_bars=False
    )
    assert complete(resumed)
    assert sorted((c.prompt, c.n) for c in llm.recorder.calls) == [("q3", 1), ("q3", 5)]
    assert resumed.stats.from_checkpoint == 5 * 6


async def test_resume_of_part_of_a_prompts_samples_asks_n_for_the_rest(tmp_path):
    path = tmp_path / "run.jsonl"
    llm = scripted()
    first = await ResponseGenerator(llm, GenerationSettings(use_n_param=True)).generate(
        PROMPTS[:2], 5, show_progress_bars=False
    )
    # a checkpoint holding q0's answer and samples 0 and 3 only, q1 complete
    ckpt = Checkpoint(path, fsync=False)
    gen = ResponseGenerator(llm, GenerationSettings(use_n_param=True))
    gen.save_checkpoint(first, ckpt, 5)
    kept = [
        line
        for line in path.read_text().splitlines()
        if '"i": 0' not in line
        or '"slot": -1' in line
        or '"slot": 0,' in line
        or '"slot": 3,' in line
    ]
    path.write_text("\n".join(kept) + "\n")
    llm.recorder.calls.clear()
    resumed = await gen.generate(PROMPTS[:2], 5, checkpoint=path, show_progress_bars=False)
    assert complete(resumed, PROMPTS[:2])
    assert [(c.prompt, c.n) for c in llm.recorder.calls] == [("q0", 3)]


@pytest.mark.parametrize("bad", ["yes", 2, 1, None])
def test_use_n_param_takes_auto_true_or_false(bad):
    from uqlm_bert import ConfigurationError

    with pytest.raises(ConfigurationError, match="use_n_param"):
        GenerationSettings(use_n_param=bad)
