"""Which Ray to run on: the session already open, a cluster's address, or a private local Ray.

A private local Ray listens on the loopback interface only (127.0.0.1), as Ray does on macOS
and Windows, and runs without a dashboard and without usage reporting: nothing on the network
can reach it, and it neither downloads nor sends anything.

:func:`ray_session` holds a session for a ``with`` block; :class:`HeldSession` holds one for the
life of an object (a ``BlackBoxUQ`` that scores on Ray) until it is closed, the objects of a
process sharing one. Either way a session that was already open in the process is used as it is
and left open, and one opened here is shut down at the end.

Example:
    >>> from uqlm_bert.distributed._session import ray_session
    >>> with ray_session() as ray:  # doctest: +SKIP
    ...     print(ray.cluster_resources()["CPU"])
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from uqlm_bert.distributed._dataset import require_ray

__all__ = ["HeldSession", "ray_session", "start_local_ray"]

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
    if not _open(ray, address):
        yield ray
        return
    try:
        yield ray
    finally:
        ray.shutdown()


def _open(ray: ModuleType, address: str | None) -> bool:
    """Open a session (see :func:`ray_session`); False when one was open already."""
    if ray.is_initialized():
        if address is not None:
            logger.info(
                "Ray is already initialized in this process; address %r is not used", address
            )
        return False
    if address is None and not os.environ.get("RAY_ADDRESS"):
        start_local_ray()
    else:
        ray.init(address=address)
    return True


# The Ray session this package started for the objects that hold one (HeldSession): the thread
# that started it and keeps it, and how many objects hold it; shut down when the last lets go.
_HELD: dict[str, Any] = {"holders": 0, "thread": None, "stop": None}
_HELD_LOCK = threading.Lock()


class HeldSession:
    """A Ray session held for the life of an object, from :meth:`open` until :meth:`close`.

    Args:
        address: the cluster, as for :func:`ray_session`.

    A session started here is started, and later shut down, by a thread of its own that lives
    until then: on Linux the processes of a local Ray are killed when the thread that started
    them ends (Ray starts them with a parent-death signal), so a session started from a
    short-lived worker thread would die with it. The thread is a daemon: at interpreter exit
    Ray's own exit handler shuts the session down. The objects of a process that hold a session
    share the one started for the first of them, which is shut down when the last one closes
    (one object closing must not stop another's actors); a session that was open in the
    process already (``ray.init`` called by its code) is used as it is, and left open.

    Attributes:
        holding: whether this object holds the session started here (and lets it go on
            :meth:`close`).

    Example:
        >>> session = HeldSession()
        >>> ray = session.open()  # doctest: +SKIP
        >>> session.close()
    """

    #: How long the last :meth:`close` waits for Ray to shut down.
    CLOSE_TIMEOUT_S = 60.0

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self.holding = False

    def open(self) -> ModuleType:
        """The ``ray`` module with a session open: the one held already, the process's, or
        one started now (again after :meth:`close`).

        Raises:
            ConfigurationError: Ray is not installed.
        """
        ray = require_ray()
        with _HELD_LOCK:
            if self.holding:
                return ray
            if _HELD["holders"]:
                if self.address is not None:
                    logger.info(
                        "a Ray session is held already; address %r is not used", self.address
                    )
                _HELD["holders"] += 1
                self.holding = True
                return ray
            if ray.is_initialized():
                return ray
            started = threading.Event()
            outcome: list[Any] = []  # whether a session was opened, or what opening it raised
            stop = threading.Event()

            def hold() -> None:
                try:
                    outcome.append(_open(ray, self.address))
                except BaseException as exc:  # noqa: BLE001 - raised by open(), in its thread
                    outcome.append(exc)
                    return
                finally:
                    started.set()
                if outcome[0]:
                    stop.wait()
                    ray.shutdown()

            thread = threading.Thread(target=hold, name="uqlm-bert-ray", daemon=True)
            thread.start()
            started.wait()
            if isinstance(outcome[0], BaseException):
                raise outcome[0]
            if outcome[0]:
                _HELD.update(holders=1, thread=thread, stop=stop)
                self.holding = True
            return ray

    def close(self) -> None:
        """Let the session go: the last object holding the one started here shuts it down (a
        session that was open already is left as it is)."""
        with _HELD_LOCK:
            if not self.holding:
                return
            self.holding = False
            _HELD["holders"] -= 1
            if _HELD["holders"]:
                return
            thread, stop = _HELD["thread"], _HELD["stop"]
            _HELD.update(thread=None, stop=None)
        stop.set()
        thread.join(self.CLOSE_TIMEOUT_S)


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
