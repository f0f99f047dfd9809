"""Sampling answers from LangChain chat models: settings, limits, retries, failures kept.

- how answers and samples are asked for: :class:`GenerationSettings` (temperatures,
  concurrency, rate limit, timeout, system prompt), :class:`RetryPolicy` (exponential backoff
  with full jitter), :data:`NUM_RESPONSES` (samples per prompt when none is said);
- every slot of every prompt, in place: :class:`ResponseGenerator`, one run's calls
  (:class:`LLMCaller`), their limits (:class:`RateLimiter`, :class:`AdaptiveConcurrency`; for a
  whole cluster :class:`ClusterLimits`, held by one Ray actor), and what runs learned about a
  provider (:func:`forget_learned_limits`);
- what went wrong and what came back: :func:`classify_exception`, :class:`ErrorInfo`,
  :func:`parse_retry_after`, :class:`CallFailure`, :class:`CallStats`,
  :class:`GenerationResult`; resuming: :class:`Checkpoint`; the copies called:
  :func:`derive_llm`; the synchronous face's loop: :class:`EventLoopThread`.

The modules behind them are private (``_settings``, ``_generator``, ``_caller``,
``_shared_limits``, ``_limiters``, ``_cluster_limits``, ``_cluster_keeper``, ``_learned_limits``,
...; see docs/architecture.md). Names are imported on first use (LangChain loads only then).

Example:
    >>> import asyncio
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> from uqlm_bert.generation import ResponseGenerator
    >>> result = asyncio.run(ResponseGenerator(ParrotFakeChatModel()).generate(
    ...     ["ping"], num_responses=1, show_progress_bars=False))
    >>> result.responses, result.sampled_responses
    (['ping'], [['ping']])
"""

from uqlm_bert._lazy import lazy_exports

__all__ = [
    "NUM_RESPONSES",
    "AdaptiveConcurrency",
    "CallFailure",
    "CallStats",
    "Checkpoint",
    "ClusterLimits",
    "ErrorInfo",
    "EventLoopThread",
    "GenerationResult",
    "GenerationSettings",
    "LLMCaller",
    "RateLimiter",
    "ResponseGenerator",
    "RetryPolicy",
    "classify_exception",
    "derive_llm",
    "forget_learned_limits",
    "parse_retry_after",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AdaptiveConcurrency": "uqlm_bert.generation._limiters",
        "CallFailure": "uqlm_bert.generation._records",
        "CallStats": "uqlm_bert.generation._records",
        "Checkpoint": "uqlm_bert.generation._checkpoint",
        "ClusterLimits": "uqlm_bert.generation._cluster_limits",
        "ErrorInfo": "uqlm_bert.generation._error_kinds",
        "EventLoopThread": "uqlm_bert.generation._event_loop",
        "GenerationResult": "uqlm_bert.generation._records",
        "GenerationSettings": "uqlm_bert.generation._settings",
        "NUM_RESPONSES": "uqlm_bert.generation._settings",
        "LLMCaller": "uqlm_bert.generation._caller",
        "RateLimiter": "uqlm_bert.generation._limiters",
        "ResponseGenerator": "uqlm_bert.generation._generator",
        "RetryPolicy": "uqlm_bert.generation._backoff",
        "classify_exception": "uqlm_bert.generation._error_kinds",
        "derive_llm": "uqlm_bert.generation._clients",
        "forget_learned_limits": "uqlm_bert.generation._learned_limits",
        "parse_retry_after": "uqlm_bert.generation._error_kinds",
    },
)
