"""Scoring a Ray Dataset: ``map_batches`` over a pool of actors that each load the model once.

Each actor holds a :class:`~uqlm_bert.distributed._batches.ScoreBatch`. On a cluster with GPUs
every actor asks for one GPU (or the fraction given) and runs the model on it; otherwise every
actor asks for one CPU (or the number given) and sets torch's thread count to match.

The output keeps the input's rows in the input's order, whatever the partitioning: the scored
dataset runs with Ray Data's ``preserve_order``, set on a copy of the dataset's context so the
caller's dataset is left as it was. Ray Data's actor pools restart an actor that dies and retry
the batch it was scoring, so a lost worker neither drops nor duplicates rows.

Example:
    >>> import ray  # doctest: +SKIP
    >>> from uqlm_bert.distributed import score_dataset
    >>> ds = ray.data.from_items([{"response": "4", "sampled_responses": ["4", "four"]}])  # doctest: +SKIP
    >>> scored = score_dataset(ds, num_workers=1)  # doctest: +SKIP
    >>> scored.to_pandas()[["response", "bert_score", "score_error"]]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from uqlm_bert._checks import check_int, check_number
from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore._settings import BERTScoreSettings
from uqlm_bert.distributed._batches import ScoreBatch
from uqlm_bert.scorers._registry import DEFAULT_SCORERS, ScorerPlan

if TYPE_CHECKING:
    import ray.data

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "PoolSettings",
    "WorkerPlan",
    "check_batch_invariance",
    "map_scorers",
    "plan_workers",
    "require_ray",
    "score_dataset",
]

logger = logging.getLogger("uqlm_bert")

#: Rows per batch handed to an actor (each row is one response and its samples).
DEFAULT_BATCH_SIZE = 64


def require_ray() -> ModuleType:
    """Import Ray (with Ray Data), or say how to install it.

    Raises:
        ConfigurationError: Ray or Ray Data is not installed.

    Example:
        >>> ray = require_ray()  # doctest: +SKIP
    """
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            "scoring on Ray needs Ray Data, which is not installed; "
            "install the extra: pip install 'uqlm-bert[ray]'"
        ) from exc
    return ray


@dataclasses.dataclass(frozen=True)
class WorkerPlan:
    """How many actors to start and what each one asks Ray for."""

    num_workers: int
    num_cpus: float
    num_gpus: float
    device: str | None  # "cuda" for GPU actors; None lets the engine choose (cpu, or mps)


@dataclasses.dataclass(frozen=True)
class PoolSettings:
    """The pool of Ray actors that scores: how many, and what each one asks for.

    Checked when made, so that a bad count fails before any work.

    Attributes:
        num_workers: actors to start; None: one per GPU (or per ``num_gpus_per_worker``) on a
            cluster with GPUs, else one per ``num_cpus_per_worker`` CPUs.
        batch_size: rows per batch given to an actor.
        num_gpus_per_worker: GPUs per actor (a fraction shares a GPU); None: 1 when the cluster
            has GPUs, else 0.
        num_cpus_per_worker: CPUs per actor (and torch threads in it); None: 1.

    Example:
        >>> PoolSettings(num_cpus_per_worker=2).plan({"CPU": 8.0})
        WorkerPlan(num_workers=3, num_cpus=2.0, num_gpus=0.0, device=None)
        >>> PoolSettings(num_workers=True)
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: num_workers must be an int >= 1 or None, got True
    """

    num_workers: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    num_gpus_per_worker: float | None = None
    num_cpus_per_worker: float | None = None

    def __post_init__(self) -> None:
        check_int("num_workers", self.num_workers, 1, none_ok=True)
        check_int("batch_size", self.batch_size, 1)
        check_number("num_gpus_per_worker", self.num_gpus_per_worker, none_ok=True)
        check_number("num_cpus_per_worker", self.num_cpus_per_worker, strict=True, none_ok=True)

    def plan(self, cluster_resources: Mapping[str, float], spare_cpu: bool = True) -> WorkerPlan:
        """Size the pool from the cluster's resources (``ray.cluster_resources()``).

        With ``spare_cpu``, a CPU pool sized by default leaves one CPU free, so that the tasks
        that read the input can run beside the actors.
        """
        cpus = float(cluster_resources.get("CPU", 0.0))
        gpus = float(cluster_resources.get("GPU", 0.0))
        per_cpu = 1.0 if self.num_cpus_per_worker is None else float(self.num_cpus_per_worker)
        if self.num_gpus_per_worker is None:
            per_gpu = 1.0 if gpus > 0 else 0.0
        else:
            per_gpu = float(self.num_gpus_per_worker)
        if per_gpu > 0 and gpus == 0:
            warn_user(
                f"each actor asks for {per_gpu:g} GPU but the Ray cluster has none now; the "
                "actors wait until GPU nodes join (pass num_gpus_per_worker=0 to score on CPUs)",
                UserWarning,
            )
        workers = self.num_workers
        if workers is None:
            if per_gpu > 0:
                workers = int(gpus // per_gpu) if gpus else 1
            else:
                usable = cpus - 1 if spare_cpu and cpus > per_cpu else cpus
                workers = int(usable // per_cpu)
            workers = max(1, workers)
        return WorkerPlan(workers, per_cpu, per_gpu, "cuda" if per_gpu > 0 else None)


def plan_workers(
    cluster_resources: Mapping[str, float],
    num_workers: int | None = None,
    num_gpus_per_worker: float | None = None,
    num_cpus_per_worker: float | None = None,
    spare_cpu: bool = True,
) -> WorkerPlan:
    """Size the actor pool from the cluster's resources: :meth:`PoolSettings.plan` of the
    counts given (see :class:`PoolSettings` for each).

    Args:
        cluster_resources: ``ray.cluster_resources()``.
        num_workers: actors to start.
        num_gpus_per_worker: GPUs per actor.
        num_cpus_per_worker: CPUs per actor (and torch threads in it).
        spare_cpu: when sizing a CPU pool by default, leave one CPU free so the tasks that read
            the input can run beside the actors.

    Raises:
        ConfigurationError: a count is not positive (or, for GPUs, negative).

    Example:
        >>> plan_workers({"CPU": 16.0, "GPU": 4.0})
        WorkerPlan(num_workers=4, num_cpus=1.0, num_gpus=1.0, device='cuda')
    """
    pool = PoolSettings(
        num_workers=num_workers,
        num_gpus_per_worker=num_gpus_per_worker,
        num_cpus_per_worker=num_cpus_per_worker,
    )
    return pool.plan(cluster_resources, spare_cpu)


def score_dataset(
    ds: ray.data.Dataset,
    scorers: Sequence[str] = DEFAULT_SCORERS,
    scorer_kwargs: Mapping[str, Any] | None = None,
    num_workers: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    num_gpus_per_worker: float | None = None,
    *,
    num_cpus_per_worker: float | None = None,
    response_column: str = "response",
    samples_column: str = "sampled_responses",
) -> ray.data.Dataset:
    """Score every row of a Ray Dataset on a pool of actors; lazy, like any Ray Data step.

    Args:
        ds: rows with a response column (a string) and a samples column (a list of strings
            and nulls); rows that are not are kept, with NaN scores and the reason in
            ``score_error``, by the rules of ``check_row``.
        scorers: scorer names, e.g. ``("bert_score", "bert_score_precision")``.
        scorer_kwargs: keyword arguments for the scorers: ``model_type``, ``num_layers``,
            ``dtype``, ``device``, ``batch_size`` (texts per forward pass), ...
        num_workers: actors in the pool; see :func:`plan_workers` for the default.
        batch_size: rows per batch given to an actor.
        num_gpus_per_worker: GPUs per actor; None: 1 on a cluster with GPUs, else 0.
        num_cpus_per_worker: CPUs per actor, also its torch thread count; None: 1.
        response_column: the column holding the responses.
        samples_column: the column holding the lists of sampled responses.

    Returns:
        A dataset with the input's columns and rows, in the input's order, plus one float64
        column per scorer and ``score_error``. Write it with ``write_parquet`` or collect it.

    Raises:
        ConfigurationError: Ray is missing, a scorer is unknown, a count is invalid, or idf
            weights would be computed per batch (see below).
        InputValidationError: the dataset's schema lacks the response or samples column.

    With ``idf=True`` the engine computes idf from each call's references, which would make a
    row's score depend on the rows batched with it; pass ``idf_sents`` (or a ``{token_id:
    weight}`` mapping as ``idf``) to fix the weights for the whole run.

    Example:
        >>> import ray  # doctest: +SKIP
        >>> ds = ray.data.read_parquet("s3://bucket/answers/")  # doctest: +SKIP
        >>> score_dataset(ds, num_workers=8).write_parquet("s3://bucket/scored/")  # doctest: +SKIP
    """
    ray = require_ray()
    scorer_plan = ScorerPlan.of(scorers, scorer_kwargs)
    check_batch_invariance(scorer_plan.settings)
    pool = PoolSettings(num_workers, batch_size, num_gpus_per_worker, num_cpus_per_worker)
    schema = ds.schema(fetch_if_missing=False)
    if schema is not None:
        absent = [c for c in (response_column, samples_column) if c not in schema.names]
        if absent:
            raise InputValidationError(
                f"the dataset has no column {absent[0]!r} (columns: {list(schema.names)}); "
                "name the right ones with response_column= and samples_column="
            )
    return map_scorers(
        ray,
        ds,
        scorer_plan,
        pool.plan(ray.cluster_resources()),
        batch_size,
        response_column=response_column,
        samples_column=samples_column,
    )


def map_scorers(
    ray: ModuleType,
    ds: ray.data.Dataset,
    scorers: ScorerPlan,
    plan: WorkerPlan,
    batch_size: int,
    *,
    response_column: str = "response",
    samples_column: str = "sampled_responses",
) -> ray.data.Dataset:
    """``ds`` scored in order by a pool of actors as ``plan`` sizes it: the step
    :func:`score_dataset` and :func:`~uqlm_bert.distributed.score_file` share, given the
    scorers' :class:`~uqlm_bert.scorers._registry.ScorerPlan` (each actor builds it, on its GPU where it
    has one).

    Example:
        >>> scored = map_scorers(ray, ds, ScorerPlan.of(), plan, 64)  # doctest: +SKIP
    """
    logger.info(
        "scoring on %d Ray actor(s), %g CPU and %g GPU each, %d rows per batch",
        plan.num_workers,
        plan.num_cpus,
        plan.num_gpus,
        batch_size,
    )
    scored = ds.map_batches(
        ScoreBatch,
        fn_constructor_kwargs={
            "plan": scorers.on_device(plan.device),
            "response_column": response_column,
            "samples_column": samples_column,
            "num_threads": max(1, int(plan.num_cpus)),
        },
        batch_size=batch_size,
        batch_format="pandas",
        compute=ray.data.ActorPoolStrategy(size=plan.num_workers),
        num_cpus=plan.num_cpus,
        num_gpus=plan.num_gpus,
    )
    # The context is shared along a chain of datasets; order is asked for on a copy of it.
    scored = ray.data.Dataset.copy(scored, _deep_copy=True)
    scored.context.execution_options.preserve_order = True
    return scored


def check_batch_invariance(settings: Mapping[str, Any], idf_from_run: bool = False) -> None:
    """Refuse scorer settings that make a row's score depend on the rows batched with it.

    Args:
        settings: the scorers' settings objects, as :func:`~uqlm_bert.scorers._registry.scorer_settings`
            builds them.
        idf_from_run: the caller fixes ``idf=True`` to the whole run's references itself.

    Raises:
        ConfigurationError: BERTScore's ``idf=True`` without ``idf_sents`` (unless
            ``idf_from_run``).

    Example:
        >>> from uqlm_bert.scorers._registry import ScorerPlan
        >>> check_batch_invariance(ScorerPlan.of(["bert_score"], idf=True).settings)
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: idf=True without idf_sents computes idf from each batch's references, so a row's score would depend on how rows are batched; pass idf_sents=[...] (the references of the whole run, say) or a {token_id: weight} mapping as idf
    """
    bert = settings.get(BERTScoreSettings.keyword)
    if bert is not None and bert.idf is True and bert.idf_sents is None and not idf_from_run:
        raise ConfigurationError(
            "idf=True without idf_sents computes idf from each batch's references, so a row's "
            "score would depend on how rows are batched; pass idf_sents=[...] (the references "
            "of the whole run, say) or a {token_id: weight} mapping as idf"
        )
