"""``uqlm-bert evaluate``: BLEU, ROUGE and BERTScore of predictions against references."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest

from tests.helpers.places import unwritable_directory
from uqlm_bert import BERTScorer
from uqlm_bert.cli import main
from uqlm_bert.evaluation._references import evaluate_references
from uqlm_bert.io._reading import read_table

sacrebleu = pytest.importorskip("sacrebleu")
rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")

KEYS = ["bleu", "bleu_precisions", "rouge1", "rouge2", "rougeL", "bertscore_precision",
        "bertscore_recall", "bertscore_f1"]  # fmt: skip

PREDICTIONS = [
    "The quick brown dog jumps.",
    "A cat sat on the mat.",
    "Paris is the capital of France.",
]
REFERENCES = [
    "The quick brown fox jumps.",
    "The cat is sitting on the mat.",
    "The capital of France is Paris.",
]


def write_lines(path, lines) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def f_measure(overlap: int, n_pred: int, n_ref: int) -> float:
    p, r = overlap / n_pred, overlap / n_ref
    return 2 * p * r / (p + r)


def test_hand_worked_case(tmp_path, capsys):
    preds = write_lines(tmp_path / "pred.txt", PREDICTIONS[:1])
    refs = write_lines(tmp_path / "ref.txt", REFERENCES[:1])
    code, stdout, stderr = run(["evaluate", preds, refs, "--format", "json", "-q"], capsys)
    assert code == 0, stderr
    got = json.loads(stdout)
    assert list(got) == KEYS

    # ROUGE (lowercased words): the quick brown {dog|fox} jumps
    #   unigrams: 4 of 5 shared; bigrams: the-quick, quick-brown shared, 2 of 4;
    #   longest common subsequence: the quick brown jumps, 4 of 5.
    assert got["rouge1"] == pytest.approx(f_measure(4, 5, 5)) and f_measure(
        4, 5, 5
    ) == pytest.approx(0.8)
    assert got["rouge2"] == pytest.approx(f_measure(2, 4, 4)) and f_measure(
        2, 4, 4
    ) == pytest.approx(0.5)
    assert got["rougeL"] == pytest.approx(0.8)

    # BLEU, 13a tokens: The quick brown dog jumps .  (6 tokens; the reference also has 6)
    #   1-grams 5/6, 2-grams 3/5 (The quick, quick brown, jumps .), 3-grams 1/4 (The quick
    #   brown), 4-grams 0/3, which exponential smoothing turns into 1 / (2 * 3); no brevity
    #   penalty since the lengths are equal.
    precisions = [5 / 6, 3 / 5, 1 / 4, 1 / (2 * 3)]
    assert got["bleu_precisions"] == pytest.approx([100 * p for p in precisions])
    assert got["bleu"] == pytest.approx(100 * math.prod(precisions) ** 0.25)
    # and sacrebleu agrees, sentence and corpus
    assert got["bleu"] == pytest.approx(
        sacrebleu.sentence_bleu(PREDICTIONS[0], [REFERENCES[0]]).score
    )

    _, _, F = BERTScorer(show_progress_bars=False).score(PREDICTIONS[:1], REFERENCES[:1])
    assert got["bertscore_f1"] == pytest.approx(float(F[0]), abs=1e-6)


def test_corpus_scores_and_per_line_file(tmp_path, capsys):
    preds = write_lines(tmp_path / "pred.txt", PREDICTIONS)
    refs = write_lines(tmp_path / "ref.txt", REFERENCES)
    per_line = tmp_path / "lines.csv"
    argv = ["evaluate", preds, refs, "--format", "json", "--per-line", per_line,
            "--num-layers", "4", "-q"]  # fmt: skip
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    got = json.loads(stdout)

    corpus = sacrebleu.corpus_bleu(PREDICTIONS, [REFERENCES])
    assert got["bleu"] == pytest.approx(corpus.score)
    assert got["bleu_precisions"] == pytest.approx(corpus.precisions)
    rouge = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    by_line = [rouge.score(r, p) for p, r in zip(PREDICTIONS, REFERENCES, strict=True)]
    for t in ("rouge1", "rouge2", "rougeL"):
        assert got[t] == pytest.approx(np.mean([s[t].fmeasure for s in by_line]))
    P, R, F = BERTScorer(num_layers=4, show_progress_bars=False).score(PREDICTIONS, REFERENCES)
    assert got["bertscore_precision"] == pytest.approx(float(P.double().mean()), abs=1e-6)
    assert got["bertscore_recall"] == pytest.approx(float(R.double().mean()), abs=1e-6)
    assert got["bertscore_f1"] == pytest.approx(float(F.double().mean()), abs=1e-6)

    df = read_table(str(per_line))  # CSV cells come back as text
    assert df["prediction"].tolist() == PREDICTIONS and df["reference"].tolist() == REFERENCES
    assert df["line"].tolist() == ["1", "2", "3"]
    for i, (p, r) in enumerate(zip(PREDICTIONS, REFERENCES, strict=True)):
        assert float(df["bleu"][i]) == pytest.approx(sacrebleu.sentence_bleu(p, [r]).score)
        assert float(df["rougeL"][i]) == pytest.approx(by_line[i]["rougeL"].fmeasure)
        assert float(df["bertscore_f1"][i]) == pytest.approx(float(F[i]), abs=1e-6)


def test_table_format_prints_every_score(tmp_path, capsys):
    preds = write_lines(tmp_path / "pred.txt", PREDICTIONS)
    refs = write_lines(tmp_path / "ref.txt", REFERENCES)
    code, stdout, _ = run(["evaluate", preds, refs, "-q"], capsys)
    assert code == 0
    table = dict(line.split() for line in stdout.splitlines())
    corpus = sacrebleu.corpus_bleu(PREDICTIONS, [REFERENCES])
    assert table["lines"] == "3"
    assert table["bleu"] == f"{corpus.score:.4f}"
    assert [table[f"bleu_precision_{n}"] for n in (1, 2, 3, 4)] == [
        f"{p:.4f}" for p in corpus.precisions
    ]
    assert {"rouge1", "rouge2", "rougeL", "bertscore_precision", "bertscore_recall",
            "bertscore_f1"} <= set(table)  # fmt: skip


def test_mismatched_line_counts_exit_2_naming_both_files(tmp_path, capsys):
    preds = write_lines(tmp_path / "pred.txt", PREDICTIONS)
    refs = write_lines(tmp_path / "ref.txt", REFERENCES[:2])
    code, stdout, stderr = run(["evaluate", preds, refs], capsys)
    assert code == 2 and stdout == ""
    assert f"{preds} has 3 lines but {refs} has 2" in stderr


@pytest.mark.parametrize(
    ("pred_text", "argv_tail", "message"),
    [
        ("", [], "no lines to evaluate"),
        ("a\n", ["--per-line", "{d}/lines.txt"], "lines.txt: unknown table format"),
        ("a\n", ["--format", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_other_input_errors_exit_2(tmp_path, capsys, pred_text, argv_tail, message):
    (tmp_path / "pred.txt").write_text(pred_text)
    (tmp_path / "ref.txt").write_text(pred_text)
    tail = [a.format(d=tmp_path) for a in argv_tail]
    code, _, stderr = run(["evaluate", tmp_path / "pred.txt", tmp_path / "ref.txt", *tail], capsys)
    assert code == 2
    assert message in stderr


def test_missing_file_exits_2(tmp_path, capsys):
    refs = write_lines(tmp_path / "ref.txt", REFERENCES)
    code, _, stderr = run(["evaluate", tmp_path / "absent.txt", refs], capsys)
    assert code == 2 and "absent.txt: no such file" in stderr


def test_library_function_rejects_mismatched_lists():
    from uqlm_bert import InputValidationError

    with pytest.raises(InputValidationError, match="predictions has 2 texts but references has 1"):
        evaluate_references(["a", "b"], ["a"])


# -- tables ----------------------------------------------------------------------------------------

#: A model that does not exist: a command that gets as far as loading it fails differently.
NO_MODEL = ["--model-type", "/nonexistent/model-directory"]


def write_table_shape(path, column: str, texts: list[str], shape: str) -> str:
    """``texts`` in ``column`` of a table (with an id column), written as pandas writes it."""
    frame = pd.DataFrame({"id": range(1, len(texts) + 1), column: texts})
    target = str(path)
    if shape == "jsonl":
        frame.to_json(target, orient="records", lines=True)
    elif shape == "json":
        frame.to_json(target, orient="records")
    elif shape == "json-indented":
        frame.to_json(target, orient="records", indent=2)
    elif shape == "csv":
        frame.to_csv(target, index=False)
    else:
        pytest.importorskip("pyarrow")
        frame.to_parquet(target, index=False)
    return target


SUFFIX = {"jsonl": ".jsonl", "json": ".json", "json-indented": ".json", "csv": ".csv",
          "parquet": ".parquet"}  # fmt: skip


@pytest.mark.parametrize(
    ("pred_shape", "pred_column", "ref_shape"),
    [("jsonl", "response", "csv"), ("json", "prediction", "jsonl"),
     ("json-indented", "response", "parquet"), ("csv", "prediction", "json"),
     ("parquet", "response", "json-indented")],
)  # fmt: skip
def test_tables_are_read_by_their_columns_as_text_files_are_by_lines(
    tmp_path, capsys, pred_shape, pred_column, ref_shape
):
    expected_code, expected_out, _ = run(
        ["evaluate", write_lines(tmp_path / "p.txt", PREDICTIONS),
         write_lines(tmp_path / "r.txt", REFERENCES), "--format", "json", "-q"], capsys,
    )  # fmt: skip
    assert expected_code == 0
    preds = write_table_shape(
        tmp_path / f"answers{SUFFIX[pred_shape]}", pred_column, PREDICTIONS, pred_shape
    )
    refs = write_table_shape(
        tmp_path / f"gold{SUFFIX[ref_shape]}", "reference", REFERENCES, ref_shape
    )
    code, stdout, stderr = run(["evaluate", preds, refs, "--format", "json", "-q"], capsys)
    assert code == 0, stderr
    got, expected = json.loads(stdout), json.loads(expected_out)
    assert list(got) == KEYS
    for key in KEYS:
        assert got[key] == pytest.approx(expected[key], abs=1e-9), key
    corpus = sacrebleu.corpus_bleu(PREDICTIONS, [REFERENCES])  # not BLEU of raw file lines
    assert got["bleu"] == pytest.approx(corpus.score)


def test_column_defaults_and_options(tmp_path, capsys):
    preds = tmp_path / "answers.jsonl"
    rows = [{"prediction": p, "response": r, "gold": g}
            for p, r, g in zip(PREDICTIONS, REFERENCES, PREDICTIONS, strict=True)]  # fmt: skip
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    refs = write_table_shape(tmp_path / "refs.csv", "reference", REFERENCES, "csv")
    per_line = tmp_path / "lines.jsonl"

    def texts_used(*options):
        argv = ["evaluate", preds, refs, "--per-line", per_line, "-q", *options]
        code, _, stderr = run(argv, capsys)
        assert code == 0, stderr
        records = [json.loads(line) for line in per_line.read_text().splitlines()]
        return [r["prediction"] for r in records], [r["reference"] for r in records]

    assert texts_used() == (PREDICTIONS, REFERENCES)  # "prediction" comes before "response"
    assert texts_used("--prediction-column", "response") == (REFERENCES, REFERENCES)
    both = texts_used("--prediction-column", "response", "--reference-column", "reference")
    assert both == (REFERENCES, REFERENCES)
    # one table holding both columns serves as both files
    assert run(["evaluate", preds, preds, "--reference-column", "gold", "-q"], capsys)[0] == 0


@pytest.mark.parametrize(
    ("names", "options", "message"),
    [
        (("p.jsonl", "r.jsonl"), ["--reference-column", "gold"],
         "r.jsonl: no column 'gold'; the columns are: id, reference"),
        (("q.jsonl", "r.jsonl"), [], "q.jsonl: no column 'prediction' or 'response'; the columns "
         "are: id, question"),
        (("p.jsonl", "r.tsv"), [], "r.tsv: unknown format '.tsv'; give a text file (.txt"),
        (("p.jsonl", "references"), [], "references: unknown format '(no suffix)'"),
        (("p.txt", "r.jsonl"), ["--prediction-column", "text"],
         "p.txt: a column ('text') is named, but a .txt file is plain text"),
        (("p.jsonl", "r.txt"), [], "p.jsonl has 3 rows but {d}/r.txt has 2 lines"),
    ],
)  # fmt: skip
def test_files_that_cannot_be_paired_exit_2(tmp_path, capsys, names, options, message):
    write_table_shape(tmp_path / "p.jsonl", "prediction", PREDICTIONS, "jsonl")
    write_table_shape(tmp_path / "q.jsonl", "question", PREDICTIONS, "jsonl")
    write_table_shape(tmp_path / "r.jsonl", "reference", REFERENCES, "jsonl")
    write_lines(tmp_path / "p.txt", PREDICTIONS)
    write_lines(tmp_path / "r.txt", REFERENCES[:2])
    for other in ("r.tsv", "references"):
        write_lines(tmp_path / other, REFERENCES)
    code, stdout, stderr = run(["evaluate", *(tmp_path / n for n in names), *options], capsys)
    assert code == 2 and stdout == ""
    assert message.format(d=tmp_path) in stderr


def test_rows_without_a_text_are_kept_with_nan_scores_and_the_reason(tmp_path, capsys):
    from uqlm_bert.evaluation._references import evaluate_references

    preds = tmp_path / "answers.jsonl"
    preds.write_text(
        json.dumps({"response": PREDICTIONS[0]}) + "\n"
        + json.dumps({"response": None}) + "\n"  # line 2: no prediction
        + '{"response": "broken\n'  # line 3: not JSON
        + json.dumps({"response": PREDICTIONS[2]}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    refs = write_table_shape(
        tmp_path / "gold.csv", "reference", [REFERENCES[0], "x", "y", REFERENCES[2]], "csv"
    )
    per_line = tmp_path / "lines.csv"
    argv = ["evaluate", preds, refs, "--format", "json", "--per-line", per_line, "-q"]
    code, stdout, stderr = run(argv, capsys)
    assert code == 1
    assert f"{preds}:2: field 'response': missing (empty or null)" in stderr
    assert f"{preds}:3: not valid JSON (Unterminated string starting at column 14)" in stderr
    assert "2 row(s) not evaluated" in stderr

    good_p, good_r = [PREDICTIONS[0], PREDICTIONS[2]], [REFERENCES[0], REFERENCES[2]]
    alone = evaluate_references(good_p, good_r, bertscore_kwargs={"show_progress_bars": False})
    got = json.loads(stdout)
    for key in KEYS:
        assert got[key] == pytest.approx(alone.summary[key], abs=1e-6), key

    df = read_table(str(per_line))
    assert df["line"].tolist() == ["1", "2", "3", "4"]
    assert df["prediction"].tolist() == [PREDICTIONS[0], None, None, PREDICTIONS[2]]
    assert df["bertscore_f1"][1] is None and df["bleu"][2] is None
    assert float(df["bertscore_f1"][3]) == pytest.approx(
        float(alone.per_line["bertscore_f1"][1]), abs=1e-6
    )
    assert df["score_error"].tolist()[0] is None and df["score_error"].tolist()[3] is None
    assert df["score_error"][1] == f"{preds}:2: field 'response': missing (empty or null)"
    assert df["score_error"][2].startswith(f"{preds}:3: not valid JSON")


def test_no_row_to_evaluate_exits_2(tmp_path, capsys):
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"prediction": null}\n', encoding="utf-8")
    refs = write_table_shape(tmp_path / "r.jsonl", "reference", ["x"], "jsonl")
    code, _, stderr = run(["evaluate", preds, refs, "-q"], capsys)
    assert code == 2
    assert f"{preds}:1: field 'prediction': missing" in stderr
    assert "has both a prediction and a reference" in stderr


@pytest.mark.parametrize("which", ["predictions", "references", "dot-slash", "symlink"])
def test_per_line_output_that_is_an_input_is_refused(tmp_path, capsys, monkeypatch, which):
    monkeypatch.chdir(tmp_path)
    write_table_shape(tmp_path / "p.csv", "prediction", PREDICTIONS, "csv")
    write_table_shape(tmp_path / "r.csv", "reference", REFERENCES, "csv")
    before = {n: (tmp_path / n).read_bytes() for n in ("p.csv", "r.csv")}
    os.symlink("r.csv", "link.csv")
    per_line, name = {
        "predictions": ("p.csv", "PREDICTIONS p.csv"),
        "references": ("r.csv", "REFERENCES r.csv"),
        "dot-slash": ("./p.csv", "PREDICTIONS p.csv"),
        "symlink": ("link.csv", "REFERENCES r.csv"),
    }[which]
    code, _, stderr = run(["evaluate", "p.csv", "r.csv", "--per-line", per_line, *NO_MODEL], capsys)
    assert code == 2
    assert f"--per-line {per_line} is the same file as {name}" in stderr
    assert {n: (tmp_path / n).read_bytes() for n in before} == before


def test_per_line_output_that_cannot_be_written_is_refused_before_the_model_loads(tmp_path, capsys):
    preds = write_lines(tmp_path / "p.txt", PREDICTIONS)
    refs = write_lines(tmp_path / "r.txt", REFERENCES)
    directory = unwritable_directory(tmp_path)
    per_line = os.path.join(directory, "lines.csv")
    code, _, stderr = run(["evaluate", preds, refs, "--per-line", per_line, *NO_MODEL], capsys)
    assert code == 2
    assert f"{per_line}: cannot write in the directory {directory}" in stderr


def test_bad_byte_in_a_text_file_is_reported_at_its_offset_and_line(tmp_path, capsys):
    body = ("A line of text.\n" * 3000).encode()[:46_014]
    preds = tmp_path / "p.txt"
    preds.write_bytes(body + b"\xc3(\n")
    refs = write_lines(tmp_path / "r.txt", REFERENCES)
    code, _, stderr = run(["evaluate", preds, refs], capsys)
    assert code == 2
    line = body.count(b"\n") + 1
    assert f"{preds}:{line}: not UTF-8 text: byte 0xc3 at offset 46014 of the file" in stderr
