"""Sampling answers from LangChain chat models: the pieces a user sets or meets.

- the retry policy of :class:`~uqlm_bert.GenerationSettings`: :class:`RetryPolicy` (exponential
  backoff with full jitter);
- one set of limits for every process of a cluster: :class:`ClusterLimits` (held by one Ray
  actor);
- resuming a stopped run: :class:`Checkpoint` (or a path, as ``checkpoint=``);
- why a call produced no text: :class:`CallFailure`, beside each failed slot of a result;
- what runs learned about a provider, forgotten: :func:`forget_learned_limits`.

The settings themselves are :class:`~uqlm_bert.GenerationSettings` (from ``uqlm_bert``). The
modules behind these names are private (the generator, the calls and their limits, adaptive
concurrency, retries, provider-error classification, ...; see docs/architecture.md). Names are
imported on first use (LangChain loads only then).

Example:
    >>> from uqlm_bert import GenerationSettings
    >>> from uqlm_bert.generation import RetryPolicy
    >>> GenerationSettings(retry=RetryPolicy(max_retries=2)).retry.max_retries
    2
"""

from uqlm_bert._lazy import lazy_exports

__all__ = [
    "CallFailure",
    "Checkpoint",
    "ClusterLimits",
    "RetryPolicy",
    "forget_learned_limits",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CallFailure": "uqlm_bert.generation._records",
        "Checkpoint": "uqlm_bert.generation._checkpoint",
        "ClusterLimits": "uqlm_bert.generation._cluster_limits",
        "RetryPolicy": "uqlm_bert.generation._backoff",
        "forget_learned_limits": "uqlm_bert.generation._learned_limits",
    },
)
