"""``uqlm-bert generate-and-score`` through ChatOpenAI against a scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import math
import os

import pandas as pd
import pytest

from fakes.openai_server import FakeOpenAIServer, answer_text
from tests.helpers.expected import default_confidence
from tests.helpers.places import unwritable_directory
from uqlm_bert import BERTScorer
from uqlm_bert.cli import main
from uqlm_bert.io._reading import read_table
from uqlm_bert.scorers._bertscore import SCORER_DEFAULTS

pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.network

KEY_VAR = "UQLM_BERT_TEST_KEY"
KEY = "sk-test-8c1f-do-not-print"


def record_authorization(server: FakeOpenAIServer) -> list[str | None]:
    """Log the Authorization header of every request the server gets from now on."""
    seen: list[str | None] = []
    base = server._httpd.RequestHandlerClass

    class Recording(base):
        def do_POST(self):  # noqa: N802 - stdlib name
            seen.append(self.headers.get("Authorization"))
            super().do_POST()

    server._httpd.RequestHandlerClass = Recording
    return seen


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def mean_f1(scorer: BERTScorer, response: str, samples: list[str], prompt: str) -> float:
    """The default confidence (generation knows the prompt: its tokens weigh 0)."""
    return default_confidence(scorer, response, samples, prompt)


def test_generate_and_score_from_a_text_file(tmp_path, capsys, server, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    server.add_rule("fails", status=400, temperature=0.25)  # the original answer fails for good
    auth = record_authorization(server)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("What is 2+2?\n\nthis one fails\nCapital of Peru?\n", encoding="utf-8")
    out = tmp_path / "scored.csv"
    argv = ["generate-and-score", prompts, "-o", out, "--model", "fake-model",
            "--base-url", server.base_url, "--api-key-env", KEY_VAR, "-m", "2",
            "--temperature", "0.25", "--sampling-temperature", "0.75", "--max-retries", "0",
            "--max-calls-per-min", "6000", "-q"]  # fmt: skip
    code, stdout, stderr = run(argv, capsys)
    assert code == 1  # one prompt's answer failed
    assert f"1 call(s) failed for good (bad_request) in 1 row(s): {prompts}:3; first: " in stderr

    df = read_table(str(out))
    assert list(df.columns) == ["prompt", "response", "sampled_responses", "bert_score", "error",
                                "sample_errors", "num_failed_samples", "samples_drawn"]  # fmt: skip
    assert df["prompt"].tolist() == ["What is 2+2?", "this one fails", "Capital of Peru?"]
    assert df["response"].tolist() == [
        answer_text("What is 2+2?", 0.25),
        None,
        answer_text("Capital of Peru?", 0.25),
    ]
    samples = [json.loads(s) for s in df["sampled_responses"]]
    assert samples == [[answer_text(p, 0.75)] * 2 for p in df["prompt"]]
    assert "400" in df["error"][1] and df["error"][0] is None and df["error"][2] is None

    scorer = BERTScorer.from_settings(SCORER_DEFAULTS, show_progress_bars=False)
    for i in (0, 2):
        assert float(df["bert_score"][i]) == pytest.approx(
            mean_f1(scorer, df["response"][i], samples[i], df["prompt"][i]), abs=1e-6
        )
    assert df["bert_score"][1] is None  # no answer: no score
    assert "rows: 3  failed: 1" in stdout

    # the key went to the server, and nowhere else
    assert auth and set(auth) == {f"Bearer {KEY}"}
    assert KEY not in stdout + stderr + out.read_text(encoding="utf-8")
    # every prompt: one answer at --temperature, its two samples in one call (n) at
    # --sampling-temperature
    asked = sorted((r.prompt, r.temperature, r.n) for r in server.log)
    assert asked == sorted([(p, t, n) for p in df["prompt"] for t, n in ((0.25, 1), (0.75, 2))])


def test_table_prompts_keep_their_columns_in_front(tmp_path, capsys, server, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    prompts = tmp_path / "prompts.jsonl"
    rows = [{"id": 1, "prompt": "Capital of France?", "answer": "Paris"},
            {"id": 2, "prompt": "Capital of Peru?", "answer": "Lima"}]  # fmt: skip
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "scored.jsonl"
    argv = ["generate-and-score", prompts, "-o", out, "--model", "fake-model", "--base-url",
            server.base_url, "--api-key-env", KEY_VAR, "-m", "1", "--scorers",
            "bert_score_recall", "-q"]  # fmt: skip
    code, _, stderr = run(argv, capsys)
    assert code == 0, stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert list(records[0]) == ["id", "prompt", "answer", "response", "sampled_responses",
                                "bert_score_recall", "error", "sample_errors",
                                "num_failed_samples", "samples_drawn"]  # fmt: skip
    assert [(r["id"], r["prompt"], r["answer"]) for r in records] == [
        (r["id"], r["prompt"], r["answer"]) for r in rows
    ]
    assert all(not math.isnan(r["bert_score_recall"]) for r in records)


def test_unset_key_variable_exits_2_before_any_call(tmp_path, capsys, server, monkeypatch):
    monkeypatch.delenv(KEY_VAR, raising=False)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("hello\n")
    out = tmp_path / "out.csv"
    argv = ["generate-and-score", prompts, "-o", out, "--model", "m", "--base-url",
            server.base_url, "--api-key-env", KEY_VAR]  # fmt: skip
    code, _, stderr = run(argv, capsys)
    assert code == 2
    assert f"the environment variable {KEY_VAR} is not set" in stderr
    assert server.log == [] and not out.exists()


def test_bad_prompt_rows_exit_2_naming_file_and_line(tmp_path, capsys, server, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    prompts = tmp_path / "prompts.csv"
    prompts.write_text('prompt\nfine\n""\n', encoding="utf-8")
    argv = ["generate-and-score", prompts, "-o", tmp_path / "out.csv", "--model", "m",
            "--base-url", server.base_url, "--api-key-env", KEY_VAR]  # fmt: skip
    code, _, stderr = run(argv, capsys)
    assert code == 2
    assert f"{prompts}:3: field 'prompt': missing or empty" in stderr
    assert server.log == []


def test_rejected_key_exits_2(tmp_path, capsys, server, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    server.add_rule("", status=401)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("hello\n")
    out = tmp_path / "out.csv"
    argv = ["generate-and-score", prompts, "-o", out, "--model", "m", "--base-url",
            server.base_url, "--api-key-env", KEY_VAR, "-m", "1", "-q"]  # fmt: skip
    code, stdout, stderr = run(argv, capsys)
    assert code == 2
    assert "uqlm-bert: error:" in stderr
    assert KEY not in stdout + stderr
    assert not out.exists()


# -- prompts in tables, and outputs refused before any call ----------------------------------------

PROMPTS = ["Capital of France?", "Boiling point of water?", "Who wrote 'Hamlet'?"]


def prompt_table(directory, shape: str) -> str:
    """The prompts, with an id and a day column, as pandas writes each file shape."""
    import datetime as dt

    frame = pd.DataFrame(
        {"id": [10, 20, 30], "prompt": PROMPTS,
         "day": [dt.date(2024, 1, 1), dt.date(2024, 2, 29), dt.date(1999, 12, 31)]}
    )  # fmt: skip
    if shape != "parquet":
        frame["day"] = [d.isoformat() for d in frame["day"]]
    suffix = {"jsonl": ".jsonl", "csv": ".csv", "json": ".json", "json-indented": ".json",
              "parquet": ".parquet"}[shape]  # fmt: skip
    path = str(directory / f"prompts{suffix}")
    if shape == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    elif shape == "csv":
        frame.to_csv(path, index=False)
    elif shape == "json":
        frame.to_json(path, orient="records")
    elif shape == "json-indented":
        frame.to_json(path, orient="records", indent=2)
    else:
        pa = pytest.importorskip("pyarrow")
        pq = pytest.importorskip("pyarrow.parquet")
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return path


def generate_argv(prompts, out, server, *extra) -> list:
    return ["generate-and-score", prompts, "-o", out, "--model", "fake-model", "--base-url",
            server.base_url, "--api-key-env", KEY_VAR, "-m", "1", "--temperature", "0.25",
            "--sampling-temperature", "0.75", "-q", *extra]  # fmt: skip


@pytest.mark.parametrize("shape", ["jsonl", "csv", "json", "json-indented", "parquet"])
def test_prompt_tables_of_every_shape(tmp_path, capsys, server, monkeypatch, shape):
    monkeypatch.setenv(KEY_VAR, KEY)
    prompts = prompt_table(tmp_path, shape)
    out = tmp_path / "scored.jsonl"
    code, stdout, stderr = run(generate_argv(prompts, out, server), capsys)
    assert code == 0, stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["prompt"] for r in records] == PROMPTS
    assert [str(r["id"]) for r in records] == ["10", "20", "30"]
    # a Parquet date column is carried through, written as its ISO 8601 date
    assert [r["day"] for r in records] == ["2024-01-01", "2024-02-29", "1999-12-31"]
    assert [r["response"] for r in records] == [answer_text(p, 0.25) for p in PROMPTS]
    assert [r["sampled_responses"] for r in records] == [[answer_text(p, 0.75)] for p in PROMPTS]
    assert all(r["bert_score"] > 0.5 for r in records)
    assert "rows: 3  failed: 0" in stdout


@pytest.mark.parametrize(
    ("option", "target", "message"),
    [
        ("-o", "prompts", "-o {target} is the same file as PROMPTS {prompts}"),
        ("-o", "dot-slash", "-o {target} is the same file as PROMPTS {prompts}"),
        ("--checkpoint", "output", "--checkpoint {target} is the same file as -o {out}"),
        ("--checkpoint", "prompts", "--checkpoint {target} is the same file as PROMPTS {prompts}"),
    ],
)
def test_outputs_that_would_overwrite_an_input_are_refused_before_any_call(
    tmp_path, capsys, server, monkeypatch, option, target, message
):
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.chdir(tmp_path)
    prompts = "prompts.jsonl"
    (tmp_path / prompts).write_text(json.dumps({"prompt": "hello"}) + "\n", encoding="utf-8")
    before = (tmp_path / prompts).read_bytes()
    out = "scored.jsonl"
    path = {"prompts": prompts, "dot-slash": f"./{prompts}", "output": out}[target]
    extra = []
    if option == "-o":
        out = path
    else:
        extra = ["--checkpoint", path]
    code, _, stderr = run(generate_argv(prompts, out, server, *extra), capsys)
    assert code == 2
    assert message.format(target=path, prompts=prompts, out=out) in stderr
    assert server.log == []
    assert (tmp_path / prompts).read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [prompts]


def test_output_that_cannot_be_written_is_refused_before_any_call(
    tmp_path, capsys, server, monkeypatch
):
    monkeypatch.setenv(KEY_VAR, KEY)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("hello\n", encoding="utf-8")
    directory = unwritable_directory(tmp_path)
    out = os.path.join(directory, "scored.csv")
    code, _, stderr = run(generate_argv(prompts, out, server), capsys)
    assert code == 2
    assert f"{out}: cannot write in the directory {directory}" in stderr
    assert server.log == []


def test_prompt_table_with_invalid_unicode_is_repaired_and_run(
    tmp_path, capsys, server, monkeypatch
):
    monkeypatch.setenv(KEY_VAR, KEY)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        '{"prompt": "hello", "note": "fine"}\n{"prompt": "again", "note": "bad \\ud800"}\n',
        encoding="utf-8",
    )
    out = tmp_path / "scored.parquet"
    with pytest.warns(UserWarning, match="not valid Unicode"):
        code, _, stderr = run(generate_argv(prompts, out, server), capsys)
    assert code == 0, stderr
    assert read_table(out)["note"].tolist() == ["fine", "bad \ufffd"]


def test_explain_prints_marked_answers_and_words_go_to_the_table(
    tmp_path, capsys, server, monkeypatch
):
    """--explain prints every answer with its weakly supported words in brackets (no terminal
    under pytest: no colour), --words writes each counted word (offsets, the word, its support,
    weak), --refine the answer without its unsupported sentences; all from the run's own token
    supports."""
    monkeypatch.setenv(KEY_VAR, KEY)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Capital of <Peru>?\nWhat is 2+2?\n", encoding="utf-8")
    out = tmp_path / "scored.jsonl"
    argv = ["generate-and-score", prompts, "-o", out, "--model", "fake-model",
            "--base-url", server.base_url, "--api-key-env", KEY_VAR, "-m", "2",
            "--temperature", "0.25", "-q", "--explain", "--words", "--refine"]  # fmt: skip
    code, stdout, _ = run(argv, capsys)
    assert code == 0
    df = read_table(str(out))
    assert {"words", "refined_response", "removed_sentences", "refinement"} <= set(df.columns)
    for response, words in zip(df["response"], df["words"], strict=True):
        words = json.loads(words) if isinstance(words, str) else words
        assert words and all(0 <= w["start"] <= w["end"] <= len(response) for w in words)
        assert all(0.0 <= w["support"] <= 1.0 + 1e-6 for w in words)
        assert all(response[w["start"] : w["end"]] == w["word"] for w in words)
        assert "." not in [w["word"] for w in words] and "?" not in [w["word"] for w in words]
    for response, refined, status in zip(
        df["response"], df["refined_response"], df["refinement"], strict=True
    ):
        assert status in ("unchanged", "refined", "all_removed")
        assert (refined == response) == (status == "unchanged")
    assert "[0] Capital of <Peru>?" in stdout and "[1] What is 2+2?" in stdout
    assert "\x1b" not in stdout
    assert "in [brackets]" in stdout
    # every answer is printed whole once its marks are taken out
    for response in df["response"]:
        shown = [line.strip() for line in stdout.splitlines() if "'" in line and "Answer" in line]
        bare = [line.replace("[", "").replace("]", "").replace("~~", "") for line in shown]
        assert response in bare, shown


@pytest.mark.parametrize("sampling", ["until_settled", "fixed"])
def test_the_command_samples_until_settled_or_fixed_and_says_what_it_drew(
    tmp_path, capsys, server, monkeypatch, sampling
):
    monkeypatch.setenv(KEY_VAR, KEY)
    prompts = tmp_path / "prompts.txt"
    questions = ["What is 2+2?", "Capital of Peru?", "Who wrote Hamlet?"]
    prompts.write_text("\n".join(questions) + "\n", encoding="utf-8")
    out = tmp_path / "scored.csv"
    argv = ["generate-and-score", prompts, "-o", out, "--model", "fake-model",
            "--base-url", server.base_url, "--api-key-env", KEY_VAR, "-m", "8",
            "--temperature", "0.25", "--sampling", sampling, "-q"]  # fmt: skip
    code, stdout, _ = run(argv, capsys)
    assert code == 0
    drawn = [len(json.loads(s)) for s in read_table(str(out))["sampled_responses"]]
    calls = len(server.log)
    if sampling == "fixed":
        assert drawn == [8, 8, 8] and calls == 2 * len(questions)
    else:
        # the scripted answers and samples say the same thing: settled after the first round
        from uqlm_bert.generation._rounds import FIRST_ROUND

        assert drawn == [FIRST_ROUND] * len(questions) and calls == 2 * len(questions)
    line = next(x for x in stdout.splitlines() if x.startswith("samples drawn:"))
    assert line == (f"samples drawn: {sum(drawn)} of a fixed run's {8 * len(questions)} "
                    f"({sum(drawn) / (8 * len(questions)):.0%}; sampling {sampling}); "
                    f"calls: {calls} (a fixed run: {2 * len(questions)})")  # fmt: skip
