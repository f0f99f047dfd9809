"""Scoring the main job on Ray: a pool of actors that hold a ``BlackBoxUQ``'s scorers.

``BlackBoxUQ(llm, scoring=RayScoring(...))`` (or ``scoring="ray"``) keeps generation in the
calling process, under its one set of limits and its checkpoint, and scores on a pool of Ray
actors. Each prompt joins the object's scoring queue as soon as its samples are in, and the queue
(:mod:`uqlm_bert._blackbox._queue`) sends what has queued up to the pool in batches while
generation goes on, ``batches_per_worker`` batches per actor at once, so that an actor finds its
next batch waiting when it finishes one.

Each actor builds the scorers once, from the object's :class:`~uqlm_bert.scorers._registry.ScorerPlan`
(the one reading of its scorers and their settings; scorers registered in this process travel
as their :class:`~uqlm_bert.scorers._registry.ScorerSpec`, :class:`~uqlm_bert.scorers.Scorer` objects as
they are), and runs on each batch the scoring step one process runs: a row's scores are those of
one process (a row is scored against its own samples only).

When an actor dies (killed, its node lost, out of memory), every batch it held is sent again, to
another actor, and a new actor takes its place: no row is lost. A batch whose actor died
:attr:`ScorerPool.MAX_ATTEMPTS` times (one that kills every actor it reaches, say) fails the
calls whose rows it holds with :class:`~uqlm_bert.ScoringWorkerError`. An exception
raised by the scorers themselves is not retried: it reaches the call whose rows raised it, as in
one process.

Example:
    >>> from uqlm_bert import BlackBoxUQ
    >>> from uqlm_bert.distributed import RayScoring
    >>> uq = BlackBoxUQ(llm, scoring=RayScoring(num_workers=4))  # doctest: +SKIP
    >>> result = uq.generate_and_score_sync(prompts, num_responses=5)  # doctest: +SKIP
    >>> uq.close()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import ConfigurationError, ScoringWorkerError
from uqlm_bert.distributed._dataset import PoolSettings, WorkerPlan
from uqlm_bert.distributed._session import HeldSession
from uqlm_bert.scorers._base import Scorer
from uqlm_bert.scorers._registry import ScorerPlan

__all__ = ["RayScoring", "ScorerPool", "ScoringWorker"]

logger = logging.getLogger("uqlm_bert")


@dataclasses.dataclass(frozen=True)
class RayScoring(PoolSettings):
    """Scoring on a pool of Ray actors: the cluster, and the pool (:class:`PoolSettings`).

    Attributes:
        num_workers: actors in the pool; None: one per GPU (or per ``num_gpus_per_worker``) on
            a cluster with GPUs, else one per ``num_cpus_per_worker`` CPUs, less one CPU left to
            the calling process's generation.
        batch_size: at most this many prompts in one batch sent to an actor (and at most
            ``BlackBoxUQ``'s ``score_batch_size``).
        num_gpus_per_worker: GPUs per actor; None: 1 on a cluster with GPUs, else 0.
        num_cpus_per_worker: CPUs per actor, also its torch thread count; None: 1.
        address: the cluster: ``"auto"``, ``"ray://host:10001"``, ``"host:6379"``. None: the
            one ``RAY_ADDRESS`` names, else a private local Ray on 127.0.0.1 (see
            ``start_local_ray``), shut down by
            ``BlackBoxUQ.close()``. A Ray already initialized in the process is used as it is.
        batches_per_worker: batches sent to each actor at once: one being scored and the
            rest waiting, so that the actor never waits for its next batch.

    Example:
        >>> RayScoring(num_workers=2).plan({"CPU": 8.0}).num_workers
        2
        >>> RayScoring(batches_per_worker=0)
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: batches_per_worker must be an int >= 1, got 0
    """

    address: str | None = None
    batches_per_worker: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("batches_per_worker", self.batches_per_worker, 1)
        if self.address is not None and not isinstance(self.address, str):
            raise ConfigurationError(
                f"address must be a string such as 'auto' or 'ray://host:10001', got "
                f"{type(self.address).__name__}"
            )

    @classmethod
    def of(cls, scoring: Any) -> RayScoring | None:
        """What ``BlackBoxUQ``'s ``scoring`` names: None for ``"local"`` (this process),
        :class:`RayScoring` defaults for ``"ray"``, or the object given.

        Raises:
            ConfigurationError: anything else.

        Example:
            >>> RayScoring.of("ray") == RayScoring(), RayScoring.of("local")
            (True, None)
        """
        if isinstance(scoring, RayScoring):
            return scoring
        if isinstance(scoring, str) and scoring in ("local", "ray"):
            return cls() if scoring == "ray" else None
        raise ConfigurationError(
            f"scoring must be 'local', 'ray' or a RayScoring(...), got {scoring!r}"
        )


class ScoringWorker:
    """One actor's work: the scorers, built once, and the scoring step run on each batch.

    Args:
        scorers: what to build the scorers from.
        step: the scoring step, called as ``step(scorers, *args)`` (``BlackBoxUQ``'s is
            :func:`~uqlm_bert._blackbox._pipeline.score_rows`).
        num_threads: torch threads for this process (None leaves torch's default).

    A failure to build the scorers (a model that cannot be loaded, say) is raised by every
    :meth:`score` call, as the error it is, instead of killing the actor: Ray would report it as
    the actor's death, which the pool answers by starting another actor.

    Example:
        >>> from uqlm_bert._blackbox._pipeline import score_rows
        >>> from uqlm_bert._inputs import ScoringInputs
        >>> from uqlm_bert.scorers._registry import ScorerPlan
        >>> worker = ScoringWorker(ScorerPlan.of(["exact_match"]), score_rows)
        >>> worker.score(["exact_match"], ScoringInputs(["a"], [["a", "b"]]), False).scores
        {'exact_match': array([0.5])}
    """

    def __init__(
        self, scorers: ScorerPlan, step: Callable[..., Any], num_threads: int | None = None
    ) -> None:
        self._step = step
        self._error: Exception | None = None
        self._scorers: dict[str, Scorer] = {}
        try:
            if num_threads is not None:
                import torch

                torch.set_num_threads(num_threads)
            self._scorers = {scorer.name: scorer for scorer in scorers.build()}
        except Exception as exc:  # noqa: BLE001 - raised by each call instead (see above)
            self._error = exc

    def score(self, names: Sequence[str], *args: Any) -> Any:
        """Run the step with the scorers ``names`` on ``args``."""
        if self._error is not None:
            raise self._error
        return self._step([self._scorers[name] for name in names], *args)


@dataclasses.dataclass(eq=False)
class _Actor:
    """An actor of the pool, and the batches sent to it and not yet back."""

    handle: Any
    in_flight: int = 0


class ScorerPool:
    """The actors of a :class:`RayScoring` that score with the same scorers, started on first
    use and stopped by :meth:`close`.

    Args:
        settings: the cluster and the pool.
        scorers: what each actor builds its scorers from.
        step: the scoring step the actors run (see :class:`ScoringWorker`).

    Attributes:
        retried: batches sent again because the actor that held them died.
        replaced: actors started in place of one that died.
        peak_in_flight: the most batches sent to the actors and not yet back at one time.

    Example:
        >>> from uqlm_bert._blackbox._pipeline import score_rows
        >>> from uqlm_bert._inputs import ScoringInputs
        >>> from uqlm_bert.scorers._registry import ScorerPlan
        >>> recipe = ScorerPlan.of(["exact_match"])
        >>> pool = ScorerPool(RayScoring(num_workers=2), recipe, score_rows)
        >>> pool.start()  # doctest: +SKIP
        4
        >>> inputs = ScoringInputs(["a"], [["a", "b"]])
        >>> scored = await pool.run(["exact_match"], inputs, False)  # doctest: +SKIP
        >>> pool.close()
    """

    #: The most times a batch is sent to an actor; a batch whose actor died that many times
    #: fails its calls.
    MAX_ATTEMPTS = 3

    def __init__(self, settings: RayScoring, scorers: ScorerPlan, step: Callable[..., Any]) -> None:
        self.settings = settings
        self.retried = 0
        self.replaced = 0
        self.peak_in_flight = 0
        self._scorers = scorers
        self._step = step
        self._session = HeldSession(settings.address)
        self._lock = threading.Lock()
        self._actors: list[_Actor] = []
        self._plan: WorkerPlan | None = None
        self._make: Any = None

    @property
    def plan(self) -> WorkerPlan | None:
        """The actors and what each asks for, once started."""
        return self._plan

    @property
    def actors(self) -> list[Any]:
        """The handles of the actors now in the pool."""
        with self._lock:
            return [actor.handle for actor in self._actors]

    def in_flight(self) -> list[int]:
        """The batches sent to each actor and not yet back."""
        with self._lock:
            return [actor.in_flight for actor in self._actors]

    def start(self) -> int:
        """Open the Ray session and start the actors, if not done yet: the models load in the
        actors in the background. Returns how many batches the pool takes at once.

        Raises:
            ConfigurationError: Ray is not installed.
        """
        with self._lock:
            if self._plan is None:
                ray = self._session.open()
                plan = self.settings.plan(ray.cluster_resources())
                self._make = ray.remote(
                    num_cpus=plan.num_cpus, num_gpus=plan.num_gpus, max_restarts=0
                )(ScoringWorker)
                self._scorers = self._scorers.on_device(plan.device)
                self._actors = [_Actor(self._new_actor(plan)) for _ in range(plan.num_workers)]
                self._plan = plan
                logger.info(
                    "scoring on %d Ray actor(s), %g CPU and %g GPU each, %d batch(es) at once each",
                    plan.num_workers,
                    plan.num_cpus,
                    plan.num_gpus,
                    self.settings.batches_per_worker,
                )
            return self._plan.num_workers * self.settings.batches_per_worker

    async def run(self, names: Sequence[str], *args: Any) -> Any:
        """Run the step on the least busy actor, with its scorers ``names`` and ``args``; when
        the actor dies, again on another (:attr:`MAX_ATTEMPTS` times at most).

        Raises:
            ScoringWorkerError: the batch's actor died :attr:`MAX_ATTEMPTS` times.
            Exception: what the step raised, as it was raised in the actor.
        """
        import ray.exceptions

        lost = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)
        attempt = 0
        while True:
            attempt += 1
            actor = self._take()
            ref = actor.handle.score.remote(list(names), *args)
            try:
                return await ref
            except asyncio.CancelledError:
                _cancel(ray, ref)  # a batch no call waits for any more leaves the actor's queue
                raise
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause
                raise (cause if isinstance(cause, Exception) else exc) from exc
            except lost as exc:
                self._replace(actor)
                if attempt == self.MAX_ATTEMPTS:
                    raise ScoringWorkerError(
                        f"a batch of prompts was sent to {attempt} Ray actors and each one died "
                        f"before scoring it (last: {type(exc).__name__}); if the actors ran out "
                        "of memory, lower the batch size (RayScoring(batch_size=...)), the "
                        "engine's batch_size or max_length, or give each actor more memory"
                    ) from exc
                with self._lock:
                    self.retried += 1
                logger.warning(
                    "a Ray scoring actor died (%s); its batch is sent to another actor",
                    type(exc).__name__,
                )
            finally:
                with self._lock:
                    actor.in_flight -= 1

    def close(self) -> None:
        """Stop the actors, and the Ray session if the pool opened it (a later :meth:`start`
        starts them again)."""
        with self._lock:
            actors, self._actors, self._plan = self._actors, [], None
        if actors:
            import ray

            for actor in actors:
                _kill(ray, actor.handle)
        self._session.close()

    # -- internals ------------------------------------------------------------------------------

    def _new_actor(self, plan: WorkerPlan) -> Any:
        return self._make.remote(self._scorers, self._step, max(1, int(plan.num_cpus)))

    def _take(self) -> _Actor:
        """The actor with the fewest batches in flight, now counting one more."""
        with self._lock:
            if self._plan is None:
                raise ScoringWorkerError("the Ray scoring pool was closed while a call was scoring")
            actor = min(self._actors, key=lambda a: a.in_flight)
            actor.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, sum(a.in_flight for a in self._actors))
            return actor

    def _replace(self, dead: _Actor) -> None:
        """Put a new actor in the place of ``dead`` (once, whichever of its batches saw it die)."""
        with self._lock:
            if self._plan is None or dead not in self._actors:
                return
            self._actors[self._actors.index(dead)] = _Actor(self._new_actor(self._plan))
            self.replaced += 1
        import ray

        _kill(ray, dead.handle)


def _cancel(ray: Any, ref: Any) -> None:
    """Cancel a batch sent to an actor, if it is still waiting there (one being scored runs to
    its end, its result unread)."""
    try:
        ray.cancel(ref)
    except Exception as exc:  # noqa: BLE001 - nothing left to cancel
        logger.debug("cancelling a Ray scoring batch: %s", exc)


def _kill(ray: Any, handle: Any) -> None:
    """Stop an actor; one that is gone already, or a session that is shut down, is fine."""
    try:
        ray.kill(handle, no_restart=True)
    except Exception as exc:  # noqa: BLE001 - nothing left to stop
        logger.debug("stopping a Ray actor: %s", exc)
