"""Side by side with uqlm 0.6.7: ``generate_and_score`` end to end, through a client and a server.

    bash benchmarks/setup-uqlm-env.sh          # once: benchmarks/.venv-uqlm with both libraries
    benchmarks/.venv-uqlm/bin/python -m benchmarks.bench_vs_uqlm [--only both|ours|uqlm] [--check-env]

Both libraries' ``BlackBoxUQ(llm, scorers=["bert_score"]).generate_and_score(prompts,
num_responses=m)``, each through its own ``ChatOpenAI`` to the loopback server; every run receives
the same texts per prompt (checked). Per latency, in turning order: uqlm (its ``BERTScorer`` on
the embedded model, layer 5, checked), uqlm-bert with uqlm's BERTScore (float32, no idf, texts
cut at the window, F1) and uqlm-bert at its defaults, all with uqlm's system prompt.
(uqlm-bert's generation alone, against its floor: ``bench_generation``.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.metadata
import importlib.util
import os
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from unittest import mock

from benchmarks import harness

LAYER = 5
TOLERANCE = 1e-5
UQLM = "uqlm 0.6.7"
OURS = "uqlm-bert, BERTScore as uqlm"
OURS_DEFAULT = "uqlm-bert, default scorer"


@dataclass
class Run:
    """One timed ``generate_and_score`` call."""

    latency_ms: float
    round: int
    variant: str
    wall_s: float
    calls: int
    answer_calls: int
    sample_calls: int
    max_in_flight: int
    last_answer_s: float  # when the last call was answered (it arrived, waited the latency)
    generation_s: float  # uqlm-bert's metadata["timings"]["generation_s"]; uqlm's: last answer
    client_cpu_s: float
    text_mismatches: int
    scores: list[float | None] = field(repr=False)


def uqlm_available() -> bool:
    return importlib.util.find_spec("uqlm") is not None


def make_uqlm(llm: Any, model_path: str, device: str | None = None) -> Any:
    """uqlm's ``BlackBoxUQ(llm, scorers=["bert_score"])`` on the embedded model, layer 5."""
    import uqlm.black_box.bert as uqlm_bert_module
    from uqlm import BlackBoxUQ as UqlmBlackBoxUQ

    reference = uqlm_bert_module.BERTScorer
    settings = {"model_type": model_path, "num_layers": LAYER, "idf": False}

    def embedded(*args: Any, **kwargs: Any) -> Any:
        return reference(*args, **{**kwargs, **settings, "rescale_with_baseline": False})

    with mock.patch.object(uqlm_bert_module, "BERTScorer", embedded):
        uq = UqlmBlackBoxUQ(llm=llm, scorers=["bert_score"], device=device)
    inner = uq.scorer_objects["bert_score"].bert_scorer
    got = (inner.model_type, inner.num_layers, inner.idf, inner.rescale_with_baseline)
    if got != (model_path, LAYER, False, False):
        raise RuntimeError(f"uqlm's BERTScorer was not pointed at the embedded model: {got}")
    return uq


def make_ours(llm: Any, model_path: str | None, device: str | None = None) -> Any:
    """uqlm-bert's ``BlackBoxUQ``: BERTScore as uqlm's where ``model_path`` is given."""
    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.scorers._bertscore import BERTScoreConsistency

    # every prompt's samples at once, as uqlm draws them: the same calls and texts for both
    common = {"llm": llm, "generation": harness.fixed_sampling(), "show_progress_bars": False}
    if model_path is None:
        return BlackBoxUQ(scorers=["bert_score"], device=device, **common)
    settings = {"model_type": model_path, "num_layers": LAYER, "idf": False, "device": device,
                "beta": 1.0, "zero_weight": None, "dtype": "float32", "long_texts": "truncate"}  # fmt: skip
    return BlackBoxUQ(scorers=[BERTScoreConsistency(**settings)], **common)


async def timed_run(
    server: harness.PassageServer, uq: Any, prompts: list[str], m: int, timeout_s: float
) -> tuple[float, list[Any], int, dict[str, Any]]:
    """Reset the server's counters, time one call; ``(seconds, scores, mismatches, counts)``."""
    server.reset()
    gc.collect()
    t0 = time.monotonic()  # the server logs arrivals on the same clock
    cpu = time.process_time()
    call = uq.generate_and_score(prompts, num_responses=m, show_progress_bars=False)
    result = await asyncio.wait_for(call, timeout_s)
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu
    d, log = result.data, server.log()
    last_answer = max((a for a, _ in log.arrivals), default=t0) + server.latency - t0
    generation_s = (getattr(result, "metadata", None) or {}).get("timings", {}).get("generation_s")
    temps = [bool(temp) for _, temp in log.arrivals]
    counts = {"calls": len(temps), "answer_calls": temps.count(False),
              "sample_calls": temps.count(True), "max_in_flight": log.max_in_flight,
              "last_answer_s": last_answer, "client_cpu_s": cpu,
              "generation_s": last_answer if generation_s is None else generation_s}  # fmt: skip
    bad = server.answers.mismatches(prompts, list(d["responses"]), list(d["sampled_responses"]))
    return wall, list(d.get("bert_score", [])), bad, counts


async def _timed_rounds(
    server: harness.PassageServer, variants: dict[str, Any], prompts: list[str], args, log,
) -> list[Run]:  # fmt: skip
    """Each variant warmed up, then timed per latency in turning order."""
    m, timeout = args.samples, args.timeout
    for uq in variants.values():  # load models, open connections: not timed
        await timed_run(server, uq, prompts[: min(4, len(prompts))], m, timeout)
    runs = []
    for latency in args.latencies:
        server.set_latency(latency / 1000.0)
        for r, name in harness.rounds(list(variants), args.rounds):
            wall, scores, bad, counts = await timed_run(server, variants[name], prompts, m, timeout)
            runs.append(Run(latency, r, name, wall, text_mismatches=bad, scores=scores, **counts))
            log(f"{latency:6.0f} ms  round {r}  {name:42s} {wall:7.2f} s (generation "
                f"{counts['generation_s']:.2f} s), {counts['calls']} calls, {bad} prompts off")  # fmt: skip
    return runs


async def run_benchmark(passages: Sequence[harness.Passage], args, log=print) -> list[Run]:
    """Every run of the libraries side by side (``args``: :func:`options`), in their order."""
    prompt_map = harness.make_prompts(passages, args.prompts)
    path, device = harness.embedded_model(), args.device
    with harness.PassageServer(prompt_map, where=args.server) as server:
        variants: dict[str, Any] = {}
        if args.only in ("both", "uqlm"):
            variants[UQLM] = make_uqlm(harness.make_llm(server.base_url), path, device)
        if args.only in ("both", "ours"):
            variants[OURS] = make_ours(harness.make_llm(server.base_url), path, device)
            variants[OURS_DEFAULT] = make_ours(harness.make_llm(server.base_url), None, device)
        return await _timed_rounds(server, variants, list(prompt_map), args, log)


def summarize(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per (latency, variant): medians, call counts, agreement with uqlm."""
    by_key: dict[tuple[float, str], list[Run]] = defaultdict(list)
    for run in runs:
        by_key[(run.latency_ms, run.variant)].append(run)
    rows = []
    for (latency, variant), group in by_key.items():
        ref = by_key.get((latency, UQLM))
        diff = None
        if ref and variant != UQLM:
            diff = max(harness.max_abs_diff(a.scores, b.scores) for a in group for b in ref)
        ref_med = harness.median(g.wall_s for g in ref) if ref else None

        def spread(key: str, group: list[Run] = group) -> list[float]:
            return harness.spread(getattr(g, key) for g in group)

        rows.append(
            {"latency_ms": latency, "variant": variant, "runs": len(group),
             "wall_s": spread("wall_s"), "generation_s": spread("generation_s"),
             "speed_up_over_uqlm": ref_med / spread("wall_s")[0] if ref_med else None,
             **{k: sorted({getattr(g, k) for g in group}) for k in ("calls", "answer_calls", "sample_calls")},
             "max_in_flight": max(g.max_in_flight for g in group),
             "client_cpu_s_median": harness.median(g.client_cpu_s for g in group),
             "max_abs_diff_vs_uqlm": diff,
             "max_abs_diff_between_rounds": max(harness.max_abs_diff(group[0].scores, g.scores) for g in group),
             "text_mismatches": sum(g.text_mismatches for g in group)}
        )  # fmt: skip
    return rows


def checks(rows: Sequence[dict[str, Any]], n_prompts: int, m: int) -> dict[str, bool]:
    """The verdicts: call counts and texts as expected, confidences stable and in agreement."""
    ours = n_prompts * -(-m // 128)  # uqlm-bert: one call per prompt's samples (n, at most 128)
    out = {
        f"call counts as expected ({n_prompts} answer calls in every run; uqlm {n_prompts * m} "
        f"sample calls, uqlm-bert {ours} with n)": all(
            r["answer_calls"] == [n_prompts]
            and r["sample_calls"] == [n_prompts * m if r["variant"] == UQLM else ours]
            for r in rows
        ),
        "texts as expected": all(r["text_mismatches"] == 0 for r in rows),
        "stable over rounds (the default scorer within its dtype's rounding)": all(
            r["max_abs_diff_between_rounds"]
            <= (harness.REDUCED_TOLERANCE if r["variant"] == OURS_DEFAULT else TOLERANCE)
            for r in rows
        ),
    }
    # only the variant with uqlm's BERTScore settings must give its numbers
    diffs = [r["max_abs_diff_vs_uqlm"] for r in rows if r["variant"] != OURS_DEFAULT]
    if diffs := [d for d in diffs if d is not None]:
        out[f"confidences agree within {TOLERANCE:g}"] = max(diffs) <= TOLERANCE
    return out


def _header(meta: dict[str, Any]) -> list[str]:
    return [
        f"- {meta['prompts']} prompts x {meta['samples']} samples of distinct WikiBio texts, "
        "served by the loopback server through `ChatOpenAI`, the server in "
        + harness.describe_server(meta.get("server")),
        f"- {meta['rounds']} round(s) per latency, the order turning each round; medians "
        "(min-max); client CPU: this process's CPU time over the call",
        f"- {meta['machine']}",
        *([f"- {meta['load']}"] if "load" in meta else []),
    ]


def _texts(bad: int) -> str:
    return "as expected" if bad == 0 else f"{bad} off"


def markdown(
    rows: Sequence[dict[str, Any]], verdicts: dict[str, bool], meta: dict[str, Any]
) -> str:
    """The report: setup, one table row per (latency, variant), and the verdicts."""
    head = ["latency", "run", "wall s", "speed-up over uqlm", "generation s", "client CPU s",
            "calls", "max in flight", "max abs diff vs uqlm", "texts"]  # fmt: skip
    table = []
    for r in rows:
        up, diff = r["speed_up_over_uqlm"], r["max_abs_diff_vs_uqlm"]
        table.append(
            [f"{r['latency_ms']:.0f} ms", r["variant"],
             harness.shown_spread(r["wall_s"]), "" if up is None else f"{up:.2f}x",
             f"{r['generation_s'][0]:.2f}",
             f"{r['client_cpu_s_median']:.2f}", "/".join(map(str, r["calls"])),
             r["max_in_flight"], "" if diff is None else f"{diff:.1e}",
             _texts(r["text_mismatches"])]
        )  # fmt: skip
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    lines = [
        f"## Side by side with uqlm {meta['versions'].get('uqlm', '(not run)')}: "
        "generate_and_score end to end", "", *_header(meta),
        f"- BERTScore device: {meta.get('device') or 'each library chooses'}; {versions}", "",
        *harness.md_table(head, table), "",
        *(f"- {k}: {'yes' if v else 'NO'}" for k, v in verdicts.items()),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def versions(with_uqlm: bool) -> dict[str, str]:
    names = ["uqlm-bert", "torch", "transformers", "numpy", "bert-score", "langchain-openai"]
    out = dict.fromkeys(["uqlm", *names] if with_uqlm else names, "not installed")
    for name in out:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def check_env() -> int:
    """Both libraries import, and their BERTScore agrees on the embedded model; 0 if so."""
    if not uqlm_available():
        print("uqlm is not installed here: run bash benchmarks/setup-uqlm-env.sh")
        return 1
    from uqlm_bert import BERTScorer

    path = harness.embedded_model()
    cands = ["The cat sat on the mat.", "Paris is the capital of France, on the Seine."]
    refs = [["A cat was sitting on the mat.", "The dog barked."],
            ["France's capital is Paris.", "Lyon lies on the Rhone."]]  # fmt: skip
    theirs = make_uqlm(None, path).scorer_objects["bert_score"].evaluate(cands, refs)
    engine = BERTScorer(model_type=path, num_layers=LAYER, idf=False, show_progress_bars=False)
    pairs = zip(cands, refs, strict=True)
    ours = [float(engine.score([c] * len(r), r)[2].mean()) for c, r in pairs]
    diff = harness.max_abs_diff(theirs, ours)
    print(", ".join(f"{k} {v}" for k, v in versions(True).items()))
    print(f"uqlm and uqlm-bert BERTScore on the embedded model, layer {LAYER}: "
          f"max abs diff {diff:.1e} ({'ok' if diff <= TOLERANCE else 'DIFFERENT'})")  # fmt: skip
    return 0 if diff <= TOLERANCE else 1


def options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    shared = ("prompts", "samples", "rounds", "latencies", "server", "device", "data", "out")
    ap = harness.parser(__doc__, *shared)
    ap.add_argument("--only", choices=["both", "ours", "uqlm"], default="both")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    ap.add_argument("--check-env", action="store_true", help="both libraries import and agree")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = options(argv)
    warnings.simplefilter("ignore")
    if args.check_env:
        return check_env()
    if not harness.have_data(args.data):
        return 0
    with_uqlm = args.only != "ours"
    if with_uqlm and not uqlm_available():
        print("uqlm is not installed in this environment: run bash benchmarks/setup-uqlm-env.sh "
              "and use benchmarks/.venv-uqlm/bin/python, or pass --only ours.")  # fmt: skip
        return 1
    passages = harness.load_passages(args.data)
    before = os.getloadavg()[0]
    runs = asyncio.run(run_benchmark(passages, args))
    rows = summarize(runs)
    meta = {**vars(args), "versions": versions(with_uqlm), "load": harness.load_line(before),
            "machine": harness.machine_summary(args.device)}  # fmt: skip
    payload = {"meta": meta, "rows": rows, "runs": [asdict(r) for r in runs]}
    payload["checks"] = verdicts = checks(rows, args.prompts, args.samples)
    harness.write_report(args.out, "vs_uqlm.md", markdown(rows, verdicts, meta), payload)
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
