"""benchmarks/bench_supports.py: a tiny run writes its report with a row per m, positive ratios
and the bytes the supports hold."""

from __future__ import annotations

import re

import pytest


def _rows(report: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header starts with ``header``."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


@pytest.mark.slow
def test_a_tiny_run_reports_both_m_with_positive_ratios(tmp_path, capsys):
    from benchmarks import bench_supports

    argv = ["--prompts", "3", "--samples", "2", "3", "--rounds", "1", "--out", str(tmp_path)]
    assert bench_supports.main(argv) == 0
    report = (tmp_path / "supports.md").read_text()
    assert report.strip() in capsys.readouterr().out
    assert "CPU: " in report

    timed = _rows(report, "| m | score alone s")
    assert [row[0] for row in timed] == ["2", "3"]
    for _, alone, both, ratio, answers in timed:
        assert float(alone) > 0 and float(both) > 0 and answers == "3"
        # the ratio of the medians (the seconds are shown rounded to the millisecond)
        assert float(ratio) > 0
        assert abs(float(ratio) - float(both) / float(alone)) <= 0.05 * float(ratio)
    largest = float(re.search(r"Largest ratio: ([0-9]+\.[0-9]+)", report).group(1))
    assert largest == max(float(row[3]) for row in timed)

    held = _rows(report, "| m | answer tokens")
    assert [row[0] for row in held] == ["2", "3"]
    for _, tokens, nbytes, per_token in held:
        assert int(tokens) > 0 and int(nbytes) > 0
        assert float(per_token) == round(int(nbytes) / int(tokens), 1)
    # the supports hold one row per answer token, whatever m is
    assert held[0][1:] == held[1][1:]
