"""Sorting an LLM client's exception into a kind: retry it, give up on the prompt, or stop the run.

Nothing here imports a provider SDK. Exceptions are recognised by their class names along the
MRO (``RateLimitError``, ``APITimeoutError``, ... as raised by ``openai``, ``anthropic`` and other
clients generated the same way, and ``httpx``'s transport errors) and by an HTTP ``status_code``
attribute, with ``Retry-After`` read from ``exc.response.headers`` where there is one.

An exception that means the run itself is broken, not one call, is ``fatal``: rejected
credentials (every call would fail the same way) and an HTTP client whose event loop has closed
or is another thread's (a bug in how the client is shared between event loops, never a passing
fault). Replies the client cannot read (no ``choices``, a body of the wrong shape) are
``malformed`` and retried.

Example:
    >>> info = classify_exception(TimeoutError("no reply"))
    >>> info.kind, info.retryable
    ('timeout', True)
    >>> classify_exception(RuntimeError("Event loop is closed")).kind
    'event_loop'
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ErrorInfo",
    "MalformedReplyError",
    "classify_exception",
    "parse_retry_after",
]


class MalformedReplyError(Exception):
    """The LLM answered, but the reply holds no usable text (no content, wrong shape)."""


@dataclass(frozen=True)
class ErrorInfo:
    """What an exception means for the call that raised it.

    Attributes:
        kind: the failure kind (see :class:`~uqlm_bert.generation._records.CallFailure`).
        retryable: whether sending the same request again may succeed.
        fatal: whether the whole run must stop (bad credentials: every call would fail).
        status_code: the HTTP status, where known.
        retry_after: seconds the server asked us to wait, where it said.
        message: one line describing the error.
    """

    kind: str
    retryable: bool
    fatal: bool = False
    status_code: int | None = None
    retry_after: float | None = None
    message: str = ""


_AUTH_NAMES = {"AuthenticationError", "PermissionDeniedError"}
_RATE_LIMIT_NAMES = {"RateLimitError"}
_TIMEOUT_NAMES = {"APITimeoutError", "TimeoutException", "TimeoutError", "ReadTimeout"}
_CONNECTION_NAMES = {
    "APIConnectionError",
    "ConnectError",
    "NetworkError",
    "TransportError",
    "RemoteProtocolError",
    "ConnectionError",
}
_MALFORMED_NAMES = {"APIResponseValidationError", "MalformedReplyError", "JSONDecodeError"}
# A reply without the expected parts ("choices": [], a missing field) surfaces from the client's
# parsing as one of these (or as a TypeError about 'choices', as langchain-openai raises it).
_SHAPE_ERRORS = (IndexError, KeyError)
# The messages of asyncio and anyio when a client is used from a loop it does not belong to.
_LOOP_MESSAGES = ("event loop is closed", "attached to a different loop", "different event loop")
_BAD_REQUEST_NAMES = {"BadRequestError", "NotFoundError", "UnprocessableEntityError"}
# Statuses a server sends for a passing condition: timeout, conflict, too early, rate limit.
_RETRYABLE_4XX = {408, 409, 425, 429}


def classify_exception(exc: BaseException) -> ErrorInfo:
    """Classify an exception raised by an LLM call.

    The exception and its ``__cause__`` chain are examined, first by HTTP status code, then by
    class name. Anything unrecognised is kind ``"other"`` and not retried: it is most likely a
    bug or a misuse that the same request would hit again.

    Example:
        >>> classify_exception(ValueError("bad")).kind
        'other'
    """
    for e in _cause_chain(exc):
        info = _classify_one(e)
        if info is not None:
            return info
    return ErrorInfo(kind="other", retryable=False, message=_one_line(exc))


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date).

    Returns ``None`` when neither header is present or readable; never a negative number.

    Example:
        >>> parse_retry_after({"Retry-After": "2"})
        2.0
        >>> parse_retry_after({"retry-after-ms": "250"})
        0.25
    """
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in _header_items(headers)}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _classify_one(exc: BaseException) -> ErrorInfo | None:
    names = {cls.__name__ for cls in type(exc).__mro__}
    status = _status_code(exc)
    message = _one_line(exc)
    retry_after = parse_retry_after(_headers(exc))
    if status is not None:
        if status in (401, 403) or names & _AUTH_NAMES:
            return ErrorInfo("auth", False, True, status, None, message)
        if status == 429:
            return ErrorInfo("rate_limit", True, False, status, retry_after, message)
        if status in _RETRYABLE_4XX:
            return ErrorInfo(
                "timeout" if status == 408 else "server", True, False, status, retry_after, message
            )
        if status >= 500:
            return ErrorInfo("server", True, False, status, retry_after, message)
        if 400 <= status < 500:
            return ErrorInfo("bad_request", False, False, status, None, message)
    if names & _AUTH_NAMES:
        return ErrorInfo("auth", False, True, status, None, message)
    if names & _RATE_LIMIT_NAMES:
        return ErrorInfo("rate_limit", True, False, status, retry_after, message)
    shape = isinstance(exc, _SHAPE_ERRORS) or (
        isinstance(exc, (TypeError, ValueError)) and "'choices'" in str(exc)
    )
    if names & _MALFORMED_NAMES or isinstance(exc, json.JSONDecodeError) or shape:
        return ErrorInfo("malformed", True, False, status, None, message)
    if isinstance(exc, RuntimeError) and any(m in str(exc).lower() for m in _LOOP_MESSAGES):
        return ErrorInfo("event_loop", False, True, status, None, message)
    # Timeouts before connection errors: openai's APITimeoutError subclasses APIConnectionError.
    if names & _TIMEOUT_NAMES or isinstance(exc, TimeoutError):
        return ErrorInfo("timeout", True, False, status, None, message or "timed out")
    if names & _CONNECTION_NAMES or isinstance(exc, ConnectionError):
        return ErrorInfo("connection", True, False, status, None, message)
    if names & _BAD_REQUEST_NAMES:
        return ErrorInfo("bad_request", False, False, status, None, message)
    return None


def _cause_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        current = current.__cause__
    return chain


def _status_code(exc: BaseException) -> int | None:
    for candidate in (getattr(exc, "status_code", None), getattr(exc, "status", None)):
        if isinstance(candidate, int) and 100 <= candidate < 600:
            return candidate
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    if isinstance(code, int) and 100 <= code < 600:
        return code
    return None


def _headers(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


def _header_items(headers: Any) -> list[tuple[str, str]]:
    try:
        return list(headers.items())
    except (AttributeError, TypeError):
        return []


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
    return text if len(text) <= limit else text[: limit - 3] + "..."
