"""Sampling answers from LangChain chat models: async calls, rate limit, retries, failures kept.

Example:
    >>> import asyncio
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> from uqlm_bert.generation import ResponseGenerator
    >>> result = asyncio.run(ResponseGenerator(ParrotFakeChatModel()).generate(
    ...     ["ping"], num_responses=1, show_progress_bars=False))
    >>> result.responses, result.sampled_responses
    (['ping'], [['ping']])
"""

from uqlm_bert.generation.checkpoint import Checkpoint
from uqlm_bert.generation.client import LLMCaller, derive_llm
from uqlm_bert.generation.errors import ErrorInfo, classify_exception, parse_retry_after
from uqlm_bert.generation.generator import ResponseGenerator
from uqlm_bert.generation.records import CallFailure, CallStats, GenerationResult
from uqlm_bert.generation.retry import RetryPolicy
from uqlm_bert.generation.sync import run_sync

__all__ = [
    "CallFailure",
    "CallStats",
    "Checkpoint",
    "ErrorInfo",
    "GenerationResult",
    "LLMCaller",
    "ResponseGenerator",
    "RetryPolicy",
    "classify_exception",
    "derive_llm",
    "parse_retry_after",
    "run_sync",
]
