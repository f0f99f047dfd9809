"""``uqlm-bert evaluate``: BLEU, ROUGE and BERTScore of predictions against references."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from uqlm_bert import BERTScorer
from uqlm_bert.cli import main
from uqlm_bert.io import read_table
from uqlm_bert.evaluation.references import evaluate_references

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
    assert code == 2 and "absent.txt: cannot read" in stderr


def test_library_function_rejects_mismatched_lists():
    from uqlm_bert.exceptions import InputValidationError

    with pytest.raises(InputValidationError, match="predictions has 2 texts but references has 1"):
        evaluate_references(["a", "b"], ["a"])
