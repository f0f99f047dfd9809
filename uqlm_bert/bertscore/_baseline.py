"""Baseline rescaling: files in the ``bert_score`` format, lookup, and computing new ones.

A baseline file is CSV text with the header ``LAYER,P,R,F`` and one row per layer: the mean
precision, recall and F1 of unrelated sentence pairs at that layer. Rescaling maps a raw score
``x`` to ``(x - b) / (1 - b)``, so unrelated text scores about 0 and identical text 1.

Example:
    >>> import io
    >>> from uqlm_bert.bertscore._baseline import read_baseline
    >>> vals = read_baseline(io.StringIO("LAYER,P,R,F\\n0,0.5,0.4,0.45\\n1,0.8,0.7,0.75\\n"), 1)
    >>> [round(v, 2) for v in vals]
    [0.8, 0.7, 0.75]
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import pandas as pd
import torch

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import BaselineNotFoundError, ConfigurationError, InputValidationError

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
    check_int("num_layers", num_layers, 0)
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
    *,
    lang: str = "en",
    trust_remote_code: bool = False,
) -> pd.DataFrame:
    """Compute a baseline file for any model from a corpus of unrelated sentences.

    Draws ``num_pairs`` random pairs of different sentences, scores them at every layer of the
    model (0 to the last) without idf, and averages P, R and F per layer: the method used for the
    published baselines. One forward pass per batch gives every layer's states at once. Use a
    large, varied corpus in the target language (thousands of sentences); the result is returned
    and, with ``path``, written in the ``LAYER,P,R,F`` format that ``baseline_path`` reads.

    Example:
        >>> from uqlm_bert.bertscore import compute_baseline
        >>> corpus = ["The sky is blue.", "Stocks fell sharply on Monday.",
        ...           "She plays the violin.", "Add two eggs to the flour."]
        >>> table = compute_baseline(corpus, num_pairs=6, show_progress_bars=False)
        >>> list(table.columns), len(table)
        (['LAYER', 'P', 'R', 'F'], 7)
    """
    from tqdm.auto import tqdm

    from uqlm_bert.bertscore._loading import load_encoder
    from uqlm_bert.bertscore._matching import greedy_match_padded
    from uqlm_bert.bertscore._settings import BERTScoreSettings

    distinct = sorted({s for s in sentences if isinstance(s, str) and s.strip()})
    if len(distinct) < 2:
        raise InputValidationError(
            "compute_baseline needs at least two different non-empty sentences"
        )
    check_int("num_pairs", num_pairs, 1, error=InputValidationError)
    check_int("seed", seed, None)
    check_int("batch_size", batch_size, 1)
    rng = random.Random(seed)
    pairs = [rng.sample(range(len(distinct)), 2) for _ in range(num_pairs)]
    enc = load_encoder(
        BERTScoreSettings(
            model_type=model_type, lang=lang, device=device, trust_remote_code=trust_remote_code
        ),
        all_layers=True,
    )
    zero = {
        getattr(enc.tokenizer, "cls_token_id", None),
        getattr(enc.tokenizer, "sep_token_id", None),
    }
    sums: torch.Tensor | None = None
    chunk = max(1, batch_size * 4)
    with tqdm(total=num_pairs, desc="baseline", unit="pair", disable=not show_progress_bars) as bar:
        for start in range(0, num_pairs, chunk):
            block = pairs[start : start + chunk]
            used = sorted({i for pair in block for i in pair})
            ids = dict(zip(used, enc.tokenize([distinct[i] for i in used]), strict=True))
            layers = _layer_embeddings(enc, used, ids, batch_size)
            cand = [a for a, _ in block]
            ref = [b for _, b in block]
            weights = {i: _uniform_weights(ids[i], zero) for i in used}
            c_w = _pad([weights[i] for i in cand]).to(enc.device)
            r_w = _pad([weights[i] for i in ref]).to(enc.device)
            c_len = torch.tensor([len(ids[i]) for i in cand], device=enc.device)
            r_len = torch.tensor([len(ids[i]) for i in ref], device=enc.device)
            # a text of special tokens only scores 0 with anything, as in the engine
            special = enc.special_ids
            empty = {i for i in used if all(t in special for t in ids[i])}
            keep = torch.tensor([a not in empty and b not in empty for a, b in block])
            block_sums = []
            for emb in layers:
                P, R, F = greedy_match_padded(
                    _pad([emb[i] for i in cand]),
                    c_w,
                    _pad([emb[i] for i in ref]),
                    r_w,
                    c_len,
                    r_len,
                )
                prf = torch.stack((P, R, F), dim=-1).double().cpu() * keep[:, None]
                block_sums.append(prf.sum(dim=0))
            total = torch.stack(block_sums)
            sums = total if sums is None else sums + total
            bar.update(len(block))
    assert sums is not None
    means = (sums / num_pairs).tolist()
    table = pd.DataFrame(
        [(layer, *row) for layer, row in enumerate(means)], columns=["LAYER", "P", "R", "F"]
    )
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(path, index=False)
    return table


def _layer_embeddings(
    enc: Any, used: list[int], ids: dict[int, list[int]], batch_size: int
) -> list[dict[int, torch.Tensor]]:
    """Each layer's L2-normalised token embeddings of the sentences ``used``."""
    order = sorted(used, key=lambda i: len(ids[i]))
    out: list[dict[int, torch.Tensor]] = []
    with enc.reuse_workspace():
        for b in range(0, len(order), batch_size):
            batch = order[b : b + batch_size]
            lens = [len(ids[i]) for i in batch]
            for k, states in enumerate(enc.layer_states([ids[i] for i in batch])):
                if len(out) <= k:
                    out.append({})
                states = states / states.norm(dim=-1, keepdim=True)
                out[k].update(zip(batch, states.split(lens), strict=True))
    return out


def _uniform_weights(ids: list[int], zero: set[Any]) -> torch.Tensor:
    w = torch.tensor([0.0 if t in zero else 1.0 for t in ids])
    total = float(w.sum())
    return w / total if total > 0 else w


def _pad(rows: list[torch.Tensor]) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)
