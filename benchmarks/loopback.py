"""The loopback server of the end-to-end benchmarks: WikiBio passages served through the scripted
OpenAI-compatible server (``tests/openai_server.py``) on 127.0.0.1, and the client they call it by.

A real provider answers from another machine: its work costs the client's process nothing. The
scripted server (the standard library's threaded HTTP server) run as a thread of the benchmark's
process would take the interpreter's lock for every request, beside the client's event loop and
scoring thread, which no deployment does. :class:`PassageServer` runs it in a child process by
default (``where="process"``: it still shares the machine's cores, not the lock);
``where="thread"`` keeps it in this process.

The server answers a prompt's passage at temperature 0 and its samples in turn otherwise; it
honours a request's ``n`` (several choices, each the prompt's next sample) or ignores it (one
choice, as some OpenAI-compatible servers do), waits a set latency, and logs every request.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tests.openai_server import FakeOpenAIServer

QUEUE = 4096  # listen backlog: bursts of hundreds of new connections
#: The system prompt of every call: uqlm's default for string prompts.
SYSTEM_PROMPT = "You are a helpful assistant."
#: How far a confidence of the default scorer may move with the company it is scored in: it runs
#: in a reduced dtype where the device has one ("Batch invariance" in docs/bertscore.md).
REDUCED_TOLERANCE = 1e-3
PROMPT_TEMPLATES = (
    "This is a Wikipedia passage about concept {idx}:",
    "Here is a Wikipedia passage about concept {idx}:",
    "Write the Wikipedia passage about concept {idx}.",
    "Give a short Wikipedia biography of concept {idx}.",
)
LABEL_DEGREE = {"accurate": 0.0, "minor_inaccurate": 0.5, "major_inaccurate": 1.0}


@dataclass(frozen=True)
class Passage:
    """One WikiBio passage: the answer and its sampled answers and, where labelled, the answer's
    sentences with their human labels (``accurate``, ``minor_inaccurate``, ``major_inaccurate``)."""

    idx: int
    response: str
    samples: tuple[str, ...]
    sentences: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()

    @cached_property
    def degree(self) -> Any:
        """Each sentence's hallucination degree (accurate 0, minor 0.5, major 1): numpy."""
        import numpy as np

        return np.array([LABEL_DEGREE[x] for x in self.labels])

    @cached_property
    def sample_sentences(self) -> list[list[str]]:
        """Each sample split into sentences (the library's split)."""
        from uqlm_bert.scorers.sentences import split_sentences

        return [split_sentences(s) or [s] for s in self.samples]

    def rotated(self, k: int) -> Passage:
        """The passage with each text's sentences rotated ``k`` places: texts of the same length
        that no other prompt receives (unless a text has no more than ``k`` sentences).

        Both libraries embed each unique text once per call, so prompts that share texts would
        make one large batch cheaper than several small ones, which real prompts never do.
        """
        from uqlm_bert.scorers.sentences import split_sentences

        def rotate(text: str) -> str:
            parts = split_sentences(text)
            j = k % len(parts) if parts else 0
            return " ".join(parts[j:] + parts[:j])

        return Passage(self.idx, rotate(self.response), tuple(map(rotate, self.samples)))


def make_prompts(passages: Sequence[Passage], n_prompts: int) -> dict[str, Passage]:
    """``n_prompts`` distinct prompt texts mapped to their passages, cycling over the passages:
    the first round over them as they are, later rounds with their sentences rotated
    (:meth:`Passage.rotated`), so that no two prompts receive the same texts."""
    prompts: dict[str, Passage] = {}
    for i in range(n_prompts):
        variant = i // len(passages)
        passage = passages[i % len(passages)]
        if variant:
            passage = passage.rotated(variant)
        text = PROMPT_TEMPLATES[variant % len(PROMPT_TEMPLATES)].format(idx=passage.idx)
        if variant >= len(PROMPT_TEMPLATES):
            text += f" (request {variant})"
        prompts[text] = passage
    return prompts


def make_llm(base_url: str) -> Any:
    """The client a benchmark calls the server through (one instance per library or object)."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="wikibio-gpt3", base_url=base_url, api_key="local", temperature=0.0, timeout=60
    )


def no_work_scorer() -> Any:
    """A scorer that does no work: runs with it time the calls alone."""
    from uqlm_bert.scorers.base import Scorer

    class NoWork(Scorer):
        name = "no_work"

        def score(self, responses, sampled_responses, show_progress_bars=False):
            return [0.0] * len(responses)

    return NoWork()


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
    """The requests since the last reset: ``(arrival, temperature)`` each, on
    ``time.monotonic()``'s clock (one clock for every process of the machine), the most served at
    once, and the choices each asked for (its ``n``; 1 without)."""

    arrivals: list[tuple[float, float | None]]
    max_in_flight: int
    asked: list[int] = field(default_factory=list)


def _apply(server: FakeOpenAIServer, answers: PassageAnswers, name: str, arg: Any) -> Any:
    if name == "latency":
        server.default_latency = float(arg)
    elif name == "ignore_n":
        server.ignore_n = bool(arg)
    elif name == "reset":
        answers.reset()
        with server.lock:
            server.log.clear()
            server.max_in_flight = 0
    elif name == "log":  # plain data, so that the child can send it as JSON
        with server.lock:
            arrivals = [(r.arrived, r.temperature) for r in server.log]
            return {
                "arrivals": arrivals,
                "asked": [r.n for r in server.log],
                "max_in_flight": server.max_in_flight,
            }
    else:
        raise ValueError(f"unknown server command {name!r}")
    return None


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


def _serve() -> None:
    """The child process (``python -m benchmarks.loopback``): the prompts come as the first line
    of stdin (JSON), the base URL goes out as the first line of stdout, then one JSON command per
    line in and one JSON reply per line out, until ``stop`` or the end of stdin."""
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
    """The server in a child process: a fresh interpreter running this module, driven through
    its stdin and stdout (not ``multiprocessing``, whose ``spawn`` re-imports the parent's main
    module, and whose ``fork`` would copy the parent's threads and libraries)."""

    def __init__(self, prompts: dict[str, Passage], start_timeout: float = 60.0) -> None:
        self.prompts = prompts
        self.start_timeout = start_timeout
        self.base_url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.loopback"],
            cwd=Path(__file__).resolve().parents[1],
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


def describe_server(where: str | None) -> str:
    """Where the server ran, for a report."""
    return "a process of its own" if where == "process" else "this process"


class PassageServer:
    """The passage server on 127.0.0.1, in a child process (``where="process"``, the default) or
    a thread of this one (``where="thread"``); use as a context manager.

    Example::

        with PassageServer(make_prompts(load_passages(), 12)) as server:
            server.set_latency(1.0)
            llm = make_llm(server.base_url)
            ...
            server.reset()  # before each timed run
            log = server.log()
    """

    def __init__(self, prompts: dict[str, Passage], where: str = "process") -> None:
        if where not in ("process", "thread"):
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
