"""Scoring on Ray: the numbers of single-process scoring, in input order, rows never lost.

The tests marked ``ray`` share one local Ray with 2 CPUs, bound to 127.0.0.1, started here and
shut down at the end of the module. Expected values always come from calling the same scorer
directly, in this process, on the same rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.texts import passage
from uqlm_bert.distributed import (
    ERROR_COLUMN,
    ScoreBatch,
    check_row,
    plan_workers,
    read_rows,
    score_dataset,
    score_file,
    start_local_ray,
    write_parquet_atomic,
)
from uqlm_bert.exceptions import ConfigurationError, InputValidationError, UQLMBertError
from uqlm_bert.scorers import Scorer, build_scorer, build_scorers
from uqlm_bert.scorers import base as scorer_registry

TOL = 1e-6
MALFORMED = {5: (42, ["an answer"]), 9: ("An answer.", "not a list"), 14: ("An answer.", ["ok", 7])}


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


@contextlib.contextmanager
def _deadline(seconds: int):
    """Fail a Ray test that hangs instead of blocking the suite."""

    def expire(signum, frame):
        raise TimeoutError(f"the Ray pipeline did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# -- rows, one at a time (no Ray) ---------------------------------------------------------------


def test_check_row_normalises_missing_values_and_arrays():
    samples = np.array(["a", None, float("nan")], dtype=object)
    assert check_row("x", samples) == ("x", ["a", None, None], None)
    assert check_row(float("nan"), ["a"]) == (None, ["a"], None)
    assert check_row(pd.NA, None) == (None, [], None)
    assert check_row("x", ("a", "b")) == ("x", ["a", "b"], None)


@pytest.mark.parametrize(
    ("response", "samples", "message"),
    [
        (42, ["a"], "response has type int (42)"),
        ("x", "a", "sampled_responses is a string"),
        ("x", {"a": 1}, "sampled_responses has type dict"),
        ("x", ["a", 3.5], "sampled_responses[1] has type float (3.5)"),
        ("x", np.array([["a"]], dtype=object), "sampled_responses has type ndarray"),
    ],
)
def test_check_row_reports_malformed_rows(response, samples, message):
    r, s, error = check_row(response, samples)
    assert (r, s) == (None, [])
    assert error.startswith(message)


def test_score_batch_matches_the_scorer_and_keeps_malformed_rows():
    rows = _rows(16)
    batch = pd.DataFrame(rows)
    before = batch.copy()
    out = ScoreBatch(scorers=["bert_score", "bert_score_recall"])(batch)
    pd.testing.assert_frame_equal(batch, before)  # the caller's batch is left alone
    assert list(out.columns) == [*batch.columns, "bert_score", "bert_score_recall", ERROR_COLUMN]
    _assert_scores(out["bert_score"], _expected(rows))
    _assert_scores(out["bert_score_recall"], _expected(rows, "bert_score_recall"))
    assert np.flatnonzero(out[ERROR_COLUMN].notna()).tolist() == sorted(MALFORMED)
    assert np.isnan(out["bert_score"][7]) and pd.isna(out[ERROR_COLUMN][7])  # missing: no error


def test_run_wide_idf_makes_batches_agree_with_one_call_over_all_rows():
    from uqlm_bert.distributed.files import _run_wide_idf

    rows = _rows(16, seed=5)
    frame = pd.DataFrame(rows)
    kwargs = _run_wide_idf(
        {"idf": True}, [r["response"] for r in rows], [r["sampled_responses"] for r in rows]
    )
    assert kwargs["idf"] is not True
    score = ScoreBatch(scorers=["bert_score"], scorer_kwargs=kwargs)
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


def test_read_jsonl_keeps_a_row_for_every_line(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(
        '{"response": "a", "sampled_responses": ["a"]}\n\n{broken\n[1, 2]\n'
        '{"response": null, "sampled_responses": ["b"]}\n'
    )
    frame, errors = read_rows(path)
    assert len(frame) == 4
    assert set(errors) == {1, 2}
    assert errors[1].startswith("line 3 is not valid JSON")
    assert errors[2] == "line 4 is a JSON list, expected an object"
    assert frame["sampled_responses"][3] == ["b"]


def test_read_csv_parses_json_lists_and_keeps_text_that_looks_missing(tmp_path):
    path = tmp_path / "in.csv"
    pd.DataFrame(
        {
            "response": ["NA", "b", "c"],
            "sampled_responses": [json.dumps(["x", None]), "not json", json.dumps({"a": 1})],
        }
    ).to_csv(path, index=False)
    frame, errors = read_rows(path)
    assert frame["response"].tolist() == ["NA", "b", "c"]
    assert frame["sampled_responses"].tolist() == [["x", None], None, None]
    assert errors[1].startswith("sampled_responses is not a JSON list")
    assert errors[2] == "sampled_responses is a JSON dict, expected a list"


@pytest.mark.parametrize(
    ("name", "match"), [("in.txt", "cannot tell the format"), ("absent.jsonl", "does not exist")]
)
def test_read_rows_rejects_unknown_or_missing_files(tmp_path, name, match):
    with pytest.raises(InputValidationError, match=match):
        read_rows(tmp_path / name)


def test_write_parquet_is_atomic(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    path = tmp_path / "out.parquet"
    write_parquet_atomic(pd.DataFrame({"a": [1, 2]}), path)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", fail)
    with pytest.raises(OSError, match="disk full"):
        write_parquet_atomic(pd.DataFrame({"a": [3]}), path)
    assert pd.read_parquet(path)["a"].tolist() == [1, 2]  # the old file is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet"]  # no temp file left


def test_write_parquet_stores_mixed_columns_as_text(tmp_path):
    path = tmp_path / "out.parquet"
    frame = pd.DataFrame({"response": ["a", 42, None], "samples": [["x"], "y", None]})
    with pytest.warns(UserWarning, match="mix value types"):
        write_parquet_atomic(frame, path)
    back = pd.read_parquet(path)
    assert back["response"].tolist()[:2] == ["a", "42"]
    assert back["samples"].tolist()[:2] == ['["x"]', "y"]


def test_score_file_checks_its_input_before_starting_ray(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"answer": "a", "sampled_responses": ["a"]}\n')
    with pytest.raises(InputValidationError, match="no column 'response'"):
        score_file(path, tmp_path / "out.parquet")
    with pytest.raises(ConfigurationError, match="unknown scorer"):
        score_file(path, tmp_path / "out.parquet", scorers=["no_such_scorer"])
    with pytest.raises(ConfigurationError, match="batch_size"):
        score_file(path, tmp_path / "out.parquet", batch_size=0)
    assert not (tmp_path / "out.parquet").exists()


# -- on a local Ray ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized(), "another test left Ray running"
    start_local_ray(num_cpus=2)
    assert [node["NodeManagerAddress"] for node in ray.nodes()] == ["127.0.0.1"]
    # Scorers defined in this module travel to the workers by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield ray
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        ray.shutdown()


@pytest.mark.ray
def test_dataset_scores_equal_single_process_scores_in_input_order(local_ray):
    rows = _rows(30)
    frame = pd.DataFrame(rows)
    # three blocks of uneven size, batches of 4 rows, two actors: nothing lines up with the
    # single call that gives the expected values
    ds = local_ray.data.from_pandas([frame.iloc[:7], frame.iloc[7:22], frame.iloc[22:]])
    with _deadline(150):
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
    assert sorted(errors) == sorted(MALFORMED)
    assert errors[5].startswith("response has type int")
    assert errors[9].startswith("sampled_responses is a string")
    assert errors[14].startswith("sampled_responses[1] has type int")


@pytest.mark.ray
def test_parquet_in_parquet_out_with_the_default_pool(local_ray, tmp_path):
    """Read with Ray, score on the default pool (which leaves a CPU to the read tasks), write
    with Ray: the flow for data on shared storage."""
    rows = [r for i, r in enumerate(_rows(24, seed=7)) if i not in MALFORMED]
    pd.DataFrame(rows).to_parquet(tmp_path / "in.parquet")
    ds = local_ray.data.read_parquet(tmp_path / "in.parquet", override_num_blocks=3)
    with _deadline(150):
        score_dataset(ds, batch_size=5).write_parquet(str(tmp_path / "scored"))
    out = pd.read_parquet(tmp_path / "scored")
    assert sorted(out["id"]) == [r["id"] for r in rows]  # every row once
    out = out.sort_values("id")
    expected = build_scorer("bert_score").score(
        [r["response"] for r in rows], [r["sampled_responses"] for r in rows]
    )
    _assert_scores(out["bert_score"], expected)
    assert out[ERROR_COLUMN].isna().all()


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
    with _deadline(150), pytest.warns(UserWarning, match="could not be scored"):
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
    assert back[ERROR_COLUMN][20].startswith("line 21 is not valid JSON")
    assert back["note"].isna().tolist() == [i == 20 for i in range(27)]
    kept = back.drop(index=20).reset_index(drop=True)
    assert kept["note"].tolist() == [r["note"] for r in rows]
    scores = back["bert_score"].to_numpy()
    _assert_scores(np.delete(scores, 20), _expected(rows, idf=True))
    assert np.isnan(scores[20])
    # malformed cells that their column's type cannot hold are nulls in the file, the rest kept
    assert np.flatnonzero(kept[ERROR_COLUMN].notna()).tolist() == sorted(MALFORMED)
    assert pd.isna(kept["response"][5]) and kept["sampled_responses"][9] is None
    assert kept["response"][6] == rows[6]["response"]
    assert list(kept["sampled_responses"][6]) == rows[6]["sampled_responses"]
    assert frame["response"][5] == 42  # the returned frame holds what was read


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


@pytest.mark.ray
def test_a_killed_actor_is_replaced_without_losing_or_duplicating_rows(
    local_ray, tmp_path, monkeypatch
):
    rows = [r for i, r in enumerate(_rows(24, seed=11)) if i not in MALFORMED]
    marker = rows[13]["response"]
    monkeypatch.setitem(
        scorer_registry._REGISTRY,
        _CrashOnce.name,
        lambda **kwargs: _CrashOnce(str(tmp_path), marker, **kwargs),
    )
    frame = pd.DataFrame(rows)
    ds = local_ray.data.from_pandas([frame.iloc[i : i + 6] for i in range(0, len(frame), 6)])
    with _deadline(200):
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
    from uqlm_bert.distributed.files import ROW_COLUMN, _in_row_order

    with pytest.raises(UQLMBertError, match="3 rows for 4 input rows"):
        _in_row_order(pd.DataFrame({ROW_COLUMN: [0, 1, 3]}), 4)
    with pytest.raises(UQLMBertError, match="3 distinct"):
        _in_row_order(pd.DataFrame({ROW_COLUMN: [0, 1, 1, 2]}), 4)
    ordered = _in_row_order(pd.DataFrame({ROW_COLUMN: [2, 0, 1], "v": [20, 0, 10]}), 3)
    assert ordered["v"].tolist() == [0, 10, 20]
