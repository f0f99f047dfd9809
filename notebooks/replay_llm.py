"""A LangChain chat model that replays recorded answers, so the notebooks run offline.

Each record of a JSON Lines file holds a ``prompt``, the ``response`` the model gave at
temperature 0, and the ``sampled_responses`` it gave at a higher temperature. Asked a recorded
prompt at temperature 0, the model answers with the response; asked at any higher temperature,
it answers with the samples in turn. A prompt it has no record of fails the call, as an
unreachable server would.

The call counters live in a dictionary that every copy of the model shares, so the copies that
``BlackBoxUQ`` makes (one per temperature) hand out each sample once.

Swap it for any LangChain chat model to run the notebooks on a real LLM, e.g.::

    from langchain_openai import ChatOpenAI
    llm = ChatOpenAI(model="gpt-4o-mini", temperature=0.0)
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class UnrecordedPromptError(LookupError):
    """The replayed run holds no answer for this prompt."""


class ReplayChatModel(BaseChatModel):
    """Replays a recorded run: the answer at temperature 0, the samples above it."""

    records: dict[str, dict[str, Any]]
    temperature: float = 0.0
    calls: dict[str, int] = Field(default_factory=dict, exclude=True)
    lock: Any = Field(default_factory=threading.Lock, exclude=True)

    @classmethod
    def from_jsonl(cls, path: str | Path, **kwargs: Any) -> ReplayChatModel:
        """Load the records of ``path`` (one JSON object per line)."""
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return cls(records={row["prompt"]: row for row in rows}, **kwargs)

    @property
    def _llm_type(self) -> str:
        return "replay-chat-model"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        record = self.records.get(prompt)
        if record is None:
            raise UnrecordedPromptError(f"no recorded answer for the prompt {prompt!r}")
        temperature = kwargs.get("temperature", self.temperature)
        if not temperature:
            text = record["response"]
        else:
            samples = record["sampled_responses"]
            with self.lock:
                k = self.calls.get(prompt, 0)
                self.calls[prompt] = k + 1
            text = samples[k % len(samples)]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        # answered on the event loop itself: calls are served in the order they are made
        return self._generate(messages, stop=stop, **kwargs)
