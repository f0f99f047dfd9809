"""Sampling answers from LangChain chat models: settings, limits, retries, failures kept.

==================  ====================================================================
module              what it holds
==================  ====================================================================
``settings``        :class:`GenerationSettings`: temperatures, concurrency, rate limit,
                    retries, timeout, system prompt
``generator``       :class:`ResponseGenerator`: every slot of every prompt, in place
``caller``          :class:`LLMCaller`: one run's calls, limits and retry loop, samples
                    asked for with the provider's ``n``
``clients``         what a LangChain model is: the copies called, its endpoint, whether it
                    accepts ``n``, the text of a reply
``limits``          the rate limit counted at the provider, and adaptive concurrency
``cluster``         :class:`ClusterLimits`: the limits held for every process of a cluster
                    by one Ray actor (``grants``, the keeper)
``memory``          what runs learned about a provider (its limit, ``n``), kept for the
                    next run in the process; :func:`forget_learned_limits`
``retry``           :class:`RetryPolicy`: exponential backoff with full jitter
``classify``        what a provider's exception means: retry, give up, or stop the run
``checkpoint``      the JSONL record of a run, for resuming; locked while in use
``records``         results, failures and call counts
``prompts``         prompts as given and as sent; fingerprints
``loop``            the long-lived event loop of the synchronous face
==================  ====================================================================

Names are imported on first use (LangChain loads only then).

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
