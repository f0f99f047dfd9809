"""The loopback server of the end-to-end benchmarks: WikiBio passages served by the scripted
OpenAI-compatible server (``fakes/openai_server.py``) on 127.0.0.1, and the client that calls it.

The server answers a prompt's passage at temperature 0 and its samples in turn otherwise, honours
a request's ``n`` or ignores it (one choice, as some servers do), waits a set latency and logs
every request. It runs in a child process by default: a provider's work costs its client's
process nothing, and a server thread would take the interpreter's lock beside the client's event
loop and scoring thread, which no deployment does (it still shares the machine's cores).
"""

from __future__ import annotations

import contextlib
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

from fakes.openai_server import FakeOpenAIServer

QUEUE = 4096  # listen backlog: bursts of hundreds of new connections
#: The system prompt of every call: uqlm's default for string prompts.
SYSTEM_PROMPT = "You are a helpful assistant."
#: How far a confidence of the default scorer may move with the company it is scored in: it runs
#: in a reduced dtype where the device has one ("Batch invariance" in docs/bertscore.md).
REDUCED_TOLERANCE = 1e-3
PROMPT_TEMPLATES = ("This is a Wikipedia passage about concept {idx}:",
                    "Here is a Wikipedia passage about concept {idx}:",
                    "Write the Wikipedia passage about concept {idx}.",
                    "Give a short Wikipedia biography of concept {idx}.")  # fmt: skip
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
        from uqlm_bert.scorers._sentences import split_sentences

        return [split_sentences(s) or [s] for s in self.samples]

    def rotated(self, k: int) -> Passage:
        """The passage with each text's sentences rotated ``k`` places: texts of the same length
        that no other prompt receives (unless a text has no more than ``k`` sentences), since
        shared texts, embedded once per call, would make large batches cheaper than real ones."""
        from uqlm_bert.scorers._sentences import split_sentences

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


def fixed_sampling(**settings: Any) -> Any:
    """The generation settings of the benchmarks that measure fixed sampling (every prompt's
    samples at once, the calls of uqlm's fixed m): the system prompt, and ``settings``."""
    from uqlm_bert import GenerationSettings

    return GenerationSettings(**{"system_prompt": SYSTEM_PROMPT, "sampling": "fixed", **settings})


def no_work_scorer() -> Any:
    """A scorer that does no work: runs with it time the calls alone."""
    from uqlm_bert.scorers._base import Scorer

    class NoWork(Scorer):
        name = "no_work"

        def score(self, responses, sampled_responses, show_progress_bars=False):
            return [0.0] * len(responses)

    return NoWork()


class PassageAnswers:
    """The server's answers: a prompt's passage at temperature 0, its samples in turn otherwise
    (thread-safe); :meth:`reset` restarts every prompt's samples from the first."""

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

    @staticmethod
    def served(passage: Passage, n: int) -> list[str]:
        """The first ``n`` samples a fresh run receives for ``passage``, in the order served."""
        return [passage.samples[j % len(passage.samples)] for j in range(n)]

    def mismatches(self, prompts: Sequence[str], responses: Sequence, samples: Sequence) -> int:
        """Prompts whose answer or multiset of samples is not what a fresh run must receive."""
        bad = 0
        for p, r, s in zip(prompts, responses, samples, strict=True):
            passage = self.prompts[p]
            want = sorted(self.served(passage, len(s)))
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
            return {"arrivals": [(r.arrived, r.temperature) for r in server.log],
                    "asked": [r.n for r in server.log], "max_in_flight": server.max_in_flight}  # fmt: skip
    else:
        raise ValueError(f"unknown server command {name!r}")


def _serve() -> None:
    """The child process (``python -m benchmarks.loopback``): the prompts come as the first line
    of stdin (JSON), the base URL goes out as the first line of stdout, then one JSON command per
    line in and one JSON reply per line out, until ``stop`` or the end of stdin."""
    rows = json.loads(sys.stdin.readline())
    answers = PassageAnswers({p: Passage(i, r, tuple(s)) for p, i, r, s in rows})
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


def describe_server(where: str | None) -> str:
    """Where the server ran, for a report."""
    return "a process of its own" if where == "process" else "this process"


class PassageServer:
    """The passage server on 127.0.0.1, in a child process (``where="process"``, the default:
    ``python -m benchmarks.loopback`` driven through its stdin and stdout) or a thread of this one
    (``where="thread"``); a context manager. Before each timed run :meth:`reset`; after it,
    :meth:`log`; ``answers.mismatches`` judges what the run received."""

    def __init__(self, prompts: dict[str, Passage], where: str = "process") -> None:
        if where not in ("process", "thread"):
            raise ValueError(f"where must be 'process' or 'thread', not {where!r}")
        self.where, self.prompts, self.latency, self.base_url = where, prompts, 0.0, ""
        self.answers = PassageAnswers(prompts)  # the thread's own; the child's are its copy
        self._local = (FakeOpenAIServer(answer=self.answers, request_queue_size=QUEUE)
                       if where == "thread" else None)  # fmt: skip
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> PassageServer:
        if self._local is not None:
            self._local.__enter__()
            self.base_url = self._local.base_url
            return self
        pipe, root = subprocess.PIPE, Path(__file__).resolve().parents[1]
        self._proc = subprocess.Popen([sys.executable, "-m", "benchmarks.loopback"], cwd=root,
                                      stdin=pipe, stdout=pipe, text=True, bufsize=1)  # fmt: skip
        rows = [[p, v.idx, v.response, list(v.samples)] for p, v in self.prompts.items()]
        self.base_url = self._exchange(rows, 60.0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._local is not None:
            self._local.__exit__(None, None, None)
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):  # a broken pipe: the child ended already
            proc.stdin.write(json.dumps(["stop", None]) + "\n")
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()

    def _exchange(self, message: Any, timeout: float = 30.0) -> Any:
        assert self._proc and self._proc.stdin and self._proc.stdout
        self._proc.stdin.write(json.dumps(message) + "\n")
        self._proc.stdin.flush()
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        line = self._proc.stdout.readline() if ready else ""
        if not line:
            self.__exit__()
            raise RuntimeError("the server process did not answer (it ended or hung)")
        return json.loads(line)

    def _command(self, name: str, arg: Any = None) -> Any:
        if self._local is not None:
            return _apply(self._local, self.answers, name, arg)
        status, value = self._exchange([name, arg])
        if status != "ok":
            raise RuntimeError(f"server command {name!r} failed: {value}")
        return value

    def set_latency(self, seconds: float) -> None:
        """Every answer from now on waits ``seconds`` before it is sent."""
        self._command("latency", seconds)
        self.latency = seconds

    def ignore_n(self, ignore: bool) -> None:
        """Answer every request with one choice whatever its ``n`` (``True``), or honour it."""
        self._command("ignore_n", ignore)

    def reset(self) -> None:
        """Restart every prompt's samples from the first, and clear the request log."""
        self._command("reset")

    def log(self) -> ServerLog:
        """The requests since the last :meth:`reset`."""
        got = self._command("log")
        return ServerLog([(a, t) for a, t in got["arrivals"]], got["max_in_flight"], got["asked"])


if __name__ == "__main__":
    _serve()
