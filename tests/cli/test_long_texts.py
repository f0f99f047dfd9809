"""``--long-texts`` on the command line, and ``long_texts`` on the Ray path.

A long answer whose second half differs from its only sample past the model's window: scored
whole by default (and with ``--long-texts window``), blind to the difference with
``--long-texts truncate``, which warns and names the option. Expected values come from the
engine called directly with the same settings. On Ray, the same file gives the local engine's
numbers in both modes, and idf over the run counts the tokens of a whole long reference.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from tests.helpers.deadline import deadline
from tests.helpers.expected import default_confidence
from tests.helpers.texts import LONG, OVERLONG, SHORT
from uqlm_bert import BERTScorer
from uqlm_bert.bertscore._settings import SCORER_DEFAULTS
from uqlm_bert.cli import main

TAIL_A = OVERLONG[0] + " " + LONG[2]  # the same first 700 words, then different tails
TAIL_B = OVERLONG[0] + " " + LONG[3]
ROWS = [
    {"id": "long", "response": TAIL_B, "sampled_responses": [TAIL_A]},
    {"id": "short", "response": SHORT[0], "sampled_responses": [SHORT[1], SHORT[0]]},
]


def _expected(mode: str) -> list[float]:
    engine = BERTScorer.from_settings(
        SCORER_DEFAULTS.replace(long_texts=mode), show_progress_bars=False
    )
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for row in ROWS:
            samples = row["sampled_responses"]
            out.append(default_confidence(engine, row["response"], samples))
    return out


def _answers(tmp_path) -> str:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return str(path)


def _scores(path) -> list[float]:
    return [json.loads(line)["bert_score"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("option", [[], ["--long-texts", "window"], ["--long-texts", "truncate"]])
def test_score_reads_long_answers_whole_unless_told_to_truncate(tmp_path, capsys, option):
    out = tmp_path / "scored.jsonl"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["score", _answers(tmp_path), "-o", str(out), "-q", *option])
    err = capsys.readouterr().err
    assert code == 0, err
    mode = option[1] if option else "window"
    got = _scores(out)
    assert got == pytest.approx(_expected(mode), abs=1e-6)
    truncation = [str(w.message) for w in caught if "truncated" in str(w.message)]
    if mode == "truncate":
        assert got[0] == pytest.approx(1.0, abs=1e-6)  # the differing tail is never read
        assert len(truncation) == 1 and "--long-texts window" in truncation[0]
    else:
        assert got[0] < 1 - 1e-3
        assert truncation == []


def test_a_bad_value_is_a_usage_error(tmp_path, capsys):
    code = main(["score", _answers(tmp_path), "-o", str(tmp_path / "x.jsonl"), "--long-texts", "x"])
    assert code == 2
    assert "--long-texts" in capsys.readouterr().err


def test_evaluate_reads_long_references_whole_with_the_option(tmp_path, capsys):
    pytest.importorskip("sacrebleu")
    pytest.importorskip("rouge_score")
    preds, refs = tmp_path / "pred.txt", tmp_path / "ref.txt"
    preds.write_text(TAIL_B + "\n", encoding="utf-8")
    refs.write_text(TAIL_A + "\n", encoding="utf-8")
    f1 = {}
    for mode in ("window", "truncate"):
        code = main(["evaluate", str(preds), str(refs), "-q", "--format", "json",
                     "--long-texts", mode])  # fmt: skip
        captured = capsys.readouterr()
        assert code == 0, captured.err
        f1[mode] = json.loads(captured.out)["bertscore_f1"]
    # truncated, the two texts are the same: F1 is 1 up to float32 sums over 512 tokens
    assert f1["truncate"] == pytest.approx(1.0, abs=1e-5)
    assert f1["window"] < 1 - 1e-3


# -- Ray ------------------------------------------------------------------------------------------


def test_run_wide_idf_counts_the_whole_of_a_long_reference():
    from uqlm_bert.bertscore._loading import load_tokenizer
    from uqlm_bert.distributed._files import _run_wide_idf
    from uqlm_bert.scorers._registry import scorer_settings

    tok = load_tokenizer(None)
    token = tok("Zanzibar", add_special_tokens=False)["input_ids"][0]
    # a word only past the window of a long reference (the test texts' words are others)
    responses, samples = [SHORT[0]], [[OVERLONG[0] + " Zanzibar.", SHORT[1]]]

    def run_idf(**flat):
        settings = scorer_settings(["bert_score"], idf=True, **flat)
        return _run_wide_idf(settings, responses, samples)["bertscore"].idf

    weights = {mode: run_idf(long_texts=mode) for mode in ("window", "truncate")}
    default = run_idf()
    # two documents: a token in one of them has idf log(3/2); an unseen one log(3)
    assert weights["window"][token] == pytest.approx(np.log(3 / 2))
    assert weights["truncate"][token] == pytest.approx(np.log(3))
    assert default[token] == weights["window"][token]  # the scorers' default reads it whole


@pytest.mark.slow
@pytest.mark.ray
def test_ray_scores_long_answers_as_the_local_engine_in_both_modes(tmp_path):
    ray = pytest.importorskip("ray")
    from uqlm_bert.distributed import score_file
    from uqlm_bert.distributed._session import start_local_ray

    assert not ray.is_initialized(), "another test left Ray running"
    src = _answers(tmp_path)
    start_local_ray(num_cpus=2)
    try:
        for mode in ("window", "truncate"):
            out = tmp_path / f"{mode}.jsonl"
            with deadline(300, "the Ray pipeline"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                score_file(src, out, scorers=["bert_score"], scorer_kwargs={"long_texts": mode},
                           num_workers=1, show_progress_bars=False)  # fmt: skip
            got = pd.read_json(out, lines=True)["bert_score"].tolist()
            assert got == pytest.approx(_expected(mode), abs=1e-6)
    finally:
        ray.shutdown()
