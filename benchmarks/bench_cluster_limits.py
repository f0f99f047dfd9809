"""What a grant of the cluster's limits costs: a place in flight and a rate-limit token from the
keeper actor (``GenerationSettings(cluster_limits=...)``), against the same grants in process.

On a local Ray (127.0.0.1), one client in this process:

- ``one at a time``: a call waits for its grant, takes it and gives it back (the release is a
  message sent without waiting), ``--grants`` times in a row: the round trip a call adds when it
  is the only one waiting;
- ``N waiting at once``: N calls ask together; one request (the client asks for every call
  waiting) brings all the grants the limits allow: the time until the last call has its grant,
  and the keeper's requests it took.

The in-process line is ``AdaptiveConcurrency.acquire`` and ``RateLimiter.acquire`` (what a lane
uses without ``cluster_limits``).

Usage::

    python -m benchmarks.bench_cluster_limits                 # 500 grants, 50 waiting at once
    python -m benchmarks.bench_cluster_limits --grants 2000 --waiting 200
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from benchmarks.harness import machine_summary  # noqa: E402
from uqlm_bert.distributed import start_local_ray  # noqa: E402
from uqlm_bert.generation.cluster import ClusterLimits  # noqa: E402
from uqlm_bert.generation.limits import AdaptiveConcurrency, RateLimiter  # noqa: E402
from uqlm_bert.generation.settings import GenerationSettings  # noqa: E402


def quantiles(seconds: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1e3 for s in seconds)
    return statistics.median(ms), ms[int(0.9 * (len(ms) - 1))]


async def one_at_a_time(acquire, release, grants: int) -> list[float]:
    times = []
    for _ in range(grants):
        started = time.perf_counter()
        held = await acquire()
        times.append(time.perf_counter() - started)
        release(held)
        await asyncio.sleep(0)  # the release goes out before the next request, as between calls
    return times


async def measure(grants: int, waiting: int) -> list[tuple[str, str, str]]:
    spec = ClusterLimits(name="bench-cluster-limits", namespace="bench")
    settings = GenerationSettings(
        max_calls_per_min=10**9, rate_limit_period=1.0, max_concurrency=10**6, cluster_limits=spec
    )
    client = spec.client(("bench",), settings)
    level, rate = client.level, client.rate
    assert rate is not None
    rows = []
    # the session opens (and the keeper starts) on the first request
    started = time.perf_counter()
    level.release(await level.acquire(), None)
    rows.append(
        (
            "first grant (keeper started, session opened)",
            f"{(time.perf_counter() - started) * 1e3:.0f}",
            "",
        )
    )

    async def take_token() -> None:
        await rate.acquire()

    for name, acquire, release in (
        ("a place, one at a time", level.acquire, lambda p: level.release(p, 0.01)),
        ("a token, one at a time", take_token, lambda _: rate.release()),
    ):
        median, p90 = quantiles(await one_at_a_time(acquire, release, grants))
        rows.append((name, f"{median:.2f}", f"{p90:.2f}"))
    before = client._keeper  # noqa: SLF001 - a benchmark counts the requests
    requests = 0
    submit = before.submit

    def counted(method, *args):
        nonlocal requests
        requests += method == "places"
        return submit(method, *args)

    before.submit = counted
    times = []
    for _ in range(20):
        started = time.perf_counter()
        permits = await asyncio.gather(*(level.acquire() for _ in range(waiting)))
        times.append(time.perf_counter() - started)
        for p in permits:
            level.release(p, 0.01)
        await asyncio.sleep(0.01)
    median, p90 = quantiles(times)
    rows.append(
        (
            f"{waiting} places waiting at once ({requests / 20:.1f} requests)",
            f"{median:.2f}",
            f"{p90:.2f}",
        )
    )
    await client.idle()
    spec.stop()
    # in process
    cap, limiter = AdaptiveConcurrency(None), RateLimiter(10**9, 1.0)

    async def local_token() -> None:
        await limiter.acquire()

    for name, acquire, release in (
        ("in process: a place", cap.acquire, lambda p: cap.release(p, 0.01)),
        ("in process: a token", local_token, lambda _: limiter.release()),
    ):
        median, p90 = quantiles(await one_at_a_time(acquire, release, grants))
        rows.append((name, f"{median * 1e3:.1f} us", f"{p90 * 1e3:.1f} us"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grants", type=int, default=500, help="grants one at a time (500)")
    parser.add_argument("--waiting", type=int, default=50, help="calls waiting at once (50)")
    args = parser.parse_args(argv)
    ray = start_local_ray(num_cpus=2, namespace="bench")
    try:
        rows = asyncio.run(measure(args.grants, args.waiting))
    finally:
        ray.shutdown()
    print("## The cluster's limits: what a grant costs (`bench_cluster_limits.py`)\n")
    print(f"Machine: {machine_summary()}; Ray {ray.__version__}, keeper and client on one node.\n")
    print("| grant | median ms | p90 ms |")
    print("|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
