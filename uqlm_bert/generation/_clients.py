"""What this package needs to know about a LangChain chat model, and the copies it calls.

The caller's model is never modified: :func:`derive_llm` makes shallow copies with another
temperature, the client's own retries off and (for OpenAI-SDK models) a connection pool of the
run's own. The other functions read a model without changing it: its temperature, its type and
name, the endpoint it talks to, whether it accepts the ``n`` parameter, and the text of a reply.

Example:
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> llm = ParrotFakeChatModel()
    >>> derive_llm(llm, temperature=1.0) is llm, accepts_n(llm)
    (False, False)
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.runnables import RunnableBinding
from pydantic import BaseModel

from uqlm_bert.generation._error_kinds import MalformedReplyError

__all__ = [
    "accepts_n",
    "derive_llm",
    "http_pool_factory",
    "llm_description",
    "llm_endpoint",
    "llm_temperature",
    "message_text",
    "provider_key",
    "unbind",
]

#: The clients known to send ``n`` to a provider that honours it (``use_n_param="auto"``).
_N_CLIENTS = (("langchain_openai", "ChatOpenAI"), ("langchain_openai", "AzureChatOpenAI"))


def derive_llm(
    llm: Any,
    *,
    temperature: float | None = None,
    disable_client_retries: bool = True,
    disable_cache: bool = False,
    http_client: Any = None,
) -> Any:
    """A copy of ``llm`` with the given temperature; ``llm`` itself is left exactly as it was.

    Pydantic chat models are copied with ``model_copy`` (shallow: the copy shares the HTTP
    connection pool). A model without a ``temperature`` field gets it as a call argument through
    ``.bind(temperature=...)``. A ``RunnableBinding`` is copied around a copy of what it binds.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> llm = ParrotFakeChatModel()
        >>> derive_llm(llm, temperature=1.0) is llm
        False
    """
    if isinstance(llm, RunnableBinding):
        bound = derive_llm(
            llm.bound,
            temperature=temperature,
            disable_client_retries=disable_client_retries,
            disable_cache=disable_cache,
            http_client=http_client,
        )
        kwargs = dict(llm.kwargs)
        if temperature is not None and "temperature" in kwargs:
            kwargs["temperature"] = temperature
        return llm.model_copy(update={"bound": bound, "kwargs": kwargs})
    if not isinstance(llm, BaseModel):
        return llm.bind(temperature=temperature) if temperature is not None else llm
    fields = type(llm).model_fields
    update: dict[str, Any] = {}
    if temperature is not None and "temperature" in fields:
        update["temperature"] = temperature
    if disable_cache and "cache" in fields:
        update["cache"] = False
    update.update(_client_update(llm, fields, disable_client_retries, http_client))
    copy = llm.model_copy(update=update, deep=False)
    if temperature is not None and "temperature" not in fields:
        return copy.bind(temperature=temperature)
    return copy


def message_text(reply: Any) -> str:
    """The text of a chat model's reply (an ``AIMessage`` or a string).

    Raises:
        MalformedReplyError: the reply carries no text at all.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> message_text(AIMessage(content=[{"type": "text", "text": "Paris"}]))
        'Paris'
    """
    content = getattr(reply, "content", reply)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block if isinstance(block, str) else block.get("text", "")
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        ]
        if parts or not content:
            return "".join(str(p) for p in parts)
    raise MalformedReplyError(
        f"the LLM reply has no text content (got {type(content).__name__}: {str(content)[:100]})"
    )


def llm_temperature(llm: Any) -> float | None:
    """The temperature the caller's model is configured with, where it says.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> llm_temperature(ParrotFakeChatModel()) is None
        True
    """
    if isinstance(llm, RunnableBinding):
        if "temperature" in llm.kwargs:
            return llm.kwargs["temperature"]
        return llm_temperature(llm.bound)
    value = getattr(llm, "temperature", None)
    return float(value) if isinstance(value, (int, float)) else None


def llm_description(llm: Any) -> dict[str, Any]:
    """The model's type and name, for metadata and checkpoint fingerprints.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> llm_description(ParrotFakeChatModel())["type"]
        'parrot-fake-chat-model'
    """
    model = _unbound(llm)
    kind = getattr(model, "_llm_type", None)
    return {
        "type": kind if isinstance(kind, str) else type(model).__name__,
        "model": _first_text(model, ("model_name", "model", "model_id", "deployment_name")),
    }


def llm_endpoint(llm: Any) -> str | None:
    """The base URL the model talks to, where it says (for messages about connection failures).

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> llm_endpoint(ParrotFakeChatModel()) is None
        True
    """
    model = _unbound(llm)
    found = _first_text(
        model, ("openai_api_base", "base_url", "api_base", "endpoint", "azure_endpoint")
    )
    url = getattr(getattr(model, "root_async_client", None), "base_url", None)
    return found or (str(url) if url else None)


def _unbound(llm: Any) -> Any:
    """The chat model inside any ``RunnableBinding`` layers."""
    while isinstance(llm, RunnableBinding):
        llm = llm.bound
    return llm


def _first_text(obj: Any, attrs: Sequence[str]) -> str | None:
    """The first of ``attrs`` that ``obj`` holds as a non-empty string."""
    for attr in attrs:
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def http_pool_factory(llm: Any) -> Callable[[], Any] | None:
    """What makes connection pools of the calls' own for an OpenAI-SDK model on the default HTTP
    client (they share one TLS context); ``None`` for other models.

    langchain-openai shares one default pool per base URL across the whole process; a pool is
    bound to the event loop it first ran on, so a second loop (a new ``asyncio.run``, a notebook
    next to a script) would fail on it. A model given its own ``http_async_client`` keeps it.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> http_pool_factory(ParrotFakeChatModel()) is None
        True
    """
    llm = _unbound(llm)
    root = getattr(llm, "root_async_client", None)
    if root is None or getattr(llm, "http_async_client", None) is not None:
        return None
    if not type(root).__module__.startswith("openai") or not hasattr(root, "with_options"):
        return None
    import openai

    context = _tls_context(openai.DefaultAsyncHttpxClient.__mro__[1].__module__)
    shared = {"verify": context} if context is not None else {}
    return lambda: openai.DefaultAsyncHttpxClient(**shared)


@functools.cache
def _tls_context(client_module: str) -> Any:
    """One TLS context per process for the pools made here, from the HTTP library's own
    defaults (loading the certificate store costs about 0.1 s of CPU each time)."""
    module = sys.modules.get(client_module.split(".")[0])
    make_context = getattr(module, "create_ssl_context", None)
    return make_context(verify=True, trust_env=True) if make_context is not None else None


def _client_update(
    llm: BaseModel, fields: dict[str, Any], disable_retries: bool, http_client: Any
) -> dict[str, Any]:
    """Field updates that switch off the client's own retries on a copy of ``llm`` and give its
    async client the run's connection pool."""
    update: dict[str, Any] = {}
    if disable_retries and "max_retries" in fields:
        update["max_retries"] = 0
    # ChatOpenAI and its relatives build an SDK client at construction time with max_retries
    # baked in; the copy gets a sibling client with retries off (and, for the async one, the
    # run's pool).
    for root_name, leaf_name, pool in (
        ("root_async_client", "async_client", http_client),
        ("root_client", "client", None),
    ):
        root = getattr(llm, root_name, None)
        if root is None or not hasattr(root, "with_options") or root_name not in fields:
            continue
        options: dict[str, Any] = {}
        if disable_retries:
            options["max_retries"] = 0
        if pool is not None:
            options["http_client"] = pool
        if not options:
            continue
        new_root = root.with_options(**options)
        update[root_name] = new_root
        leaf = getattr(llm, leaf_name, None)
        old_leaf = getattr(getattr(root, "chat", None), "completions", None)
        if leaf is not None and leaf is old_leaf and leaf_name in fields:
            update[leaf_name] = new_root.chat.completions
    return update


def accepts_n(llm: Any) -> bool:
    """Whether ``llm`` is a client known to ask the provider for several choices with ``n``:
    langchain-openai's ``ChatOpenAI`` or ``AzureChatOpenAI`` (or a binding of one) on the Chat
    Completions API (the Responses API has no ``n``).

    Example:
        >>> from langchain_openai import ChatOpenAI
        >>> accepts_n(ChatOpenAI(model="gpt-4o-mini", api_key="sk-test"))
        True
        >>> accepts_n(ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", use_responses_api=True))
        False
    """
    model = _unbound(llm)
    for module_name, class_name in _N_CLIENTS:
        module = sys.modules.get(module_name)  # never imported here: a model of it exists
        cls = getattr(module, class_name, None) if module is not None else None
        if cls is not None and isinstance(model, cls):
            return not _uses_responses_api(model)
    return False


def _uses_responses_api(model: Any) -> bool:
    if getattr(model, "use_responses_api", None) is True:
        return True
    check = getattr(model, "_use_responses_api", None)
    try:
        return bool(check({})) if callable(check) else False
    except Exception:  # noqa: BLE001 - a client's private check; if it fails, assume the default
        return False


def unbind(llm: Any) -> tuple[Any, dict[str, Any]]:
    """The chat model inside any ``RunnableBinding`` layers, and the call arguments they bind
    (the innermost binding's first, outer ones overriding).

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> model, kwargs = unbind(ParrotFakeChatModel().bind(temperature=0.5).bind(stop=["."]))
        >>> type(model).__name__, kwargs
        ('ParrotFakeChatModel', {'temperature': 0.5, 'stop': ['.']})
    """
    layers = []
    while isinstance(llm, RunnableBinding):
        layers.append(llm.kwargs)
        llm = llm.bound
    kwargs: dict[str, Any] = {}
    for bound in reversed(layers):
        kwargs.update(bound)
    return llm, kwargs


def provider_key(llm: Any) -> tuple[Any, ...]:
    """What identifies the provider and model ``llm`` calls: (endpoint, model type, model name).

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> provider_key(ParrotFakeChatModel())
        (None, 'parrot-fake-chat-model', None)
    """
    described = llm_description(llm)
    return (llm_endpoint(llm), described["type"], described["model"])
