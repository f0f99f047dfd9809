"""``uqlm-bert generate-and-score`` when things go wrong: broken text in a reply, an output that
cannot be written after the calls, a checkpoint path that is someone else's file or is in use,
a process killed mid-run, failed calls, and the API key kept out of everything written."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from pathlib import Path

import pytest

from fakes.openai_server import FakeOpenAIServer, answer_text
from tests.conftest import REPO_ROOT
from tests.helpers.retries import fast
from tests.helpers.waiting import wait_for
from uqlm_bert.cli import main
from uqlm_bert.io._reading import read_table

pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.network

KEY_VAR = "UQLM_BERT_TEST_KEY"
KEY = "sk-test-3f9a7c41-never-written-anywhere"
PROMPTS = ["Capital of France?", "Boiling point of water?", "Who wrote 'Hamlet'?"]


#: the scripted server's options in this module (the ``server`` fixture reads them)
SERVER_OPTIONS = {"request_queue_size": 128}


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_prompts(path: Path, prompts=PROMPTS) -> Path:
    path.write_text("".join(p + "\n" for p in prompts), encoding="utf-8")
    return path


def generate_argv(prompts, out, base_url, *extra) -> list:
    return ["generate-and-score", prompts, "-o", out, "--model", "fake-model", "--base-url",
            base_url, "--api-key-env", KEY_VAR, "-m", "2", "--temperature", "0.25",
            "--sampling-temperature", "0.75", "--max-retries", "1", "--scorers", "exact_match",
            "-q", *extra]  # fmt: skip


def read_checkpoint(path: Path) -> list[dict]:
    """Every line of a checkpoint, each of which must be valid UTF-8 and valid JSON."""
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").splitlines()]


def output_columns(path) -> dict:
    frame = read_table(str(path))
    return frame[["prompt", "response", "sampled_responses", "error"]].to_dict("list")


# -- 3. a reply with a lone surrogate, through the checkpoint -------------------------------------


def surrogate_answer(prompt: str, temperature: float | None) -> str:
    text = answer_text(prompt, temperature)
    return f"broken \ud800 {text}" if "Hamlet" in prompt else text


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_reply_with_a_lone_surrogate_is_checkpointed_and_resumed(tmp_path, capsys, suffix):
    prompts = write_prompts(tmp_path / "prompts.txt")
    ckpt = tmp_path / "run.ckpt.jsonl"
    out = tmp_path / f"scored{suffix}"
    with FakeOpenAIServer(answer=surrogate_answer) as first:
        code, _, stderr = run(generate_argv(prompts, out, first.base_url, "--checkpoint", ckpt),
                              capsys)  # fmt: skip
    assert code == 0, stderr
    repaired = "broken \ufffd " + answer_text(PROMPTS[2], 0.25)
    assert read_table(str(out))["response"].tolist()[2] == repaired
    records = read_checkpoint(ckpt)
    assert len(records) == 1 + 3 * 3
    assert {r["text"] for r in records[1:] if r["i"] == 2 and r["slot"] == -1} == {repaired}
    before = output_columns(out)

    again = tmp_path / f"again{suffix}"
    with FakeOpenAIServer() as second:
        code, _, stderr = run(generate_argv(prompts, again, second.base_url, "--checkpoint", ckpt),
                              capsys)  # fmt: skip
        assert code == 0, stderr
        assert second.log == []  # every slot, the repaired ones too, came from the checkpoint
    assert output_columns(again) == before


# -- 4. the output cannot be written once the calls are done --------------------------------------


class FailingWriter:
    """Stands in for ``write_table``: fails the first ``times`` writes as a full or read-only
    disk would (after ``before_failing``), then writes."""

    def __init__(self, monkeypatch, times: int = 1, before_failing=None) -> None:
        import uqlm_bert.io

        self.real = uqlm_bert.io.write_table
        self.times = times
        self.before_failing = before_failing
        monkeypatch.setattr(uqlm_bert.io, "write_table", self)

    def __call__(self, df, path):
        if self.times > 0:
            self.times -= 1
            if self.before_failing is not None:
                self.before_failing(path)
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return self.real(df, path)


def test_unwritable_output_with_a_checkpoint_names_the_checkpoint(
    tmp_path, capsys, server, monkeypatch
):
    prompts = write_prompts(tmp_path / "prompts.txt")
    ckpt = tmp_path / "run.ckpt.jsonl"
    out = tmp_path / "scored.csv"
    FailingWriter(monkeypatch)
    code, _, stderr = run(generate_argv(prompts, out, server.base_url, "--checkpoint", ckpt),
                          capsys)  # fmt: skip
    assert code == 2
    assert f"cannot write {out}: Permission denied" in stderr
    assert f"The answers are kept in the checkpoint {ckpt}" in stderr
    # per prompt: the answer, and its two samples in one call (n)
    assert not out.exists() and len(server.log) == 6
    code, _, stderr = run(generate_argv(prompts, out, server.base_url, "--checkpoint", ckpt),
                          capsys)  # fmt: skip
    assert code == 0, stderr
    assert len(server.log) == 6  # the table came from the checkpoint
    assert read_table(str(out))["response"].tolist() == [answer_text(p, 0.25) for p in PROMPTS]


@pytest.mark.parametrize("where", ["beside the output", "in the temporary directory"])
def test_unwritable_output_without_a_checkpoint_saves_the_answers(
    tmp_path, capsys, server, monkeypatch, where
):
    prompts = write_prompts(tmp_path / "prompts.txt")
    outdir = tmp_path / "results"
    outdir.mkdir()
    out = outdir / "scored.csv"
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    if where == "beside the output":
        FailingWriter(monkeypatch)
        saved = outdir / "scored.csv.answers.jsonl"
    else:  # the output's directory is gone by the time the table is written
        FailingWriter(monkeypatch, before_failing=lambda path: shutil.rmtree(outdir))
        saved = temp / "scored.csv.answers.jsonl"
    code, stdout, stderr = run(generate_argv(prompts, out, server.base_url), capsys)
    assert code == 2
    assert f"cannot write {out}: Permission denied. The answers are saved in {saved}:" in stderr
    assert f"--checkpoint {saved}" in stderr
    assert stdout == ""
    records = read_checkpoint(saved)
    assert records[0]["type"] == "header" and len(records) == 1 + 3 * 3

    outdir.mkdir(exist_ok=True)
    again = outdir / "scored.csv"
    code, _, stderr = run(
        generate_argv(prompts, again, server.base_url, "--checkpoint", saved), capsys
    )
    assert code == 0, stderr
    assert len(server.log) == 6  # no new call: the answers came from the saved checkpoint
    frame = read_table(str(again))
    assert frame["response"].tolist() == [answer_text(p, 0.25) for p in PROMPTS]
    assert [json.loads(s) for s in frame["sampled_responses"]] == [
        [answer_text(p, 0.75)] * 2 for p in PROMPTS
    ]


def test_a_second_failure_takes_the_next_free_name(tmp_path, capsys, server, monkeypatch):
    prompts = write_prompts(tmp_path / "prompts.txt")
    out = tmp_path / "scored.jsonl"
    FailingWriter(monkeypatch, times=2)
    for name in ("scored.jsonl.answers.jsonl", "scored.jsonl.answers-2.jsonl"):
        code, _, stderr = run(generate_argv(prompts, out, server.base_url), capsys)
        assert code == 2 and f"The answers are saved in {tmp_path / name}:" in stderr
        assert read_checkpoint(tmp_path / name)[0]["type"] == "header"


# -- 6. a checkpoint path that is someone else's file ---------------------------------------------


@pytest.mark.parametrize(
    "content",
    ["first prompt\nsecond prompt\n", '{"prompt": "a row of some table"}\n', "{", "\n"],
    ids=["text", "jsonl", "one-brace", "blank-line"],
)
def test_a_file_that_is_not_a_checkpoint_is_refused_and_left_alone(
    tmp_path, capsys, server, content
):
    prompts = write_prompts(tmp_path / "prompts.txt")
    other = tmp_path / "notes.txt"
    other.write_text(content, encoding="utf-8")
    before = sorted(os.listdir(tmp_path))
    code, _, stderr = run(
        generate_argv(prompts, tmp_path / "out.csv", server.base_url, "--checkpoint", other),
        capsys,
    )
    assert code == 2
    assert f"{str(other)!r} is not a uqlm-bert checkpoint file" in stderr
    assert "left alone" in stderr and "delete" not in stderr
    assert other.read_text(encoding="utf-8") == content
    assert sorted(os.listdir(tmp_path)) == before  # not even a lock file beside it
    assert server.log == []


# -- 7. two processes on one checkpoint -----------------------------------------------------------


class Gate:
    """An ``answer=`` hook that answers the first ``free`` requests at once and holds the rest
    until :meth:`open` (or 60 s); a request for several choices (``n``) counts once."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.answered: list[tuple[str, float | None]] = []

    def __call__(self, prompt: str, temperature: float | None) -> str:
        return self.choices(prompt, temperature, 1)[0]

    def choices(self, prompt: str, temperature: float | None, n: int) -> list[str]:
        with self.lock:
            free, self.free = self.free, self.free - 1
        if free <= 0:
            self.released.wait(60)
        with self.lock:
            self.answered.append((prompt, temperature))
        return [answer_text(prompt, temperature)] * n

    def open(self) -> None:
        self.released.set()


def command(prompts, out, base_url, *extra) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uqlm_bert",
        *map(str, generate_argv(prompts, out, base_url, *extra)),
    ]


def subprocess_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), KEY_VAR: KEY}


def slot_lines(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_bytes().split(b"\n")[1:] if line.strip())


@pytest.mark.slow
def test_a_second_process_on_the_same_checkpoint_is_refused_at_once(tmp_path):
    prompts = write_prompts(tmp_path / "prompts.txt")
    ckpt = tmp_path / "run.ckpt.jsonl"
    gate = Gate(free=2)
    with FakeOpenAIServer(answer=gate) as server:
        first = subprocess.Popen(
            command(prompts, tmp_path / "first.csv", server.base_url, "--checkpoint", ckpt),
            env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: slot_lines(ckpt) >= 2, 120, "the first run's first answers")
            second = subprocess.run(
                command(prompts, tmp_path / "second.csv", server.base_url, "--checkpoint", ckpt),
                env=subprocess_env(), capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert first.poll() is None  # the first run still holds the checkpoint
            assert second.returncode == 2
            assert f"checkpoint {str(ckpt)!r} is in use by another run" in second.stderr
            assert not (tmp_path / "second.csv").exists()
            requests_so_far = len(server.log)
        finally:
            gate.open()
        stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    # the second run made no call (per prompt: the answer, and its samples in one call)
    assert requests_so_far <= 6 and len(server.log) == 6
    frame = read_table(str(tmp_path / "first.csv"))
    assert frame["response"].tolist() == [answer_text(p, 0.25) for p in PROMPTS]
    assert [json.loads(s) for s in frame["sampled_responses"]] == [
        [answer_text(p, 0.75)] * 2 for p in PROMPTS
    ]
    assert slot_lines(ckpt) == 9


# -- 13. kill -9 and resume -----------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_then_resume_loses_and_repeats_nothing(tmp_path):
    """A run killed mid-way resumes from its checkpoint: across both runs the server answers
    each slot exactly once, and the table is the one an uninterrupted run writes."""
    prompts_list = [f"question {i}" for i in range(6)]
    prompts = write_prompts(tmp_path / "prompts.txt", prompts_list)
    ckpt = tmp_path / "run.ckpt.jsonl"
    gate = Gate(free=7)  # seven calls answered, then the calls in flight hang until the kill
    with FakeOpenAIServer(answer=gate) as server:
        proc = subprocess.Popen(
            command(prompts, tmp_path / "killed.csv", server.base_url, "--checkpoint", ckpt,
                    "--max-concurrency", "4"),
            env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            # a call's slots: the answer's one, or the samples' two (asked in one call with n)
            def recorded() -> bool:
                with gate.lock:
                    slots = sum(1 if t == 0.25 else 2 for _, t in gate.answered)
                return len(gate.answered) == 7 and slot_lines(ckpt) == slots

            wait_for(recorded, 120, "seven calls' answers in the checkpoint")
            server.wait_until(lambda: len(server.log) > 7, 30)  # calls in flight: killed mid-call
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
            answered_first = list(gate.answered)
            gate.open()
    assert proc.returncode == -signal.SIGKILL
    assert len(answered_first) == 7 and not (tmp_path / "killed.csv").exists()

    out = tmp_path / "resumed.csv"
    with FakeOpenAIServer() as second:
        resumed = subprocess.run(
            command(prompts, out, second.base_url, "--checkpoint", ckpt),
            env=subprocess_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        asked_second = [(r.prompt, r.temperature) for r in second.log]
    assert resumed.returncode == 0, resumed.stderr
    answered = sorted(answered_first + asked_second)
    assert answered == sorted([(p, t) for p in prompts_list for t in (0.25, 0.75)])
    frame = read_table(str(out))
    assert frame["response"].tolist() == [answer_text(p, 0.25) for p in prompts_list]
    assert [json.loads(s) for s in frame["sampled_responses"]] == [
        [answer_text(p, 0.75)] * 2 for p in prompts_list
    ]
    records = read_checkpoint(ckpt)[1:]
    assert sorted((r["i"], r["slot"]) for r in records) == [
        (i, s) for i in range(6) for s in (-1, 0, 1)
    ]


# -- 12. one report per failed call ---------------------------------------------------------------


def test_each_failed_call_is_reported_once(tmp_path, capsys, server):
    server.add_rule("France", status=400, temperature=0.25)  # the answer fails for good
    # one sample of two fails: the call for both (n) and the first asked alone are refused
    server.add_rule("water", status=400, temperature=0.75, times=2)
    prompts = write_prompts(tmp_path / "prompts.txt")
    out = tmp_path / "scored.csv"
    with warnings.catch_warnings(record=True) as caught:  # a warning would go to stderr too
        warnings.simplefilter("always")
        code, _, stderr = run(generate_argv(prompts, out, server.base_url), capsys)
    assert [str(w.message) for w in caught] == []
    assert code == 1  # the row without an answer failed; the other is scored on one sample
    lines = [line for line in stderr.splitlines() if line.strip()]
    # one line per kind of failure, with the rows it is in
    assert lines == [
        f"2 call(s) failed for good (bad_request) in 2 row(s): {prompts}:1, {prompts}:2; "
        "first: bad_request after 1 attempt: OpenAIInvalidRequestError: Error code: 400 - "
        "scripted 400",
        f"uqlm-bert: see the error and sample_errors columns of {out}",
    ]


# -- 13. the API key is written nowhere -----------------------------------------------------------


def test_the_api_key_is_in_no_output_log_checkpoint_metadata_warning_or_traceback(
    tmp_path, capsys, caplog, server
):
    import asyncio
    import logging

    from langchain_openai import ChatOpenAI

    from uqlm_bert._blackbox import BlackBoxUQ

    caplog.set_level(logging.DEBUG, logger="uqlm_bert")
    server.add_rule("France", status=400, temperature=0.25)
    server.add_rule("water", status=503, times=1)
    server.add_rule("Hamlet", malformed="json", times=1)
    prompts = write_prompts(tmp_path / "prompts.txt")
    texts: list[str] = []

    # the command: output, checkpoint, stdout and stderr
    for suffix in (".jsonl", ".csv"):
        out, ckpt = tmp_path / f"scored{suffix}", tmp_path / f"run{suffix}.ckpt.jsonl"
        code, stdout, stderr = run(
            generate_argv(prompts, out, server.base_url, "--checkpoint", ckpt), capsys
        )
        assert code == 1, stderr
        texts += [stdout, stderr, out.read_text(encoding="utf-8"), ckpt.read_text("utf-8")]
    # errors that stop a run: rejected key, unreachable server
    server.add_rule("", status=401)
    code, stdout, stderr = run(generate_argv(prompts, tmp_path / "x.csv", server.base_url), capsys)
    assert code == 2
    texts += [stdout, stderr]

    # the library: result metadata, warnings, and the tracebacks of the errors it raises
    def uq(base_url: str) -> BlackBoxUQ:
        llm = ChatOpenAI(model="m", base_url=base_url, api_key=KEY, temperature=0.0)
        return BlackBoxUQ(llm, scorers=["exact_match"], show_progress_bars=False, **fast())

    with FakeOpenAIServer() as fine, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fine.add_rule("water", status=400)
        result = asyncio.run(uq(fine.base_url).generate_and_score(PROMPTS, 2))
        texts += [json.dumps(result.metadata, default=str), result.to_df().to_json()]
        texts += [repr(result), str(result.data)]
        for base_url in (server.base_url, "http://127.0.0.1:9/v1"):  # 401; nothing listening
            try:
                asyncio.run(uq(base_url).generate_and_score(PROMPTS, 1))
            except Exception as exc:  # noqa: BLE001 - its traceback is what is checked
                texts.append("".join(traceback.format_exception(exc)))
            else:
                raise AssertionError(f"a run against {base_url} did not fail")
    texts += [f"{w.filename}:{w.lineno}: {w.message}" for w in caught]
    texts += [caplog.text]
    assert len(texts) > 10 and all(texts[:4])
    leaks = [t for t in texts if KEY in t or KEY[3:15] in t]
    assert leaks == []
