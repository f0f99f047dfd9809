"""Limits held for a whole cluster (uqlm_bert.generation._cluster_keeper and .cluster), without Ray: the
keeper runs in the test's event loop, reached through a stand-in for the Ray actor that can die,
be replaced, or answer late. Several clients stand for several processes.

What Ray itself adds (the actor found by name, its death seen by the clients) is tested in
tests/integration/test_cluster_limits_ray.py.
"""

from __future__ import annotations

import asyncio
import math
import pickle
import time
from typing import Any

import pytest

from tests.helpers.retries import no_wait
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel, http_error
from tests.helpers.waiting import GUARD_S, settle
from uqlm_bert import ConfigurationError, LimitsUnavailableError
from uqlm_bert.generation import _cluster_limits as cluster_module
from uqlm_bert.generation._cluster_keeper import GrantKeeper, LimitNumbers
from uqlm_bert.generation._cluster_limits import ClusterClient, ClusterLimits, KeeperLost
from uqlm_bert.generation._generator import ResponseGenerator
from uqlm_bert.generation._settings import GenerationSettings

KEY = ("http://provider", "chat", "model")


def numbers(**given: Any) -> LimitNumbers:
    base = {
        "max_concurrency": None,
        "max_calls_per_min": None,
        "rate_limit_period": 60.0,
        "adaptive": True,
        "initial_concurrency": None,
    }
    return LimitNumbers(**{**base, **given})


class LocalKeeper:
    """A keeper in this event loop, reached as the Ray actor is: ``submit`` returns a future of
    its answer. ``die()`` fails the requests in flight and the next one as a dead actor does, and
    the request after that starts a replacement (as the client's Ray side does); ``delay`` holds
    every answer back. ``requests`` and ``answered`` count them by method, and :meth:`until`
    waits for them to show something."""

    def __init__(self, lease_s: float = 30.0) -> None:
        self.lease_s = lease_s
        self.keeper = GrantKeeper(lease_s)
        self.delay = 0.0
        self.requests: dict[str, int] = {}
        self.answered: dict[str, int] = {}
        self._moved = asyncio.Event()  # set when a request comes in or is answered
        self._dead = False
        self._lost = False
        self._pending: set[asyncio.Future[Any]] = set()

    def submit(self, method: str, *args: Any) -> asyncio.Future[Any]:
        self.requests[method] = self.requests.get(method, 0) + 1
        self._moved.set()
        future = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda _: self._answer_of(method))
        if self._dead:
            self._dead, self._lost = False, True
            future.set_exception(KeeperLost("the keeper died (test)", died=True))
            return future
        if self._lost:
            self._lost = False
            self.keeper = GrantKeeper(self.lease_s, replaces_lost=True)
        task = asyncio.ensure_future(self._answer(self.keeper, method, args))

        def done(t: asyncio.Task[Any]) -> None:
            self._pending.discard(future)
            if future.done():
                return
            if t.cancelled():
                future.cancel()
            elif t.exception() is not None:
                future.set_exception(t.exception())
            else:
                future.set_result(t.result())

        task.add_done_callback(done)
        self._pending.add(future)
        return future

    def _answer_of(self, method: str) -> None:
        self.answered[method] = self.answered.get(method, 0) + 1
        self._moved.set()

    async def until(self, condition: Any) -> None:
        """Return once ``condition()`` holds, checked whenever a request comes in or is
        answered (failed, as by a dead keeper, included)."""

        async def wait() -> None:
            while not condition():
                self._moved.clear()
                await self._moved.wait()

        await asyncio.wait_for(wait(), GUARD_S)

    async def _answer(self, keeper: GrantKeeper, method: str, args: tuple[Any, ...]) -> Any:
        if self.delay:
            await asyncio.sleep(self.delay)
        return await getattr(keeper, method)(*args)

    def die(self) -> None:
        self._dead = True
        for future in list(self._pending):
            if not future.done():
                future.set_exception(KeeperLost("the keeper died (test)", died=True))

    async def stop(self) -> None:
        await self.keeper.stop()


def client(transport: LocalKeeper, nums: LimitNumbers, **spec: Any) -> ClusterClient:
    return ClusterClient(ClusterLimits(**spec), KEY, nums, transport)


@pytest.mark.slow
async def test_no_window_holds_more_than_max_calls_across_clients():
    limit, period = 5, 0.5
    transport = LocalKeeper()
    clients = [client(transport, numbers(max_calls_per_min=limit, rate_limit_period=period))]
    clients.append(client(transport, numbers(max_calls_per_min=limit, rate_limit_period=period)))
    arrivals: list[float] = []
    per_client = [0, 0]

    async def attempt(k: int) -> None:
        c = clients[k]
        assert c.rate is not None
        await c.rate.acquire()
        arrivals.append(time.monotonic())
        per_client[k] += 1
        await asyncio.sleep(0.01)
        c.rate.release()

    calls = [attempt(k % 2) for k in range(4 * limit + 4)]
    await asyncio.wait_for(asyncio.gather(*calls), 30)
    for c in clients:
        await c.idle()
    await transport.stop()
    arrivals.sort()
    assert len(arrivals) == 4 * limit + 4 and per_client == [2 * limit + 2] * 2
    # a token is held from its grant until one period after it is given back: each client
    # with its own limit would let 2 * limit calls into one window
    crowded = [
        arrivals[i + limit] - arrivals[i]
        for i in range(len(arrivals) - limit)
        if arrivals[i + limit] - arrivals[i] <= period
    ]
    assert not crowded, crowded


async def test_the_cap_holds_across_clients_and_waiting_calls_are_granted_together():
    cap = 3
    transport = LocalKeeper()
    clients = [client(transport, numbers(max_concurrency=cap, adaptive=False)) for _ in range(2)]
    in_flight = peak = 0

    async def call(c: ClusterClient) -> None:
        nonlocal in_flight, peak
        permit = await c.level.acquire()
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        c.level.release(permit, 0.02)

    await asyncio.wait_for(asyncio.gather(*(call(clients[k % 2]) for k in range(20))), 30)
    assert peak == cap  # never more, and the calls waiting filled it
    snapshot = (await transport.keeper.snapshot())[KEY]
    assert snapshot["max_in_flight"] == cap and snapshot["in_flight"] == 0
    # forty calls waiting at once on one client, under a cap that fits them all: one request
    wide = client(transport, numbers(max_concurrency=50, adaptive=False))
    other_key = ClusterClient(ClusterLimits(), ("other",), wide.numbers, transport)
    before = transport.requests.get("places", 0)
    permits = await asyncio.wait_for(
        asyncio.gather(*(other_key.level.acquire() for _ in range(40))), 10
    )
    assert len({p.place for p in permits}) == 40
    assert transport.requests["places"] - before == 1
    for p in permits:
        other_key.level.release(p, None)
    for c in (*clients, other_key):
        await c.idle()
    assert (await transport.keeper.snapshot())[("other",)]["in_flight"] == 0
    await transport.stop()


async def test_a_refusal_seen_by_one_client_lowers_the_level_for_all():
    transport = LocalKeeper()
    a, b = (client(transport, numbers(max_concurrency=8)) for _ in range(2))
    held = [await a.level.acquire() for _ in range(4)]
    assert a.level.limit == math.inf  # no limit until the provider pushes back
    # as the caller does on a 429: report it, then give the place back to wait and retry
    reports = transport.answered.get("report", 0)
    a.level.congestion(held[0], "rate_limit")
    a.level.release(held[0], None)
    # the report goes out with the next turn of the loop
    await transport.until(lambda: transport.answered.get("report", 0) > reports)
    level = (await transport.keeper.snapshot())[KEY]["limit"]
    assert level == 3  # the three calls the provider was still serving
    # b never saw a refusal, but gets no place while a's three fill the level: the keeper has
    # its request, and grants nothing
    asked = transport.requests.get("places", 0)
    waiting = asyncio.ensure_future(b.level.acquire())
    await transport.until(lambda: transport.requests.get("places", 0) > asked)
    await settle()
    assert not waiting.done()
    assert b.level.limit == level and b.level.learned() is not None
    a.level.release(held[1], 0.01)
    permit = await asyncio.wait_for(waiting, 5)
    b.level.release(permit, 0.01)
    for p in held[2:]:
        a.level.release(p, 0.01)
    await a.idle()
    await b.idle()
    await transport.stop()


async def test_a_silent_clients_grants_are_taken_back_after_its_lease():
    keeper = GrantKeeper(lease_s=0.3)
    nums = numbers(max_concurrency=2, max_calls_per_min=2, rate_limit_period=0.2)
    gone = await keeper.open(KEY, nums)
    taken = await keeper.places(gone.session, want=2, retries=0)
    tokens = await keeper.tokens(gone.session, want=2)
    assert len(taken.places) == 2 and tokens.tokens == 2
    alive = await keeper.open(KEY, nums)
    # the silent client holds the whole cap and every token: nothing for another one yet
    assert (await keeper.places(alive.session, 1, 0, poll_s=0.1)).places == ()
    started = time.monotonic()
    got = await keeper.places(alive.session, 1, 0, poll_s=1.5)
    assert len(got.places) == 1 and time.monotonic() - started < 1.5
    # its tokens count as attempts that ended when it was closed: free one period later
    assert (await keeper.tokens(alive.session, 2, poll_s=1.0)).tokens == 2
    assert (await keeper.heartbeat(gone.session)).known is False
    await keeper.stop()


async def test_every_client_must_bring_the_numbers_the_keeper_holds():
    keeper = GrantKeeper()
    await keeper.open(KEY, numbers(max_calls_per_min=60))
    with pytest.raises(ConfigurationError, match="same max_concurrency"):
        await keeper.open(KEY, numbers(max_calls_per_min=120))
    await keeper.stop()


async def test_a_lost_keeper_stops_waiting_calls_and_its_replacement_waits_before_granting():
    lease, period = 0.4, 0.6
    transport = LocalKeeper(lease_s=lease)
    c = client(transport, numbers(max_calls_per_min=1, rate_limit_period=period), lease_s=lease)
    assert c.rate is not None
    await c.rate.acquire()  # the one token, held by a call in flight
    asked = transport.requests.get("tokens", 0)
    waiting = asyncio.ensure_future(c.rate.acquire())
    await transport.until(lambda: transport.requests.get("tokens", 0) > asked)  # at the keeper
    transport.die()
    with pytest.raises(LimitsUnavailableError, match="died"):
        await asyncio.wait_for(waiting, 5)
    reports = transport.answered.get("report", 0)
    c.rate.release()  # the call in flight ends: its release goes nowhere, and is logged
    await transport.until(lambda: transport.answered.get("report", 0) > reports)
    started = time.monotonic()
    await asyncio.wait_for(c.rate.acquire(), 10)  # a new keeper, after its quiet time
    assert time.monotonic() - started >= max(lease, period) - 0.1
    assert transport.keeper.replaces_lost
    c.rate.release()
    await c.idle()
    await transport.stop()


@pytest.mark.slow
async def test_a_slow_keeper_fails_the_waiting_calls_and_late_grants_are_given_back(monkeypatch):
    monkeypatch.setattr(cluster_module, "POLL_S", 0.05)
    transport = LocalKeeper()
    c = client(transport, numbers(max_concurrency=4), timeout_s=0.2)
    permit = await c.level.acquire()  # opens the session while the keeper is quick
    c.level.release(permit, None)
    transport.delay = 0.6
    started = time.monotonic()
    with pytest.raises(LimitsUnavailableError, match="did not answer within"):
        await c.level.acquire()
    assert time.monotonic() - started < 0.5
    # the late grant arrives, and is given back: the second report (after the first permit's)
    await transport.until(lambda: transport.answered.get("report", 0) >= 2)
    snapshot = (await transport.keeper.snapshot())[KEY]
    assert snapshot["max_in_flight"] == 1 and snapshot["in_flight"] == 0
    transport.delay = 0.0
    await c.idle()
    await transport.stop()


async def test_two_generators_with_cluster_limits_share_the_cap_and_the_level(monkeypatch):
    """The whole path: two generators (two processes, each with its own lanes) whose settings
    name one ClusterLimits send their calls through one keeper."""
    transport = LocalKeeper()
    monkeypatch.setattr(
        ClusterLimits,
        "client",
        lambda self, key, settings: ClusterClient(self, key, LimitNumbers.of(settings), transport),
    )
    cap = 4
    recorder = Recorder()  # the provider: both generators' calls are counted together
    recorder.add_fault("refused", http_error(429))
    settings = GenerationSettings(
        max_concurrency=cap,
        use_n_param=False,
        retry=no_wait(),
        cluster_limits=ClusterLimits(name="test"),
    )
    generators = [
        ResponseGenerator(ScriptedChatModel(latency=0.05, recorder=recorder), settings)
        for _ in range(2)
    ]
    prompts = [
        [f"first {i}" for i in range(6)] + ["refused once"],
        [f"second {i}" for i in range(6)],
    ]
    results = await asyncio.wait_for(
        asyncio.gather(
            *(
                g.generate(p, num_responses=2, show_progress_bars=False)
                for g, p in zip(generators, prompts, strict=True)
            )
        ),
        30,
    )
    for result, asked in zip(results, prompts, strict=True):
        assert [r is not None and p in r for r, p in zip(result.responses, asked, strict=True)] == [
            True
        ] * len(asked)
    assert len(recorder.calls) == 3 * 13 + 1  # one call refused, and tried again
    # one process's cap would let 2 * cap calls in flight
    assert 2 <= recorder.max_in_flight <= cap
    snapshot = (await transport.keeper.snapshot())[KEY_OF(generators[0])]
    assert snapshot["cuts"] == 1 and snapshot["in_flight"] == 0 and snapshot["sessions"] == 0
    await transport.stop()


def KEY_OF(generator: ResponseGenerator) -> Any:  # noqa: N802 - reads as a constant
    from uqlm_bert.generation._clients import provider_key

    return provider_key(generator.llm)


def test_cluster_limits_need_a_running_ray():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray session is open in this process")
    from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel

    with pytest.raises(ConfigurationError, match="needs a running Ray"):
        ClusterLimits().snapshot()
    settings = GenerationSettings(cluster_limits=ClusterLimits())
    generator = ResponseGenerator(ParrotFakeChatModel(), settings)
    with pytest.raises(ConfigurationError, match="needs a running Ray"):
        asyncio.run(generator.generate(["a"], num_responses=1, show_progress_bars=False))
    assert not ray.is_initialized()  # nothing started one behind the user's back


def test_cluster_limits_are_checked_and_travel_in_the_settings():
    with pytest.raises(ConfigurationError, match="cluster_limits must be a ClusterLimits"):
        GenerationSettings(cluster_limits="my-limits")
    with pytest.raises(ConfigurationError, match="timeout_s must be a number > 0"):
        ClusterLimits(timeout_s=-1)
    limits = ClusterLimits(name="app", namespace="serve")
    settings = GenerationSettings(max_calls_per_min=60, cluster_limits=limits)
    assert settings.replace(max_concurrency=8).cluster_limits is limits
    assert pickle.loads(pickle.dumps(settings)) == settings  # as it travels to a replica
    assert settings.describe()["cluster_limits"] == {
        "name": "app",
        "namespace": "serve",
        "lease_s": 30.0,
        "timeout_s": 30.0,
    }
    assert GenerationSettings().describe()["cluster_limits"] is None


class _SlowToDie:
    """A stand-in for ``ray`` whose killed actor keeps its name for ``frees_after`` lookups, as
    Ray's asynchronous kill does for a moment."""

    def __init__(self, frees_after: int) -> None:
        self.lookups, self.killed, self.frees_after = 0, False, frees_after

    def get_actor(self, name: str, namespace: str | None = None) -> object:
        if self.killed:
            self.lookups += 1
            if self.lookups > self.frees_after:
                raise ValueError(f"Failed to look up actor with name {name!r}")
        return object()

    def kill(self, actor: object, no_restart: bool = False) -> None:
        assert no_restart
        self.killed = True

    def get_runtime_context(self) -> Any:
        raise AssertionError("the spec names its namespace")


def test_stop_returns_once_the_killed_keeper_has_given_up_its_name(monkeypatch):
    # a client started right after stop() would otherwise reach the dying keeper by name
    ray = _SlowToDie(frees_after=3)
    monkeypatch.setattr(cluster_module, "_ray", lambda: ray)
    assert ClusterLimits(namespace="ns").stop()
    assert ray.lookups == 4  # looked up until the name was free, and no longer

    stuck = _SlowToDie(frees_after=10**9)
    monkeypatch.setattr(cluster_module, "_ray", lambda: stuck)
    started = time.monotonic()
    with pytest.raises(LimitsUnavailableError, match=r"still holds its name after 0.2 s"):
        ClusterLimits(namespace="ns", timeout_s=0.2).stop()
    assert 0.2 <= time.monotonic() - started < 0.2 + GUARD_S
