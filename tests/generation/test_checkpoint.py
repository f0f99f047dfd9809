"""Checkpoint files: every answer on disk as it arrives, resume skips what is done."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from tests.helpers.retries import no_wait
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel, answer_text, http_error
from tests.helpers.tables import read_jsonl
from tests.helpers.waiting import until
from uqlm_bert import CheckpointError
from uqlm_bert.generation import Checkpoint
from uqlm_bert.generation._generator import ResponseGenerator
from uqlm_bert.generation._records import CallFailure
from uqlm_bert.generation._settings import GenerationSettings

FAST = no_wait(1)
PROMPTS = [f"question {i}" for i in range(8)]


def scripted(**kwargs) -> ScriptedChatModel:
    return ScriptedChatModel(temperature=0.0, recorder=Recorder(), **kwargs)


def fields(result):
    return (
        result.responses,
        result.sampled_responses,
        [None if e is None else e.kind for e in result.response_errors],
        [[None if e is None else e.kind for e in errs] for errs in result.sample_errors],
    )


async def test_every_call_is_recorded(tmp_path):
    path = tmp_path / "run.jsonl"
    llm = scripted()
    result = await ResponseGenerator(llm).generate(
        PROMPTS[:3], 2, checkpoint=path, show_progress_bars=False
    )
    lines = read_jsonl(path)
    assert lines[0]["type"] == "header" and lines[0]["num_prompts"] == 3
    slots = sorted((r["i"], r["slot"]) for r in lines[1:])
    assert slots == [(i, s) for i in range(3) for s in (-1, 0, 1)]
    for rec in lines[1:]:
        expected = result.responses if rec["slot"] == -1 else None
        text = expected[rec["i"]] if expected else result.sampled_responses[rec["i"]][rec["slot"]]
        assert rec["text"] == text and rec["error"] is None


async def test_resume_of_a_finished_run_makes_no_calls(tmp_path):
    path = tmp_path / "run.jsonl"
    first = await ResponseGenerator(scripted()).generate(
        PROMPTS, 3, checkpoint=path, show_progress_bars=False
    )
    again_llm = scripted()
    again = await ResponseGenerator(again_llm).generate(
        PROMPTS, 3, checkpoint=path, show_progress_bars=False
    )
    assert again_llm.recorder.calls == []
    assert fields(again) == fields(first)
    assert again.stats.from_checkpoint == len(PROMPTS) * 4 and again.stats.attempts == 0


async def test_interrupted_run_resumes_to_the_same_result(tmp_path):
    path = tmp_path / "run.jsonl"
    clean = await ResponseGenerator(scripted()).generate(PROMPTS, 3, show_progress_bars=False)

    slow = scripted(latency=0.01)
    task = asyncio.ensure_future(
        ResponseGenerator(slow, GenerationSettings(max_concurrency=3)).generate(
            PROMPTS, 3, checkpoint=path, show_progress_bars=False
        )
    )
    await until(lambda: path.exists() and len(read_jsonl(path)) >= 12)  # header + 11 slots
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() == {asyncio.current_task()}
    on_file = {(r["i"], r["slot"]) for r in read_jsonl(path)[1:]}
    assert 11 <= len(on_file) < len(PROMPTS) * 4

    resumed_llm = scripted()
    resumed = await ResponseGenerator(resumed_llm).generate(
        PROMPTS, 3, checkpoint=path, show_progress_bars=False
    )
    assert fields(resumed) == fields(clean)
    # only the slots missing from the file were asked for
    assert len(resumed_llm.recorder.calls) == len(PROMPTS) * 4 - len(on_file)
    assert resumed.stats.from_checkpoint == len(on_file)


async def test_resume_retries_transient_failures_but_keeps_permanent_ones(tmp_path):
    path = tmp_path / "run.jsonl"
    llm = scripted()
    llm.recorder.add_fault("question 1", http_error(503), temperature=1.0, always=True)
    llm.recorder.add_fault("question 2", http_error(400), temperature=0.0, always=True)
    first = await ResponseGenerator(llm, GenerationSettings(retry=FAST)).generate(
        PROMPTS[:3], 2, checkpoint=path, show_progress_bars=False
    )
    assert first.sampled_responses[1] == [None, None]

    healthy = scripted()
    second = await ResponseGenerator(healthy, GenerationSettings(retry=FAST)).generate(
        PROMPTS[:3], 2, checkpoint=path, show_progress_bars=False
    )
    assert second.stats.failed == 0 and second.stats.from_checkpoint == 9 - 2
    assert [(c.prompt, c.temperature) for c in healthy.recorder.calls] == [
        ("question 1", 1.0),
        ("question 1", 1.0),
    ]
    assert second.sampled_responses[1] == [answer_text("question 1", 1.0)] * 2
    assert second.responses[2] is None and second.response_errors[2].kind == "bad_request"
    # a third run reads the later records for prompt 1 and needs nothing
    third_llm = scripted()
    third = await ResponseGenerator(third_llm).generate(
        PROMPTS[:3], 2, checkpoint=path, show_progress_bars=False
    )
    assert third_llm.recorder.calls == [] and fields(third) == fields(second)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"prompts": PROMPTS[:4] + ["something else"]}, "prompt 4 differs"),
        ({"prompts": PROMPTS[:5][::-1]}, "prompt 0 differs"),
        ({"prompts": PROMPTS[:6]}, "it has 5 prompts and this run has 6"),
        ({"num_responses": 3}, "the setting 'num_responses' was 2 and is now 3"),
        (
            {"sampling_temperature": 0.7},
            "the setting 'sampling_temperature' was 1.0 and is now 0.7",
        ),
        (
            {"system_prompt": "Be brief."},
            "the setting 'system_prompt' was None and is now 'Be brief.'",
        ),
    ],
)
async def test_a_checkpoint_of_another_run_is_refused(tmp_path, change, named):
    path = tmp_path / "run.jsonl"
    await ResponseGenerator(scripted()).generate(
        PROMPTS[:5], 2, checkpoint=path, show_progress_bars=False
    )
    before = path.read_bytes()
    gen = ResponseGenerator(
        scripted(),
        GenerationSettings(
            sampling_temperature=change.get("sampling_temperature", 1.0),
            system_prompt=change.get("system_prompt"),
        ),
    )
    with pytest.raises(CheckpointError, match=f"different run: {re.escape(named)}"):
        await gen.generate(
            change.get("prompts", PROMPTS[:5]),
            change.get("num_responses", 2),
            checkpoint=path,
            show_progress_bars=False,
        )
    assert path.read_bytes() == before


async def test_a_line_cut_short_by_a_crash_is_dropped_and_redone(tmp_path):
    path = tmp_path / "run.jsonl"
    await ResponseGenerator(scripted()).generate(
        PROMPTS[:2], 1, checkpoint=path, show_progress_bars=False
    )
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    last = json.loads(lines[-1])
    path.write_text("".join(lines[:-1]) + lines[-1][:25], encoding="utf-8")
    llm = scripted()
    with pytest.warns(RuntimeWarning, match="cut short"):
        result = await ResponseGenerator(llm).generate(
            PROMPTS[:2], 1, checkpoint=path, show_progress_bars=False
        )
    assert len(llm.recorder.calls) == 1
    assert llm.recorder.calls[0].prompt == PROMPTS[last["i"]]
    assert all(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    assert result.responses == [answer_text(p, 0.0) for p in PROMPTS[:2]]


async def test_damaged_or_foreign_files_are_refused(tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes, not a checkpoint", encoding="utf-8")
    with pytest.raises(CheckpointError, match="not a uqlm-bert checkpoint.*left alone"):
        await ResponseGenerator(scripted()).generate(
            ["q"], 1, checkpoint=foreign, show_progress_bars=False
        )
    assert foreign.read_text(encoding="utf-8") == "my notes, not a checkpoint"

    path = tmp_path / "run.jsonl"
    await ResponseGenerator(scripted()).generate(
        ["q"], 1, checkpoint=path, show_progress_bars=False
    )
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([lines[0], "{broken", *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match="line 2"):
        await ResponseGenerator(scripted()).generate(
            ["q"], 1, checkpoint=path, show_progress_bars=False
        )


def test_checkpoint_roundtrip_of_failures(tmp_path):
    path = tmp_path / "c.jsonl"
    failure = CallFailure("server", "HTTP 503", attempts=3, status_code=503)
    ckpt = Checkpoint(path)
    assert ckpt.open(["a", "b"], {"m": 1}) == {}
    ckpt.write(1, 0, None, failure)
    ckpt.write(1, 0, "later success", None)
    ckpt.close()
    assert Checkpoint(path).open(["a", "b"], {"m": 1}) == {(1, 0): ("later success", None)}
    ckpt = Checkpoint(path)
    ckpt.open(["a", "b"], {"m": 1})
    ckpt.write(0, -1, None, failure)
    ckpt.close()
    got = Checkpoint(path).open(["a", "b"], {"m": 1})
    assert got[(0, -1)] == (None, failure)
    with pytest.raises(CheckpointError, match="prompt 1 differs"):
        Checkpoint(path).open(["a", "changed"], {"m": 1})


def test_checkpoint_argument_type_is_checked():
    from uqlm_bert import ConfigurationError

    with pytest.raises(ConfigurationError, match="checkpoint"):
        asyncio.run(
            ResponseGenerator(scripted()).generate(
                ["q"], 1, checkpoint=123, show_progress_bars=False
            )
        )


async def test_a_second_run_on_an_open_checkpoint_is_refused_at_once(tmp_path):
    path = tmp_path / "run.jsonl"
    slow = scripted(latency=0.05)
    first = asyncio.ensure_future(
        ResponseGenerator(slow, GenerationSettings(max_concurrency=2)).generate(
            PROMPTS, 2, checkpoint=path, show_progress_bars=False
        )
    )
    await slow.recorder.until(lambda: len(slow.recorder.calls) >= 2)
    second = scripted()
    with pytest.raises(CheckpointError, match=r"in use by another run.*run\.jsonl\.lock"):
        await ResponseGenerator(second).generate(
            PROMPTS, 2, checkpoint=path, show_progress_bars=False
        )
    assert second.recorder.calls == [] and not first.done()
    result = await first
    assert result.responses == [answer_text(p, 0.0) for p in PROMPTS]
    assert len(read_jsonl(path)) == 1 + len(PROMPTS) * 3
    # the lock is released with the run: the checkpoint opens again, with nothing left to do
    again = scripted()
    await ResponseGenerator(again).generate(PROMPTS, 2, checkpoint=path, show_progress_bars=False)
    assert again.recorder.calls == []


@pytest.mark.parametrize("content", [b"{", b'{"type"', b"\n", b"\x00\x01"])
async def test_a_file_shorter_than_a_header_is_not_taken_for_one(tmp_path, content):
    """Only the file of a crash while the header was written (it starts with the header's first
    bytes) is overwritten; a short file of someone else's is refused and left alone."""
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="not a uqlm-bert checkpoint.*left alone"):
        await ResponseGenerator(scripted()).generate(
            ["q"], 1, checkpoint=path, show_progress_bars=False
        )
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


async def test_a_header_cut_short_by_a_crash_is_started_over(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(b'{"type": "header", "format": "uqlm-bert-che')
    llm = scripted()
    with pytest.warns(RuntimeWarning, match="cut short"):
        result = await ResponseGenerator(llm).generate(
            ["q"], 1, checkpoint=path, show_progress_bars=False
        )
    assert result.responses == [answer_text("q", 0.0)] and len(llm.recorder.calls) == 2
    assert [r["type"] for r in read_jsonl(path)] == ["header", "slot", "slot"]


async def test_a_finished_run_saved_as_a_checkpoint_resumes_without_calls(tmp_path):
    llm = scripted()
    llm.recorder.add_fault(PROMPTS[1], http_error(400), temperature=1.0)  # a permanent failure
    generator = ResponseGenerator(llm, GenerationSettings(retry=FAST))
    result = await generator.generate(PROMPTS[:3], 2, show_progress_bars=False)
    path = tmp_path / "saved.jsonl"
    generator.save_checkpoint(result, path, 2)
    again = scripted()
    resumed = await ResponseGenerator(again, GenerationSettings(retry=FAST)).generate(
        PROMPTS[:3], 2, checkpoint=path, show_progress_bars=False
    )
    assert again.recorder.calls == []
    assert fields(resumed) == fields(result)
    assert resumed.stats.from_checkpoint == 3 * 3
    with pytest.raises(CheckpointError, match="already holds answers"):
        generator.save_checkpoint(result, path, 2)
