"""benchmarks/eval_sentences.py: its threshold rule, its measures and the rest of its helpers on
hand cases, its data option, and a small run on a file of the shared data's format."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script():
    from benchmarks import eval_sentences

    return eval_sentences


def test_youden_by_hand(script):
    scores = np.array([0.2, 0.4, 0.6, 0.8])
    positive = np.array([True, True, False, False])
    assert script.youden(scores, positive) == (0.5, 1.0)  # below 0.5: both positives, no negative
    # one positive above a negative: below 0.3 catches 1 of 2 positives and no negative (J 0.5);
    # below 0.7 catches both and 1 of 2 negatives (J 0.5): the lower threshold wins the tie
    t, j = script.youden(np.array([0.2, 0.4, 0.6, 0.8]), np.array([True, False, True, False]))
    assert (t, j) == (pytest.approx(0.3), 0.5)


def test_youden_equals_brute_force(script):
    rng = np.random.default_rng(0)
    scores = rng.random(300).round(2)  # ties included
    positive = rng.random(300) < 0.4
    values = np.unique(scores)
    cuts = (values[:-1] + values[1:]) / 2
    j = [
        ((scores < c) & positive).sum() / positive.sum()
        - ((scores < c) & ~positive).sum() / (~positive).sum()
        for c in cuts
    ]
    t, best = script.youden(scores, positive)
    assert best == pytest.approx(max(j)) and t == cuts[int(np.argmax(j))]


def test_measures_are_selfcheckgpt_s(script):
    from uqlm_bert.evaluation import auc_pr

    scores = np.array([0.9, 0.2, 0.5, 0.7])
    degree = np.array([0.0, 1.0, 0.5, 0.0])
    nonfact, factual = script.measures(scores, degree)
    assert nonfact == pytest.approx(100 * auc_pr(-scores, degree > 0))
    assert factual == pytest.approx(100 * auc_pr(scores, degree == 0))
    assert nonfact == pytest.approx(100.0)  # the two inaccurate sentences score lowest


def test_the_concept_comes_from_the_passage_or_the_data(script, tmp_path):
    rows = [
        {"response": "Ann Lee (1900-1950) was a poet.", "sentences": ["Ann Lee (1900-1950) was a poet."],
         "sentence_labels": ["accurate"], "sampled_responses": ["Ann Lee was a poet."]},
        {"response": "Bo is a city.", "sentences": ["Bo is a city."], "concept": "Bo, Sierra Leone",
         "sentence_labels": ["major_inaccurate"], "sampled_responses": ["Bo is a town."]},
    ]  # fmt: skip
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    passages, concepts = script.load(path)
    assert concepts == ["Ann Lee", "Bo, Sierra Leone"]
    assert passages[1].degree.tolist() == [1.0]


def test_skips_without_the_data(script, tmp_path, capsys):
    assert script.main(["--data", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().out
    assert not (tmp_path / "sentences.md").exists()


@pytest.mark.slow
def test_a_small_file_of_the_same_format_runs(script, shared_data_dir, tmp_path, capsys):
    """The script pointed at another file (the held-out check is run this way): two passages,
    the default settings only."""
    lines = (shared_data_dir / "wikibio_gpt3_dev.jsonl").read_text().splitlines()
    labels = [set(json.loads(line)["sentence_labels"]) for line in lines]
    # two passages with accurate and inaccurate sentences both
    lines = [line for line, got in zip(lines, labels, strict=True) if len(got) > 1][:2]
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(lines))
    monkey = script.AGGREGATIONS[:]
    argv = ["--data", str(path), "--bootstrap", "5", "--configs", script.DEFAULT_CONFIG]
    try:
        script.AGGREGATIONS[:] = ["min", "trim10"]
        assert script.main([*argv, "--out", str(tmp_path / "out")]) == 0
    finally:
        script.AGGREGATIONS[:] = monkey
    out = capsys.readouterr().out
    assert "2 passages" in out and "| **trim10** |" in out and "Weak-support threshold" in out
    report = (tmp_path / "out" / "sentences.md").read_text()
    assert report.strip() in out and report.splitlines()[2].startswith("CPU: ")
