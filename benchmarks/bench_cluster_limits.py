"""What a grant of the cluster's limits costs: a place in flight and a rate-limit token from the
keeper actor (``GenerationSettings(cluster_limits=...)``), against the same grants in process.

    python -m benchmarks.bench_cluster_limits [--grants 500] [--waiting 50]

On a local Ray (127.0.0.1), one client in this process. One at a time: a call waits for its
grant, takes it and gives it back (a message sent without waiting), ``--grants`` times: the round
trip a call adds when it waits alone. N waiting at once: N calls ask together, and one request
brings every grant the limits allow: the time until the last call has its grant, and the
keeper's requests it took (20 times). In process: ``AdaptiveConcurrency`` and ``RateLimiter``
(a lane without ``cluster_limits``). Writes ``cluster_limits.md``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from benchmarks import harness
from uqlm_bert.distributed._session import start_local_ray
from uqlm_bert.generation._cluster_limits import ClusterLimits
from uqlm_bert.generation._limiters import AdaptiveConcurrency, RateLimiter
from uqlm_bert.generation._settings import GenerationSettings


def quantiles(seconds: list[float], us: bool = False) -> list[str]:
    """The median and the 90th percentile (its rank rounded down), in ms (or us)."""
    xs = sorted(s * (1e6 if us else 1e3) for s in seconds)
    median, p90 = harness.median(xs), xs[int(0.9 * (len(xs) - 1))]
    return [f"{x:.1f} us" if us else f"{x:.2f}" for x in (median, p90)]


async def timed(take, give, times: int, pause: float = 0.0) -> list[float]:
    """The seconds of each of ``times`` awaits of ``take()``, each given back by ``give``."""
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        held = await take()
        seconds.append(time.perf_counter() - started)
        give(held)
        await asyncio.sleep(pause)  # the release goes out before the next ask, as between calls
    return seconds


async def measure(grants: int, waiting: int) -> list[list[str]]:
    spec = ClusterLimits(name="bench-cluster-limits", namespace="bench")
    limits = dict(max_calls_per_min=10**9, rate_limit_period=1.0, max_concurrency=10**6)
    client = spec.client(("bench",), GenerationSettings(**limits, cluster_limits=spec))
    level, rate, keeper, requests = client.level, client.rate, client._keeper, []
    place = (level.acquire, lambda p: level.release(p, 0.01))
    token = (rate.acquire, lambda _: rate.release())
    (first,) = await timed(level.acquire, lambda p: level.release(p, None), 1)  # keeper starts
    rows = [["first grant (keeper started, session opened)", f"{first * 1e3:.0f}", ""]]
    for name, (take, give) in (("a place", place), ("a token", token)):
        rows.append([f"{name}, one at a time", *quantiles(await timed(take, give, grants))])
    submit = keeper.submit  # counting the keeper's requests for places
    keeper.submit = lambda method, *a: requests.append(method == "places") or submit(method, *a)
    together = lambda: asyncio.gather(*(level.acquire() for _ in range(waiting)))  # noqa: E731
    times = await timed(together, lambda held: [place[1](p) for p in held], 20, 0.01)
    rows.append([f"{waiting} places waiting at once ({sum(requests) / 20:.1f} requests)",
                 *quantiles(times)])  # fmt: skip
    await client.idle()
    spec.stop()
    cap, limiter = AdaptiveConcurrency(None), RateLimiter(10**9, 1.0)
    for name, (take, give) in (
        ("in process: a place", (cap.acquire, lambda p: cap.release(p, 0.01))),
        ("in process: a token", (limiter.acquire, lambda _: limiter.release())),
    ):
        rows.append([name, *quantiles(await timed(take, give, grants), us=True)])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "out")
    ap.add_argument("--grants", type=int, default=500, help="grants one at a time (500)")
    ap.add_argument("--waiting", type=int, default=50, help="calls waiting at once (50)")
    args = ap.parse_args(argv)
    ray = start_local_ray(num_cpus=2, namespace="bench")
    try:
        rows = asyncio.run(measure(args.grants, args.waiting))
    finally:
        ray.shutdown()
    lines = ["## The cluster's limits: what a grant costs (`bench_cluster_limits`)", "",
             f"{harness.machine_summary()}; Ray {ray.__version__}, keeper and client on one node.",
             "", *harness.md_table(["grant", "median ms", "p90 ms"], rows)]  # fmt: skip
    harness.write_report(args.out, "cluster_limits.md", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
