"""One function scores a file for every engine: ``uqlm_bert.io.score_table_file``.

The command's local engine, its Ray engine and ``uqlm_bert.distributed.score_file`` each call it
once, so the rows are read and checked once, by the same rules, and the output is written by
the same code; the engines differ only in the function that scores the good rows. (That the
two engines then write the same file, on a real local Ray, is in
``tests/distributed/test_dataset.py``.)
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from uqlm_bert.cli import main
from uqlm_bert.io._reading import read_table
from uqlm_bert.io._rows import ERROR_COLUMN

ROWS = [
    {"id": "a", "response": "Lima", "sampled_responses": ["Lima", "lima", None]},
    {"id": "b", "response": None, "sampled_responses": ["Quito"]},
    {"id": "c", "response": "Quito", "sampled_responses": ["Bogota"]},
]


@pytest.fixture
def calls(monkeypatch) -> list[dict[str, Any]]:
    """Every call of ``score_table_file``, which still does its work."""
    from uqlm_bert.io import _file_scoring as scoring

    seen: list[dict[str, Any]] = []
    real = scoring.score_table_file

    def spy(source, output, scorers, score, **kwargs):
        seen.append({"source": source, "output": output, "scorers": list(scorers)})
        return real(source, output, scorers, score, **kwargs)

    monkeypatch.setattr(scoring, "score_table_file", spy)
    return seen


def _input(tmp_path, rows=ROWS) -> str:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_the_local_engine_scores_the_file_through_score_table_file(tmp_path, calls, capsys):
    src, out = _input(tmp_path), str(tmp_path / "scored.jsonl")
    assert main(["score", src, "-o", out, "--scorers", "exact_match", "-q"]) == 1
    assert calls == [{"source": src, "output": out, "scorers": ["exact_match"]}]
    # exact_match: the share of present samples equal to the response (normalised: lima = Lima)
    assert read_table(out)["exact_match"].tolist() == [1.0, None, 0.0]
    assert f"{src}:2: field 'response': missing" in capsys.readouterr().err


def test_the_ray_engine_scores_the_file_through_score_table_file(
    tmp_path, calls, capsys, monkeypatch
):
    """The Ray engine gets the command's settings whole and only the good rows to score; the
    reading, checking and writing are the shared function's."""
    from uqlm_bert.distributed import _files

    engine: list[dict[str, Any]] = []

    def ray_rows_scorer(names, settings, pool, **options):
        engine.append({"names": names, "settings": settings, "pool": pool, "options": options})

        def score(responses, samples):
            engine[-1]["rows"] = (responses, samples)
            return {"bert_score": [0.25 * (i + 1) for i in range(len(responses))]}

        return score

    monkeypatch.setattr(_files, "ray_rows_scorer", ray_rows_scorer)
    src, out = _input(tmp_path), str(tmp_path / "scored.jsonl")
    argv = ["score", src, "-o", out, "--engine", "ray", "--address", "ray://head:10001",
            "--num-workers", "3", "--num-layers", "4", "--device", "cpu", "-q"]  # fmt: skip
    assert main(argv) == 1
    stdout, stderr = capsys.readouterr()
    assert calls == [{"source": src, "output": out, "scorers": ["bert_score"]}]
    (call,) = engine
    assert call["names"] == ["bert_score"]
    bert = call["settings"]["bertscore"]
    assert (bert.num_layers, bert.device) == (4, "cpu")
    assert call["pool"].num_workers == 3
    assert call["options"] == {"address": "ray://head:10001", "show_progress_bars": False}
    assert call["rows"] == (["Lima", "Quito"], [["Lima", "lima", None], ["Bogota"]])
    assert sorted(os.listdir(tmp_path)) == ["answers.jsonl", "scored.jsonl"]
    records = [json.loads(line) for line in open(out, encoding="utf-8")]
    assert [r["bert_score"] for r in records] == [0.25, None, 0.5]
    assert records[1][ERROR_COLUMN] == "field 'response': missing (empty or null)"
    assert "rows: 3  failed: 1" in stdout
    assert f"{src}:2: field 'response': missing" in stderr


def test_score_file_scores_through_score_table_file_and_starts_no_ray_for_no_row(tmp_path, calls):
    ray = pytest.importorskip("ray")
    from uqlm_bert.distributed import score_file

    src = _input(tmp_path, [{"response": None, "sampled_responses": ["x"]}, {"id": 2}])
    out = tmp_path / "new" / "scored.jsonl"
    with pytest.warns(UserWarning, match="2 of 2 rows could not be scored"):
        frame = score_file(src, out, scorers=["exact_match"])
    assert calls == [{"source": src, "output": out, "scorers": ["exact_match"]}]
    assert not ray.is_initialized()
    assert frame[ERROR_COLUMN].notna().all() and frame["exact_match"].isna().all()
    assert read_table(out)[ERROR_COLUMN].tolist() == frame[ERROR_COLUMN].tolist()
