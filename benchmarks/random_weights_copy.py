"""A copy of a model directory with the same architecture and tokenizer and random weights.

For timing where the weights cannot be had: a benchmark's time depends on the model's shapes
and on the tokens (how many, how long each text), not on the values of the weights, so a copy
built from the model's own ``config.json`` and tokenizer files, with weights drawn by
transformers' own initialisation, takes the time the model takes. Quality figures taken on such
a copy mean nothing. ``bench_presets.py --random-weights``, on a machine that has the real
weights too, times both side by side: the times should agree.

    python benchmarks/random_weights_copy.py SOURCE_DIR TARGET_DIR

``SOURCE_DIR`` needs the config and the tokenizer files only (no weights). Name ``TARGET_DIR``
as the model's folder (``.../all-mpnet-base-v2``) where the model is to be recognised by its
path, as the accurate preset's copy is.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def random_weights_copy(source: Path, target: Path, seed: int = 0) -> Path:
    """Write to ``target`` the model of ``source``'s config with random weights (safetensors)
    and ``source``'s tokenizer, each saved by transformers.

    Example:
        >>> random_weights_copy(Path("models/all-mpnet-base-v2"), Path("/tmp/r/all-mpnet-base-v2"))
        ... # doctest: +SKIP
    """
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    if not (source / "config.json").is_file():
        raise FileNotFoundError(f"{source} has no config.json: give a model's directory")
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.from_pretrained(source))
    model.save_pretrained(target, safe_serialization=True)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a model directory (config and tokenizer)")
    parser.add_argument("target", type=Path, help="where the copy goes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(random_weights_copy(args.source, args.target, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
