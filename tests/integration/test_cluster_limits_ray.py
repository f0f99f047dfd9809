"""The cluster's limits through Ray: the keeper actor found by name from another process, and
what its death does, on a private local Ray (127.0.0.1, 2 CPUs) started and stopped here.

The keeper's rules themselves are tested without Ray in tests/generation/test_cluster_limits.py.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.helpers.waiting import until
from uqlm_bert import LimitsUnavailableError
from uqlm_bert.generation._cluster_limits import ClusterLimits, _RayKeeper
from uqlm_bert.generation._settings import GenerationSettings

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.ray

RAY_NAMESPACE = NAMESPACE = "uqlm-bert-cluster-limits-test"
KEY = ("http://provider", "chat", "model")


@ray.remote(num_cpus=1)
def hold_places(spec: ClusterLimits, settings: GenerationSettings, n: int, seconds: float) -> int:
    """In a Ray worker (another process): take ``n`` places, hold them, give them back."""

    async def run() -> int:
        client = spec.client(KEY, settings)
        held = [await client.level.acquire() for _ in range(n)]
        await asyncio.sleep(seconds)
        for permit in held:
            client.level.release(permit, 0.01)
        await client.idle()
        return len(held)

    return asyncio.run(run())


@pytest.mark.slow
def test_another_process_shares_the_cap_through_the_keeper_found_by_name(local_ray):
    spec = ClusterLimits(name="shared-cap", namespace=NAMESPACE)
    settings = GenerationSettings(max_concurrency=3, adaptive=False, cluster_limits=spec)

    async def here() -> tuple[int, float]:
        client = spec.client(KEY, settings)
        await until(lambda: spec_has_places_taken(spec, 2), 60)  # the other holds two of three
        first = await asyncio.wait_for(client.level.acquire(), 10)
        started = time.monotonic()
        second = await asyncio.wait_for(client.level.acquire(), 30)  # waits for the other
        waited = time.monotonic() - started
        for permit in (first, second):
            client.level.release(permit, 0.01)
        await client.idle()
        return 2, waited

    other = hold_places.remote(spec, settings, 2, 2.0)
    mine, waited = asyncio.run(here())
    assert ray.get(other, timeout=60) == 2 and mine == 2
    assert waited > 0.5  # the cap was full until the other process gave its places back
    (held,) = spec.snapshot().values()
    assert held["max_in_flight"] == 3 and held["in_flight"] == 0 and held["sessions"] == 0
    assert spec.stop() and not spec.stop()


def spec_has_places_taken(spec: ClusterLimits, n: int) -> bool:
    try:
        snapshot = spec.snapshot()
    except LimitsUnavailableError:  # not started yet
        return False
    return any(s["in_flight"] >= n for s in snapshot.values())


@pytest.mark.slow
def test_a_killed_keeper_fails_the_waiting_calls_and_its_replacement_waits(local_ray):
    lease, period = 2.0, 3.0
    spec = ClusterLimits(name="killed", namespace=NAMESPACE, lease_s=lease, timeout_s=10)
    settings = GenerationSettings(
        max_calls_per_min=1, rate_limit_period=period, max_concurrency=4, cluster_limits=spec
    )

    async def run(newcomer: bool) -> tuple[float, float]:
        client = spec.client(KEY, settings)
        assert client.rate is not None
        await client.rate.acquire()  # the one token, held by a call in flight
        waiting = asyncio.ensure_future(client.rate.acquire())
        # the keeper is another process, and says nothing of a request it holds: give the
        # request a moment to get there, so that the death is seen by a call waiting on it
        await asyncio.sleep(0.2)
        killed = time.monotonic()
        ray.kill(ray.get_actor(spec.name, namespace=NAMESPACE))  # it dies: not a stop
        with pytest.raises(LimitsUnavailableError, match="died"):
            await asyncio.wait_for(waiting, 10)
        seen = time.monotonic() - killed
        client.rate.release()
        if newcomer:  # a process that never saw the keeper die, a new replica say
            await client.idle()
            client = spec.client(KEY, settings)
            assert client.rate is not None
        started = time.monotonic()
        await asyncio.wait_for(client.rate.acquire(), 30)  # from a replacement keeper
        quiet = time.monotonic() - started
        client.rate.release()
        await client.idle()
        return seen, quiet

    for newcomer in (False, True):
        seen, quiet = asyncio.run(run(newcomer))
        assert seen < 5.0  # the death is seen when it happens, not at a timeout
        # the replacement grants nothing before the lost keeper's grants have aged out
        assert quiet >= max(lease, period) - 0.5, (newcomer, quiet)
    # a keeper stopped on purpose leaves no record: the next one grants at once
    assert spec.stop()

    async def after_stop() -> float:
        # the next keeper starts as a client's first call starts it (a new process: slow on a
        # busy machine, and not what is timed); a replacement would then grant nothing for
        # max(lease, period) from its start, a keeper after a stop grants at once
        await asyncio.to_thread(_RayKeeper(spec)._connect, False)
        spec.snapshot()  # answers once the keeper runs
        client = spec.client(KEY, settings)
        started = time.monotonic()
        await asyncio.wait_for(client.rate.acquire(), 30)
        client.rate.release()
        await client.idle()
        return time.monotonic() - started

    assert asyncio.run(after_stop()) < lease / 2
    assert spec.stop()
