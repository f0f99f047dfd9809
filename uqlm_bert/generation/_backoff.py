"""How long to wait before trying a failed call again: exponential backoff with full jitter.

Attempt ``k`` (0 for the first retry) waits a uniformly random time in
``[0, min(max_delay, base_delay * 2**k)]``, so that many clients hit by the same outage do not
retry in lockstep. When the server sent ``Retry-After``, the wait is at least that long.

Example:
    >>> import random
    >>> policy = RetryPolicy(max_retries=3, base_delay=1.0, max_delay=5.0)
    >>> delays = [policy.delay(k, rng=random.Random(0)) for k in range(5)]
    >>> all(0 <= d <= c for d, c in zip(delays, [1, 2, 4, 5, 5]))
    True
    >>> policy.delay(0, retry_after=3.0, rng=random.Random(0)) >= 3.0
    True
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from uqlm_bert._checks import check_int, check_number

__all__ = ["RetryPolicy", "backoff_cap"]


@dataclass(frozen=True)
class RetryPolicy:
    """Retry settings for transient failures (429, 5xx, timeouts, connection errors).

    Attributes:
        max_retries: retries after the first attempt (0 disables retrying).
        base_delay: the backoff cap of the first retry, in seconds.
        max_delay: the largest backoff cap, in seconds.
        max_retry_after: the longest ``Retry-After`` honoured, in seconds; a server asking for
            longer is waited on for this long, then tried again.
    """

    max_retries: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_retry_after: float = 300.0

    def __post_init__(self) -> None:
        check_int("max_retries", self.max_retries, 0)
        for name in ("base_delay", "max_delay", "max_retry_after"):
            check_number(name, getattr(self, name))

    def delay(
        self, retry_index: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based)."""
        cap = backoff_cap(retry_index, self.base_delay, self.max_delay)
        wait = (rng or random).uniform(0.0, cap)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait


def backoff_cap(retry_index: int, base_delay: float, max_delay: float) -> float:
    """``min(max_delay, base_delay * 2**retry_index)``, safe for large indices.

    Example:
        >>> backoff_cap(3, 0.5, 10.0), backoff_cap(100, 0.5, 10.0)
        (4.0, 10.0)
    """
    if retry_index >= 62:
        return float(max_delay)
    return float(min(max_delay, base_delay * (2**retry_index)))
