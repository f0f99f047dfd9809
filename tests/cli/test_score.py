"""``uqlm-bert score`` and the command's common behaviour: outputs, problems, exit codes, Ray."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.helpers.company import in_company
from tests.helpers.expected import default_confidence, precision_confidence
from uqlm_bert import BERTScorer
from uqlm_bert.cli import main
from uqlm_bert.io._reading import read_table
from uqlm_bert.scorers._bertscore import SCORER_DEFAULTS

REPO_ROOT = Path(__file__).resolve().parents[2]


def expected_confidence(scorer: BERTScorer, response, samples) -> float:
    """The default confidence of the response against each present sample (no prompts in
    these tables: punctuation weighs 0)."""
    return default_confidence(scorer, response, samples)


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_jsonl(path: Path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


ROWS = [
    {
        "id": "a",
        "prompt": "Boiling point of water?",
        "response": "Water boils at 100 degrees Celsius.",
        "sampled_responses": ["At sea level water boils at 100 C.", None, "It boils at 90 C."],
    },
    {
        "id": "b",
        "prompt": "Capital of Peru?",
        "response": "Lima is the capital of Peru.",
        "sampled_responses": ["The capital of Peru is Lima.", "Cusco."],
    },
    {"id": "c", "prompt": "Nothing came back", "response": "An answer.", "sampled_responses": []},
    {
        "id": "d",
        "prompt": "Who wrote Hamlet?",
        "response": "Shakespeare.",
        "sampled_responses": ["Christopher Marlowe wrote it in 1590.", "William Shakespeare."],
    },
]


# -- score: output ---------------------------------------------------------------------------------


def test_score_keeps_every_row_and_column_and_adds_one_column_per_scorer(
    tmp_path, capsys, default_engine
):
    src = write_jsonl(tmp_path / "answers.jsonl", ROWS)
    out = tmp_path / "scored.csv"
    code, stdout, stderr = run(["score", src, "-o", out, "--quiet"], capsys)
    assert code == 0, stderr
    df = read_table(str(out))
    assert list(df.columns) == ["id", "prompt", "response", "sampled_responses", "bert_score",
                                "score_error"]  # fmt: skip
    assert df["id"].tolist() == ["a", "b", "c", "d"]
    assert [json.loads(s) for s in df["sampled_responses"]] == [
        r["sampled_responses"] for r in ROWS
    ]
    expected = [
        expected_confidence(default_engine, r["response"], r["sampled_responses"]) for r in ROWS
    ]
    got = [math.nan if v is None else float(v) for v in df["bert_score"]]
    np.testing.assert_allclose(got, expected, atol=in_company(1e-6), equal_nan=True)
    assert math.isnan(got[2]) and math.isnan(expected[2])  # no samples: NaN, but not a failure
    assert df["score_error"].tolist() == [None] * 4

    # the summary: counts, then mean / median / min / max of the scored rows (those written)
    assert "rows: 4  failed: 0" in stdout
    line = next(ln for ln in stdout.splitlines() if ln.startswith("bert_score"))
    present = np.array([got[0], got[1], got[3]])
    assert abs(present.mean() - np.median(present)) > 1e-3  # the summary must tell them apart
    assert line.split()[1:] == ["3"] + [
        f"{v:.4f}" for v in (present.mean(), np.median(present), present.min(), present.max())
    ]
    # --quiet: no progress bar
    assert "%|" not in stderr and "it/s" not in stderr


def test_score_passes_bertscore_settings_to_the_engine(tmp_path, capsys):
    src = write_jsonl(tmp_path / "answers.jsonl", ROWS[:2])
    out = tmp_path / "scored.jsonl"
    argv = ["score", src, "-o", out, "-q", "--num-layers", "3", "--batch-size", "4",
            "--scorers", "bert_score_precision, bert_score"]  # fmt: skip
    code, _, stderr = run(argv, capsys)
    assert code == 0, stderr
    layer3 = BERTScorer.from_settings(
        SCORER_DEFAULTS.replace(num_layers=3), show_progress_bars=False
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert list(records[0])[-3:] == ["bert_score_precision", "bert_score", "score_error"]
    for row, rec in zip(ROWS[:2], records, strict=True):
        present = [s for s in row["sampled_responses"] if s is not None]
        assert rec["bert_score_precision"] == pytest.approx(
            precision_confidence(layer3, row["response"], present), abs=in_company(1e-6)
        )
        assert rec["bert_score"] == pytest.approx(
            default_confidence(layer3, row["response"], present), abs=in_company(1e-6)
        )


def test_existing_score_column_is_replaced_in_place(tmp_path, capsys):
    rows = [{"response": r["response"], "bert_score": "old", "sampled_responses": r["sampled_responses"]}
            for r in ROWS[:2]]  # fmt: skip
    src = write_jsonl(tmp_path / "rescore.jsonl", rows)
    out = tmp_path / "out.jsonl"
    code, _, _ = run(["score", src, "-o", out, "-q"], capsys)
    assert code == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert list(first) == ["response", "bert_score", "sampled_responses", "score_error"]
    assert isinstance(first["bert_score"], float)


def test_parquet_output_from_jsonl_input(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    src = write_jsonl(tmp_path / "answers.jsonl", ROWS)
    out = tmp_path / "scored.parquet"
    code, _, stderr = run(["score", src, "-o", out, "-q"], capsys)
    assert code == 0, stderr
    df = read_table(str(out))
    assert df["sampled_responses"].tolist() == [r["sampled_responses"] for r in ROWS]
    assert df["id"].tolist() == ["a", "b", "c", "d"]


# -- score: malformed rows -------------------------------------------------------------------------


def test_malformed_csv_rows_are_reported_and_leave_other_rows_alone(
    tmp_path, capsys, default_engine
):
    good = ROWS[1]
    src = tmp_path / "answers.csv"
    src.write_text(
        "prompt,response,sampled_responses\n"  # line 1
        f'"two\nlines","{good["response"]}","{json.dumps(good["sampled_responses"]).replace(chr(34), chr(34) * 2)}"\n'
        'q2,Lima,"[""Lima"", oops]"\n'  # line 4: broken JSON list
        'q3,,"[""x""]"\n'  # line 5: no response
        f'q4,"{good["response"]}","[""Cusco.""]"\n',  # line 6
        encoding="utf-8",
    )
    out = tmp_path / "scored.jsonl"
    code, stdout, stderr = run(["score", src, "-o", out, "-q"], capsys)
    assert code == 1
    assert f"{src}:4: field 'sampled_responses': not a JSON list" in stderr
    assert f"{src}:5: field 'response': missing (empty or null)" in stderr
    assert "2 row(s) not scored" in stderr
    assert "rows: 4  failed: 2" in stdout

    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["prompt"] for r in records] == ["two\nlines", "q2", "q3", "q4"]
    assert records[1]["sampled_responses"] == '["Lima", oops]'  # kept as it was read
    assert records[1]["bert_score"] is None and records[2]["bert_score"] is None
    assert "not a JSON list" in records[1]["score_error"]
    assert records[2]["score_error"] == "field 'response': missing (empty or null)"
    assert records[0]["score_error"] is None and records[3]["score_error"] is None
    assert records[0]["bert_score"] == pytest.approx(
        expected_confidence(default_engine, good["response"], good["sampled_responses"]), abs=1e-6
    )
    assert records[3]["bert_score"] == pytest.approx(
        expected_confidence(default_engine, good["response"], ["Cusco."]), abs=1e-6
    )


def test_unparseable_jsonl_line_keeps_the_output_aligned(tmp_path, capsys):
    src = tmp_path / "answers.jsonl"
    lines = [json.dumps(ROWS[0]), '{"id": "broken", "response": ', json.dumps(ROWS[1])]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "scored.csv"
    code, _, stderr = run(["score", src, "-o", out, "-q"], capsys)
    assert code == 1
    assert f"{src}:2: not valid JSON" in stderr
    df = read_table(str(out))
    assert len(df) == 3
    assert df["id"].tolist() == ["a", None, "b"]
    assert df["bert_score"][1] is None and df["bert_score"][0] is not None
    assert df["score_error"][1].startswith("not valid JSON") and '"broken"' in df["score_error"][1]


def test_many_problems_are_summarised_after_the_first_twenty(tmp_path, capsys):
    rows = [{"response": None, "sampled_responses": []} for _ in range(25)]
    src = write_jsonl(tmp_path / "bad.jsonl", rows)
    code, _, stderr = run(["score", src, "-o", tmp_path / "out.jsonl", "-q"], capsys)
    assert code == 1
    listed = [ln for ln in stderr.splitlines() if ln.startswith(src)]
    assert len(listed) == 20
    assert "... and 5 more; 25 row(s) not scored" in stderr


# -- score: usage and input errors -----------------------------------------------------------------


def test_missing_column_exits_2_naming_file_and_column(tmp_path, capsys):
    src = write_jsonl(tmp_path / "answers.jsonl", [{"response": "a", "samples": ["a"]}])
    out = tmp_path / "out.jsonl"
    code, _, stderr = run(["score", src, "-o", out], capsys)
    assert code == 2
    assert f"{src}: no column 'sampled_responses'" in stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["score", "{src}", "-o", "{d}/out.txt"], "out.txt: unknown table format '.txt'"),
        (["score", "{d}/in.xlsx", "-o", "{d}/out.csv"], "in.xlsx: unknown table format"),
        (["score", "{d}/absent.csv", "-o", "{d}/out.csv"], "absent.csv: no such file"),
        (["score", "{src}", "-o", "{d}/no/out.csv"], "the directory {d}/no does not exist"),
        (["score", "{src}", "-o", "{d}/out.csv", "--scorers", "bert_score,nope"],
         "unknown scorer 'nope'; known scorers: "),
        (["score", "{src}", "-o", "{d}/out.csv", "--scorers", "bert_score,bert_score"],
         "is listed twice"),
        (["score", "{src}", "-o", "{d}/out.csv", "--address", "auto"],
         "--address and --num-workers need --engine ray"),
        (["score", "{src}", "-o", "{d}/out.csv", "--num-layers", "-1"],
         "num_layers must be an int >= 0 or None, got -1"),
        (["score", "{src}", "-o", "{d}/out.csv", "--dtype", "int8"], "invalid choice: 'int8'"),
        (["score", "{src}"], "the following arguments are required: -o/--output"),
        ([], "the following arguments are required: COMMAND"),
    ],
)  # fmt: skip
def test_usage_and_input_errors_exit_2_and_write_nothing(tmp_path, capsys, argv, message):
    src = write_jsonl(tmp_path / "answers.jsonl", ROWS[:1])
    fill = {"src": src, "d": str(tmp_path)}
    code, _, stderr = run([a.format(**fill) for a in argv], capsys)
    assert code == 2
    assert message.format(**fill) in stderr
    assert sorted(os.listdir(tmp_path)) == ["answers.jsonl"]


def test_a_model_that_cannot_load_exits_2_and_keeps_the_old_output(tmp_path, capsys):
    src = write_jsonl(tmp_path / "answers.jsonl", ROWS[:1])
    out = tmp_path / "out.csv"
    out.write_text("previous\n")
    missing_model = tmp_path / "no-such-model"
    code, _, stderr = run(["score", src, "-o", out, "--model-type", missing_model], capsys)
    assert code == 2
    assert "uqlm-bert: error:" in stderr
    assert out.read_text() == "previous\n"
    assert sorted(os.listdir(tmp_path)) == ["answers.jsonl", "out.csv"]


def test_help_and_version(capsys):
    code, stdout, _ = run(["--help"], capsys)
    assert code == 0
    for command in ("score", "generate-and-score", "evaluate"):
        assert command in stdout
    code, stdout, _ = run(["--version"], capsys)
    from uqlm_bert import __version__

    assert code == 0 and stdout.strip() == f"uqlm-bert {__version__}"


# -- score --engine ray ----------------------------------------------------------------------------


def test_ray_engine_without_ray_installed_exits_2_with_the_install_hint(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    src = write_jsonl(tmp_path / "answers.jsonl", ROWS[:1])
    out = tmp_path / "out.jsonl"
    code, _, stderr = run(["score", src, "-o", out, "--engine", "ray"], capsys)
    assert code == 2
    assert "pip install 'uqlm-bert[ray]'" in stderr
    assert not out.exists()


# -- python -m uqlm_bert ---------------------------------------------------------------------------


@pytest.mark.slow
def test_python_dash_m_runs_the_command(tmp_path, capsys):
    src = write_jsonl(tmp_path / "answers.jsonl", ROWS)
    in_process = tmp_path / "in_process.csv"
    assert main(["score", src, "-o", str(in_process), "-q"]) == 0
    capsys.readouterr()
    out = tmp_path / "subprocess.csv"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "uqlm_bert", "score", src, "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "rows: 4  failed: 0" in proc.stdout
    a, b = pd.read_csv(in_process), pd.read_csv(out)
    pd.testing.assert_frame_equal(a, b, atol=1e-6)


@pytest.mark.slow
def test_a_warning_on_the_terminal_reads_as_the_commands_own_message(tmp_path):
    """Warnings reach the terminal as ``uqlm-bert: warning: ...``, without the code location
    (``<frozen runpy>:88:`` under ``python -m``) that means nothing to a user of the command."""
    src = tmp_path / "answers.jsonl"
    # a lone surrogate, as a JSON escape can carry: repaired on reading, with a warning
    src.write_text('{"response": "a \\ud800", "sampled_responses": ["a"]}\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "uqlm_bert", "score", str(src), "-o", str(tmp_path / "o.jsonl"),
         "-q", "--scorers", "exact_match"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "not valid Unicode" in ln]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"uqlm-bert: warning: {src}: 1 record(s) held text"), lines
    assert "runpy" not in proc.stderr and "Warning:" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_score_explains_words_and_refines_a_file_of_answers(tmp_path, capsys, suffix):
    """``score --explain --words --refine``: each answer marked on stdout, its words and its
    refined form beside its scores in the output, the same as the library's result of the
    scored rows gives them; a row that cannot be scored gets none of them."""
    from uqlm_bert import BlackBoxUQ

    rows = [
        {"response": "Lima is the capital of Peru. It has nine moons.",
         "sampled_responses": ["Lima is the capital of Peru.", "Peru's capital is Lima."]},
        {"response": None, "sampled_responses": ["x"]},
        {"response": "Water boils at 100 C. It is made of cheese.",
         "sampled_responses": ["Water boils at 100 C at sea level.", "It boils at 100 C."]},
    ]  # fmt: skip
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / f"out{suffix}"
    code, stdout, _ = run(
        ["score", src, "-o", out, "-q", "--explain", "--words", "--refine"], capsys
    )
    assert code == 1  # the row without a response
    table = read_table(str(out))
    good = [rows[0], rows[2]]
    result = BlackBoxUQ(show_progress_bars=False).score(
        [r["response"] for r in good], [r["sampled_responses"] for r in good]
    )
    refined = result.refine()
    for row, position in ((0, 0), (2, 1)):
        words = table["words"][row]
        words = json.loads(words) if isinstance(words, str) else words
        expected = result.words()
        expected = expected[(expected["prompt_index"] == position) & expected["counted"]]
        assert [w["word"] for w in words] == expected["word"].tolist()
        assert table["refinement"][row] == refined["refinement"][position]
        if refined["refined_response"][position] is None:
            assert pd.isna(table["refined_response"][row])
        else:
            assert table["refined_response"][row] == refined["refined_response"][position]
    assert table["refined_response"][0] == "Lima is the capital of Peru."
    assert pd.isna(table["refined_response"][1]) and pd.isna(table["words"][1])
    assert "Lima is the capital of Peru. ~~It has [nine] [moons].~~" in stdout
    assert "in ~~tildes~~" in stdout


def test_score_refuses_what_the_ray_engine_cannot_give(tmp_path, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", ROWS[:1])
    code, _, stderr = run(
        ["score", src, "-o", tmp_path / "o.jsonl", "-q", "--refine", "--engine", "ray"], capsys
    )
    assert code == 2 and "--engine local" in stderr
    code, _, stderr = run(
        ["score", src, "-o", tmp_path / "o.jsonl", "-q", "--refine", "hi"], capsys
    )
    assert code == 2 and "--refine takes a sentence threshold" in stderr
