"""Which Ray to run on: the session already open, a cluster's address, or a private local Ray.

A private local Ray listens on the loopback interface only (127.0.0.1), as Ray does on macOS
and Windows, and runs without a dashboard and without usage reporting: nothing on the network
can reach it, and it neither downloads nor sends anything.

Example:
    >>> from uqlm_bert.distributed import ray_session
    >>> with ray_session() as ray:  # doctest: +SKIP
    ...     print(ray.cluster_resources()["CPU"])
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from uqlm_bert.distributed.dataset import require_ray

__all__ = ["ray_session", "start_local_ray"]

logger = logging.getLogger("uqlm_bert")

# Set while a private Ray starts, and inherited by its processes: Ray's switch between a node
# reachable from other machines and a loopback-only one, and no usage reports.
_PRIVATE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


@contextmanager
def ray_session(address: str | None = None) -> Iterator[ModuleType]:
    """Use the Ray session of this process, or open one for the ``with`` block.

    Args:
        address: ``"auto"``, ``"ray://host:10001"`` or ``"host:6379"`` to join a cluster.
            None joins the cluster ``RAY_ADDRESS`` names when it is set, and otherwise starts
            a private local Ray (see :func:`start_local_ray`).

    A session opened here is shut down at the end; one already open in this process is used
    as it is and left running (``address`` is then ignored, with a log message).

    Example:
        >>> with ray_session("auto") as ray:  # doctest: +SKIP
        ...     print(ray.cluster_resources())
    """
    ray = require_ray()
    if ray.is_initialized():
        if address is not None:
            logger.info(
                "Ray is already initialized in this process; address %r is not used", address
            )
        yield ray
        return
    if address is None and not os.environ.get("RAY_ADDRESS"):
        start_local_ray()
    else:
        ray.init(address=address)
    try:
        yield ray
    finally:
        ray.shutdown()


def start_local_ray(**init_kwargs: Any) -> ModuleType:
    """Start a private Ray on this machine, listening on 127.0.0.1 only, with no dashboard.

    Args:
        init_kwargs: more arguments for ``ray.init`` (``num_cpus=2``, ...).

    Returns:
        The ``ray`` module, initialized.

    Example:
        >>> ray = start_local_ray(num_cpus=2)  # doctest: +SKIP
        >>> ray.nodes()[0]["NodeManagerAddress"]  # doctest: +SKIP
        '127.0.0.1'
    """
    ray = require_ray()
    from ray._private import ray_constants  # Ray reads the switch once, at import

    saved_env = {name: os.environ.get(name) for name in _PRIVATE_ENV}
    saved_flag = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    os.environ.update(_PRIVATE_ENV)
    if saved_flag is not None:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(address="local", include_dashboard=False, **init_kwargs)
    finally:
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if saved_flag is not None:
            ray_constants.ENABLE_RAY_CLUSTER = saved_flag
    return ray
