"""The long-text benchmarks: how they build their texts, the rule they compare against, and their
behaviour without data."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import bench_long_texts as speed
from benchmarks import eval_long_texts as quality
from benchmarks.harness import Passage
from uqlm_bert.bertscore._windows import plan_windows


def _rows(n: int) -> list[Passage]:
    return [Passage(i, f"P{i}", tuple(f"S{i}.{j}" for j in range(20))) for i in range(n)]


def test_long_answers_keep_three_passages_and_replace_three_by_other_peoples():
    faithful, corrupted, samples = quality.long_answers(_rows(30), sample_set=2)
    assert len(faithful) == len(corrupted) == len(samples) == 30
    assert faithful[28].split("\n\n") == ["P28", "P29", "P0", "P1", "P2", "P3"]
    assert corrupted[28].split("\n\n") == ["P28", "P29", "P0", "P4", "P5", "P6"]
    # the samples of a set join the same six people's samples of that set, in order
    assert samples[28][0].split("\n\n") == [f"S{p}.10" for p in (28, 29, 0, 1, 2, 3)]
    assert [s.split("\n\n")[0] for s in samples[28]] == [f"S28.{j}" for j in range(10, 15)]
    for good, bad in zip(faithful, corrupted, strict=True):
        replaced = set(bad.split("\n\n")[3:])
        assert not replaced & set(good.split("\n\n"))  # none of the six people


def _most_context(windows, n):
    """The rule by its definition: for each token, the window where min(context before,
    context after) is largest, a window at the text's start or end having all there is on that
    side; ties go to the earlier window."""
    best = []
    for p in range(n):
        scores = []
        for a, b in windows:
            if not a <= p < b:
                scores.append(-1)
                continue
            before = n if a == 0 else p - a
            after = n if b == n else b - 1 - p
            scores.append(min(before, after))
        best.append(int(np.argmax(scores)))
    return best


@pytest.mark.parametrize(
    "windows",
    [plan_windows(300, 62, o) for o in (0, 1, 15)] + [[(0, 10), (4, 14), (11, 30)]],
)
def test_the_most_context_rule_of_the_comparison_follows_its_definition(windows):
    n = windows[-1][1]
    spans = quality.most_context_spans(windows)
    owner = [j for j, (a, b) in enumerate(spans) for _ in range(a, b)]
    assert owner == _most_context(windows, n)


def test_eval_skips_cleanly_without_the_data(tmp_path, capsys):
    assert quality.main(["--data", str(tmp_path / "absent.jsonl")]) == 0
    assert "not found" in capsys.readouterr().out


def test_texts_are_cut_at_the_token_count_asked():
    from uqlm_bert.bertscore._loading import load_tokenizer

    tok = load_tokenizer(None)
    text = " ".join(["The river city was founded in the early years."] * 60)
    for tokens in (50, 200):
        cut = speed.cut(tok, text, tokens)
        assert text.startswith(cut)
        assert tokens - 2 <= len(tok(cut)["input_ids"]) <= tokens
    assert speed.cut(tok, "a short text", 200) == "a short text"
