"""Reliability end to end, through langchain-openai's ChatOpenAI against the server on 127.0.0.1.

Each test reproduces a failure as a user meets it: repeated synchronous calls in one process
(scripts and notebooks), a reply that is not valid Unicode, a reply without ``choices``, a rate
limit kept while the machine is busy, a server that is not there, and the warnings a failed call
gives.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import socket
import threading
import time
import warnings
from collections.abc import Iterator

import pytest

from fakes.openai_server import FakeOpenAIServer, answer_text
from tests.helpers.retries import fast
from tests.helpers.scorers import LengthRatio
from uqlm_bert import GenerationError, GenerationSettings, ProviderUnreachableError
from uqlm_bert._blackbox import BlackBoxUQ
from uqlm_bert.generation import RetryPolicy

langchain_openai = pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.network


#: the scripted server's options in this module (the ``server`` fixture reads them)
SERVER_OPTIONS = {"default_latency": 0.005, "request_queue_size": 128}


def chat(base_url: str, **kwargs):
    params = {"temperature": 0.0, **kwargs}
    return langchain_openai.ChatOpenAI(
        model="fake-model", base_url=base_url, api_key="test-key", **params
    )


def uq_for(llm, **kwargs) -> BlackBoxUQ:
    return BlackBoxUQ(llm, scorers=[LengthRatio()], show_progress_bars=False, **kwargs)


def assert_complete(result, prompts: list[str], num_responses: int) -> None:
    """Every slot holds its own prompt's answer, and nothing failed."""
    assert result.data["responses"] == [answer_text(p, 0.0) for p in prompts]
    assert result.data["sampled_responses"] == [
        [answer_text(p, 1.0)] * num_responses for p in prompts
    ]
    assert result.metadata["calls"]["failed"] == 0
    assert not any(math.isnan(v) for v in result.data["length_ratio"])


# -- 1. repeated calls in one process -------------------------------------------------------------


def test_repeated_sync_calls_in_one_process(server):
    """Scripts call the synchronous face again and again; notebooks call it from a running
    loop. Every call must fill every slot, whichever client object it is given."""
    llm = chat(server.base_url)
    uq = uq_for(llm)
    for k in range(3):  # one client, one BlackBoxUQ
        prompts = [f"same-{k}-{i}" for i in range(3)]
        assert_complete(uq.generate_and_score_sync(prompts, num_responses=2), prompts, 2)
    for k in range(3):  # a fresh client and a fresh BlackBoxUQ each time
        prompts = [f"fresh-{k}-{i}" for i in range(3)]
        fresh = uq_for(chat(server.base_url))
        assert_complete(fresh.generate_and_score_sync(prompts, num_responses=2), prompts, 2)
    other = uq_for(llm)  # the first client again, under another BlackBoxUQ

    async def notebook_cells():  # Jupyter: the calls come from inside a running loop
        results = []
        for k, obj in enumerate([uq, other, uq_for(chat(server.base_url))]):
            prompts = [f"cell-{k}-{i}" for i in range(3)]
            results.append((obj.generate_and_score_sync(prompts, num_responses=2), prompts))
        return results

    for result, prompts in asyncio.run(notebook_cells()):
        assert_complete(result, prompts, 2)
    assert len(server.log) == 9 * 3 * 2  # per prompt: the answer, and its samples with n
    uq.close()
    other.close()


def test_repeated_asyncio_run_with_one_chatopenai(server):
    llm = chat(server.base_url)
    uq = uq_for(llm)
    for k in range(2):
        prompts = [f"run-{k}-{i}" for i in range(4)]
        assert_complete(asyncio.run(uq.generate_and_score(prompts, num_responses=2)), prompts, 2)
    # a second BlackBoxUQ on the same client, on yet another loop
    prompts = ["run-2-0"]
    assert_complete(asyncio.run(uq_for(llm).generate_and_score(prompts, 2)), prompts, 2)
    assert len(server.log) == 9 * 2  # per prompt: the answer, and its samples with n


def test_a_client_bound_to_a_closed_loop_stops_the_run_and_fills_no_slot(server, tmp_path):
    """A pool the caller gave the client is the caller's: it is used as it is. On a second
    ``asyncio.run`` it belongs to a closed loop; that is a broken setup, not a failed call, so
    the run stops with a GenerationError that says what to do, and no slot records it."""
    httpx = pytest.importorskip("httpx")
    llm = chat(server.base_url, http_async_client=httpx.AsyncClient())
    uq = uq_for(llm, **fast())
    first = asyncio.run(uq.generate_and_score(["loop-0"], num_responses=2))
    assert_complete(first, ["loop-0"], 2)
    path = tmp_path / "run.jsonl"
    with pytest.raises(GenerationError, match="event loop") as caught:
        asyncio.run(uq.generate_and_score([f"loop-{i}" for i in range(1, 6)], 2, checkpoint=path))
    assert "generate_and_score_sync" in str(caught.value)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    assert not [r for r in records if r["error"] is not None]
    # the same objects work again from one loop of their own
    assert_complete(uq.generate_and_score_sync(["loop-9"], num_responses=2), ["loop-9"], 2)
    uq.close()
    # The pool still holds connections of the closed loops, which nothing can close now: let
    # them go here, quietly, rather than in whichever test the garbage collector runs in.
    del uq, llm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


# -- 3. a reply that is not valid Unicode ---------------------------------------------------------


def surrogate_answer(prompt: str, temperature: float | None) -> str:
    """The scripted answer, with a lone surrogate in the answers to prompts that ask for one
    (``json.dumps`` sends it as the escape ``\\ud800``, as a server with a broken decoder does)."""
    text = answer_text(prompt, temperature)
    return f"broken \ud800 {text}" if "broken" in prompt else text


def test_a_reply_with_a_lone_surrogate_is_repaired_and_counted():
    with FakeOpenAIServer(answer=surrogate_answer) as server:
        uq = BlackBoxUQ(chat(server.base_url), scorers=["exact_match"], show_progress_bars=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # earlier tests' objects (clients left on closed loops, Ray's sockets), collected whenever
            # the garbage collector runs: not warnings of this run
            warnings.simplefilter("ignore", ResourceWarning)
            result = asyncio.run(uq.generate_and_score(["fine", "broken one"], num_responses=2))
    # repaired at the source, and said once, as a repaired input text is, at the caller's line
    assert [str(w.message)[:40] for w in caught] == ["3 LLM repl(ies) held characters that are"]
    assert caught[0].category is UserWarning and caught[0].filename == __file__
    assert result.data["responses"][0] == answer_text("fine", 0.0)
    assert result.data["responses"][1] == "broken \ufffd " + answer_text("broken one", 0.0)
    assert (
        result.data["sampled_responses"][1]
        == ["broken \ufffd " + answer_text("broken one", 1.0)] * 2
    )
    assert result.metadata["calls"]["repaired_replies"] == 3
    assert result.metadata["calls"]["failed"] == 0
    assert result.data["exact_match"] == [0.0, 0.0]  # answer and samples differ in temperature
    result.to_df().to_json(orient="records")  # every text is valid Unicode now


# -- 8. replies without choices -------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["empty_choices", "null_choices"])
def test_a_reply_without_choices_is_malformed_and_retried(server, shape):
    server.add_rule("twice", malformed=shape, times=2)
    server.add_rule("always", malformed=shape)
    uq = uq_for(chat(server.base_url), **fast(max_retries=3, max_concurrency=1))
    with pytest.warns(RuntimeWarning, match=r"failed for good \(malformed"):
        result = asyncio.run(uq.generate_and_score(["twice", "always"], num_responses=1))
    # the first two replies to "twice" had no choices; the third, a proper one, is kept
    assert result.data["responses"][0] == answer_text("twice", 0.0)
    assert result.data["sampled_responses"][0] == [answer_text("twice", 1.0)]
    assert len(server.requests_for("twice")) == 2 + 2
    # "always" never gets a proper reply: each slot is tried 1 + 3 times, then marked malformed
    assert len(server.requests_for("always")) == 2 * 4
    errors = result.to_df()
    assert errors["error"][1].startswith("malformed after 4 attempts")
    assert errors["sample_errors"][1][0].startswith("malformed after 4 attempts")
    calls = result.metadata["calls"]
    assert calls["failures_by_kind"] == {"malformed": 2}
    assert calls["retries"] == 2 + 2 * 3
    assert calls["attempts"] == len(server.log)


# -- 10. the rate limit, counted where calls arrive, on a busy machine ----------------------------


class BusyCPU:
    """A thread that keeps the interpreter busy (it takes the GIL from the event loop and the
    server, so calls are delayed between being issued and arriving) until stopped."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        x = 0
        while not self.stop.is_set():
            for i in range(10_000):
                x = (x * 31 + i) % 1_000_003

    def __enter__(self) -> BusyCPU:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def most_in_any_window(arrivals: list[float], period: float) -> int:
    """The most arrivals in a window ``[t, t + period)``, over windows starting at each one."""
    arrivals = sorted(arrivals)
    most = 0
    for i, start in enumerate(arrivals):
        most = max(most, sum(1 for a in arrivals[i:] if a < start + period))
    return most


@pytest.mark.slow
def test_rate_limit_holds_where_calls_arrive_while_the_cpu_is_busy():
    """With ``max_calls_per_min=N`` no window of ``rate_limit_period`` seconds holds more than N
    arrivals at the server, however late calls arrive after they are issued; and since a token
    is held from issue until the reply plus one period, each token serves a call every
    ``period + latency`` seconds, so the throughput stays near N per period."""
    limit, period, latency = 6, 1.5, 0.1
    prompts = [f"busy-{i}" for i in range(12)]  # 36 calls: six rounds of the limit
    with FakeOpenAIServer(default_latency=latency, request_queue_size=128) as server, BusyCPU():
        uq = uq_for(
            chat(server.base_url),
            generation=GenerationSettings(
                max_calls_per_min=limit,
                rate_limit_period=period,
                max_concurrency=64,  # adaptive (the default) within this cap
                use_n_param=False,  # one call per sample: six rounds of the limit
            ),
        )
        started = time.monotonic()
        result = asyncio.run(uq.generate_and_score(prompts, num_responses=2))
        elapsed = time.monotonic() - started
    assert_complete(result, prompts, 2)
    arrivals = sorted(r.arrived for r in server.log)
    assert len(arrivals) == 36
    assert most_in_any_window(arrivals, period) <= limit
    # Saturated from the first call: each round of `limit` calls takes one period plus the time
    # from issue to reply (latency, and the delays of the busy machine). Allow that time to be
    # up to 0.4 periods: at least limit / 1.4 (> 0.7 * limit) calls per period.
    rounds = (arrivals[-1] - arrivals[0]) / period
    per_period = (len(arrivals) - limit) / rounds
    assert per_period >= limit / 1.4, f"{per_period:.2f} calls per period"
    assert elapsed < 60  # only catches a hang


# -- 11. a server that is not there ---------------------------------------------------------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound (so nothing else takes it) but not
    listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.mark.slow
def test_an_unreachable_server_stops_the_run_early_with_one_warning(closed_port, tmp_path):
    url = f"http://127.0.0.1:{closed_port}/v1"
    retry = RetryPolicy(base_delay=0.01, max_delay=0.05)  # max_retries: 5
    uq = uq_for(chat(url), generation=GenerationSettings(retry=retry))
    prompts = [f"down-{i}" for i in range(40)]
    path = tmp_path / "run.jsonl"
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # earlier tests' objects (clients left on closed loops, Ray's sockets), collected whenever
        # the garbage collector runs: not warnings of this run
        warnings.simplefilter("ignore", ResourceWarning)
        with pytest.raises(ProviderUnreachableError, match="cannot connect to") as raised:
            asyncio.run(uq.generate_and_score(prompts, num_responses=5, checkpoint=path))
    assert time.monotonic() - started < 20  # seconds, not 240 slots retried six times
    assert url in str(raised.value)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert str(caught[0].message).startswith(f"cannot connect to {url}: ")
    attempts = int(str(raised.value).split(": ")[1].split(" attempts")[0])
    # the first rounds (40 answers and 40 calls for samples with n), not every attempt of every call
    assert attempts <= 3 * 80
    # The checkpoint holds nothing a resume would keep: no text and only transient failures,
    # and its lock is free. A resume against a live server makes every call.
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert records[0]["type"] == "header"
    assert all(r["text"] is None and r["error"]["kind"] == "connection" for r in records[1:])
    with FakeOpenAIServer() as server:
        resumed = asyncio.run(
            uq_for(chat(server.base_url)).generate_and_score(prompts, 5, checkpoint=path)
        )
    assert_complete(resumed, prompts, 5)
    # every slot asked for again: per prompt the answer, and its samples with n
    assert len(server.log) == 80 and resumed.metadata["calls"]["from_checkpoint"] == 0


# -- 12. one warning per kind of failure, at the caller's line ------------------------------------


def test_one_failed_call_gives_one_warning_at_the_callers_line(server, caplog):
    server.add_rule("refused", status=400, temperature=0.0)  # the answer fails for good, once
    uq = uq_for(chat(server.base_url), **fast())
    caplog.set_level(logging.WARNING, logger="uqlm_bert")

    with warnings.catch_warnings(record=True) as sync_caught:
        warnings.simplefilter("always")
        # earlier tests' objects (clients left on closed loops, Ray's sockets), collected whenever
        # the garbage collector runs: not warnings of this run
        warnings.simplefilter("ignore", ResourceWarning)
        uq.generate_and_score_sync(["fine", "refused"], num_responses=2)

    async def from_a_coroutine():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # earlier tests' objects (clients left on closed loops, Ray's sockets), collected whenever
            # the garbage collector runs: not warnings of this run
            warnings.simplefilter("ignore", ResourceWarning)
            await uq.generate_and_score(["also fine", "refused"], num_responses=2)
        return caught

    async_caught = asyncio.run(from_a_coroutine())
    for caught in (sync_caught, async_caught):
        assert len(caught) == 1, [str(w.message) for w in caught]
        assert caught[0].category is RuntimeWarning
        assert str(caught[0].message).startswith("1 LLM call(s) failed for good (bad_request")
        assert caught[0].filename == __file__
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    uq.close()
