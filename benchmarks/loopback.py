"""The WikiBio passage server of the end-to-end benchmarks, in a process of its own or a thread.

A real provider answers from another machine: its work costs the client's process nothing. The
scripted server (``tests/openai_server.py``, the standard library's threaded HTTP server) run as
a thread of the benchmark's process would take the interpreter's lock for every request it
parses and answers, beside the client's event loop and scoring thread, which no deployment does.
:class:`PassageServer` runs it in a child process by default (``where="process"``): it still
shares this machine's cores, so its CPU time still counts against the run, but not the lock.
``where="thread"`` keeps it in this process, as the earlier tables in benchmarks/RESULTS.md were
measured.

Both answer with :class:`PassageAnswers` and expose the same controls: the latency, whether the
server honours a request's ``n`` (several choices, each the prompt's next sample) or ignores it
(one choice, as some OpenAI-compatible servers do), a reset of the per-prompt sample counters and
of the request log, and the log's arrival times and choices asked.
"""

from __future__ import annotations

import argparse
import json
import select
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TESTS = str(Path(__file__).resolve().parents[1] / "tests")
if _TESTS not in sys.path:  # the scripted server lives with the tests
    sys.path.insert(0, _TESTS)

from openai_server import FakeOpenAIServer  # noqa: E402

QUEUE = 4096  # listen backlog: bursts of hundreds of new connections


@dataclass(frozen=True)
class Passage:
    """One WikiBio passage: the answer text and the sampled texts the server hands out."""

    idx: int
    response: str
    samples: tuple[str, ...]

    def rotated(self, k: int) -> Passage:
        """The passage with each text's sentences rotated ``k`` places: texts of the same length
        that no other prompt receives (unless a text has no more than ``k`` sentences; 701 of
        the 720 texts of 120 prompts x 6 are distinct).

        Both libraries embed each unique text once per call, so prompts that share texts would
        make one large batch cheaper than several small ones, which real prompts never do.
        """
        from uqlm_bert.scorers.sentences import split_sentences

        def rotate(text: str) -> str:
            parts = split_sentences(text)
            j = k % len(parts) if parts else 0
            return " ".join(parts[j:] + parts[:j])

        return Passage(self.idx, rotate(self.response), tuple(rotate(t) for t in self.samples))


class PassageAnswers:
    """The server's answers: a prompt's passage at temperature 0, its samples in turn otherwise.

    Thread-safe (the server answers from many threads). :meth:`reset` restarts every prompt's
    samples from the first, so that each run receives the same texts per prompt.
    """

    UNKNOWN = "No passage is known for this prompt."

    def __init__(self, prompts: dict[str, Passage]) -> None:
        self.prompts = prompts
        self._next: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def __call__(self, prompt: str, temperature: float | None) -> str:
        passage = self.prompts.get(prompt)
        if passage is None:
            return self.UNKNOWN
        if not temperature:
            return passage.response
        with self._lock:
            j = self._next[prompt]
            self._next[prompt] += 1
        return passage.samples[j % len(passage.samples)]

    def reset(self) -> None:
        with self._lock:
            self._next.clear()

    def mismatches(
        self, prompts: Sequence[str], responses: Sequence[Any], samples: Sequence[Sequence[Any]]
    ) -> int:
        """Prompts whose answer or multiset of samples is not what a fresh run must receive."""
        bad = 0
        for p, r, s in zip(prompts, responses, samples, strict=True):
            passage = self.prompts[p]
            want = sorted(passage.samples[j % len(passage.samples)] for j in range(len(s)))
            if r != passage.response or sorted(map(str, s)) != want:
                bad += 1
        return bad


@dataclass(frozen=True)
class ServerLog:
    """What the server saw since its last reset: ``(arrival time, temperature)`` per request, on
    ``time.monotonic()``'s clock (one clock for every process of the machine), and the most
    requests it served at once."""

    arrivals: list[tuple[float, float | None]]
    max_in_flight: int
    #: the choices each request asked for (its ``n``; 1 without)
    asked: list[int] = field(default_factory=list)


class _Local:
    """The server in a thread of this process."""

    def __init__(self, prompts: dict[str, Passage]) -> None:
        self.answers = PassageAnswers(prompts)
        self.server = FakeOpenAIServer(answer=self.answers, request_queue_size=QUEUE)
        self.base_url = ""

    def start(self) -> None:
        self.server.__enter__()
        self.base_url = self.server.base_url

    def stop(self) -> None:
        self.server.__exit__(None, None, None)

    def command(self, name: str, arg: Any = None) -> Any:
        return _apply(self.server, self.answers, name, arg)


def _apply(server: FakeOpenAIServer, answers: PassageAnswers, name: str, arg: Any) -> Any:
    if name == "latency":
        server.default_latency = float(arg)
        return None
    if name == "ignore_n":
        server.ignore_n = bool(arg)
        return None
    if name == "reset":
        answers.reset()
        with server.lock:
            server.log.clear()
            server.max_in_flight = 0
        return None
    if name == "log":  # plain data, so that the child can send it as JSON
        with server.lock:
            arrivals = [(r.arrived, r.temperature) for r in server.log]
            asked = [r.n for r in server.log]
            return {"arrivals": arrivals, "asked": asked, "max_in_flight": server.max_in_flight}
    raise ValueError(f"unknown server command {name!r}")


def _serve() -> None:
    """The child process (``python loopback.py``): the prompts come as the first line of stdin
    (JSON), the base URL goes out as the first line of stdout, then one JSON command per line in
    and one JSON reply per line out, until ``stop`` or the end of stdin."""
    rows = json.loads(sys.stdin.readline())
    prompts = {p: Passage(idx, response, tuple(samples)) for p, idx, response, samples in rows}
    answers = PassageAnswers(prompts)
    with FakeOpenAIServer(answer=answers, request_queue_size=QUEUE) as server:
        print(json.dumps(server.base_url), flush=True)
        for line in sys.stdin:
            name, arg = json.loads(line)
            if name == "stop":
                break
            try:
                reply = ["ok", _apply(server, answers, name, arg)]
            except Exception as exc:  # the parent raises it
                reply = ["error", repr(exc)]
            print(json.dumps(reply), flush=True)


class _Child:
    """The server in a child process: a fresh interpreter running this file, driven through its
    stdin and stdout (not ``multiprocessing``, whose ``spawn`` re-imports the parent's main
    module, and whose ``fork`` would copy the parent's threads and libraries)."""

    def __init__(self, prompts: dict[str, Passage], start_timeout: float = 60.0) -> None:
        self.prompts = prompts
        self.start_timeout = start_timeout
        self.base_url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        rows = [[p, v.idx, v.response, list(v.samples)] for p, v in self.prompts.items()]
        self.base_url = self._exchange(rows, self.start_timeout)

    def _exchange(self, message: Any, timeout: float = 30.0) -> Any:
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.stop()
            raise RuntimeError("the server process did not answer (it ended or hung)")
        return json.loads(line)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(["stop", None]) + "\n")
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()

    def command(self, name: str, arg: Any = None) -> Any:
        status, value = self._exchange([name, arg])
        if status != "ok":
            raise RuntimeError(f"server command {name!r} failed: {value}")
        return value


WHERE = ("process", "thread")


def add_server_option(parser: argparse.ArgumentParser) -> None:
    """The benchmarks' ``--server process|thread`` option."""
    parser.add_argument(
        "--server",
        choices=WHERE,
        default="process",
        help="run the loopback server in a child process (default) or a thread of this one",
    )


def describe(where: str | None) -> str:
    """Where the server ran, for a report: "a process of its own" or "this process"."""
    return "a process of its own" if where == "process" else "this process"


class PassageServer:
    """The passage server on 127.0.0.1, in a child process (``where="process"``, the default) or
    a thread of this one (``where="thread"``); use as a context manager.

    Example::

        with PassageServer(make_prompts(passages, 12)) as server:
            server.set_latency(1.0)
            llm = ChatOpenAI(base_url=server.base_url, api_key="local", model="m")
            ...
            server.reset()  # before each timed run
            log = server.log()
    """

    def __init__(self, prompts: dict[str, Passage], where: str = "process") -> None:
        if where not in WHERE:
            raise ValueError(f"where must be 'process' or 'thread', not {where!r}")
        self.where = where
        self.answers = PassageAnswers(prompts)  # this side: judging what a run received
        self._impl: _Local | _Child = _Child(prompts) if where == "process" else _Local(prompts)
        self.latency = 0.0

    @property
    def base_url(self) -> str:
        return self._impl.base_url

    def __enter__(self) -> PassageServer:
        self._impl.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._impl.stop()

    def set_latency(self, seconds: float) -> None:
        """Every answer from now on waits ``seconds`` before it is sent."""
        self._impl.command("latency", seconds)
        self.latency = seconds

    def ignore_n(self, ignore: bool) -> None:
        """Answer every request with one choice whatever its ``n`` (``True``), or honour it."""
        self._impl.command("ignore_n", ignore)

    def reset(self) -> None:
        """Restart every prompt's samples from the first, and clear the request log."""
        self._impl.command("reset")

    def log(self) -> ServerLog:
        """The requests since the last :meth:`reset`."""
        got = self._impl.command("log")
        return ServerLog([(a, t) for a, t in got["arrivals"]], got["max_in_flight"], got["asked"])


if __name__ == "__main__":
    _serve()
