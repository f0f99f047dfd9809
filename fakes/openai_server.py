"""A scripted OpenAI-compatible chat server on 127.0.0.1, for end-to-end tests through ChatOpenAI.

``POST /v1/chat/completions`` answers in the OpenAI format with a text that names the prompt and
the temperature, so tests can check that every answer landed in its own prompt's slot. Faults are
scripted per prompt with :meth:`FakeOpenAIServer.add_rule`: an HTTP status (with ``Retry-After``),
a hang, a malformed body (``malformed=``: ``"json"``, not JSON; ``"shape"``, no ``choices``;
``"empty_choices"``, ``"choices": []``; ``"null_choices"``, ``"choices": null``), or extra
latency, for the first ``times`` matching requests or for all.
Every request is logged with its arrival time, so tests can count calls per time window
(:meth:`FakeOpenAIServer.most_in_window`), and wait, without polling, until the log shows
something (:meth:`FakeOpenAIServer.wait_until`, or :meth:`FakeOpenAIServer.until` in a
coroutine).
``answer`` replaces the scripted text with any function of (prompt, temperature) (called once per
choice; an ``answer`` with a ``choices(prompt, temperature, n)`` method is called once per request
instead), and
``request_queue_size`` sets the listen backlog for bursts of hundreds of new connections (the
standard library's default of 5 makes the kernel drop connection attempts beyond it, which clients
then retry after a second).

A request's ``n`` (choices, as OpenAI's API has it) is honoured: the reply holds ``n`` choices,
each answered in turn. ``ignore_n=True`` plays a provider that ignores ``n`` (one choice, as some
OpenAI-compatible servers do), and ``max_n`` one that refuses larger ``n`` with HTTP 400 (OpenAI
allows 128).

``serving_slots`` plays a server that serves that many requests at once and queues the rest in
arrival order, never refusing one (llama.cpp's server, vLLM, Ollama): a queued request waits for
a slot, and is still served after its client gave up on it; ``max_queued`` is the most that
waited at once.

``concurrency_limit`` plays a provider with a cap on requests in flight: a request that arrives
while that many are being served is answered 429 at once (with ``concurrency_retry_after`` as
``Retry-After`` when set) and is not counted in flight. A request counts as in flight from its
arrival until its reply starts to be written, so a client that sends its next request as soon as
it has read a reply never finds the previous one still counted. ``in_flight`` and
``max_in_flight`` count the requests being served.

The server runs in a background thread, binds port 0 on the loopback interface only, and is
stopped by the context manager (hung requests are released when it stops).
"""

from __future__ import annotations

import json
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fakes.watched import Watched

HANG_LIMIT_S = 30.0


@dataclass
class Rule:
    """A fault applied to requests whose last user message contains ``match``."""

    match: str
    status: int | None = None
    times: int | None = None
    temperature: float | None = None
    retry_after: str | None = None
    retry_after_ms: str | None = None
    hang: bool = False
    malformed: str | None = None
    latency: float = 0.0
    used: int = 0

    def applies(self, prompt: str, temperature: float | None) -> bool:
        if self.match not in prompt:
            return False
        if self.temperature is not None and temperature != self.temperature:
            return False
        return self.times is None or self.used < self.times


@dataclass
class RequestLog:
    """One request as the server saw it."""

    arrived: float
    prompt: str
    temperature: float | None
    status: int
    body: dict[str, Any] = field(default_factory=dict)
    #: choices asked for (the request's ``n``, 1 without) and returned
    n: int = 1
    choices: int = 0
    #: when it stopped counting in flight: its reply started to be written, or it ended without
    #: one (a hung request, when the server stops); None while in flight
    answered: float | None = None


def answer_text(prompt: str, temperature: float | None) -> str:
    """The text the server answers ``prompt`` with at ``temperature``."""
    return f"Answer to '{prompt}' at temperature {temperature}."


class FakeOpenAIServer(Watched):
    """Scripted OpenAI-compatible server; use as a context manager.

    Example::

        with FakeOpenAIServer() as server:
            server.add_rule("flaky", status=503, times=1)
            llm = ChatOpenAI(base_url=server.base_url, api_key="test", model="fake")
    """

    def __init__(
        self,
        default_latency: float = 0.0,
        answer: Callable[[str, float | None], str] = answer_text,
        request_queue_size: int | None = None,
        concurrency_limit: int | None = None,
        concurrency_retry_after: str | None = None,
        ignore_n: bool = False,
        max_n: int | None = None,
        serving_slots: int | None = None,
    ) -> None:
        self.default_latency = default_latency
        self.answer = answer
        self.request_queue_size = request_queue_size
        self.concurrency_limit = concurrency_limit
        self.concurrency_retry_after = concurrency_retry_after
        self.ignore_n = ignore_n
        self.max_n = max_n
        self.serving_slots = serving_slots
        self.max_queued = 0
        self._slots = threading.Condition()
        self._queued: list[object] = []
        self._serving = 0
        self.rules: list[Rule] = []
        self.log: list[RequestLog] = []
        self.lock = threading.Lock()
        #: notified whenever a request arrives or stops counting in flight
        self.changed = threading.Condition(self.lock)
        self.stopping = threading.Event()
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "the server is not running"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add_rule(self, match: str, **kwargs: Any) -> Rule:
        rule = Rule(match=match, **kwargs)
        with self.lock:
            self.rules.append(rule)
        return rule

    def requests_for(self, text: str) -> list[RequestLog]:
        with self.lock:
            return [r for r in self.log if text in r.prompt]

    def most_in_window(self, period: float) -> int:
        """The most requests that arrived within any window of ``period`` seconds (both ends
        included)."""
        with self.lock:
            arrivals = sorted(r.arrived for r in self.log)
        most = start = 0
        for end, arrived in enumerate(arrivals):
            while arrived - arrivals[start] > period:
                start += 1
            most = max(most, end - start + 1)
        return most

    def __enter__(self) -> FakeOpenAIServer:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
        if self.request_queue_size is not None:
            self._httpd.request_queue_size = self.request_queue_size  # read by listen()
        try:
            self._httpd.server_bind()
            self._httpd.server_activate()
        except OSError:
            self._httpd.server_close()
            raise
        self._httpd.daemon_threads = True
        self._httpd.handle_error = self._handle_error  # type: ignore[method-assign]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that went away (a pooled keep-alive connection closed when its
        client is collected, perhaps after this server stopped); the default report otherwise."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        socketserver.BaseServer.handle_error(self._httpd, request, client_address)

    def _pick_rule(self, prompt: str, temperature: float | None) -> Rule | None:
        with self.lock:
            for rule in self.rules:
                if rule.applies(prompt, temperature):
                    rule.used += 1
                    return rule
        return None


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            return

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            arrived = time.monotonic()
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            messages = body.get("messages") or []
            users = [m for m in messages if m.get("role") == "user"]
            prompt = str(users[-1].get("content", "")) if users else ""
            temperature = body.get("temperature")
            n = int(body.get("n") or 1)
            with server.lock:
                limit = server.concurrency_limit
                overloaded = limit is not None and server.in_flight >= limit
                status = 429 if overloaded else 200
                entry = RequestLog(arrived, prompt, temperature, status, body, n=n)
                server.log.append(entry)
                if not overloaded:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                server.changed.notify_all()
            if overloaded:
                self._overloaded(entry)
                return
            self._entry: RequestLog | None = entry
            rule = server._pick_rule(prompt, temperature)
            try:
                if server.serving_slots is None:
                    self._respond(rule, prompt, temperature, body, entry)
                elif self._take_slot():
                    try:
                        self._respond(rule, prompt, temperature, body, entry)
                    finally:
                        self._give_slot()
            finally:
                self._leave()

        def _take_slot(self) -> bool:
            """Wait in line for a serving slot (False: the server stopped first)."""
            me = object()
            with server._slots:
                server._queued.append(me)
                server.max_queued = max(server.max_queued, len(server._queued))
                while server._queued[0] is not me or server._serving >= server.serving_slots:
                    if server.stopping.is_set():
                        server._queued.remove(me)
                        server._slots.notify_all()
                        return False
                    server._slots.wait(0.05)
                server._queued.pop(0)
                server._serving += 1
                server._slots.notify_all()
            return True

        def _give_slot(self) -> None:
            with server._slots:
                server._serving -= 1
                server._slots.notify_all()

        def _leave(self) -> None:
            """The request stops counting in flight (once): its reply is about to be written,
            or it ended without one."""
            entry, self._entry = getattr(self, "_entry", None), None
            if entry is not None:
                with server.lock:
                    server.in_flight -= 1
                    entry.answered = time.monotonic()
                    server.changed.notify_all()

        def _overloaded(self, entry: RequestLog) -> None:
            headers = {}
            if server.concurrency_retry_after is not None:
                headers["Retry-After"] = server.concurrency_retry_after
            error = {"message": "too many requests in flight", "type": "test", "code": None}
            entry.answered = time.monotonic()
            self._send(429, {"error": error}, headers)

        def _respond(
            self,
            rule: Rule | None,
            prompt: str,
            temperature: float | None,
            body: dict[str, Any],
            entry: RequestLog,
        ) -> None:
            latency = server.default_latency + (rule.latency if rule else 0.0)
            if latency and server.stopping.wait(latency):
                return
            if rule is not None and rule.hang:
                entry.status = 0
                server.stopping.wait(HANG_LIMIT_S)
                self.close_connection = True
                return
            if rule is not None and rule.status is not None:
                entry.status = rule.status
                headers = {}
                if rule.retry_after is not None:
                    headers["Retry-After"] = rule.retry_after
                if rule.retry_after_ms is not None:
                    headers["retry-after-ms"] = rule.retry_after_ms
                error = {"message": f"scripted {rule.status}", "type": "test", "code": None}
                self._send(rule.status, {"error": error}, headers)
                return
            if rule is not None and rule.malformed == "json":
                self._send_raw(200, b"{this is not json", "application/json")
                return
            if rule is not None and rule.malformed == "shape":
                self._send(200, {"id": "x", "object": "chat.completion", "unexpected": True})
                return
            if rule is not None and rule.malformed in ("empty_choices", "null_choices"):
                choices = [] if rule.malformed == "empty_choices" else None
                entry.status = 200
                self._send(
                    200,
                    {"id": "x", "object": "chat.completion", "created": int(time.time()),
                     "model": body.get("model", "fake"), "choices": choices},
                )  # fmt: skip
                return
            n = entry.n
            if server.max_n is not None and n > server.max_n and not server.ignore_n:
                entry.status = 400
                error = {"message": f"n must be at most {server.max_n}", "type": "test"}
                self._send(400, {"error": error})
                return
            count = 1 if server.ignore_n else n
            entry.choices = count
            per_request = getattr(server.answer, "choices", None)
            if per_request is not None:  # one hook call per request (a gate counting requests)
                texts = list(per_request(prompt, temperature, count))
            else:
                texts = [server.answer(prompt, temperature) for _ in range(count)]
            self._send(
                200,
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": k,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                        for k, text in enumerate(texts)
                    ],
                    "usage": {
                        "prompt_tokens": 1,
                        "completion_tokens": count,
                        "total_tokens": 1 + count,
                    },
                },
            )

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

        def _send_raw(
            self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None
        ) -> None:
            self._leave()
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout or cancellation)

    return Handler
