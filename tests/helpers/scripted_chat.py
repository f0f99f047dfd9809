"""A LangChain fake chat model with scripted faults and a call log, for unit tests.

``ScriptedChatModel`` answers ``"Answer to '<prompt>' at temperature <t>."`` (the prompt being the
last message's text, the temperature the one it was called with), after ``latency`` seconds, with
as many choices as the call's ``n`` asks (one with ``ignore_n=True``, at most ``max_n``). A
fault script maps a prompt substring (and optionally a temperature) to exceptions raised by the
first matching calls. Exceptions that look like provider errors (an HTTP ``status_code`` and
``response.headers``) are built by :func:`http_error`.

The log lives in a :class:`Recorder` object shared by the model and every copy of it, so tests can
count the calls a run made while checking that the caller's model itself did not change, and wait,
without polling, until the log shows something (:meth:`Recorder.until`).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from fakes.watched import Watched


def answer_text(prompt: str, temperature: float | None) -> str:
    return f"Answer to '{prompt}' at temperature {temperature}."


class HTTPStatusFault(Exception):
    """An exception shaped like a provider SDK's HTTP error."""

    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status_code} (scripted)")
        self.status_code = status_code
        self.response = SimpleNamespace(status_code=status_code, headers=dict(headers or {}))


def http_error(status_code: int, **headers: str) -> HTTPStatusFault:
    return HTTPStatusFault(status_code, {k.replace("_", "-"): v for k, v in headers.items()})


@dataclass
class Fault:
    match: str
    errors: list[BaseException | str]
    temperature: float | None = None
    repeat_last: bool = False

    def next_error(self, prompt: str, temperature: float | None) -> BaseException | str | None:
        if self.match not in prompt:
            return None
        if self.temperature is not None and temperature != self.temperature:
            return None
        if not self.errors:
            return None
        if self.repeat_last and len(self.errors) == 1:
            return self.errors[0]
        return self.errors.pop(0)


@dataclass
class Call:
    prompt: str
    temperature: float | None
    started: float
    kwargs: dict[str, Any]
    messages: list[BaseMessage]

    @property
    def n(self) -> int:
        """Choices asked for."""
        return int(self.kwargs.get("n") or 1)


@dataclass
class Recorder(Watched):
    faults: list[Fault] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    latency_rng: random.Random | None = None
    max_random_latency: float = 0.0
    slow: dict[str, float] = field(default_factory=dict)  # prompt substring -> extra latency
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: notified whenever a call starts or ends
    changed: threading.Condition = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def add_fault(
        self,
        match: str,
        *errors: BaseException | str,
        temperature: float | None = None,
        always: bool = False,
    ) -> None:
        """Raise ``errors`` (one per matching call, in order); ``always`` repeats the last one.

        An error given as the string ``"hang"`` makes the call never return.
        """
        self.faults.append(Fault(match, list(errors), temperature, repeat_last=always))

    def calls_for(self, text: str, temperature: float | None = None) -> list[Call]:
        return [
            c
            for c in self.calls
            if text in c.prompt and (temperature is None or c.temperature == temperature)
        ]


class ScriptedChatModel(BaseChatModel):
    """Fake chat model with a temperature field, client retries and scripted faults."""

    temperature: float | None = 0.0
    max_retries: int = 2
    latency: float = 0.0
    ignore_n: bool = False
    max_n: int | None = None
    recorder: Any = Field(default_factory=Recorder, exclude=True)

    @property
    def _llm_type(self) -> str:
        return "scripted-fake-chat-model"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        prompt, temperature, error, delay = self._begin(messages, kwargs)
        try:
            time.sleep(delay)
            return self._reply(
                prompt,
                temperature,
                TimeoutError("hung") if error == "hang" else error,
                self._choices(kwargs),
            )
        finally:
            self._end()

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        prompt, temperature, error, delay = self._begin(messages, kwargs)
        try:
            if delay:
                await asyncio.sleep(delay)
            if error == "hang":
                await asyncio.sleep(3600)
            return self._reply(prompt, temperature, error, self._choices(kwargs))
        finally:
            self._end()

    def _begin(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> tuple:
        rec: Recorder = self.recorder
        temperature = kwargs.get("temperature", self.temperature)
        prompt = str(messages[-1].content)
        with rec.lock:
            rec.calls.append(Call(prompt, temperature, time.monotonic(), dict(kwargs), messages))
            rec.in_flight += 1
            rec.max_in_flight = max(rec.max_in_flight, rec.in_flight)
            error = None
            for fault in rec.faults:
                error = fault.next_error(prompt, temperature)
                if error is not None:
                    break
            extra = rec.latency_rng.uniform(0, rec.max_random_latency) if rec.latency_rng else 0.0
            extra += sum(v for k, v in rec.slow.items() if k in prompt)
            rec.changed.notify_all()
        return prompt, temperature, error, self.latency + extra

    def _choices(self, kwargs: dict[str, Any]) -> int:
        """How many choices to return; a refusal of too large an ``n`` as a provider's 400."""
        n = int(kwargs.get("n") or 1)
        if self.max_n is not None and n > self.max_n and not self.ignore_n:
            raise http_error(400)
        return 1 if self.ignore_n else n

    def _end(self) -> None:
        with self.recorder.lock:
            self.recorder.in_flight -= 1
            self.recorder.changed.notify_all()

    @staticmethod
    def _reply(prompt: str, temperature: float | None, error: Any, choices: int = 1) -> ChatResult:
        if isinstance(error, BaseException):
            raise error
        text = answer_text(prompt, temperature)
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=text)) for _ in range(choices)]
        )
