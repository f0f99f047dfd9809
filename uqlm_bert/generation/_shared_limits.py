"""Limits shared by every call in flight: one lane per owner and provider, one provider state
per provider.

An async app awaits many ``generate_and_score`` calls on one ``BlackBoxUQ`` at once. The limits
its user set on the object hold across all of them, and what the provider can take belongs to
the provider, whichever call meets it:

- a :class:`Lane` per owner (a ``BlackBoxUQ``, or a ``ResponseGenerator`` used on its own),
  event loop, provider and limit settings holds the rate limit (``max_calls_per_min`` per
  ``rate_limit_period``) and the cap on calls in flight (``max_concurrency``), shared by the
  owner's calls, and the copies of the model with their connection pools, shared while at least
  one call runs;
- a :class:`ProviderState` per provider (endpoint and model) and event loop is shared by every
  lane of the process that calls it: congestion control (the adaptive level learned from the
  provider's 429s, 5xx and timeouts, :class:`~uqlm_bert.generation._limiters.AdaptiveConcurrency`),
  how many choices one call may ask for with ``n``, and the provider's queue as the client sees
  it (below). When its last call ends, what it learned is kept for later loops
  (:mod:`uqlm_bert.generation._learned_limits`).

A call waits for a place in flight first within its lane's cap, then within the provider's
level, each in a first-come, first-served line (retries first); each call has at most one new
call waiting at a time, so the calls of a lane take turns: a one-prompt call that arrives while
a 500-prompt call runs waits for the places already asked for, not for the 500 prompts. Two
owners on one provider keep their own rate limits and caps (each is its user's setting) and share
the provider's level, so together they do not push the provider past what it refused.

With ``cluster_limits`` in the settings, a lane takes its rate limit, cap and level from the
keeper of the cluster instead, shared with the lanes of every process that names it
(:mod:`uqlm_bert.generation._cluster_limits`); the rest of the lane (the provider's queue, the model's
copies) stays in the process.

**Queued calls are not timed out.** A server that queues what it cannot serve yet (llama.cpp,
vLLM, Ollama) answers other calls while a call waits its turn, and not always in the order they
were sent (llama.cpp serves a call asking for several choices once that many slots are free).
An attempt's ``request_timeout`` therefore counts from when it was sent, or from the provider's
last answer to any attempt, whichever is later: while the provider keeps answering, a call it
has not served yet is waiting, not hung. So that a call the provider never serves still ends, an
attempt waits at most one ``request_timeout`` for itself and one for each attempt that was in
flight when it was sent. A provider that answers nothing times out as before.

Example:
    >>> import asyncio
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> from uqlm_bert.generation._settings import GenerationSettings
    >>> async def two_calls_one_cap():
    ...     lanes = SharedLimits()
    ...     settings = GenerationSettings(max_concurrency=1)
    ...     first = lanes.lane(ParrotFakeChatModel(), settings)
    ...     second = lanes.lane(ParrotFakeChatModel(), settings)
    ...     return first is second, first.cap
    >>> asyncio.run(two_calls_one_cap())
    (True, 1)
"""

from __future__ import annotations

import asyncio
import math
import weakref
from dataclasses import dataclass
from typing import Any

from uqlm_bert.generation import _learned_limits as memory
from uqlm_bert.generation._clients import derive_llm, http_pool_factory, provider_key, unbind
from uqlm_bert.generation._cluster_keeper import LimitNumbers
from uqlm_bert.generation._limiters import AdaptiveConcurrency, Permit, RateLimiter
from uqlm_bert.generation._settings import GenerationSettings

__all__ = [
    "Attempt",
    "ClientSet",
    "Lane",
    "Place",
    "ProviderState",
    "SharedLimits",
    "provider_state",
]

#: Calls in flight per HTTP connection pool. The OpenAI client's pool looks at every one of its
#: connections for each request it sends and each reply it reads, so the CPU a call costs grows
#: with the connections in its pool: hundreds of calls in flight are spread over several pools.
POOL_CONNECTIONS = 48


class ProviderState:
    """What the calls on one event loop share about one provider.

    Args:
        key: the provider (endpoint, model type, model name).
        concurrency: its congestion control (lanes that do not adapt leave it aside).
        max_choices: the most choices one call may ask for with ``n``, where a reply showed it.

    Attributes:
        users: the calls using it now.
    """

    def __init__(self, key: Any, concurrency: AdaptiveConcurrency, max_choices: int | None) -> None:
        self.key = key
        self.concurrency = concurrency
        self.max_choices = max_choices
        self.users = 0
        self.in_flight = 0  # attempts sent and not back
        self.last_answer = -math.inf  # when an attempt was last answered (loop time)

    def attempt_sent(self, now: float) -> Attempt:
        """An attempt goes out at ``now`` (loop time); :meth:`attempt_done` once it is back."""
        self.in_flight += 1
        return Attempt(now, self.in_flight - 1)

    def attempt_done(self, answered_at: float | None) -> None:
        """An attempt is back: answered at ``answered_at`` (loop time), or failed (None)."""
        self.in_flight -= 1
        if answered_at is not None:
            self.last_answer = max(self.last_answer, answered_at)

    def deadline(self, attempt: Attempt, timeout: float) -> float:
        """When ``attempt`` times out: ``timeout`` seconds after it was sent or after the
        provider last answered an attempt, whichever is later (while the provider answers, a
        call it has not served yet waits in its queue), and at the latest ``timeout`` seconds
        for itself and for each attempt that was in flight when it was sent (served one at a
        time, each within its timeout)."""
        waited = max(attempt.sent, self.last_answer) + timeout
        return min(waited, attempt.sent + timeout * (1 + attempt.ahead))


@dataclass(frozen=True)
class Attempt:
    """An attempt in flight: when it was sent, and the attempts in flight then (ahead of it
    at a server that queues in arrival order)."""

    sent: float
    ahead: int


#: The provider states of each event loop.
_providers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, ProviderState]] = (
    weakref.WeakKeyDictionary()
)


def provider_state(key: Any, settings: GenerationSettings) -> ProviderState:
    """The running loop's state of provider ``key``: shared while calls use it; once they all
    ended, a new one, started from what earlier runs learned (:mod:`~uqlm_bert.generation.
    memory`, where each call leaves what it learned)."""
    states = _providers.setdefault(asyncio.get_running_loop(), {})
    state = states.get(key)
    if state is not None and state.users:
        return state
    known = memory.recall(key)
    learned = known.concurrency if known is not None else None
    initial = settings.initial_concurrency if settings.adaptive else None  # as the first lane
    state = ProviderState(
        key,
        AdaptiveConcurrency(initial, None, learned=learned),
        known.max_choices if known is not None else None,
    )
    states[key] = state
    return state


@dataclass
class Place:
    """A place in flight: one in the lane's cap and one in the provider's level."""

    capped: Permit | None
    provider: Permit | None  # None in a lane that does not adapt


class ClientSet:
    """The copies of one model a lane's calls send through: one as the user configured it (for
    answers) and one at the sampling temperature with the response cache off (for samples), per
    connection pool; pools are added as calls in flight grow, and closed when the last call
    using them ends."""

    def __init__(self, llm: Any, settings: GenerationSettings) -> None:
        self.llm = llm
        self.settings = settings
        self.users = 0
        self.original: list[Any] = []
        self.sampling: list[Any] = []
        self._n_models: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._new_pool = http_pool_factory(llm)
        self._pools: list[Any] = []
        self._sending: list[int] = []  # attempts in flight per copy
        self._add()

    def matches(self, llm: Any, settings: GenerationSettings) -> bool:
        """Whether these are the copies a call of ``llm`` under ``settings`` sends through."""
        mine = self.settings
        return (
            self.llm is llm
            and mine.sampling_temperature == settings.sampling_temperature
            and mine.disable_client_retries == settings.disable_client_retries
        )

    def _add(self) -> None:
        """One more pool (where the model gets pools of the run's own) and its copies."""
        pool = None
        if self._new_pool is not None:
            pool = self._new_pool()
            self._pools.append(pool)
        no_retry = self.settings.disable_client_retries
        self.original.append(
            derive_llm(self.llm, disable_client_retries=no_retry, http_client=pool)
        )
        self.sampling.append(
            derive_llm(
                self.llm,
                temperature=self.settings.sampling_temperature,
                disable_client_retries=no_retry,
                disable_cache=True,
                http_client=pool,
            )
        )
        self._sending.append(0)

    def n_model(self, turn: int) -> tuple[Any, dict[str, Any]]:
        """The sampling copy ``turn`` unbound, with its bound arguments, for calls that ask for
        several choices with ``n`` (streaming off: it merges the choices into one)."""
        if turn not in self._n_models:
            model, kwargs = unbind(self.sampling[turn])
            if "disable_streaming" in getattr(type(model), "model_fields", {}):
                model = model.model_copy(update={"disable_streaming": True})
            self._n_models[turn] = (model, kwargs)
        return self._n_models[turn]

    def reserve(self, in_flight: float) -> None:
        """Pools enough for ``in_flight`` calls, made before the calls start (not between
        their sends)."""
        while self._new_pool is not None and in_flight > POOL_CONNECTIONS * len(self.original):
            self._add()

    def checkout(self) -> int:
        """The copy (and pool) the next attempt uses: the one with the fewest attempts in
        flight, so that connections spread evenly; a new pool when every pool is full."""
        turn = min(range(len(self._sending)), key=self._sending.__getitem__)
        if self._new_pool is not None and self._sending[turn] >= POOL_CONNECTIONS:
            self._add()
            turn = len(self._sending) - 1
        self._sending[turn] += 1
        return turn

    def checkin(self, turn: int) -> None:
        """The attempt on copy ``turn`` is back."""
        self._sending[turn] -= 1

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


class Lane:
    """The limits one owner's calls to one provider share: the rate limit, the cap on calls in
    flight, the provider's state, and the model's copies.

    Args:
        key: the provider.
        settings: the generation settings the lane's limits come from.

    Attributes:
        cap: the most calls in flight (``max_concurrency`` and ``max_calls_per_min``, the lower;
            ``None`` for none).
        rate: the rate limit, or ``None``.
        in_flight: the owner's calls to this provider in flight now.
        cluster: where ``cluster_limits`` is set, the client of the keeper that grants the
            places (its cap and level in one) and the tokens; else ``None``.
    """

    def __init__(self, key: Any, settings: GenerationSettings) -> None:
        self.key = key
        self.adaptive = settings.adaptive  # whether calls also keep within the provider's level
        numbers = LimitNumbers.of(settings)
        self.cap: int | None = numbers.cap
        self.rate: RateLimiter | None
        self._capped, self.rate = numbers.enforcers()
        self.provider: ProviderState | None = None
        self.in_flight = 0
        self._clients: list[ClientSet] = []
        # limits held for a whole cluster (generation/_cluster_limits.py): the keeper grants the places
        # (its cap and level in one) and the tokens
        self.cluster: Any = None
        if settings.cluster_limits is not None:
            self.cluster = settings.cluster_limits.client(key, settings)
            self.adaptive, self._capped, self.rate = True, None, self.cluster.rate

    # -- a call enters and leaves ----------------------------------------------------------

    def enter(
        self, llm: Any, settings: GenerationSettings, calls: int
    ) -> tuple[ProviderState, ClientSet]:
        """A call of ``calls`` calls starts using the lane: the provider's state and the
        model's copies, with pools enough for the calls it may add in flight."""
        if self.cluster is None:
            self.provider = provider_state(self.key, settings)
        elif self.provider is None or not self.provider.users:
            known = memory.recall(self.key)
            choices = known.max_choices if known is not None else None
            self.provider = ProviderState(self.key, self.cluster.level, choices)  # type: ignore[arg-type]
        self.provider.users += 1
        clients = next((c for c in self._clients if c.matches(llm, settings)), None)
        if clients is None:
            clients = ClientSet(llm, settings)
            self._clients.append(clients)
        clients.users += 1
        clients.reserve(self.in_flight + min(self.limit, calls))
        return self.provider, clients

    async def leave(self, provider: ProviderState, clients: ClientSet) -> None:
        """A call is done with the lane: the last one out closes the pools and records what was
        learned about the provider."""
        provider.users -= 1
        learned = provider.concurrency.learned()
        if learned is not None:
            memory.remember(provider.key, concurrency=learned)
        clients.users -= 1
        if not clients.users:
            self._clients.remove(clients)
            await clients.aclose()
        if self.cluster is not None and not provider.users:
            await self.cluster.idle()

    # -- places in flight ------------------------------------------------------------------

    @property
    def limit(self) -> float:
        """The calls allowed in flight now: the cap and the provider's level, the lower."""
        level = float("inf")
        if self.adaptive and self.provider is not None:
            level = self.provider.concurrency.limit
        return level if self.cap is None else min(self.cap, level)

    async def acquire(self, provider: ProviderState, priority: bool = False) -> Place:
        """Wait for a place within the cap, then within the provider's level."""
        capped = await self._capped.acquire(priority) if self._capped is not None else None
        try:
            level = await provider.concurrency.acquire(priority) if self.adaptive else None
            place = Place(capped, level)
        except BaseException:
            if capped is not None:
                assert self._capped is not None
                self._capped.release(capped, None)
            raise
        self.in_flight += 1
        return place

    def release(self, provider: ProviderState, place: Place, latency: float | None) -> None:
        """The call is done, or waits to try again (see ``AdaptiveConcurrency.release``)."""
        self.in_flight -= 1
        if place.provider is not None:
            provider.concurrency.release(place.provider, latency)
        if place.capped is not None:
            assert self._capped is not None
            self._capped.release(place.capped, None)


def _limits_key(settings: GenerationSettings) -> tuple[Any, ...]:
    return (LimitNumbers.of(settings), settings.cluster_limits)


class SharedLimits:
    """An owner's lanes: one per event loop, provider and limit settings.

    A call takes its lane with :meth:`lane` when it starts; calls that start while the limit
    settings are the same share it (a call started after ``max_concurrency`` changed gets a lane
    of the new settings).
    """

    def __init__(self) -> None:
        self._lanes: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[Any, ...], Lane]
        ] = weakref.WeakKeyDictionary()

    def lane(self, llm: Any, settings: GenerationSettings) -> Lane:
        """The running loop's lane for ``llm``'s provider under ``settings``' limits."""
        lanes = self._lanes.setdefault(asyncio.get_running_loop(), {})
        key = (provider_key(llm), _limits_key(settings))
        found = lanes.get(key)
        if found is None:
            found = lanes[key] = Lane(key[0], settings)
        return found
