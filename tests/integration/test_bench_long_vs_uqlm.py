"""The side-by-side benchmark with uqlm's long-text scorer: its accounting of what a refinement
removes, and ours read from refine(), checked by hand on small inputs (uqlm itself lives in the
benchmark's own environment; the run is in benchmarks/RESULTS.md)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_long_vs_uqlm import our_removed, refinement_row
from benchmarks.harness import Passage
from uqlm_bert import BlackBoxUQ, InputValidationError


def test_the_refinement_row_counts_what_goes_against_the_base_rate():
    removed = np.array([True, True, False, False, False])
    inaccurate = np.array([True, False, True, False, False])
    # base 2/5 = 40%; among the removed 1/2 = 50% (+10 points); among the kept 1/3 (-6.7)
    row = refinement_row("r", removed, inaccurate)
    assert row == ["r", "2 of 5", "50.0% (+10.0)", "33.3% (-6.7)", "40.0%"]
    nothing = refinement_row("none", np.zeros(5, dtype=bool), inaccurate)
    assert nothing[1:4] == ["0 of 5", "-", "40.0% (-0.0)"]


def test_what_refine_removes_is_read_by_sentence_across_passages():
    passages = [
        Passage(0, "Lima is in Peru. It has nine moons.", ("Lima is the capital of Peru.",) * 2,
                ("Lima is in Peru.", "It has nine moons."), ("accurate", "major_inaccurate")),
        Passage(1, "Paris is in France.", ("Paris is in France.",) * 2, ("Paris is in France.",),
                ("accurate",)),
    ]  # fmt: skip
    result = BlackBoxUQ(show_progress_bars=False).score(
        [p.response for p in passages], [list(p.samples) for p in passages]
    )
    removed = our_removed(result, passages)
    table = result.sentences(sentences=[list(p.sentences) for p in passages])
    expected = (table["support"] < result.threshold(level="sentence")).to_numpy()
    assert removed.tolist() == expected.tolist()
    assert removed.tolist()[1] is True and removed.tolist()[2] is False
    with pytest.raises(InputValidationError, match="one list of sentences"):
        our_removed(result, passages[:1])  # each answer needs its own passage's sentences
