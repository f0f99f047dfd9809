"""The presets side by side: time per 1,000 answers, and the accurate preset's time ratio.

    python -m benchmarks.bench_presets [--samples 5] [--rounds 5] [--device cuda] [--padded]
        [--random-weights]

``BlackBoxUQ.score`` with ``model_type="fast"`` (the default) and ``"accurate"`` on the same
work (the WikiBio passages, m samples each), rounds in turning order: median wall and CPU time
per preset, per 1,000 answers, and their ratios to ``fast``. ``--padded`` adds the accurate
preset with its packed pass off (the padded transformers forward); ``--random-weights`` adds the
accurate model's architecture and tokenizer with random weights (:func:`random_weights_copy`),
for a machine without the weights (time depends on shapes and tokens, not on weights). The
accurate model: ``$UQLM_BERT_ACCURATE_MODEL_DIR`` or the Hugging Face cache. Writes
``presets.md``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks import harness
from uqlm_bert import BERTScoreSettings, BlackBoxUQ
from uqlm_bert.bertscore._known_models import ACCURATE_MODEL_NAME

#: The name of the contestant with random weights (``--random-weights``).
RANDOM = "accurate, random weights"


def random_weights_copy(source: Path, target: Path, seed: int = 0) -> Path:
    """Write to ``target`` the model of ``source``'s config with random weights (safetensors)
    and ``source``'s tokenizer, each saved by transformers; ``source`` needs only the config and
    tokenizer files. Name ``target`` as the model's folder (``.../all-mpnet-base-v2``) where the
    model is to be recognised by its path. Quality figures taken on such a copy mean nothing."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    if not (source / "config.json").is_file():
        raise FileNotFoundError(f"{source} has no config.json: give a model's directory")
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.from_pretrained(source))
    model.save_pretrained(target, safe_serialization=True)
    return target


def run(presets: dict[str, str], args) -> dict:
    """Per contestant: wall and CPU seconds of each round's ``BlackBoxUQ.score`` call."""
    responses, sampled, source = harness.load_prompts(args.prompts, args.samples)
    uqs = {
        name: BlackBoxUQ(
            scorers=["bert_score"],
            bertscore=BERTScoreSettings(model_type=model, device=args.device),
            show_progress_bars=False,
        )
        for name, model in presets.items()
    }
    for uq in uqs.values():  # load, build idf, warm up
        uq.score(responses[:2], sampled[:2])
    calls = {name: (lambda uq=uq: uq.score(responses, sampled)) for name, uq in uqs.items()}
    engines = {n: uq.scorers[0].engine for n, uq in uqs.items()}
    if args.padded:
        accurate = "accurate" if "accurate" in uqs else RANDOM
        engines[f"{accurate}, padded"] = engines[accurate]
        calls[f"{accurate}, padded"] = lambda: _unpacked(uqs[accurate], responses, sampled)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    return {"times": harness.time_rounds(calls, args.rounds, log), "source": source,
            "engines": engines}  # fmt: skip


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
    base = {k: times.median("fast", k) for k in ("wall", "cpu")}
    rows = []
    for name in times.wall:
        wall, cpu, e = times.median(name), times.median(name, "cpu"), engines[name]
        rows.append(
            [name, e.model_type, e.num_layers, str(e.dtype).removeprefix("torch."),
             f"{wall:.2f}", f"{1000 * wall / prompts:.0f}", f"{wall / base['wall']:.2f}",
             f"{cpu:.2f}", f"{cpu / base['cpu']:.2f}"]
        )  # fmt: skip
    head = ["preset", "model", "layer", "dtype", "wall s", "s per 1,000 answers",
            "x fast (wall)", "CPU s", "x fast (CPU)"]  # fmt: skip
    lines = [
        "# Presets side by side",
        "",
        f"{harness.machine_summary(engines['fast'].device)}.",
        "",
        f"Work: `BlackBoxUQ.score` on {prompts} {result['source']}, {samples} samples each; "
        f"{rounds} rounds in turning order, medians.",
        "",
        *harness.md_table(head, rows),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "prompts", "samples", "rounds", "device", "out")
    ap.add_argument("--padded", action="store_true", help="add accurate, packed pass off")
    ap.add_argument("--random-weights", action="store_true", help="add the accurate model with "
                    "random weights (config and tokenizer suffice)")  # fmt: skip
    args = ap.parse_args(argv)
    presets = {"fast": "fast", "accurate": harness.accurate_model()}
    with tempfile.TemporaryDirectory() as tmp:
        if args.random_weights:
            source = _accurate_source()
            copy = Path(tmp) / ACCURATE_MODEL_NAME.split("/")[-1]  # recognised by its path
            presets[RANDOM] = str(random_weights_copy(source, copy))
            if not (source / "model.safetensors").is_file():
                del presets["accurate"]
        result = run(presets, args)
    text = report(result, args.prompts, args.samples, args.rounds)
    harness.write_report(args.out, "presets.md", text)
    return 0


def _accurate_source() -> Path:
    """The directory of the accurate model's config and tokenizer: ``$UQLM_BERT_ACCURATE_MODEL_DIR``
    or the Hugging Face cache's copy."""
    from uqlm_bert.bertscore._presets import cached_copy

    given = os.environ.get(harness.ACCURATE_MODEL_ENV) or cached_copy(ACCURATE_MODEL_NAME)
    if not given:
        raise SystemExit(
            f"--random-weights needs the model's config: set {harness.ACCURATE_MODEL_ENV}"
        )
    return Path(given)


if __name__ == "__main__":
    raise SystemExit(main())
