"""Web services built on the library: answers through your LLM, with how far to trust each.

- :func:`create_asgi_app`: an ASGI app (Starlette) holding one :class:`~uqlm_bert.BlackBoxUQ`
  for the process, so every request shares its limits and its scoring batches;
  :func:`create_asgi_app_from_env` builds it from ``UQLM_BERT_APP_*`` environment variables::

      uvicorn --factory uqlm_bert.apps:create_asgi_app_from_env --host 127.0.0.1 --port 8000
      python -m uqlm_bert.apps --port 8000          # the same, through uvicorn.run

- :func:`build_serve_app`: the same service on Ray Serve, its replicas under one set of cluster
  limits and one scorer deployment batching the answers of all of them
  (:class:`ServeAppSettings`; :func:`serve_app_builder` for ``serve run``)::

      serve run uqlm_bert.apps:serve_app_builder model=gpt-4o-mini max_calls_per_min=500

Starlette and uvicorn come with the ``app`` extra, Ray Serve with the ``serve`` extra; each is
imported only when its app is built. See docs/black_box.md ("A web service").

Example:
    >>> from uqlm_bert.apps import ServeAppSettings
    >>> settings = ServeAppSettings(model="gpt-4o-mini", num_responses=3)
    >>> settings.num_responses, sorted(ServeAppSettings().__dataclass_fields__)[:2]
    (3, ['base_url', 'batch_wait_timeout_s'])
"""

from __future__ import annotations

from uqlm_bert._lazy import lazy_exports

__all__ = [
    "ServeAppSettings",
    "build_serve_app",
    "create_asgi_app",
    "create_asgi_app_from_env",
    "serve_app_builder",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "create_asgi_app": "uqlm_bert.apps._asgi",
        "create_asgi_app_from_env": "uqlm_bert.apps._asgi",
        "ServeAppSettings": "uqlm_bert.apps._serve",
        "build_serve_app": "uqlm_bert.apps._serve",
        "serve_app_builder": "uqlm_bert.apps._serve",
    },
)
