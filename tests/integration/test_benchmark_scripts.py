"""The benchmarks in benchmarks/: their helpers, the harness's server, and their behaviour without
data."""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from benchmarks import bench_end_to_end as end_to_end
from benchmarks import bench_generation as generation
from benchmarks import bench_vs_uqlm as vs
from benchmarks import eval_idf, eval_threshold, harness, loopback
from benchmarks import eval_wikibio as combos
from tests.helpers.deadline import deadline
from uqlm_bert.bertscore._settings import SCORER_DEFAULTS

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_is_a_module_of_the_package(name):
    module = importlib.import_module(f"benchmarks.{name}")
    source = (REPO / "benchmarks" / f"{name}.py").read_text(encoding="utf-8")
    assert "sys.path" not in source
    if name not in ("harness", "loopback"):
        assert callable(module.main)


def test_run_all_runs_every_benchmark():
    run_all = (REPO / "benchmarks" / "run_all.sh").read_text(encoding="utf-8")
    ran = set(re.findall(r"^\s*run (\w+)", run_all, re.M))
    ran |= set(re.findall(r"-m benchmarks\.(\w+)", run_all))
    assert set(SCRIPTS) - {"harness", "loopback"} <= ran


@pytest.mark.slow
def test_a_benchmark_runs_with_python_m_and_skips_without_its_data(tmp_path):
    absent = tmp_path / "absent.jsonl"
    got = subprocess.run(
        [sys.executable, "-m", "benchmarks.eval_threshold", "--data", str(absent)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert "not found" in got.stdout


def test_the_shared_options_have_one_default_each():
    args = harness.parser(None, *harness.OPTIONS).parse_args([])
    for name, (_, default, _) in harness.OPTIONS.items():
        assert getattr(args, name.replace("-", "_")) == default


def test_judge_matches_scipy_over_sample_subsets():
    rng = np.random.default_rng(0)
    scores = rng.random((12, 20))  # [passages, samples]
    degree = rng.random(12)
    got = combos.judge(lambda idx: scores[:, idx].mean(1), degree)

    def cell(idx):
        return 100 * spearmanr(-scores[:, idx].mean(1), degree).statistic

    k20 = cell(list(range(20)))
    k10 = [cell(list(range(s * 10, (s + 1) * 10))) for s in range(2)]
    k5 = [cell(list(range(s * 5, (s + 1) * 5))) for s in range(4)]
    assert got["k=20"] == pytest.approx(k20)
    assert got["k=10"] == pytest.approx(np.mean(k10))
    assert got["k=5"] == pytest.approx(np.mean(k5))
    assert got["all cells"] == pytest.approx(np.mean([k20, *k10, *k5]))
    assert got["worst"] == pytest.approx(min([k20, *k10, *k5]))


def test_candidates_pool_the_chosen_samples_only():
    rng = np.random.default_rng(1)
    f1 = {(layer, idf): rng.random((6, 20)) for layer in combos.LAYERS for idf in (False, True)}
    bleu = rng.random((6, 20))
    pools = combos.candidates(f1, bleu)
    idx = [0, 3, 7]
    best = pools["layer 5, idf, F1, mean over samples (best single setting)"]
    np.testing.assert_allclose(best(idx), f1[(5, True)][:, idx].mean(1))
    avg = pools["F1 averaged over layers 4,5, no idf"]
    np.testing.assert_allclose(
        avg(idx), (f1[(4, False)][:, idx].mean(1) + f1[(5, False)][:, idx].mean(1)) / 2
    )
    drop = pools["layer 5, idf, F1, mean without the best sample"]
    m = f1[(5, True)][:, idx]
    np.testing.assert_allclose(drop(idx), (m.sum(1) - m.max(1)) / 2)


def test_idf_summary_gives_k20_and_the_spread_over_the_k5_sets():
    rng = np.random.default_rng(2)
    rows = pd.DataFrame(
        [
            {"idf": name, "k": k, "subset": s, "passage_spearman": rng.normal(70, 5)}
            for name in ("none", "fixed")
            for k, s in [(20, 0), (5, 0), (5, 1), (5, 2), (5, 3)]
        ]
    )
    got = eval_idf.summary(rows, "idf", ["passage_spearman"]).set_index("idf")
    for name in ("none", "fixed"):
        mine = rows[rows.idf == name]
        five = mine[mine.k == 5]["passage_spearman"].to_numpy()
        assert got.loc[name, "passage_spearman k=20"] == mine[mine.k == 20].iloc[0, -1]
        assert got.loc[name, "passage_spearman k=5"] == f"{five.mean():.2f} ({five.std():.2f})"


@pytest.mark.parametrize("script", [combos, eval_idf], ids=["eval_wikibio", "eval_idf"])
def test_scripts_skip_cleanly_without_the_data(script, tmp_path, capsys):
    missing = tmp_path / "absent.jsonl"
    assert script.main(["--data", str(missing)]) == 0
    assert "not found" in capsys.readouterr().out


# bench_vs_uqlm.py: the pieces that need no uqlm run everywhere; the uqlm side where it is installed


def _passages() -> list:
    return [
        harness.Passage(
            idx,
            f"{name} was a painter born in {town}. {name} studied in Paris. {name} taught there.",
            tuple(
                f"{name} was a {job} from {town}. Work number {j} is known. It is in {town}."
                for j in range(4)
            ),
        )
        for idx, name, town, job in [
            (11, "Anna Berg", "Oslo", "painter"),
            (12, "Luis Ortega", "Seville", "sculptor"),
        ]
    ]


def _options(prompts: int, *more: str):
    """The side-by-side benchmark's options: ``prompts`` prompts x 2 samples, 1 round at 0 ms."""
    return vs.options(
        ["--prompts", str(prompts), "--samples", "2", "--rounds", "1", "--latencies", "0", *more]
    )


def test_vs_uqlm_prompts_map_to_passages_and_samples_restart_after_reset():
    passages = _passages()
    prompts = harness.make_prompts(passages, 5)
    assert len(prompts) == 5  # distinct texts, cycling over the passages
    # the first round over the passages as they are, later rounds with sentences rotated
    assert list(prompts.values())[:2] == passages
    texts = [t for p in prompts.values() for t in (p.response, *p.samples)]
    assert len(set(texts)) == len(texts)  # no two prompts share a text
    for i, p in enumerate(prompts.values()):
        original = passages[i % 2]
        assert p.idx == original.idx
        pairs = zip((p.response, *p.samples), (original.response, *original.samples), strict=True)
        for got, orig in pairs:
            assert sorted(got.split()) == sorted(orig.split())  # the same words, reordered
    first = next(iter(prompts))
    assert first == "This is a Wikipedia passage about concept 11:"
    answers = loopback.PassageAnswers(prompts)
    assert answers(first, 0.0) == answers(first, None) == passages[0].response
    samples = passages[0].samples
    assert [answers(first, 1.0) for _ in range(5)] == [*samples, samples[0]]
    answers.reset()
    assert answers(first, 1.0) == samples[0]
    assert answers("an unknown prompt", 0.0) == loopback.PassageAnswers.UNKNOWN
    # a run is judged by the multiset of its samples, in any order
    assert answers.mismatches([first], [passages[0].response], [samples[1::-1]]) == 0
    assert answers.mismatches([first], [passages[0].response], [samples[2:0:-1]]) == 1
    assert answers.mismatches([first], [samples[0]], [samples[:2]]) == 1


def test_vs_uqlm_rounds_put_every_run_in_every_place():
    names = ["a", "b", "c"]
    orders = [harness.round_order(names, r) for r in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    for place in range(3):  # each name runs once in each place over three rounds
        assert sorted(o[place] for o in orders) == names
    assert harness.round_order(names, 3) == names
    assert harness.round_order(["x", "y"], 1) == ["y", "x"]
    assert list(harness.rounds(["x", "y"], 2)) == [(0, "x"), (0, "y"), (1, "y"), (1, "x")]


@pytest.mark.slow
@pytest.mark.network
def test_vs_uqlm_our_side_end_to_end_on_a_few_prompts():
    runs = asyncio.run(
        vs.run_benchmark(_passages(), _options(3, "--only", "ours"), log=lambda _: None)
    )
    assert [r.variant for r in runs] == [vs.OURS, vs.OURS_DEFAULT]
    rows = vs.summarize(runs)
    assert all(vs.checks(rows, 3, 2).values())
    # per prompt the answer, and its samples in one call with n (the default through ChatOpenAI)
    assert all(r.calls == 6 and r.answer_calls == 3 and r.max_in_flight >= 1 for r in runs)
    assert all(r.generation_s > 0 and r.client_cpu_s > 0 for r in runs)
    # the default scorer weighs tokens with the fixed idf table; uqlm's settings do not
    assert runs[0].scores != runs[1].scores
    # uqlm's settings give uqlm's numbers: per prompt the mean bert_score F1 of the answer
    # against each sample, from the reference package (what uqlm computes)
    bert_score = pytest.importorskip("bert_score")
    reference = bert_score.BERTScorer(
        model_type=harness.embedded_model(), num_layers=vs.LAYER, idf=False
    )
    texts = list(harness.make_prompts(_passages(), 3).values())
    want = [float(reference.score([t.response] * 2, list(t.samples[:2]))[2].mean()) for t in texts]
    assert max(abs(a - b) for a, b in zip(runs[0].scores, want, strict=True)) <= vs.TOLERANCE
    assert all(0.0 < s <= 1.0 for r in runs for s in r.scores)
    report = vs.markdown(
        rows,
        vs.checks(rows, 3, 2),
        {
            "versions": vs.versions(False),
            "prompts": 3,
            "samples": 2,
            "calls_per_run": 9,
            "rounds": 1,
            "machine": "test",
        },
    )
    assert "| 0 ms | uqlm-bert, BERTScore as uqlm |" in report


@pytest.mark.slow
@pytest.mark.network
def test_generation_benchmark_runs_every_way_of_asking_for_samples_against_its_floor():
    args = generation.options(["--prompts", "3", "--samples", "2", "--rounds", "1",
                               "--latencies", "200", "0"])  # fmt: skip
    runs = asyncio.run(generation.run_benchmark(_passages(), args, log=lambda _: None))
    calls = {(r.variant, r.latency_ms): r.calls for r in runs}
    # with n: per prompt the answer and its samples in one call; without, one call per sample;
    # a server that ignores n: the call with n, then the missing sample asked for again
    per_prompt = {generation.DEFAULTS: 2, generation.FIXED: 2, generation.NO_N: 3,
                  generation.ALONE: 2, generation.ALONE_NO_N: 3, generation.IGNORED: 3}  # fmt: skip
    assert calls == {(v, lat): 3 * k for v, k in per_prompt.items() for lat in (200.0, 0.0)}
    assert all(r.text_mismatches == 0 and r.generation_s > 0 for r in runs)
    rows = generation.summarize(runs)
    at_200 = {r["variant"]: r for r in rows if r["latency_ms"] == 200.0}
    zero = {r["variant"]: r for r in rows if r["latency_ms"] == 0.0}
    for variant, row in at_200.items():  # the floor: the 0 ms run's generation plus 0.2 s a round
        assert row["rounds"] == 1  # 2 samples: one round, whatever the sampling
        assert row["floor_s"] == pytest.approx(zero[variant]["generation_s"][0] + 0.2)
        assert row["of_floor"] == pytest.approx(row["generation_s"][0] / row["floor_s"])
        assert row["generation_s"][0] >= 0.2  # one round trip at least
    verdicts = generation.checks(rows)
    meta = {**vars(args), "machine": "test", "load": "quiet"}
    report = generation.markdown(rows, verdicts, meta)
    assert f"| 200 ms | {generation.DEFAULTS} |" in report and "<= 1.15" in report


@pytest.mark.slow
@pytest.mark.network
def test_vs_uqlm_script_writes_its_report(shared_data_dir, tmp_path, capsys):
    args = [
        "--only",
        "ours",
        "--prompts",
        "2",
        "--samples",
        "2",
        "--rounds",
        "1",
        "--latencies",
        "0",
        "--out",
        str(tmp_path),
    ]
    if vs.uqlm_available():
        args[1] = "both"
    assert vs.main([*args, "--data", str(shared_data_dir / "wikibio_gpt3_dev.jsonl")]) == 0
    out = json.loads((tmp_path / "vs_uqlm.json").read_text())
    assert all(out["checks"].values())
    assert (tmp_path / "vs_uqlm.md").read_text() in capsys.readouterr().out


@pytest.mark.network
def test_vs_uqlm_uqlm_side_agrees(tmp_path):
    pytest.importorskip("uqlm")
    runs = asyncio.run(
        vs.run_benchmark(_passages(), _options(2, "--only", "both"), log=lambda _: None)
    )
    rows = vs.summarize(runs)
    verdicts = vs.checks(rows, 2, 2)
    assert all(verdicts.values()), verdicts
    assert {r.variant for r in runs} == {vs.UQLM, vs.OURS, vs.OURS_DEFAULT}


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("where", ["process", "thread"])
def test_passage_server_answers_resets_and_logs_in_a_process_or_a_thread(where):
    import time

    import httpx

    PassageServer = harness.PassageServer
    passages = _passages()
    prompts = harness.make_prompts(passages, 2)
    first = next(iter(prompts))

    def ask(client: httpx.Client, prompt: str, temperature: float) -> str:
        body = {
            "model": "m",
            "temperature": temperature,
            "messages": [{"role": "user", "content": prompt}],
        }
        got = client.post("/chat/completions", json=body, timeout=10)
        got.raise_for_status()
        return got.json()["choices"][0]["message"]["content"]

    with PassageServer(prompts, where=where) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=server.base_url) as client:
            t0 = time.monotonic()
            assert ask(client, first, 0.0) == passages[0].response
            assert [ask(client, first, 1.0) for _ in range(2)] == list(passages[0].samples[:2])
            log = server.log()
            # arrivals on this process's monotonic clock, whichever process logged them
            assert [temp for _, temp in log.arrivals] == [0.0, 1.0, 1.0]
            assert all(t0 <= arrived <= time.monotonic() for arrived, _ in log.arrivals)
            assert log.max_in_flight == 1
            server.reset()  # samples restart from the first, the log empties
            assert server.log().arrivals == []
            assert ask(client, first, 1.0) == passages[0].samples[0]
            server.set_latency(0.3)
            started = time.monotonic()
            assert ask(client, first, 0.0) == passages[0].response
            assert time.monotonic() - started >= 0.3
            assert server.latency == 0.3
    with pytest.raises(ValueError, match="'process' or 'thread'"):
        PassageServer(prompts, where="elsewhere")


def test_vs_uqlm_skips_cleanly_without_the_data(tmp_path, capsys):
    assert vs.main(["--data", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path)]) == 0
    assert "not found" in capsys.readouterr().out


@pytest.mark.slow
def test_import_benchmark_measures_and_reports_no_heavy_module(tmp_path, monkeypatch):
    from benchmarks import bench_import

    assert len(bench_import.wall_times([sys.executable, "-c", "pass"], 2)) == 2
    assert bench_import.heavy_modules("import uqlm_bert") == []
    assert bench_import.heavy_modules("import pandas") == ["numpy", "pandas"]


def test_threshold_rule_on_a_hand_case():
    confidence = np.array([0.2, 0.4, 0.6, 0.8])
    positive = np.array([True, True, False, False])
    # flagging below 0.5 catches both positives and no negative: J = 1 - 0
    t, j = eval_threshold.youden_threshold(confidence, positive)
    assert (t, j) == (0.5, 1.0)
    r = eval_threshold.rates(confidence, positive, 0.7)
    assert r == {"flagged": 3, "of": 4, "precision": 2 / 3, "recall": 1.0,
                 "false_positive_rate": 0.5}  # fmt: skip


def test_threshold_script_skips_without_data(tmp_path, capsys):
    assert eval_threshold.main(["--data", str(tmp_path / "absent.jsonl")]) == 0
    assert "nothing to measure" in capsys.readouterr().out


# bench_end_to_end.py: generation and scoring, one call against a burst of one-prompt calls, a stream


def test_percentile_is_numpys():
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 20):
        xs = rng.random(n).tolist()
        for q in (0, 50, 95, 100):
            assert harness.percentile(xs, q) == pytest.approx(np.percentile(xs, q))


@pytest.mark.slow
@pytest.mark.network
def test_end_to_end_script_writes_its_report(shared_data_dir, tmp_path, capsys):
    n, m = 3, 2
    args = ["--prompts", str(n), "--samples", str(m), "--rounds", "1", "--latencies", "0",
            "--rate", "8", "--duration", "0.5", "--device", "cpu", "--out", str(tmp_path),
            "--data", str(shared_data_dir / "wikibio_gpt3_dev.jsonl")]  # fmt: skip
    assert end_to_end.main(args) == 0
    out = json.loads((tmp_path / "end_to_end.json").read_text())
    assert all(out["checks"].values())
    (row,) = out["rows"]
    # one call or a burst, per prompt the answer and its samples in one call with n (ChatOpenAI)
    assert row["calls"] == [2 * n] and row["text_mismatches"] == 0
    runs = {r["run"]: r for r in out["runs"]}
    assert set(runs) == {end_to_end.GEN, end_to_end.SCORE, end_to_end.ONE, end_to_end.BURST}
    assert len(runs[end_to_end.BURST]["request_s"]) == n and row["burst / one call"] > 0
    assert runs[end_to_end.ONE]["batches"] and runs[end_to_end.ONE]["scoring_s"] > 0
    (stream,) = out["streams"]
    assert stream["requests"] == 4 and stream["calls"] == 2 * 4  # 8 per second for 0.5 s
    assert all(lat > 0 for lat in stream["request_s"])
    printed = capsys.readouterr().out
    assert (tmp_path / "end_to_end.md").read_text().strip() in printed
    assert "CPU: " in printed and ("AMX" in printed or "AVX512-BF16" in printed)


@pytest.mark.slow
def test_layer_sweep_scores_each_layer_as_the_scorer_does(shared_data_dir, monkeypatch):
    """eval_layers.py judges a layer by the confidences ``BlackBoxUQ.score`` gives at its
    defaults: at the default layer its pair scores reproduce them; at another layer they are
    the scorer's with that layer (float32, where batches do not change the numbers)."""
    from benchmarks import eval_layers
    from uqlm_bert import BERTScoreSettings, BlackBoxUQ

    monkeypatch.setattr(eval_layers, "SCORER_DEFAULTS", SCORER_DEFAULTS.replace(dtype="float32"))
    rows = eval_layers.load_rows(shared_data_dir / "wikibio_gpt3_dev.jsonl", set())[:4]
    datasets = {"dev": rows}
    table, pairs = eval_layers.evaluate("fast", [4, 5], datasets, "cpu")
    assert [(r["data"], r["layer"]) for r in table] == [("dev", 4), ("dev", 5)]
    assert pairs["dev", 5].shape == (4, eval_layers.N_SAMPLES)
    at = {layer: pairs["dev", layer] for layer in (4, 5)}
    assert eval_layers.check_against_black_box("fast", rows, at, "cpu") < 1e-6
    first = eval_layers.SETS_OF_FIVE[1]
    uq = BlackBoxUQ(
        bertscore=BERTScoreSettings(num_layers=4, device="cpu", dtype="float32"),
        show_progress_bars=False,
    )
    got = uq.score([r["response"] for r in rows], [[r["samples"][j] for j in first] for r in rows])
    np.testing.assert_allclose(got.data["bert_score"], at[4][:, first].mean(axis=1), atol=1e-6)
    degree = np.array([r["degree"] for r in rows])
    expected = 100 * spearmanr(-at[5].mean(axis=1), degree).statistic
    assert table[1]["m=20"] == pytest.approx(expected)


def test_a_random_weights_copy_has_the_models_shapes_and_tokens_and_new_weights(
    tmp_path, embedded_model_path
):
    """What lets a copy stand in for a model in timing: the same architecture and tokenizer
    (so the same tokens and matrix shapes), weights of its own."""
    import warnings

    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer

    from benchmarks.bench_presets import random_weights_copy
    from tests.helpers.texts import LONG, SHORT
    from tests.helpers.tiny_models import build_tiny_mpnet
    from uqlm_bert import BERTScorer

    source = build_tiny_mpnet(tmp_path / "source", embedded_model_path)
    real = load_file(source / "model.safetensors")
    config_only = tmp_path / "config_only"  # what the copy needs: no weights
    shutil.copytree(source, config_only, ignore=shutil.ignore_patterns("model.safetensors"))
    copy = random_weights_copy(config_only, tmp_path / "copy" / "tiny", seed=1)  # not the source's

    want, got = AutoConfig.from_pretrained(source), AutoConfig.from_pretrained(copy)
    for key in ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size"):
        assert getattr(got, key) == getattr(want, key)
    drawn = load_file(copy / "model.safetensors")
    assert {k: v.shape for k, v in drawn.items()} == {k: v.shape for k, v in real.items()}
    assert not torch.equal(
        drawn["embeddings.word_embeddings.weight"], real["embeddings.word_embeddings.weight"]
    )
    texts = SHORT + LONG[:2]
    assert (
        AutoTokenizer.from_pretrained(copy)(texts)["input_ids"]
        == AutoTokenizer.from_pretrained(source)(texts)["input_ids"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # texts over the tiny model's 130 tokens are cut
        scorer = BERTScorer(model_type=str(copy), num_layers=3, show_progress_bars=False)
        same = scorer.score(texts, texts)[2]
        other = scorer.score(texts, texts[::-1])[2]
    assert torch.allclose(same, torch.ones(len(texts)), atol=1e-5)  # a text against itself
    assert torch.isfinite(other).all() and len(other) == len(texts)


# bench_cluster_limits.py: what a grant of the cluster's limits costs, on a local Ray


@pytest.mark.slow
@pytest.mark.ray
def test_cluster_limits_benchmark_reports_every_grant(tmp_path):
    """A few grants of each kind (bounded: 180 s with Ray's start), one row each in the report."""
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized(), "another test left Ray running"
    from benchmarks import bench_cluster_limits

    with deadline(180, "bench_cluster_limits"):
        args = ["--grants", "5", "--waiting", "4", "--out", str(tmp_path)]
        assert bench_cluster_limits.main(args) == 0
    assert not ray.is_initialized()
    report = (tmp_path / "cluster_limits.md").read_text()
    table = [line.strip("| ").split(" | ") for line in report.splitlines() if line[:2] == "| "]
    names = [row[0].split(" (")[0] for row in table]
    assert names == [
        "grant", "first grant", "a place, one at a time", "a token, one at a time",
        "4 places waiting at once", "in process: a place", "in process: a token",
    ]  # fmt: skip
    assert float(table[1][1]) > 0 and all(float(row[1]) >= 0 for row in table[2:5])
    assert all(row[1].endswith(" us") and row[2].endswith(" us") for row in table[5:])


def test_the_simulated_rule_is_the_librarys_rule_answer_by_answer():
    from benchmarks import eval_sampling_rounds as rounds
    from uqlm_bert._blackbox._settle import SPREAD_FLOOR, Z, settled
    from uqlm_bert.generation._rounds import FIRST_ROUND, round_ends

    rng = np.random.default_rng(3)
    # answers near and far from the threshold, with small and large spreads
    scores = np.clip(rng.normal(rng.uniform(0.4, 1.0, (400, 1)), rng.uniform(0, 0.2, (400, 1)),
                                (400, 20)), 0, 1)  # fmt: skip
    for m in (5, 10, 20):
        assert rounds.ends_of(m, FIRST_ROUND, 2.0) == round_ends(m)
        conf, drawn = rounds.until_settled(scores, m, (Z, SPREAD_FLOOR, FIRST_ROUND, 2.0))
        for x, c, k in zip(scores, conf, drawn, strict=True):
            # the library: the first round end at which settled() holds, else the last
            want = next((e for e in round_ends(m)[:-1]
                         if settled(x[:e], rounds.DEFAULT_THRESHOLD)), m)  # fmt: skip
            assert k == want and c == pytest.approx(x[:k].mean())
    assert rounds.ends_of(10, 3, 1.0) == [3, 4, 5, 6, 7, 8, 9, 10]


@pytest.mark.slow
@pytest.mark.network
def test_sampling_rounds_benchmark_runs_every_variant_and_checks_the_simulation():
    from benchmarks import bench_sampling_rounds as bench

    args = bench.harness.parser(None, "prompts", "samples", "rounds", "server", "data", "out")
    args.add_argument("--latency", type=float, default=100.0)
    args.add_argument("--rate", type=int, default=40)
    args = args.parse_args(["--prompts", "2", "--rounds", "1"])
    runs = asyncio.run(bench.run_benchmark(_passages(), args, log=lambda _: None))
    assert {r["variant"] for r in runs} == set(bench.VARIANTS)
    assert all(r["mismatches"] == 0 and r["calls"] == r["result_calls"] for r in runs)
    for r in runs:
        sampling, use_n, _ = bench.VARIANTS[r["variant"]]
        if sampling == "fixed":
            assert r["drawn"] == [5, 5]
            assert r["calls"] == 2 * (1 + (1 if use_n else 5))
    simulated = bench.simulated_drawn(harness.make_prompts(_passages(), 2), 5)
    rows = bench.summarize(runs, simulated)
    assert all(r["drawn_as_simulated"] == 1.0 for r in rows if "drawn_as_simulated" in r)
