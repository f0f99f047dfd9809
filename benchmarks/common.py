"""Shared helpers for the benchmarks: realistic LLM-answer texts and careful timing.

Texts come from the WikiBio GPT-3 passages in the shared data folder beside the repository when it
is present (real LLM answers with sampled answers, about 190 tokens each), and otherwise from a
generator that draws passages with the same length distribution.
"""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WIKIBIO = REPO.parent / "shared" / "data" / "wikibio_gpt3_dev.jsonl"
#: A local copy of the accurate preset's model (all-mpnet-base-v2): its directory.
ACCURATE_MODEL_ENV = "UQLM_BERT_ACCURATE_MODEL_DIR"


def accurate_model() -> str:
    """The accurate preset's model for a benchmark: the directory in
    ``$UQLM_BERT_ACCURATE_MODEL_DIR`` where set, else the preset's name (the Hugging Face cache)."""
    return os.environ.get(ACCURATE_MODEL_ENV) or "accurate"


def gpu_name(device) -> str | None:
    """The name of the CUDA card ``device`` (a string or ``torch.device``) names, else None."""
    if device is None or not str(device).startswith("cuda"):
        return None
    import torch

    return torch.cuda.get_device_name(torch.device(device))


_WORDS = (
    "the a of and in to is was he she it born known for his her career team city river "
    "university award film album played wrote released served member president football "
    "american british french german novel song year early later life died married children "
    "professional league season record first second national government science research "
    "published studied worked became founded led won politician actor singer author england"
).split()


def _synthetic_passage(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(n_words)]
    out = []
    for i, w in enumerate(words):
        if i == 0 or out[-1].endswith("."):
            w = w.capitalize()
        out.append(w + ("." if rng.random() < 0.07 else ""))
    return " ".join(out).rstrip(".") + "."


def load_prompts(
    n_prompts: int, n_samples: int, seed: int = 0
) -> tuple[list[str], list[list[str]], str]:
    """``(responses, samples, source)``: ``n_prompts`` answers with ``n_samples`` samples each."""
    if WIKIBIO.is_file():
        recs = [json.loads(line) for line in WIKIBIO.read_text().splitlines() if line.strip()]
        responses, samples = [], []
        for i in range(n_prompts):
            rec = recs[i % len(recs)]
            responses.append(rec["response"])
            samples.append(rec["sampled_responses"][:n_samples])
        repeated = f" ({len(recs)} distinct, repeated)" if n_prompts > len(recs) else ""
        return responses, samples, "WikiBio GPT-3 passages" + repeated
    rng = random.Random(seed)
    lengths = [rng.randint(80, 200) for _ in range(n_prompts * (n_samples + 1))]
    it = iter(lengths)
    responses = [_synthetic_passage(rng, next(it)) for _ in range(n_prompts)]
    samples = [
        [_synthetic_passage(rng, next(it)) for _ in range(n_samples)] for _ in range(n_prompts)
    ]
    return responses, samples, "generated passages (WikiBio length distribution)"


def time_rounds(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Run each function ``rounds`` times, interleaved (so drift hits all equally); seconds."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def write_report(out: Path, name: str, report: str) -> Path:
    """Write a Markdown report as ``out/name`` (creating ``out``) and print it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(report, encoding="utf-8")
    print(report)
    return path


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024 if sys.platform != "darwin" else r / (1024 * 1024)


def machine_summary(device=None) -> str:
    """The CPU, its cores and flags, torch and its threads; and the GPU where ``device`` is a
    CUDA device."""
    import platform

    import torch

    flags = ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in cpuinfo.splitlines()
                if ln.startswith("model name")
            ),
            platform.processor(),
        )
        have = set(
            next(
                (
                    ln.split(":", 1)[1].split()
                    for ln in cpuinfo.splitlines()
                    if ln.startswith("flags")
                ),
                [],
            )
        )
        flags = ", ".join(
            f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni") if f in have
        )
    except OSError:
        model = platform.processor()
    card = gpu_name(device)
    return (
        f"{model}; {os.cpu_count()} cores; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads); {flags}" + (f"; {card}" if card else "")
    )
