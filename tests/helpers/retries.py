"""Retries that do not wait: the tests' servers answer at once (or fail on purpose), so a
retry's backoff would only cost time. One definition for every test."""

from __future__ import annotations

from typing import Any

from uqlm_bert import GenerationSettings
from uqlm_bert.generation import RetryPolicy
from uqlm_bert.generation._settings import generation_settings

#: The flat form, as ``create_asgi_app`` and the generation settings' builders take it.
NO_WAIT = {"retry_base_delay": 0.0, "retry_max_delay": 0.0}


def no_wait(max_retries: int = RetryPolicy().max_retries) -> RetryPolicy:
    """A retry policy with ``max_retries`` retries and no wait between them."""
    return RetryPolicy(max_retries=max_retries, base_delay=0.0, max_delay=0.0)


def fast(**generation: Any) -> dict[str, GenerationSettings]:
    """``BlackBoxUQ``'s ``generation=`` keyword: these generation settings (flat, as
    ``max_concurrency=2``, ``max_retries=1``) with retries that do not wait."""
    return {"generation": generation_settings(None, **NO_WAIT, **generation)}
