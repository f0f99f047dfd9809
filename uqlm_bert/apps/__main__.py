"""``python -m uqlm_bert.apps [--host 127.0.0.1] [--port 8000]``: the ASGI app, from the
environment (see :func:`uqlm_bert.apps.create_asgi_app_from_env`), served by uvicorn."""

from uqlm_bert.apps._asgi import main

if __name__ == "__main__":
    raise SystemExit(main())
