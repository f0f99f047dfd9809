"""BlackBoxUQ against a real LLM server: llama.cpp's, on 127.0.0.1, with the embedded model.

What a real server does that the loopback replay server does not: it decodes at most ``slots``
sequences at once and queues the rest (it never answers 429 or 503), honours ``n`` up to its slots
and answers HTTP 400 beyond, and can die in the middle of a run. Each test starts its own server
(:class:`uqlm_bert._local_llm.LocalLLM`), asks a few short questions (a handful of tokens per
reply), and stops it.
"""

from __future__ import annotations

import asyncio
import json
import time
import warnings

import pytest

from tests.helpers.waiting import until
from uqlm_bert.generation._checkpoint import ORIGINAL_SLOT

pytestmark = pytest.mark.network

pytest.importorskip("xllamacpp", reason="the local extra is not installed (xllamacpp)")

QUESTIONS = [
    "What is the capital of France?",
    "What is the capital of Japan?",
    "Who wrote Hamlet?",
    "What is the largest ocean?",
    "What color is the sky?",
    "How many legs does a spider have?",
    "What is the boiling point of water?",
    "Which planet is the largest?",
    "What is the currency of Japan?",
    "Who painted the Mona Lisa?",
    "What is the capital of Italy?",
    "What language is spoken in Brazil?",
]
SYSTEM = "Answer in one short sentence."


@pytest.fixture(autouse=True)
def _embedded_model():
    from uqlm_bert import ConfigurationError
    from uqlm_bert._local_llm import embedded_model_path

    try:
        embedded_model_path()
    except ConfigurationError as exc:  # pragma: no cover - CI installs it
        pytest.skip(str(exc))


def _uq(llm, **kwargs):
    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.generation._settings import generation_settings

    generation = generation_settings(None, system_prompt=SYSTEM, **kwargs)
    return BlackBoxUQ(llm=llm, generation=generation, show_progress_bars=False)


def _all_filled(result) -> None:
    data = result.data
    assert all(isinstance(r, str) for r in data["responses"]), data["errors"]
    assert all(isinstance(s, str) for g in data["sampled_responses"] for s in g), data[
        "sample_errors"
    ]
    assert all(e is None for e in data["errors"])
    assert all(e is None for g in data["sample_errors"] for e in g)


@pytest.mark.slow
def test_samples_within_the_slots_come_in_one_call_per_prompt():
    from uqlm_bert._local_llm import LocalLLM

    prompts, m = QUESTIONS[:3], 3
    with LocalLLM(num_responses=m, max_tokens=8) as llm:
        result = _uq(llm).generate_and_score_sync(prompts, num_responses=m)
    _all_filled(result)
    calls = result.metadata["calls"]
    # one call for each answer and one (asking for m choices with n) for each prompt's samples
    assert calls["n_calls"] == len(prompts)
    assert calls["attempts"] == 2 * len(prompts) and calls["retries"] == 0
    assert calls["succeeded"] == len(prompts) * (1 + m)


@pytest.mark.slow
def test_n_beyond_the_slots_falls_back_to_one_call_per_sample_and_is_remembered():
    from uqlm_bert._local_llm import LocalLLM
    from uqlm_bert.generation import _learned_limits as memory
    from uqlm_bert.generation._clients import provider_key

    prompts, m = QUESTIONS[:3], 4
    with LocalLLM(num_responses=m, slots=2, max_tokens=8) as llm:
        # every sample drawn, so that each prompt's one call with n = 4 meets the 2 slots
        first = _uq(llm, sampling="fixed").generate_and_score_sync(prompts, num_responses=m)
        _all_filled(first)
        calls = first.metadata["calls"]
        assert calls["failed"] == 0 and calls["succeeded"] == len(prompts) * (1 + m)
        assert calls["max_choices"] == 1  # n is not used with this server any more
        assert memory.recall(provider_key(llm)).max_choices == 1
        # the next run against the same endpoint asks one sample per call from the start:
        # exactly one attempt per slot, none refused
        again = _uq(llm, sampling="fixed").generate_and_score_sync(prompts, num_responses=m)
    _all_filled(again)
    calls = again.metadata["calls"]
    assert calls["attempts"] == len(prompts) * (1 + m)
    assert calls["n_calls"] == 0 and calls["failed"] == 0 and calls["retries"] == 0


@pytest.mark.slow
def test_a_queue_longer_than_the_timeout_causes_no_storm_of_duplicates():
    """More calls than slots, with a request_timeout shorter than the server's queue: the
    calls at the back must not time out and be sent again while the server still holds them.

    The queue's length is measured, not assumed: the same run with a timeout long enough for
    the whole queue takes ``long_s``; the last calls of that run waited about that long, so a
    timeout of a quarter of it is shorter than the queue (and still several times one call's
    own time: 2 slots serve the run's calls about ``calls / 2`` at a time)."""
    from uqlm_bert._local_llm import LocalLLM

    prompts, m = QUESTIONS, 2
    with LocalLLM(num_responses=m, slots=2, max_tokens=12) as llm:
        started = time.perf_counter()
        patient = _uq(llm, request_timeout=600).generate_and_score_sync(prompts, num_responses=m)
        long_s = time.perf_counter() - started
        _all_filled(patient)
        calls = patient.metadata["calls"]["attempts"]
        assert patient.metadata["calls"]["retries"] == 0
        timeout = long_s / 4
        one_call_s = long_s * 2 / calls  # 2 slots: about 2 calls served at once
        assert timeout > 2 * one_call_s, (long_s, calls)

        started = time.perf_counter()
        hurried = _uq(llm, request_timeout=timeout).generate_and_score_sync(
            prompts, num_responses=m
        )
        short_s = time.perf_counter() - started
    _all_filled(hurried)  # nothing lost
    stats = hurried.metadata["calls"]
    assert stats["failed"] == 0
    assert stats["retries"] < 0.05 * calls, stats  # no storm of timed-out duplicates
    # no slower than with a timeout long enough for the whole queue (a tenth for noise)
    assert short_s <= 1.1 * long_s + 1.0, (short_s, long_s, stats)


def _a_few_with_an_answer(slots) -> bool:
    return len(slots) >= 3 and ORIGINAL_SLOT in slots


@pytest.mark.slow
async def test_a_server_killed_mid_run_leaves_errors_in_place_and_a_resume_completes(tmp_path):
    from uqlm_bert import BlackBoxUQ, GenerationSettings
    from uqlm_bert._local_llm import LocalLLM
    from uqlm_bert.generation import RetryPolicy

    prompts, m = QUESTIONS[:8], 2
    checkpoint = tmp_path / "run.jsonl"
    retry = RetryPolicy(max_retries=1, base_delay=0.05)
    settings = dict(
        generation=GenerationSettings(system_prompt=SYSTEM, retry=retry), show_progress_bars=False
    )
    local = LocalLLM(num_responses=m, slots=2, max_tokens=12)
    async with local as llm:
        uq = BlackBoxUQ(llm=llm, **settings)
        run = asyncio.ensure_future(
            uq.generate_and_score(prompts, num_responses=m, checkpoint=checkpoint)
        )
        # kill the server once a few replies are in, an answer among them (the server may
        # finish the calls for samples first), well before the end
        await until(lambda: run.done() or _a_few_with_an_answer(_filled_slots(checkpoint)), 300)
        await asyncio.to_thread(local.kill)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = await run
    data = first.data
    finished = [i for i, r in enumerate(data["responses"]) if r is not None]
    unfinished = [
        i
        for i in range(len(prompts))
        if data["responses"][i] is None or any(s is None for s in data["sampled_responses"][i])
    ]
    assert finished and unfinished, data["responses"]
    for i in unfinished:  # each missing text carries its error, in its own slot
        if data["responses"][i] is None:
            assert data["errors"][i] is not None
        for text, error in zip(data["sampled_responses"][i], data["sample_errors"][i], strict=True):
            assert (text is None) == (error is not None)
    assert first.metadata["calls"]["failed"] > 0

    # a new server (another port, the same model): the resume asks only for what is missing
    async with LocalLLM(num_responses=m, slots=2, max_tokens=12) as llm:
        resumed = await BlackBoxUQ(llm=llm, **settings).generate_and_score(
            prompts, num_responses=m, checkpoint=checkpoint
        )
    _all_filled(resumed)
    calls = resumed.metadata["calls"]
    assert calls["from_checkpoint"] == sum(
        (r is not None) + sum(s is not None for s in g)
        for r, g in zip(data["responses"], data["sampled_responses"], strict=True)
    )
    for i in finished:  # what the first run got is kept as it was
        assert resumed.data["responses"][i] == data["responses"][i]


def _filled_slots(path) -> list[int]:
    """The slot of each answer and sample a checkpoint holds (its header line aside; a line
    being written may be read half-written, and is left for the next look)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    slots = []
    for line in lines[1:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("text"):
            slots.append(record["slot"])
    return slots


@pytest.mark.slow
def test_identical_samples_at_a_high_temperature_give_one_warning():
    """A server whose sampling ignores the temperature (top_k=1 on the server side: every reply
    is the most likely one) returns identical samples at sampling_temperature=1.0: one warning.
    The same questions on a server that samples give none."""
    from uqlm_bert._local_llm import LocalLLM
    from uqlm_bert.results._identical_samples import IdenticalSamplesWarning

    prompts, m = QUESTIONS[:5], 3
    with LocalLLM(num_responses=m, max_tokens=12, top_k=1) as llm:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            greedy = _uq(llm, sampling_temperature=1.0).generate_and_score_sync(
                prompts, num_responses=m
            )
    assert all(len(set(g)) == 1 for g in greedy.data["sampled_responses"])
    found = [w for w in caught if issubclass(w.category, IdenticalSamplesWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert "5 of 5 prompts" in str(found[0].message)

    with LocalLLM(num_responses=m, max_tokens=12) as llm:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sampled = _uq(llm, sampling_temperature=1.0).generate_and_score_sync(
                prompts, num_responses=m
            )
    assert sum(len(set(g)) > 1 for g in sampled.data["sampled_responses"]) >= 3
    assert not [w for w in caught if issubclass(w.category, IdenticalSamplesWarning)]
