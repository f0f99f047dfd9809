"""``score_file`` opens and closes its own private local Ray when none is running.

Kept apart from test_distributed.py, whose tests share one Ray for the whole module: here no Ray
may be running when a test starts.
"""

from __future__ import annotations

import json
import signal

import numpy as np
import pandas as pd
import pytest

from tests.texts import passage
from uqlm_bert.distributed import ray_session, score_file
from uqlm_bert.scorers import build_scorer

ray = pytest.importorskip("ray")


@pytest.fixture
def no_ray(monkeypatch):
    """No Ray running and no cluster named in the environment; the test is bounded in time."""
    assert not ray.is_initialized(), "another test left Ray running"
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def expire(signum, frame):
        raise TimeoutError("the test did not finish within 240 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(240)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        if ray.is_initialized():
            ray.shutdown()


@pytest.mark.ray
def test_ray_session_starts_a_loopback_ray_and_shuts_it_down(no_ray):
    with ray_session() as session:
        assert [node["NodeManagerAddress"] for node in session.nodes()] == ["127.0.0.1"]
        with ray_session("auto"):  # an open session is reused, not replaced or closed
            pass
        assert ray.is_initialized()
    assert not ray.is_initialized()


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
