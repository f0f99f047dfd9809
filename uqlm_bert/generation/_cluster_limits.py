"""Limits held for a whole cluster: ``max_calls_per_min``, ``max_concurrency`` and the learned
level shared by every process that names the same :class:`ClusterLimits`.

Within one process the limits of a ``BlackBoxUQ`` hold for every call in flight on it
(:mod:`uqlm_bert.generation._shared_limits`). An app that runs as several processes (the replicas of a
Ray Serve deployment, workers of one job) would otherwise send each process's limit: ``k``
replicas, ``k`` times ``max_calls_per_min``. With ``cluster_limits`` set in its
``GenerationSettings``, a process takes its limits from one Ray actor, a
:class:`~uqlm_bert.generation._cluster_keeper.GrantKeeper`, shared by every process that names it:

- at most ``max_calls_per_min`` calls, retries included, arrive at the provider in any window of
  ``rate_limit_period`` seconds, and at most ``max_concurrency`` are in flight, counted over
  every process as one process counts its own;
- the adaptive level is the keeper's: a 429 that one process sees lowers it for all of them,
  and what it learned stays with the keeper for the runs that follow.

**Why a settings field, and this object.** The limits belong to the provider and to the app,
not to one process: the numbers stay where they are set today (``GenerationSettings``), and
``cluster_limits`` only says who holds them. :class:`ClusterLimits` is a small frozen value (a
name, a Ray namespace and two durations): it pickles, compares and hashes like the rest of the
settings, so a Serve replica builds its ``BlackBoxUQ`` from the same settings object as any
other process, and the keeper is found by name (or started, the first time) from wherever the
settings travel. Nothing changes for a process whose settings do not name it: its lanes are the
in-process ones, as fast as before.

**What one call costs.** A place in flight and a rate-limit token are each one round trip to the
keeper (about a millisecond on one machine; ``docs/scaling.md`` has the figures), and giving them
back is a message sent without waiting. Grants are batched: a process asks for places (and
tokens) for all its calls waiting at once, with one request in flight at a time, and gets as many
as are free in one answer; what its calls give back in one turn of the event loop goes in one
message.

**When the keeper is slow or lost.** A call never goes out without a grant. A keeper that has
not answered a request within ``timeout_s`` seconds (beyond its own wait of at most
:data:`~uqlm_bert.generation._cluster_keeper.POLL_S` seconds), or that died, fails the calls waiting for a
grant with :class:`~uqlm_bert.LimitsUnavailableError`, which stops their runs; calls
already in flight finish. The next run in the process finds the keeper again, or starts a new
one if it died. A keeper started where one of its name ran before on the cluster (a record in
Ray's key-value store says so, whichever process starts it) replaces a lost one: it grants
nothing for its first ``max(lease_s, rate_limit_period)`` seconds, so that what the lost one
granted has ended and no window holds calls granted by both (``ClusterLimits.stop()``, for
a keeper no process uses, removes the record). Grants that a slow keeper gives late are given back. A
process that stays silent for ``lease_s`` seconds (it died, or its event loop stalled) loses its
session: the keeper takes back what it held and logs a warning, and the process opens a new
session when it next asks.

Example:
    >>> from uqlm_bert.generation._settings import GenerationSettings
    >>> limits = ClusterLimits(name="my-app-limits", namespace="serve")
    >>> settings = GenerationSettings(max_calls_per_min=600, max_concurrency=64,
    ...                               cluster_limits=limits)
    >>> settings.cluster_limits.name, settings.describe()["cluster_limits"]["lease_s"]
    ('my-app-limits', 30.0)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import asdict, dataclass
from typing import Any

from uqlm_bert._checks import check_number
from uqlm_bert._exceptions import ConfigurationError, LimitsUnavailableError
from uqlm_bert.generation._cluster_keeper import POLL_S, LimitNumbers, Opened, Reply, Standing

__all__ = ["ClusterClient", "ClusterLimits", "KeeperLost"]

logger = logging.getLogger("uqlm_bert")


@dataclass(frozen=True)
class ClusterLimits:
    """Who holds the limits for the whole cluster: the Ray actor named ``name``.

    Set it as ``GenerationSettings(cluster_limits=ClusterLimits(...))``; the numbers
    (``max_calls_per_min``, ``rate_limit_period``, ``max_concurrency``, ``adaptive``,
    ``initial_concurrency``) stay in the settings, and every process sharing the limits must
    give the same ones. The process needs a running Ray (a Serve replica, a Ray task or actor, or
    a driver after ``ray.init``).

    Args:
        name: the keeper actor's name; one keeper per name holds one set of limits per
            provider (endpoint and model).
        namespace: its Ray namespace; ``None``: the namespace of the process that uses it (Ray
            Serve runs replicas in ``"serve"``).
        lease_s: a process silent this long loses its grants (see the module's docstring); a
            keeper replacing a lost one waits this long (or a rate-limit period, the longer)
            before its first grant.
        timeout_s: how long a call waits for the keeper to answer before it fails with
            :class:`~uqlm_bert.LimitsUnavailableError`.

    Example:
        >>> ClusterLimits(lease_s=0)
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: lease_s must be a number > 0, got 0
    """

    name: str = "uqlm-bert-limits"
    namespace: str | None = None
    lease_s: float = 30.0
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"name must be a non-empty string, got {self.name!r}")
        if self.namespace is not None and (
            not isinstance(self.namespace, str) or not self.namespace
        ):
            raise ConfigurationError(
                f"namespace must be a non-empty string or None, got {self.namespace!r}"
            )
        check_number("lease_s", self.lease_s, strict=True)
        check_number("timeout_s", self.timeout_s, strict=True)

    def describe(self) -> dict[str, Any]:
        """As plain data, for result metadata."""
        return asdict(self)

    def client(self, key: Hashable, settings: Any) -> ClusterClient:
        """The grants of one lane (an owner's calls to provider ``key`` on one event loop)
        under ``settings``' numbers, from this keeper."""
        return ClusterClient(self, key, LimitNumbers.of(settings), _RayKeeper(self))

    def snapshot(self) -> dict[Any, dict[str, Any]]:
        """The keeper's figures per provider (calls in flight now and at most, the level, its
        drops, sessions, tokens free), read through Ray.

        Raises:
            LimitsUnavailableError: no keeper of this name runs.
        """
        ray = _ray()
        try:
            actor = ray.get_actor(self.name, namespace=self.namespace)
        except ValueError as exc:
            raise LimitsUnavailableError(f"no keeper named {self.name!r} runs: {exc}") from exc
        return ray.get(actor.snapshot.remote(), timeout=self.timeout_s)

    def stop(self) -> bool:
        """Stop the keeper, if it runs (``True`` if it did); the next use starts a new one,
        which grants at once. Stop it only while no process uses it: a new keeper knows nothing
        of the calls the old one granted (a keeper that died instead is replaced by one that
        waits before its first grant). It returns once the keeper is gone.

        Raises:
            LimitsUnavailableError: Ray still holds the keeper's name ``timeout_s`` after it
                was killed.
        """
        ray = _ray()
        try:
            actor = ray.get_actor(self.name, namespace=self.namespace)
        except ValueError:
            return False
        ray.kill(actor, no_restart=True)
        _Record(ray, self).delete()
        # Ray kills an actor asynchronously: until the name is free, a new client would still
        # reach the old keeper (and wait on its grants). Return once it is gone.
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            try:
                ray.get_actor(self.name, namespace=self.namespace)
            except ValueError:
                return True
            time.sleep(0.02)
        raise LimitsUnavailableError(
            f"the keeper {self.name!r} was killed but still holds its name after "
            f"{self.timeout_s:g} s (timeout_s); try again once Ray has released it"
        )


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is in the ray and serve extras
        raise ConfigurationError(
            'cluster_limits needs Ray: pip install "uqlm-bert[serve]" (or "uqlm-bert[ray]")'
        ) from exc
    if not ray.is_initialized():
        raise ConfigurationError(
            "cluster_limits needs a running Ray in this process: call ray.init(address=...) "
            "first, or use the settings inside a Ray task, actor or Serve replica"
        )
    return ray


class KeeperLost(Exception):
    """The keeper cannot be reached (``died``: it is gone, and a new one is needed)."""

    def __init__(self, message: str, died: bool) -> None:
        super().__init__(message)
        self.died = died


class _RayKeeper:
    """The keeper actor, reached through Ray from this process."""

    def __init__(self, spec: ClusterLimits) -> None:
        self.spec = spec
        self._handle: Any = None
        self._lost = False  # the last keeper died: the next one replaces it

    def submit(self, method: str, *args: Any) -> asyncio.Future[Any]:
        return asyncio.ensure_future(self._call(method, args))

    async def _call(self, method: str, args: tuple[Any, ...]) -> Any:
        from ray import exceptions as rex

        if self._handle is None:
            if method != "open":  # what a lost keeper's session did goes nowhere
                raise KeeperLost("the keeper of this session is gone", died=False)
            self._handle = await asyncio.to_thread(self._connect, self._lost)
            self._lost = False
        try:
            ref = getattr(self._handle, method).remote(*args)
            return await asyncio.wrap_future(ref.future())
        except rex.ActorDiedError as exc:
            self._handle, self._lost = None, True
            raise KeeperLost(f"the keeper died ({exc})", died=True) from exc
        except (rex.ActorUnavailableError, rex.RayActorError) as exc:
            raise KeeperLost(f"the keeper cannot be reached ({exc})", died=False) from exc
        except rex.RayTaskError as exc:
            if isinstance(exc.cause, ConfigurationError):
                raise ConfigurationError(str(exc.cause)) from None
            raise

    def _connect(self, replaces_lost: bool) -> Any:
        """The keeper of this name, started if none runs: as a replacement (it waits before its
        first grant) where this process saw the last one die, or where any keeper of this name
        ran on the cluster before (it died unseen; one stopped with ``ClusterLimits.stop()``
        leaves no record)."""
        ray = _ray()
        from uqlm_bert.generation._cluster_keeper import GrantKeeper

        spec = self.spec
        record = _Record(ray, spec)
        handle = (
            ray.remote(GrantKeeper)
            .options(
                name=spec.name,
                namespace=spec.namespace,
                lifetime="detached",
                get_if_exists=True,
                max_restarts=0,
                max_concurrency=1000,
                num_cpus=0,
            )
            .remote(lease_s=spec.lease_s, replaces_lost=replaces_lost or record.exists())
        )
        record.write()
        return handle


class _Record:
    """The cluster's record that a keeper of a name was started (in Ray's key-value store, which
    lives as long as the cluster): a keeper started where one ran before replaces a lost one."""

    NAMESPACE = "uqlm_bert_limits"

    def __init__(self, ray: Any, spec: ClusterLimits) -> None:
        namespace = spec.namespace or ray.get_runtime_context().namespace
        self.key = f"{namespace}/{spec.name}"

    def _kv(self) -> Any:
        try:
            from ray.experimental import internal_kv
        except ImportError:  # pragma: no cover - a Ray without it: no record kept
            return None
        return internal_kv if internal_kv._internal_kv_initialized() else None

    def exists(self) -> bool:
        kv = self._kv()
        return bool(kv and kv._internal_kv_exists(self.key, namespace=self.NAMESPACE))

    def write(self) -> None:
        kv = self._kv()
        if kv is not None:
            kv._internal_kv_put(self.key, b"started", namespace=self.NAMESPACE)

    def delete(self) -> None:
        kv = self._kv()
        if kv is not None:
            kv._internal_kv_del(self.key, namespace=self.NAMESPACE)


@dataclass
class _Granted:
    """A place in flight granted by the keeper, as the lane holds it."""

    session: int
    place: int
    refused: bool = False


class _Line:
    """The calls of one lane waiting for one kind of grant, served by one request at a time:
    each request asks for all the calls waiting then (calls trying again first)."""

    def __init__(
        self,
        ask: Callable[[int, int], Awaitable[list[Any]]],
        give_back: Callable[[Any], None],
    ) -> None:
        self._ask = ask
        self._give_back = give_back
        self._retrying: deque[asyncio.Future[Any]] = deque()
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._task: asyncio.Task[None] | None = None

    async def get(self, priority: bool = False) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        (self._retrying if priority else self._waiting).append(future)
        if self._task is None:
            self._task = asyncio.ensure_future(self._serve())
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None:
                self._give_back(future.result())  # granted while it was cancelled
            raise

    def _prune(self) -> None:
        for line in (self._retrying, self._waiting):
            while line and line[0].done():
                line.popleft()
            if any(f.done() for f in line):
                kept = [f for f in line if not f.done()]
                line.clear()
                line.extend(kept)

    async def _serve(self) -> None:
        try:
            while True:
                self._prune()
                retries, want = len(self._retrying), len(self._retrying) + len(self._waiting)
                if not want:
                    return
                granted = await self._ask(want, retries)
                self._prune()
                for grant in granted:
                    line = self._retrying or self._waiting
                    if line:
                        line.popleft().set_result(grant)
                    else:
                        self._give_back(grant)
        except asyncio.CancelledError:
            self._fail(LimitsUnavailableError("the request for grants was cancelled"))
            raise
        except BaseException as exc:
            self._fail(exc)
        finally:
            self._task = None

    def _fail(self, exc: BaseException) -> None:
        for line in (self._retrying, self._waiting):
            while line:
                future = line.popleft()
                if not future.done():
                    future.set_exception(exc)


class _Level:
    """The keeper's cap and level as a lane's provider state uses them (the face of
    :class:`~uqlm_bert.generation._limiters.AdaptiveConcurrency`): a place is one grant of both."""

    def __init__(self, client: ClusterClient) -> None:
        self._client = client

    @property
    def limit(self) -> float:
        """The level, as the keeper last said (``math.inf`` before it first did)."""
        limit = self._client.standing.limit
        return limit if limit == math.inf else max(1, int(limit))

    def learned(self) -> Any:
        return self._client.standing.learned

    async def acquire(self, priority: bool = False) -> _Granted:
        return await self._client.places.get(priority)

    def release(self, permit: _Granted, latency: float | None) -> None:
        self._client.post(permit.session, ("release", permit.place, latency))

    def congestion(self, permit: _Granted, kind: str = "rate_limit") -> None:
        if not permit.refused:
            permit.refused = True
            self._client.post(permit.session, ("congestion", permit.place, kind))


class _Rate:
    """The keeper's rate limit as a lane uses it (the face of
    :class:`~uqlm_bert.generation._limiters.RateLimiter`)."""

    def __init__(self, client: ClusterClient) -> None:
        self._client = client
        self._held: deque[int] = deque()  # the session of each token held

    async def acquire(self) -> None:
        self._held.append(await self._client.tokens.get())

    def release(self) -> None:
        self._client.post(self._held.popleft(), ("token",))


class ClusterClient:
    """One lane's grants from the keeper: its session, its lines of waiting calls, and what its
    calls give back.

    Args:
        spec: the keeper.
        key: the provider.
        numbers: the limit settings.
        keeper: how the keeper is reached: an object whose ``submit(method, *args)`` returns a
            future of the keeper's answer and fails with :class:`KeeperLost`.

    Attributes:
        level: the cap and the level, as the lane's provider state (``concurrency``).
        rate: the rate limit, as the lane's ``rate`` (None without ``max_calls_per_min``).
        standing: where the provider's level stood at the keeper's last answer.
    """

    def __init__(self, spec: ClusterLimits, key: Hashable, numbers: LimitNumbers, keeper: Any):
        self.spec = spec
        self.key = key
        self.numbers = numbers
        self._keeper = keeper
        self.standing = Standing()
        self._session: int | None = None
        self._lease_s = spec.lease_s
        self._opening = asyncio.Lock()
        self._heartbeat: asyncio.Task[None] | None = None
        self._outbox: list[tuple[int, tuple[Any, ...]]] = []
        self._flush_due = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.places = _Line(self._ask_places, self._give_back_place)
        self.tokens = _Line(self._ask_tokens, self._give_back_token)
        self.level = _Level(self)
        self.rate = _Rate(self) if numbers.max_calls_per_min is not None else None

    # -- asking ------------------------------------------------------------------------------

    async def _ask_places(self, want: int, retries: int) -> list[_Granted]:
        session = await self._open()
        reply = await self._request("places", session, want, retries)
        if self._read(session, reply):
            return [_Granted(session, place) for place in reply.places]
        return []

    async def _ask_tokens(self, want: int, retries: int) -> list[int]:
        session = await self._open()
        reply = await self._request("tokens", session, want)
        return [session] * reply.tokens if self._read(session, reply) else []

    def _read(self, session: int, reply: Reply) -> bool:
        """Take in an answer: ``False`` where the keeper no longer knows the session."""
        if not reply.known:
            self._lose_session(session)
            return False
        if reply.standing is not None:
            self.standing = reply.standing
        return True

    def _give_back_place(self, grant: _Granted) -> None:
        self.post(grant.session, ("release", grant.place, None))

    def _give_back_token(self, session: int) -> None:
        self.post(session, ("token",))

    async def _request(self, method: str, *args: Any) -> Any:
        """The keeper's answer, or :class:`LimitsUnavailableError` when it does not come in
        time or the keeper is lost; grants that come late are given back."""
        grants = method in ("places", "tokens")
        wait = self.spec.timeout_s + (POLL_S if grants else 0.0)
        future = self._keeper.submit(method, *args)
        late = functools.partial(self._late, args[0] if grants else None)
        try:
            done, _ = await asyncio.wait({future}, timeout=wait)
        except asyncio.CancelledError:
            future.add_done_callback(late)
            raise
        if not done:
            future.add_done_callback(late)
            raise self._unavailable(f"it did not answer within {wait:g} s")
        try:
            return future.result()
        except KeeperLost as exc:
            if exc.died:
                self._lose_session(self._session)
            raise self._unavailable(str(exc)) from exc

    def _unavailable(self, why: str) -> LimitsUnavailableError:
        where = self.spec.name + (
            f" (namespace {self.spec.namespace})" if self.spec.namespace else ""
        )
        return LimitsUnavailableError(
            f"the cluster's limits, held by the Ray actor {where}, cannot be used: {why}. The "
            "calls waiting for a grant stop rather than go past the limits; calls in flight "
            "finish. Check that the Ray cluster is up; the next run finds the keeper again, "
            "or starts a new one if it died (a new one grants nothing for its first "
            "max(lease_s, rate_limit_period) seconds)."
        )

    def _late(self, session: int | None, future: asyncio.Future[Any]) -> None:
        """An answer that came after its request was given up: give back what it granted
        (through ``session``, the one it was asked for)."""
        if future.cancelled() or future.exception() is not None:
            return
        answer = future.result()
        if isinstance(answer, Opened):
            self._spawn(self._keeper.submit("close", answer.session))
        elif isinstance(answer, Reply) and answer.known and session is not None:
            for place in answer.places:
                self._give_back_place(_Granted(session, place))
            for _ in range(answer.tokens):
                self._give_back_token(session)

    # -- the session -------------------------------------------------------------------------

    async def _open(self) -> int:
        async with self._opening:
            if self._session is None:
                opened: Opened = await self._request("open", self.key, self.numbers)
                self._session, self._lease_s = opened.session, opened.lease_s
                self.standing = opened.standing
                self._heartbeat = asyncio.ensure_future(self._beat(opened.session))
            return self._session

    def _lose_session(self, session: int | None) -> None:
        if session is not None and session == self._session:
            logger.warning(
                "the cluster's limits keeper %r closed this process's session (silent for "
                "longer than its lease, or the keeper was lost): its grants were taken back; "
                "a new session is opened",
                self.spec.name,
            )
            self._session = None
            if self._heartbeat is not None:
                self._heartbeat.cancel()

    async def _beat(self, session: int) -> None:
        """Keep the session open while it lasts."""
        while self._session == session:
            await asyncio.sleep(self._lease_s / 4)
            if self._session != session:
                return
            try:
                self._read(session, await self._request("heartbeat", session))
            except LimitsUnavailableError as exc:
                logger.warning("the cluster's limits keeper missed a heartbeat: %s", exc)

    async def idle(self) -> None:
        """The lane's last call is done: give back what is pending and close the session."""
        session, self._session = self._session, None
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        await self._flush()
        if session is not None:
            with contextlib.suppress(LimitsUnavailableError):
                await self._request("close", session)

    # -- giving back -------------------------------------------------------------------------

    def post(self, session: int, event: tuple[Any, ...]) -> None:
        """Tell the keeper what a call did; sent with the others of this turn of the loop."""
        self._outbox.append((session, event))
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(lambda: self._spawn(self._flush()))

    async def _flush(self) -> None:
        self._flush_due = False
        events, self._outbox = self._outbox, []
        by_session: dict[int, list[tuple[Any, ...]]] = {}
        for session, event in events:
            by_session.setdefault(session, []).append(event)
        for session, mine in by_session.items():
            try:
                self._read(session, await self._request("report", session, tuple(mine)))
            except LimitsUnavailableError as exc:
                logger.warning("%d releases could not be given back: %s", len(mine), exc)

    def _spawn(self, awaitable: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(awaitable)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
