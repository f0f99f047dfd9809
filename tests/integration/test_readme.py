"""The README's quick start is runnable as written, and CI runs its test command."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


def _quick_start_commands() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"^## Quick start\n.*?```\w*\n(.*?)```", text, re.S | re.M)
    assert block, "README.md has no '## Quick start' code block"
    return [
        line
        for line in block.group(1).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_quick_start_has_exactly_two_commands():
    cmds = _quick_start_commands()
    assert len(cmds) == 2, cmds
    assert all(c.startswith("bash scripts/setup-env.sh") for c in cmds)
    assert "pytest" in cmds[1]


@pytest.mark.slow
def test_ci_runs_the_readme_test_command():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "sed -n 2p" in ci and "README.md" in ci
    out = subprocess.run(
        [
            "bash",
            "-c",
            "awk '/^## Quick start/{q=1;next} q&&/^```/{if(b){exit}b=1;next} q&&b' README.md | "
            "grep -v -e '^\\s*#' -e '^\\s*$' | sed -n 2p",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == _quick_start_commands()[1]


@pytest.mark.slow
@pytest.mark.network
def test_main_job_of_the_quick_start_runs():
    """The first command's main job, run with this interpreter (the install part is what CI's
    fresh environment exercises): the real local LLM answers the shipped questions, and the
    output shows each confidence, flag and verdict, and the separation line."""
    from uqlm_bert.examples import load_questions

    setup, _, job = _quick_start_commands()[0].partition(" && ")
    assert setup == "bash scripts/setup-env.sh local"
    argv = job.split()
    assert argv[0] == ".venv/bin/python"
    result = subprocess.run(
        [sys.executable, *argv[1:], "--quiet"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "confidence" in lines[0] and "right" in lines[0]
    questions = [q["question"] for q in load_questions(30)]
    rows = lines[1 : 1 + len(questions)]
    for question, row in zip(questions, rows, strict=True):
        confidence, rest = row.split(maxsplit=1)
        assert 0.0 <= float(confidence) <= 1.0, row
        assert f"{question} -> " in rest, row
        assert ("yes" in rest.split(question)[0]) != ("no" in rest.split(question)[0]), row
    assert "flagged as likely hallucinations" in result.stdout
    # the separation line, or (a model right on every question or none) why there is none
    assert re.search(r"^Separation: (AUROC [01]\.\d\d|none to measure)", result.stdout, re.M)
    # what sampling until settled drew, against a fixed run's 30 x 5 samples and 30 x 2 calls
    drawn = re.search(r"^Samples drawn: (\d+) of a fixed run's (\d+) \((\d+)%\), in (\d+) calls "
                      r"\(a fixed run: (\d+)\)", result.stdout, re.M)  # fmt: skip
    assert drawn, result.stdout
    samples, fixed, share, _, fixed_calls = map(int, drawn.groups())
    assert fixed == 30 * 5 and fixed_calls == 30 * 2
    assert 30 * 3 <= samples <= fixed and share == round(100 * samples / fixed)
