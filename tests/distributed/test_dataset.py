"""Scoring on Ray: the numbers of single-process scoring, in input order, rows never lost.

The tests marked ``ray`` share one local Ray with 2 CPUs, bound to 127.0.0.1, started here and
shut down at the end of the module. Expected values always come from calling the same scorer
directly, in this process, on the same rows, or from the command's local engine on the same
file.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.helpers.company import in_company
from tests.helpers.deadline import deadline
from tests.helpers.texts import passage
from uqlm_bert import ConfigurationError, InputValidationError, UQLMBertError
from uqlm_bert.cli import main
from uqlm_bert.distributed import ScoreBatch, score_dataset, score_file
from uqlm_bert.distributed._dataset import plan_workers
from uqlm_bert.io._reading import read_table
from uqlm_bert.io._rows import ERROR_COLUMN, scoring_inputs, validate_rows
from uqlm_bert.scorers import Scorer, build_scorers
from uqlm_bert.scorers import _registry as scorer_registry
from uqlm_bert.scorers._registry import ScorerSpec, build_scorer, scorer_settings

#: the scorers' dtype is the default's ("auto"); a row is scored among other rows here
TOL = in_company(1e-6)
MALFORMED = {5: (42, ["an answer"]), 9: ("An answer.", "not a list"), 14: ("An answer.", ["ok", 7])}
NO_RESPONSE = 7  # a failed row too: nothing to score
FAILED = sorted({*MALFORMED, NO_RESPONSE})


def _rows(n: int, seed: int = 0) -> list[dict]:
    """LLM-answer sized rows; some samples missing, one response missing, a few malformed."""
    rows = []
    for i in range(n):
        samples = [passage(seed + 100 * i + j, 12 + 7 * ((i + j) % 5)) for j in range(3)]
        if i % 4 == 1:
            samples[1] = None
        rows.append(
            {
                "id": i,
                "response": passage(seed + 100 * i, 15 + 5 * (i % 6)),
                "sampled_responses": samples,
                "note": f"row {i}",
            }
        )
    rows[7]["response"] = None
    rows[11]["sampled_responses"] = [None, None, None]
    for i, (response, samples) in MALFORMED.items():
        if i < n:
            rows[i]["response"], rows[i]["sampled_responses"] = response, samples
    return rows


def _expected(rows: list[dict], name: str = "bert_score", **kwargs) -> np.ndarray:
    """Single-process scores of the well-formed rows; NaN for the malformed ones."""
    ok = [i for i in range(len(rows)) if i not in MALFORMED]
    out = np.full(len(rows), np.nan)
    out[ok] = build_scorer(name, **kwargs).score(
        [rows[i]["response"] for i in ok], [rows[i]["sampled_responses"] for i in ok]
    )
    return out


def _assert_scores(actual, expected) -> None:
    actual = np.asarray(actual, dtype=np.float64)
    assert np.array_equal(np.isnan(actual), np.isnan(expected))
    both = ~np.isnan(expected)
    assert both.sum() > 0
    np.testing.assert_allclose(actual[both], expected[both], rtol=0, atol=TOL)


# -- rows, one at a time (no Ray) ---------------------------------------------------------------


def test_score_batch_matches_the_scorer_and_keeps_malformed_rows():
    rows = _rows(16)
    batch = pd.DataFrame(rows)
    before = batch.copy()
    out = ScoreBatch(scorers=["bert_score", "bert_score_recall"])(batch)
    pd.testing.assert_frame_equal(batch, before)  # the caller's batch is left alone
    assert list(out.columns) == [*batch.columns, "bert_score", "bert_score_recall", ERROR_COLUMN]
    _assert_scores(out["bert_score"], _expected(rows))
    _assert_scores(out["bert_score_recall"], _expected(rows, "bert_score_recall"))
    assert np.flatnonzero(out[ERROR_COLUMN].notna()).tolist() == FAILED
    # the messages are those of the local engine, from the same row checker
    assert out[ERROR_COLUMN][5] == "field 'response': a int, expected a string"
    assert out[ERROR_COLUMN][NO_RESPONSE] == "field 'response': missing (empty or null)"
    assert np.isnan(out["bert_score"][NO_RESPONSE])
    assert np.isnan(out["bert_score"][11]) and pd.isna(
        out[ERROR_COLUMN][11]
    )  # no samples: no error


def test_run_wide_idf_makes_batches_agree_with_one_call_over_all_rows():
    from uqlm_bert.distributed._files import _run_wide_idf

    rows = _rows(16, seed=5)
    frame = pd.DataFrame(rows)
    good, _ = validate_rows(frame, "rows")
    settings = _run_wide_idf(
        scorer_settings(["bert_score"], idf=True), *scoring_inputs(frame, good)
    )
    assert settings["bertscore"].idf is not True
    score = ScoreBatch(scorers=["bert_score"], scorer_kwargs=settings)
    halves = pd.concat([score(frame.iloc[:6]), score(frame.iloc[6:])])
    _assert_scores(halves["bert_score"], _expected(rows, idf=True))
    # and idf matters here: without it the scores differ
    assert np.nanmax(np.abs(_expected(rows) - _expected(rows, idf=True))) > 1e-3


def test_score_batch_names_a_missing_column():
    score = ScoreBatch(scorers=["bert_score"], response_column="answer")
    with pytest.raises(InputValidationError, match="'answer'"):
        score(pd.DataFrame({"response": ["a"], "sampled_responses": [["a"]]}))


# -- sizing the pool (no Ray) -------------------------------------------------------------------


def test_plan_uses_one_gpu_per_actor_when_the_cluster_has_gpus():
    plan = plan_workers({"CPU": 32.0, "GPU": 4.0})
    assert (plan.num_workers, plan.num_gpus, plan.device) == (4, 1.0, "cuda")
    half = plan_workers({"CPU": 32.0, "GPU": 4.0}, num_gpus_per_worker=0.5)
    assert (half.num_workers, half.num_gpus) == (8, 0.5)


def test_plan_uses_cpus_without_gpus_and_leaves_one_for_reading():
    plan = plan_workers({"CPU": 8.0})
    assert (plan.num_workers, plan.num_cpus, plan.num_gpus, plan.device) == (7, 1.0, 0.0, None)
    assert plan_workers({"CPU": 8.0}, spare_cpu=False).num_workers == 8
    assert plan_workers({"CPU": 8.0}, num_cpus_per_worker=2).num_workers == 3
    assert plan_workers({"CPU": 1.0}).num_workers == 1
    assert plan_workers({"CPU": 8.0, "GPU": 2.0}, num_gpus_per_worker=0).device is None


def test_plan_warns_when_gpus_are_asked_for_but_absent():
    with pytest.warns(UserWarning, match="has none now"):
        plan = plan_workers({"CPU": 4.0}, num_gpus_per_worker=1)
    assert (plan.num_workers, plan.num_gpus) == (1, 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_workers": 0},
        {"num_workers": 1.5},
        {"num_cpus_per_worker": 0},
        {"num_gpus_per_worker": -1},
    ],
)
def test_plan_rejects_bad_counts(kwargs):
    with pytest.raises(ConfigurationError):
        plan_workers({"CPU": 4.0}, **kwargs)


# -- files (no Ray) -----------------------------------------------------------------------------


def test_score_file_checks_its_input_before_starting_ray(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"answer": "a", "sampled_responses": ["a"]}\n')
    with pytest.raises(InputValidationError, match="no column 'response'"):
        score_file(path, tmp_path / "out.parquet")
    with pytest.raises(ConfigurationError, match="unknown scorer"):
        score_file(path, tmp_path / "out.parquet", scorers=["no_such_scorer"])
    with pytest.raises(ConfigurationError, match="batch_size"):
        score_file(path, tmp_path / "out.parquet", batch_size=0)
    with pytest.raises(InputValidationError, match=r"out.txt: unknown table format '\.txt'"):
        score_file(path, tmp_path / "out.txt", response_column="answer")
    with pytest.raises(InputValidationError, match=r"in.txt: unknown table format"):
        score_file(tmp_path / "in.txt", tmp_path / "out.parquet")
    with pytest.raises(InputValidationError, match="absent.jsonl: no such file"):
        score_file(tmp_path / "absent.jsonl", tmp_path / "out.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_score_file_with_no_row_to_score_writes_the_failures_without_ray(tmp_path, monkeypatch):
    from uqlm_bert.distributed import _files as files

    def no_ray(address=None):
        raise AssertionError("Ray was started with no row to score")

    monkeypatch.setattr(files, "ray_session", no_ray)
    src = tmp_path / "in.csv"
    src.write_text('response,sampled_responses\n,"[""a""]"\nb,[oops\n', encoding="utf-8")
    with pytest.warns(UserWarning, match="2 of 2 rows could not be scored"):
        frame = score_file(src, tmp_path / "out.csv")
    back = read_table(tmp_path / "out.csv")
    assert back["sampled_responses"].tolist() == ['["a"]', "[oops"]  # kept as read
    assert back["bert_score"].tolist() == [None, None]
    assert back[ERROR_COLUMN].tolist() == frame[ERROR_COLUMN].tolist()
    assert frame[ERROR_COLUMN].tolist() == [
        "field 'response': missing (empty or null)",
        "field 'sampled_responses': not a JSON list (Expecting value at column 2) nor a Python "
        "list ('[' was never closed at column 1)",
    ]


# -- on a local Ray ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.ray
def test_dataset_scores_equal_single_process_scores_in_input_order(local_ray):
    rows = _rows(30)
    frame = pd.DataFrame(rows)
    # three blocks of uneven size, batches of 4 rows, two actors: nothing lines up with the
    # single call that gives the expected values
    ds = local_ray.data.from_pandas([frame.iloc[:7], frame.iloc[7:22], frame.iloc[22:]])
    with deadline(150, "the Ray pipeline"):
        scored = score_dataset(
            ds, ["bert_score", "bert_score_precision"], num_workers=2, batch_size=4
        )
        # row by row: Ray's to_pandas cannot concatenate a column that mixes lists and strings
        out = pd.DataFrame(scored.take_all())
    assert list(out.columns) == [*frame.columns, "bert_score", "bert_score_precision", ERROR_COLUMN]
    assert out["id"].tolist() == list(range(30))
    assert out["note"].tolist() == frame["note"].tolist()
    _assert_scores(out["bert_score"], _expected(rows))
    _assert_scores(out["bert_score_precision"], _expected(rows, "bert_score_precision"))
    errors = {i: e for i, e in enumerate(out[ERROR_COLUMN]) if isinstance(e, str)}
    assert sorted(errors) == FAILED
    assert errors[5] == "field 'response': a int, expected a string"
    assert errors[NO_RESPONSE] == "field 'response': missing (empty or null)"
    assert errors[9].startswith("field 'sampled_responses': not a JSON list")
    assert errors[14] == "field 'sampled_responses': item 1 is a int, expected a string or null"


@pytest.mark.slow
@pytest.mark.ray
def test_parquet_in_parquet_out_with_the_default_pool(local_ray, tmp_path):
    """Read with Ray, score on the default pool (which leaves a CPU to the read tasks), write
    with Ray: the flow for data on shared storage."""
    rows = [r for i, r in enumerate(_rows(24, seed=7)) if i not in MALFORMED]
    pd.DataFrame(rows).to_parquet(tmp_path / "in.parquet")
    ds = local_ray.data.read_parquet(tmp_path / "in.parquet", override_num_blocks=3)
    with deadline(150, "the Ray pipeline"):
        score_dataset(ds, batch_size=5).write_parquet(str(tmp_path / "scored"))
    out = pd.read_parquet(tmp_path / "scored")
    assert sorted(out["id"]) == [r["id"] for r in rows]  # every row once
    out = out.sort_values("id")
    expected = build_scorer("bert_score").score(
        [r["response"] for r in rows], [r["sampled_responses"] for r in rows]
    )
    _assert_scores(out["bert_score"], expected)
    errors = out.set_index("id")[ERROR_COLUMN].dropna().to_dict()
    assert errors == {NO_RESPONSE: "field 'response': missing (empty or null)"}


@pytest.mark.slow
@pytest.mark.ray
def test_score_file_jsonl_to_parquet(local_ray, tmp_path):
    rows = _rows(26, seed=3)
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps(r) + "\n" for r in rows[:20])
        + "{oops\n"
        + "".join(json.dumps(r) + "\n" for r in rows[20:])
    )
    dst = tmp_path / "out" / "scored.parquet"
    with deadline(150, "the Ray pipeline"), pytest.warns(UserWarning, match="could not be scored"):
        frame = score_file(
            src,
            dst,
            num_workers=1,
            batch_size=5,
            show_progress_bars=False,
            scorer_kwargs={"idf": True},  # weights from the references of the whole file
        )
    back = pd.read_parquet(dst)
    assert list(back.columns) == [
        "id",
        "response",
        "sampled_responses",
        "note",
        "bert_score",
        ERROR_COLUMN,
    ]
    assert len(back) == len(frame) == 27
    np.testing.assert_array_equal(back["bert_score"], frame["bert_score"])
    # the broken line is row 20, kept as a row of nulls; the rows after it follow in order
    assert back[ERROR_COLUMN][20].startswith("not valid JSON (")
    assert back["note"].isna().tolist() == [i == 20 for i in range(27)]
    kept = back.drop(index=20).reset_index(drop=True)
    assert kept["note"].tolist() == [r["note"] for r in rows]
    scores = back["bert_score"].to_numpy()
    _assert_scores(np.delete(scores, 20), _expected(rows, idf=True))
    assert np.isnan(scores[20])
    assert np.flatnonzero(kept[ERROR_COLUMN].notna()).tolist() == FAILED
    # malformed cells are kept: a column that mixes types is stored as JSON text in Parquet
    assert kept["response"][5] == "42" and json.loads(kept["sampled_responses"][9]) == "not a list"
    assert json.loads(kept["response"][6]) == rows[6]["response"]
    assert json.loads(kept["sampled_responses"][6]) == rows[6]["sampled_responses"]
    assert frame["response"][5] == 42  # the returned frame holds what was read


# -- the command: --engine ray writes what --engine local writes -----------------------------


def _answers_jsonl(path: Path) -> None:
    good = _rows(12, seed=21)[:4]  # well-formed rows
    lines = [
        json.dumps({**good[0], "id": "a"}),
        '{"id": "b", "response": "Lima.", "sampled_responses": ["Lima"]',  # not valid JSON
        "[1, 2]",  # JSON, but not an object
        "",  # blank: skipped
        json.dumps({**good[1], "id": "c", "meta": {"source": "x", "k": [1, 2]}}),
        json.dumps({"id": "d", "response": None, "sampled_responses": ["a"]}),  # no response
        json.dumps({"id": "e", "sampled_responses": ["a"]}),  # no response key
        json.dumps({"id": "f", "response": 42, "sampled_responses": ["42"]}),
        json.dumps({"id": "g", "response": "Lima.", "sampled_responses": '["Lima", oops]'}),
        json.dumps({"id": "h", "response": "Lima.", "sampled_responses": ["ok", 7]}),
        json.dumps({"id": "i", "response": "Lima.", "sampled_responses": []}),
        json.dumps({"id": "j", "response": "Lima.", "sampled_responses": [None, None]}),
        json.dumps({"id": "k", "response": "Lima.", "sampled_responses": None}),
        json.dumps({**good[2], "id": "l"}),
        json.dumps({**good[3], "id": "m"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _answers_csv(path: Path) -> None:
    def cell(value) -> str:
        return '"' + value.replace('"', '""') + '"'

    good = _rows(12, seed=22)[:4]
    lines = ["id,prompt,response,sampled_responses"]
    for i, (key, prompt, response, samples) in enumerate(
        [
            ("a", "two\nlines", good[0]["response"], json.dumps(good[0]["sampled_responses"])),
            ("b", "q", "Lima.", '["Lima", oops]'),  # broken sample list
            ("c", "q", "", '["Lima"]'),  # empty cell: no response
            ("d", "q", "NA", json.dumps([good[1]["response"]])),  # "NA" is an answer
            ("e", "q", "Lima.", "[]"),
            ("f", "q", "Lima.", '{"a": 1}'),  # a JSON object, not a list
            ("g", "q", "Lima.", ""),  # no samples
            ("h", "q", good[2]["response"], json.dumps(good[2]["sampled_responses"])),
            ("i", "q", good[3]["response"], json.dumps(good[3]["sampled_responses"])),
        ]
    ):
        cells = [
            key,
            cell(prompt),
            cell(response) if response else "",
            cell(samples) if samples else "",
        ]
        lines.append(",".join(cells))
        if i == 4:
            lines.append("x,q,Lima.,[],extra")  # more fields than the header
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _cell(value):
    """A cell as plain data, with every kind of missing value as None."""
    if isinstance(value, (list, dict)):
        return value
    return None if pd.isna(value) else value


def _number(value) -> float:
    return math.nan if _cell(value) is None else float(value)


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.parametrize(
    ("source", "output", "failed"),
    [
        ("answers.jsonl", "scored.jsonl", [None, None, "d", "e", "f", "g", "h", "k"]),
        ("answers.csv", "scored.csv", ["b", "c", None, "f", "g"]),
        ("answers.jsonl", "scored.parquet", [None, None, "d", "e", "f", "g", "h", "k"]),
    ],
)
def test_the_ray_engine_writes_the_file_the_local_engine_writes(
    local_ray, tmp_path, capsys, source, output, failed
):
    src = tmp_path / source
    (_answers_jsonl if source.endswith(".jsonl") else _answers_csv)(src)
    results = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine / output
        out.parent.mkdir()
        argv = ["score", str(src), "-o", str(out), "-q", "--engine", engine,
                "--scorers", "bert_score,bert_score_recall"]  # fmt: skip
        if engine == "ray":
            argv += ["--num-workers", "1"]
        with deadline(200, "the Ray pipeline"):
            code = main(argv)
        captured = capsys.readouterr()
        results[engine] = {
            "code": code,
            "problems": [ln for ln in captured.err.splitlines() if ln.startswith(str(src))],
            "counts": captured.out.splitlines()[1],
            "table": read_table(out),
        }
    local, ray = results["local"]["table"], results["ray"]["table"]
    assert results["local"]["code"] == results["ray"]["code"] == 1
    assert results["ray"]["problems"] == results["local"]["problems"]
    assert len(results["local"]["problems"]) == len(failed)
    counts = f"rows: {len(local)}  failed: {len(failed)}"
    assert results["ray"]["counts"] == results["local"]["counts"] == counts
    # the failed rows are the ones expected (an unreadable record has no id), the rest scored
    errors = zip(local["id"], local[ERROR_COLUMN], strict=True)
    assert [_cell(key) for key, error in errors if _cell(error)] == failed
    assert np.isfinite([_number(v) for v in local["bert_score"]]).sum() >= 3

    assert list(ray.columns) == list(local.columns)
    assert list(local.columns)[-3:] == ["bert_score", "bert_score_recall", ERROR_COLUMN]
    assert len(ray) == len(local)
    for column in local.columns:
        for row, (mine, theirs) in enumerate(zip(local[column], ray[column], strict=True)):
            where = f"column {column!r}, row {row}"
            if column in ("bert_score", "bert_score_recall"):
                a, b = _number(mine), _number(theirs)
                assert math.isnan(a) == math.isnan(b), where
                assert math.isnan(a) or abs(a - b) <= TOL, where
            else:
                assert _cell(theirs) == _cell(mine), where


class _CrashOnce(Scorer):
    """``bert_score``, except that the process dies the first time it sees ``marker``."""

    name = "bert_score_crash_once"

    def __init__(self, flag_dir: str, marker: str, **kwargs) -> None:
        self._inner = build_scorer("bert_score", **kwargs)
        self._dir = Path(flag_dir)
        self._marker = marker
        with open(self._dir / "started", "a") as f:
            f.write(f"{os.getpid()}\n")

    def score(self, responses, sampled_responses, show_progress_bars=False):
        crashed = self._dir / "crashed"
        if self._marker in responses and not crashed.exists():
            crashed.write_text(str(os.getpid()))
            os._exit(1)  # as if the node running this actor went away mid-batch
        return self._inner.score(responses, sampled_responses, show_progress_bars)


@pytest.mark.slow
@pytest.mark.ray
def test_a_killed_actor_is_replaced_without_losing_or_duplicating_rows(
    local_ray, tmp_path, monkeypatch
):
    rows = [r for i, r in enumerate(_rows(24, seed=11)) if i not in MALFORMED]
    marker = rows[13]["response"]
    monkeypatch.setitem(
        scorer_registry._REGISTRY,
        _CrashOnce.name,
        ScorerSpec(_CrashOnce.name, lambda **kwargs: _CrashOnce(str(tmp_path), marker, **kwargs)),
    )
    frame = pd.DataFrame(rows)
    ds = local_ray.data.from_pandas([frame.iloc[i : i + 6] for i in range(0, len(frame), 6)])
    with deadline(200, "the Ray pipeline"):
        out = score_dataset(ds, [_CrashOnce.name], num_workers=2, batch_size=3).to_pandas()
    crashed_pid = (tmp_path / "crashed").read_text()
    started = (tmp_path / "started").read_text().split()
    assert crashed_pid in started
    assert len(set(started)) >= 3  # two actors, then a replacement for the one that died
    assert out["id"].tolist() == frame["id"].tolist()  # every row once, in order
    expected = build_scorers(["bert_score"])[0].score(
        [r["response"] for r in rows], [r["sampled_responses"] for r in rows]
    )
    _assert_scores(out[_CrashOnce.name], expected)


@pytest.mark.ray
def test_score_dataset_refuses_batch_dependent_settings(local_ray):
    ds = local_ray.data.from_items([{"response": "a", "sampled_responses": ["a"]}])
    with pytest.raises(ConfigurationError, match="idf_sents"):
        score_dataset(ds, scorer_kwargs={"idf": True})
    with pytest.raises(InputValidationError, match="no column 'answer'"):
        score_dataset(ds, response_column="answer")


def test_lost_rows_are_an_error_not_a_short_output():
    from uqlm_bert.distributed._files import ROW_COLUMN, _in_row_order

    with pytest.raises(UQLMBertError, match="3 rows for 4 input rows"):
        _in_row_order(pd.DataFrame({ROW_COLUMN: [0, 1, 3]}), 4)
    with pytest.raises(UQLMBertError, match="3 distinct"):
        _in_row_order(pd.DataFrame({ROW_COLUMN: [0, 1, 1, 2]}), 4)
    ordered = _in_row_order(pd.DataFrame({ROW_COLUMN: [2, 0, 1], "v": [20, 0, 10]}), 3)
    assert ordered["v"].tolist() == [0, 10, 20]
