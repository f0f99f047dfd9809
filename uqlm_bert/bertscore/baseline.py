"""Baseline rescaling: files in the ``bert_score`` format, lookup, and computing new ones.

A baseline file is CSV text with the header ``LAYER,P,R,F`` and one row per layer: the mean
precision, recall and F1 of unrelated sentence pairs at that layer. Rescaling maps a raw score
``x`` to ``(x - b) / (1 - b)``, so unrelated text scores about 0 and identical text 1.

Example:
    >>> import io
    >>> from uqlm_bert.bertscore.baseline import read_baseline
    >>> vals = read_baseline(io.StringIO("LAYER,P,R,F\\n0,0.5,0.4,0.45\\n1,0.8,0.7,0.75\\n"), 1)
    >>> [round(v, 2) for v in vals]
    [0.8, 0.7, 0.75]
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import pandas as pd
import torch

from uqlm_bert.exceptions import BaselineNotFoundError, ConfigurationError, InputValidationError

__all__ = ["BASELINE_DIR", "find_baseline", "read_baseline", "rescale", "compute_baseline"]

#: Where the package keeps its baseline files: ``<lang>/<model name>.tsv``.
BASELINE_DIR = Path(__file__).resolve().parent / "baselines"


def find_baseline(model_name: str, lang: str) -> Path:
    """The packaged baseline file for ``model_name`` in ``lang``.

    Raises:
        BaselineNotFoundError: none is packaged; the message says how to make one.
    """
    path = BASELINE_DIR / lang / f"{model_name}.tsv"
    if not path.is_file():
        raise BaselineNotFoundError(
            f"no baseline for model {model_name!r} in language {lang!r} is packaged. Compute one "
            "from your own corpus with uqlm_bert.bertscore.compute_baseline(sentences, "
            "model_type=..., path='baseline.tsv') and pass baseline_path='baseline.tsv', or turn "
            "off rescale_with_baseline."
        )
    return path


def read_baseline(source: str | os.PathLike[str] | IO[str], num_layers: int) -> list[float]:
    """``[P, R, F]`` baselines of layer ``num_layers`` from a ``LAYER,P,R,F`` file.

    Raises:
        BaselineNotFoundError: the file does not exist.
        ConfigurationError: the file is malformed or has no row for that layer.
    """
    if isinstance(source, (str, os.PathLike)) and not Path(source).is_file():
        raise BaselineNotFoundError(f"baseline file {str(source)!r} does not exist")
    try:
        table = pd.read_csv(source)
    except (ValueError, pd.errors.ParserError) as exc:
        raise ConfigurationError(f"baseline file {source!r} is not LAYER,P,R,F CSV: {exc}") from exc
    missing = {"LAYER", "P", "R", "F"} - set(table.columns)
    if missing:
        raise ConfigurationError(
            f"baseline file {source!r} lacks columns {sorted(missing)}; expected header LAYER,P,R,F"
        )
    rows = table[table["LAYER"] == num_layers]
    if len(rows) != 1:
        raise ConfigurationError(
            f"baseline file {source!r} has no single row for layer {num_layers} "
            f"(layers present: {sorted(table['LAYER'].tolist())})"
        )
    row = rows.iloc[0]
    return [float(row["P"]), float(row["R"]), float(row["F"])]


def rescale(scores: torch.Tensor, baseline: Sequence[float]) -> torch.Tensor:
    """Rescale ``[..., 3]`` (P, R, F) scores with ``[bP, bR, bF]``: ``(x - b) / (1 - b)``."""
    b = torch.as_tensor(baseline, dtype=scores.dtype, device=scores.device)
    return (scores - b) / (1 - b)


def compute_baseline(
    sentences: Sequence[str],
    model_type: str | None = None,
    num_pairs: int = 10_000,
    seed: int = 0,
    path: str | os.PathLike[str] | None = None,
    device: str | None = None,
    batch_size: int = 64,
    show_progress_bars: bool = True,
) -> pd.DataFrame:
    """Compute a baseline file for any model from a corpus of unrelated sentences.

    Draws ``num_pairs`` random pairs of different sentences, scores them at every layer of the
    model (0 to the last) without idf, and averages P, R and F per layer: the method used for the
    published baselines. Use a large, varied corpus in the target language (thousands of
    sentences); the result is returned and, with ``path``, written in the ``LAYER,P,R,F`` format
    that ``baseline_path`` reads.

    Example:
        >>> from uqlm_bert.bertscore import compute_baseline
        >>> corpus = ["The sky is blue.", "Stocks fell sharply on Monday.",
        ...           "She plays the violin.", "Add two eggs to the flour."]
        >>> table = compute_baseline(corpus, num_pairs=6, show_progress_bars=False)
        >>> list(table.columns), len(table)
        (['LAYER', 'P', 'R', 'F'], 7)
    """
    from uqlm_bert.bertscore.encoder import resolve_model
    from uqlm_bert.bertscore.scorer import BERTScorer

    distinct = sorted({s for s in sentences if isinstance(s, str) and s.strip()})
    if len(distinct) < 2:
        raise InputValidationError(
            "compute_baseline needs at least two different non-empty sentences"
        )
    if num_pairs < 1:
        raise InputValidationError(f"num_pairs must be >= 1, got {num_pairs}")
    rng = random.Random(seed)
    cands, refs = [], []
    for _ in range(num_pairs):
        a, b = rng.sample(distinct, 2)
        cands.append(a)
        refs.append(b)
    from transformers import AutoConfig

    _, location = resolve_model(model_type)
    config = AutoConfig.from_pretrained(location)
    n_layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layers", 0))
    rows = []
    for layer in range(n_layers + 1):
        scorer = BERTScorer(
            model_type=model_type,
            num_layers=layer,
            device=device,
            batch_size=batch_size,
            show_progress_bars=show_progress_bars,
        )
        P, R, F = scorer.score(cands, refs)
        rows.append((layer, float(P.mean()), float(R.mean()), float(F.mean())))
    table = pd.DataFrame(rows, columns=["LAYER", "P", "R", "F"])
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(path, index=False)
    return table
