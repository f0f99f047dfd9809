"""The presets side by side: time per 1,000 answers, and the accurate preset's time ratio.

``BlackBoxUQ.score`` at its defaults but for ``model_type`` (``"fast"``, the default, and
``"accurate"``) scores the same work, the WikiBio GPT-3 development passages (a response and m
samples each; synthetic passages of their lengths when the data is absent), in one process:
rounds alternate between the presets (their order swapped every round, so drift hits both
alike), each scorer built and warmed once before the rounds. Reported per preset: the median
wall time and the median CPU time of this process (user + system, all threads: on a machine
loaded by other work the CPU time moves less than the wall time), each per 1,000 answers, and
their ratios to ``fast``.

    python benchmarks/bench_presets.py                          # m=5, 5 rounds
    python benchmarks/bench_presets.py --samples 20 --rounds 3
    python benchmarks/bench_presets.py --padded   # and accurate on the transformers forward
    python benchmarks/bench_presets.py --random-weights --device cuda

``--padded`` adds a contestant: the accurate preset with its packed pass switched off for
its rounds (the same loaded model run by the padded transformers forward), which measures what
the packed pass gives MPNet. ``--random-weights`` adds one more: the accurate model's
architecture and tokenizer with random weights (``random_weights_copy.py``), for a machine
where the weights cannot be had (only the config and tokenizer files are needed then; the real
model's row is left out when its weights are absent). Its time should equal the real model's:
run both on one machine to see.

The accurate preset's model is not shipped: set ``UQLM_BERT_ACCURATE_MODEL_DIR`` to a local
copy's directory, or have it in the Hugging Face cache (see docs/bertscore.md). Writes
``benchmarks/out/presets.md`` and prints it.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    ACCURATE_MODEL_ENV,
    accurate_model,
    load_prompts,
    machine_summary,
    write_report,
)
from random_weights_copy import random_weights_copy  # noqa: E402

from uqlm_bert import BlackBoxUQ  # noqa: E402
from uqlm_bert.bertscore.layers import ACCURATE_MODEL_NAME  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: The name of the contestant with random weights (``--random-weights``).
RANDOM = "accurate, random weights"


def run(
    presets: dict[str, str], prompts: int, samples: int, rounds: int, device, padded: bool
) -> dict:
    """Per contestant: wall and CPU seconds of each round's ``BlackBoxUQ.score`` call."""
    responses, sampled, source = load_prompts(prompts, samples)
    uqs = {
        name: BlackBoxUQ(
            scorers=["bert_score"], model_type=model, device=device, show_progress_bars=False
        )  # fmt: skip
        for name, model in presets.items()
    }
    for uq in uqs.values():  # load, build idf, warm up
        uq.score(responses[:2], sampled[:2])
    calls = {name: (lambda uq=uq: uq.score(responses, sampled)) for name, uq in uqs.items()}
    engines = {n: uq.scorers[0].engine for n, uq in uqs.items()}
    if padded:
        accurate = "accurate" if "accurate" in uqs else RANDOM
        engines[f"{accurate}, padded"] = engines[accurate]
        calls[f"{accurate}, padded"] = lambda: _unpacked(uqs[accurate], responses, sampled)
    times: dict[str, dict[str, list[float]]] = {n: {"wall": [], "cpu": []} for n in calls}
    order = list(calls)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            calls[name]()
            times[name]["cpu"].append(time.process_time() - cpu)
            times[name]["wall"].append(time.perf_counter() - wall)
        print(f"round {r + 1}: " + ", ".join(
            f"{n} {t['wall'][-1]:.1f} s" for n, t in times.items()), file=sys.stderr, flush=True)  # fmt: skip
    return {"times": times, "source": source, "engines": engines}


def _unpacked(uq: BlackBoxUQ, responses, sampled) -> None:
    """``uq.score`` with the model's packed pass off: the transformers forward, padded."""
    loaded = uq.scorers[0].engine.encoder.loaded
    packed, loaded.packed = loaded.packed, None
    try:
        uq.score(responses, sampled)
    finally:
        loaded.packed = packed


def report(result: dict, prompts: int, samples: int, rounds: int) -> str:
    times, engines = result["times"], result["engines"]
    base = {k: statistics.median(times["fast"][k]) for k in ("wall", "cpu")}
    lines = [
        "# Presets side by side",
        "",
        f"Machine: {machine_summary(engines['fast'].device)}.",
        "",
        f"Work: `BlackBoxUQ.score` on {prompts} {result['source']}, {samples} samples each; "
        f"{rounds} alternating rounds, medians.",
        "",
        "| preset | model | layer | dtype | wall s | s per 1,000 answers | x fast (wall) | "
        "CPU s | x fast (CPU) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in times.items():
        wall, cpu = statistics.median(t["wall"]), statistics.median(t["cpu"])
        e = engines[name]
        lines.append(
            f"| {name} | {e.model_type} | {e.num_layers} | {str(e.dtype).removeprefix('torch.')} "
            f"| {wall:.2f} | {1000 * wall / prompts:.0f} | {wall / base['wall']:.2f} | "
            f"{cpu:.2f} | {cpu / base['cpu']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=30)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default=None)
    parser.add_argument("--padded", action="store_true", help="add accurate, packed pass off")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help="add the accurate model with random weights (config and tokenizer suffice)",
    )
    args = parser.parse_args(argv)
    presets = {"fast": "fast", "accurate": accurate_model()}
    with tempfile.TemporaryDirectory() as tmp:
        if args.random_weights:
            source = _accurate_source()
            copy = Path(tmp) / ACCURATE_MODEL_NAME.split("/")[-1]  # recognised by its path
            presets[RANDOM] = str(random_weights_copy(source, copy))
            if not (source / "model.safetensors").is_file():
                del presets["accurate"]
        result = run(presets, args.prompts, args.samples, args.rounds, args.device, args.padded)
    write_report(args.out, "presets.md", report(result, args.prompts, args.samples, args.rounds))
    return 0


def _accurate_source() -> Path:
    """The directory of the accurate model's config and tokenizer: ``$UQLM_BERT_ACCURATE_MODEL_DIR``
    or the Hugging Face cache's copy."""
    from uqlm_bert.bertscore.presets import cached_copy

    given = os.environ.get(ACCURATE_MODEL_ENV) or cached_copy(ACCURATE_MODEL_NAME)
    if not given:
        raise SystemExit(f"--random-weights needs the model's config: set {ACCURATE_MODEL_ENV}")
    return Path(given)


if __name__ == "__main__":
    sys.exit(main())
