"""Rebuild the fixed idf data of ``uqlm_bert/bertscore/idf_data/`` from wordfreq.

    pip install -e '.[dev]'          # brings wordfreq, needed by this script only
    python scripts/make_idf_table.py [--accurate-tokenizer DIR]

Writes, deterministically (the same wordfreq version gives the same bytes):

- ``words_en.tsv.gz``: wordfreq's English 'small' list (every word seen at least once per
  million words), as ``word<TAB>zipf`` lines, most frequent first. wordfreq folds numbers of two
  or more digits into shapes (``0000`` stands for every four-digit number); those shapes are
  left out, and the whole numbers 10-9999 at least as frequent as the cut-off are listed
  instead, with wordfreq's own estimate for each (Benford's law, and a distribution of years).
- ``all-MiniLM-L6-v2.tsv.gz``: the token weights of the embedded model's tokenizer, built from
  that table by :func:`uqlm_bert.bertscore._fixed_idf.build_idf`;
- ``all-mpnet-base-v2.tsv.gz``: the same for the tokenizer of the ``"accurate"`` preset's model,
  sentence-transformers/all-mpnet-base-v2. Only its tokenizer files are read: from
  ``--accurate-tokenizer`` (a directory), else from ``$UQLM_BERT_ACCURATE_MODEL_DIR``, else from
  the Hugging Face cache or hub under its name;
- the provenance section of ``README.md`` there (versions, sizes and constants).
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib.metadata import PackageNotFoundError, version

from uqlm_bert.bertscore import _fixed_idf as fixed_idf
from uqlm_bert.bertscore._idf import IdfWeights

WORDFREQ_VERSION = "3.1.1"
WORDLIST = "small"
MIN_ZIPF = 3.0  # the 'small' list's cut-off: at least once per million words
NUMBERS = range(10, 10_000)
README = fixed_idf.DATA_DIR / "README.md"
START, END = "<!-- provenance: start -->", "<!-- provenance: end -->"


def word_rows() -> list[tuple[str, float]]:
    """``(word, zipf)`` rows of the table, most frequent first, then alphabetical."""
    import wordfreq

    rows: dict[str, float] = {}
    for i, bucket in enumerate(wordfreq.get_frequency_list("en", wordlist=WORDLIST)):
        zipf = round(9 - i / 100, 2)  # bucket i holds the words of frequency 10 ** (-i / 100)
        for word in bucket:
            if sum(c.isdigit() for c in word) < 2:  # not a folded number shape
                rows[word] = zipf
    for n in NUMBERS:
        zipf = wordfreq.zipf_frequency(str(n), "en", wordlist=WORDLIST)
        if zipf >= MIN_ZIPF:
            rows[str(n)] = zipf
    bad = [w for w in rows if not w or re.search(r"\s", w)]
    if bad:
        raise SystemExit(f"words with whitespace cannot be written: {bad[:5]}")
    return sorted(rows.items(), key=lambda r: (-r[1], r[0]))


def word_table_text(rows: list[tuple[str, float]]) -> str:
    """The table file's text: metadata comments, then the rows."""
    head = [
        "# uqlm-bert English word table for fixed idf weights; lines: word<TAB>Zipf frequency",
        f"# source: wordfreq {WORDFREQ_VERSION} by Robyn Speer, English '{WORDLIST}' list, "
        "CC BY-SA 4.0; attribution and derivation in README.md",
        f"# min_zipf: {MIN_ZIPF}",
        f"# words: {len(rows)}",
    ]
    return "\n".join(head + [f"{w}\t{z:.2f}" for w, z in rows]) + "\n"


def provenance(table: fixed_idf.WordTable, built: list[tuple[str, IdfWeights, int]]) -> str:
    """The README's provenance section; ``built``: each token table's file name, weights and
    vocabulary size."""
    tables = [
        f"- `{file}`: {len(weights.weights)} of the {vocab} token ids have a weight other than "
        f"the default (special tokens included, at 0); default log(M + 1) = {weights.default}."
        for file, weights, vocab in built
    ]
    return "\n".join(
        [
            START,
            "Built by `scripts/make_idf_table.py`:",
            "",
            f"- wordfreq {WORDFREQ_VERSION}, English `{WORDLIST}` list (Zipf >= {MIN_ZIPF}); "
            f"{len(table.words)} entries in `words_en.tsv.gz` (numbers 10-9999 included as above);",
            f"- word table SHA-256 (of its text): `{table.digest}`;",
            f"- L = `DOC_WORDS` = {fixed_idf.DOC_WORDS} words, M = `NUM_DOCS` = "
            f"{fixed_idf.NUM_DOCS} documents;",
            *tables,
            END,
        ]
    )


def accurate_tokenizer(given: str | None):
    """The accurate preset's tokenizer, from a directory, the environment or the hub's name."""
    import os

    from transformers import AutoTokenizer

    from uqlm_bert.bertscore._known_models import ACCURATE_MODEL_NAME
    from uqlm_bert.bertscore._presets import cached_copy

    where = given or os.environ.get("UQLM_BERT_ACCURATE_MODEL_DIR") or None
    return AutoTokenizer.from_pretrained(
        where or cached_copy(ACCURATE_MODEL_NAME) or ACCURATE_MODEL_NAME
    )


def write_weights(path, tok, table, note: str) -> tuple[str, IdfWeights, int]:
    """Build and write one tokenizer's token table; its row of the provenance section."""
    weights = fixed_idf.build_idf(tok, table)
    key = fixed_idf.tokenizer_key(tok, table)
    fixed_idf.write_token_table(path, key, weights, note=note)
    return path.name, weights, len(tok.get_vocab())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--accurate-tokenizer",
        help="directory of sentence-transformers/all-mpnet-base-v2 (its tokenizer files)",
    )
    args = ap.parse_args(argv)
    try:
        found = version("wordfreq")
    except PackageNotFoundError:
        found = None
    if found != WORDFREQ_VERSION:
        print(
            f"needs wordfreq=={WORDFREQ_VERSION} (found {found}); pip install -e '.[dev]'",
            file=sys.stderr,
        )
        return 2
    rows = word_rows()
    fixed_idf.write_gz_text(fixed_idf.WORD_TABLE, word_table_text(rows))
    table = fixed_idf.load_word_table(fixed_idf.WORD_TABLE)  # read back: what the package ships

    licence = "derived from words_en.tsv.gz, CC BY-SA 4.0"
    built = [
        write_weights(
            fixed_idf.EMBEDDED_TABLE,
            fixed_idf.embedded_tokenizer(),
            table,
            f"sentence-transformers/all-MiniLM-L6-v2; {licence}",
        ),
        write_weights(
            fixed_idf.ACCURATE_TABLE,
            accurate_tokenizer(args.accurate_tokenizer),
            table,
            f"sentence-transformers/all-mpnet-base-v2; {licence}",
        ),
    ]

    readme = README.read_text(encoding="utf-8")
    if START not in readme or END not in readme:
        raise SystemExit(f"{README} lacks the provenance markers {START} ... {END}")
    before, rest = readme.split(START, 1)
    after = rest.split(END, 1)[1]
    block = provenance(table, built)
    README.write_text(before + block + after, encoding="utf-8")
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
