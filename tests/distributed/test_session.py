"""``score_file`` opens and closes its own private local Ray when none is running.

Kept apart from test_distributed.py, whose tests share one Ray for the whole module: here no Ray
may be running when a test starts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO_ROOT
from tests.helpers.deadline import deadline
from tests.helpers.texts import passage
from tests.helpers.waiting import wait_for
from uqlm_bert.distributed import score_file
from uqlm_bert.distributed._session import ray_session
from uqlm_bert.scorers._registry import build_scorer

ray = pytest.importorskip("ray")


@pytest.fixture
def no_ray(monkeypatch):
    """No Ray running and no cluster named in the environment; the test is bounded in time."""
    assert not ray.is_initialized(), "another test left Ray running"
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    try:
        with deadline(240, "the test"):
            yield
    finally:
        if ray.is_initialized():
            ray.shutdown()


@pytest.mark.slow
@pytest.mark.ray
def test_ray_session_starts_a_loopback_ray_and_shuts_it_down(no_ray):
    with ray_session() as session:
        assert [node["NodeManagerAddress"] for node in session.nodes()] == ["127.0.0.1"]
        with ray_session("auto"):  # an open session is reused, not replaced or closed
            pass
        assert ray.is_initialized()
    assert not ray.is_initialized()


@pytest.mark.slow
@pytest.mark.ray
def test_score_file_without_a_running_ray(no_ray, tmp_path):
    rows = [
        {
            "response": passage(i, 20 + i),
            "sampled_responses": [passage(50 + i + j, 18) for j in range(3)],
        }
        for i in range(6)
    ]
    src = tmp_path / "answers.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame = score_file(src, tmp_path / "scored.parquet", num_workers=1, show_progress_bars=False)
    assert not ray.is_initialized()
    expected = build_scorer("bert_score").score(
        [r["response"] for r in rows], [r["sampled_responses"] for r in rows]
    )
    np.testing.assert_allclose(frame["bert_score"], expected, rtol=0, atol=1e-6)
    back = pd.read_parquet(tmp_path / "scored.parquet")
    assert back["response"].tolist() == [r["response"] for r in rows]
    np.testing.assert_array_equal(back["bert_score"], frame["bert_score"])


#: A script that opens a pool with a Ray of its own, runs, and exits without closing anything.
_EXIT_SCRIPT = """
import sys
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
import ray
from uqlm_bert import BlackBoxUQ
uq = BlackBoxUQ(ParrotFakeChatModel(), scorers=["exact_match"], show_progress_bars=False,
                scoring="ray")
uq.generate_and_score_sync(["a", "b"], num_responses=1)
print(ray.get_runtime_context().gcs_address, flush=True)
"""


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, int(port))) == 0


@pytest.mark.slow
@pytest.mark.ray
def test_a_ray_opened_by_black_box_uq_is_closed_by_close_and_at_exit(no_ray, tmp_path):
    from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel

    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.distributed import RayScoring

    first, second = (
        BlackBoxUQ(
            ParrotFakeChatModel(),
            scorers=["exact_match"],
            show_progress_bars=False,
            scoring=RayScoring(num_workers=1),
        )
        for _ in range(2)
    )
    assert not ray.is_initialized()  # nothing starts before the first call
    result = first.generate_and_score_sync(["Lima", "Quito"], num_responses=2)
    assert result.data["exact_match"] == [1.0, 1.0]
    assert [node["NodeManagerAddress"] for node in ray.nodes()] == ["127.0.0.1"]
    gcs = ray.get_runtime_context().gcs_address
    assert second.generate_and_score_sync(["Lima"], num_responses=1).data["exact_match"] == [1.0]
    # the two share the one Ray: the first closing leaves it to the second, the last stops it
    first.close()
    assert ray.is_initialized()
    assert second.generate_and_score_sync(["Bogota"], num_responses=2).data["exact_match"] == [1.0]
    second.close()
    assert not ray.is_initialized() and not _listening(gcs)

    # at interpreter exit, without close(): nothing of that Ray is left running
    script = tmp_path / "exit.py"
    script.write_text(_EXIT_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert done.returncode == 0, done.stderr
    address = done.stdout.strip().splitlines()[-1]
    wait_for(lambda: not _listening(address), 30, "the Ray the script started to stop")
