"""Memory of a generate-and-score run does not grow with the number of prompts beyond their
results: 5,000 prompts with 5 samples each peak at about what 1,000 do.

Each size runs in a fresh process (peak RSS is per process), with a chat model that answers at
once and keeps no log (so that the test double holds nothing per call) and a cheap scorer.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

RUN = """
import gc, resource, sys
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from uqlm_bert._blackbox import BlackBoxUQ

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

n = int(sys.argv[1])
uq = BlackBoxUQ(ParrotFakeChatModel(), scorers=["exact_match"], show_progress_bars=False)
uq.generate_and_score_sync([f"warm-up prompt {i}" for i in range(200)], num_responses=5)
gc.collect()
before = peak_mb()
result = uq.generate_and_score_sync([f"prompt number {i} of the run" for i in range(n)], 5)
assert result.metadata["calls"]["succeeded"] == 6 * n
assert result.data["exact_match"] == [1.0] * n
print(before, peak_mb())
"""


def peak_rss(n: int) -> tuple[float, float]:
    """(peak RSS in MB after a warm-up run, peak RSS after the run of ``n`` prompts)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(n)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    before, after = map(float, proc.stdout.split())
    return before, after


@pytest.mark.slow
def test_peak_memory_is_flat_in_the_number_of_prompts():
    small_before, small = peak_rss(1_000)
    large_before, large = peak_rss(5_000)
    detail = (
        f"1,000 prompts: {small_before:.0f} -> {small:.0f} MB; "
        f"5,000 prompts: {large_before:.0f} -> {large:.0f} MB"
    )
    assert large <= 1.3 * small, detail
