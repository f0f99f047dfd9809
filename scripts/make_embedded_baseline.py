"""Compute the packaged rescaling baseline of the embedded model (all-MiniLM-L6-v2).

Corpus: the sentences of the WikiBio GPT-3 passages in the shared data folder beside the
repository (answers and samples, split at sentence ends). Random pairs of sentences from
*different* passages stand for unrelated text, as the published baselines use random pairs of
Common Crawl sentences. Only the per-layer means are written to the package, not the data.

    python scripts/make_embedded_baseline.py [path/to/wikibio_gpt3_dev.jsonl]
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pandas as pd

from uqlm_bert.bertscore import BERTScorer
from uqlm_bert.bertscore._baseline import BASELINE_DIR
from uqlm_bert.bertscore._known_models import EMBEDDED_MODEL_NAME

NUM_PAIRS = 20_000
SEED = 0


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    data = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else root.parent / "shared/data/wikibio_gpt3_dev.jsonl"
    )
    passages = []
    for line in data.read_text().splitlines():
        rec = json.loads(line)
        sents = []
        for text in [rec["response"], *rec["sampled_responses"]]:
            sents += [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 4]
        passages.append(sorted(set(sents)))
    rng = random.Random(SEED)
    cands, refs = [], []
    while len(cands) < NUM_PAIRS:
        a, b = rng.sample(range(len(passages)), 2)
        cands.append(rng.choice(passages[a]))
        refs.append(rng.choice(passages[b]))
    rows = []
    for layer in range(7):
        P, R, F = BERTScorer(num_layers=layer).score(cands, refs)
        rows.append((layer, float(P.mean()), float(R.mean()), float(F.mean())))
        print(rows[-1])
    out = BASELINE_DIR / "en" / f"{EMBEDDED_MODEL_NAME}.tsv"
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=["LAYER", "P", "R", "F"]).to_csv(
        out, index=False, float_format="%.8f"
    )
    print("wrote", out)


if __name__ == "__main__":
    main()
