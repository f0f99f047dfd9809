"""Fixed idf weights for BERTScore, derived from English word frequencies: batch-invariant.

idf computed over the references of a call (``BERTScorer(idf=True)``) weighs rare tokens up, which
helps, but it makes a prompt's score depend on the other prompts of the call. These weights are
derived once from general English word frequencies instead, so a pair scores the same alone or
among any others. The package ships a word table (``idf_data/words_en.tsv.gz``, see the README
beside it) and builds token weights for any tokenizer from it.

Derivation, for a tokenizer with token ids t:

1. Word rates. ``f_w`` is the frequency of word w per running word of English text, from the
   word table (wordfreq's English list of the words seen at least once per million words, Zipf
   >= 3; ``f_w = 10 ** (zipf_w - 9)``).
2. Token rates. ``q_t = sum_w f_w * n(w, t) + r_t``: the expected number of occurrences of t per
   running word, where ``n(w, t)`` counts t in the tokens of w as w sits inside running text
   (after a space: byte-level BPE tokens with their leading space, ``Ġword``, whatever the
   tokenizer's ``add_prefix_space``) and ``r_t`` is the rate of punctuation marks, which the
   word list leaves out (see ``PUNCTUATION``). The list is case-folded: for a cased tokenizer a
   word's rate is credited in full both to its lower-case and to its capitalised form (its
   case mix is unknown; neither form is ever made rarer than the word is).
3. Document frequency. A document of L running words holds t with probability
   ``P_t = 1 - exp(-L * q_t)``, the Poisson form of ``1 - (1 - p_t) ** L_tokens``.
4. Weight. ``idf_t = log((M + 1) / (M * P_t + 1))``: the reference's ``log((M + 1) / (df + 1))``
   with ``df`` its expectation ``M * P_t`` over M documents. Weights are rounded to 6 decimals.
5. Special tokens (``tokenizer.all_special_ids``) weigh 0, as in BERTScore. A token that occurs
   in no listed word and no mark weighs ``log(M + 1)``, the weight the reference gives a token
   seen in no document, and the largest weight of the table.

Constants: ``L = DOC_WORDS = 100`` words, a one-paragraph answer, the length of answer the
library scores. ``M = NUM_DOCS = 1 / (L * f_min) = 10,000`` with ``f_min = 1e-6`` the list's
cut-off: the corpus of M answers (one million words) is the one in which the rarest listed word
is expected in one document. Words below the cut-off would get weights within ``log 2`` of the
unseen default, so the list loses nothing by stopping there. Occurrences are treated as
independent (Poisson); real content words cluster within a document, so their true document
frequency is lower and their weights here are, if anything, conservative.

The weights of the embedded model's tokenizer (``embedded_idf``) and of the accurate preset's
(all-mpnet-base-v2, ``ACCURATE_TABLE``) are shipped too; other tokenizers' are built on first use (a few seconds: the word table is tokenized once), and kept in a disk cache
(``$UQLM_BERT_CACHE_DIR/idf``, else ``~/.cache/uqlm_bert/idf``) and in memory.

Example:
    >>> from math import log
    >>> from uqlm_bert.bertscore._fixed_idf import NUM_DOCS, embedded_idf, embedded_tokenizer
    >>> tok = embedded_tokenizer()
    >>> w = embedded_idf()
    >>> w.default == round(log(NUM_DOCS + 1), 6), w[tok.cls_token_id]
    (True, 0.0)
    >>> the, period, rare = tok.convert_tokens_to_ids(["the", ".", "violinist"])
    >>> w[the] < 0.05 and w[period] < 0.05 and w[rare] > 5
    True
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import logging
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert.bertscore._idf import IdfWeights
from uqlm_bert.io._paths import atomic_write

__all__ = [
    "DOC_WORDS",
    "NUM_DOCS",
    "PUNCTUATION",
    "WORD_TABLE",
    "EMBEDDED_TABLE",
    "ACCURATE_TABLE",
    "WordTable",
    "load_word_table",
    "build_idf",
    "tokenizer_key",
    "embedded_tokenizer",
    "embedded_idf",
    "idf_for_tokenizer",
    "idf_mapping",
    "cache_dir",
    "read_token_table",
    "write_token_table",
    "write_gz_text",
]

logger = logging.getLogger("uqlm_bert")

#: L: running words in a typical document (an LLM answer of one paragraph).
DOC_WORDS = 100
#: M: documents in the notional corpus, ``1 / (DOC_WORDS * 1e-6)`` for a list cut at 1e-6.
NUM_DOCS = 10_000

#: Punctuation marks per 1000 running words, and how each sits in text: ``"close"`` marks are
#: attached to the word before them (``word.``), ``"open"`` marks follow a space (``(word``).
#: Source: V. J. Cook (2013), "Standard punctuation and the punctuation of the street", in
#: M. Pawlak and L. Aronin (eds.), Essential Topics in Applied Linguistics and Multilingualism,
#: 267-290, counts per 1000 words of a 459,000-word corpus of novels, newspapers, a report and
#: academic papers: . 65.3, , 61.6, ; 3.2, : 3.4, ! 3.3, ? 5.6, " 26.7 (split evenly between
#: opening and closing marks), - 15.3. Parentheses and the dash are not in that count: C. F.
#: Meyer (1987, A Linguistic Study of American Punctuation) found each to be 2% of the marks of
#: the Brown corpus against 47% for the comma, so each gets 2/47 of Cook's comma rate (2.62;
#: counting a pair of parentheses as one use, "(" and ")" get it each). The apostrophe is not
#: added: the word list keeps it inside words ("it's", "john's"), and tokenizers that split it
#: off credit it from there.
PUNCTUATION: tuple[tuple[str, float, str], ...] = (
    (".", 65.3, "close"),
    (",", 61.6, "close"),
    (";", 3.2, "close"),
    (":", 3.4, "close"),
    ("!", 3.3, "close"),
    ("?", 5.6, "close"),
    ('"', 13.35, "open"),
    ('"', 13.35, "close"),
    ("-", 15.3, "close"),
    ("(", 2.62, "open"),
    (")", 2.62, "close"),
    ("\u2014", 2.62, "close"),  # em dash
)

DATA_DIR = Path(__file__).resolve().parent / "idf_data"
#: The shipped English word table: ``word<TAB>zipf`` lines, most frequent first.
WORD_TABLE = DATA_DIR / "words_en.tsv.gz"
#: The shipped token weights of the embedded model's tokenizer.
EMBEDDED_TABLE = DATA_DIR / "all-MiniLM-L6-v2.tsv.gz"
#: The shipped token weights of the accurate preset's tokenizer (all-mpnet-base-v2's).
ACCURATE_TABLE = DATA_DIR / "all-mpnet-base-v2.tsv.gz"

# Bump when the derivation changes, so that disk caches of the old one are not reused.
_ALGORITHM_VERSION = 1
# Words are placed after this one to be tokenized as they sit inside running text.
_ANCHOR = "a"
# Tokenized in one call to the tokenizer.
_CHUNK = 4096
# Tokenized into the cache key, so that tokenizers with one vocabulary but different
# normalisation (lower-casing, accents, prefix space) get different keys.
_PROBE = "The Café, naïve e-mail (1990): it's “quoted” ELSEWHERE!"
_MEMO: dict[str, IdfWeights] = {}


# -- the word table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WordTable:
    """English words with their Zipf frequencies (log10 of occurrences per billion words).

    Attributes:
        words: the words, lower-case, most frequent first.
        zipf: each word's Zipf frequency.
        min_zipf: the list's cut-off: every English word at least this frequent is listed.
        digest: SHA-256 of the table's text, which identifies its version.
    """

    words: tuple[str, ...]
    zipf: tuple[float, ...]
    min_zipf: float
    digest: str

    def frequencies(self) -> list[float]:
        """Each word's frequency per running word, ``10 ** (zipf - 9)``."""
        return [10.0 ** (z - 9.0) for z in self.zipf]


def load_word_table(path: str | os.PathLike[str] | None = None) -> WordTable:
    """Read a word table (default: the shipped one); comment lines ``# key: value`` give metadata.

    Raises:
        ConfigurationError: the file is missing or malformed.

    Example:
        >>> from uqlm_bert.bertscore._fixed_idf import load_word_table
        >>> table = load_word_table()
        >>> table.words[:3], table.min_zipf
        (('the', 'to', 'and'), 3.0)
    """
    if path is None:
        return _shipped_word_table()
    return _read_word_table(Path(path))


@functools.lru_cache(maxsize=1)
def _shipped_word_table() -> WordTable:
    return _read_word_table(WORD_TABLE)


def _read_word_table(path: Path) -> WordTable:
    text = _read_gz_text(path, "word table")
    meta, rows = _table_lines(text)
    words: list[str] = []
    zipf: list[float] = []
    for n, line in rows:
        word, sep, value = line.partition("\t")
        try:
            if not sep or not word:
                raise ValueError("expected word<TAB>zipf")
            zipf.append(float(value))
        except ValueError as exc:
            raise ConfigurationError(f"{path}, line {n}: {exc}: {line!r}") from exc
        words.append(word)
    if "min_zipf" not in meta or not words:
        raise ConfigurationError(f"{path} is not a word table (no min_zipf line, or no words)")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return WordTable(tuple(words), tuple(zipf), float(meta["min_zipf"]), digest)


# -- building weights for a tokenizer -------------------------------------------------------------


def build_idf(
    tokenizer: Any,
    table: WordTable | None = None,
    *,
    doc_words: float = DOC_WORDS,
    num_docs: float = NUM_DOCS,
) -> IdfWeights:
    """Token weights for ``tokenizer`` from a word table, by the derivation of the module doc.

    Args:
        tokenizer: a transformers tokenizer.
        table: the word table (default: the shipped one).
        doc_words: L, running words per document.
        num_docs: M, documents in the notional corpus.

    Raises:
        ConfigurationError: ``doc_words`` or ``num_docs`` is not positive.

    Example:
        >>> from uqlm_bert.bertscore._fixed_idf import build_idf, embedded_idf, embedded_tokenizer
        >>> build_idf(embedded_tokenizer()) == embedded_idf()
        True
    """
    if not doc_words > 0 or not num_docs > 0:
        raise ConfigurationError(
            f"doc_words and num_docs must be positive, got {doc_words!r} and {num_docs!r}"
        )
    table = _shipped_word_table() if table is None else table
    pieces: list[str] = []  # text after the anchor word, as in running text
    rates: list[float] = []  # occurrences of the piece per running word
    cased = _is_cased(tokenizer)
    for word, freq in zip(table.words, table.frequencies(), strict=True):
        forms = {word, word[:1].upper() + word[1:]} if cased else {word}
        for form in sorted(forms):
            pieces.append(" " + form)
            rates.append(freq)
    for mark, per_thousand, place in PUNCTUATION:
        pieces.append(mark if place == "close" else " " + mark)
        rates.append(per_thousand / 1000.0)

    rate: defaultdict[int, float] = defaultdict(float)
    for ids, r in zip(_piece_ids(tokenizer, pieces), rates, strict=True):
        for t in ids:
            rate[t] += r
    weights = {t: _idf(-math.expm1(-doc_words * q), num_docs) for t, q in sorted(rate.items())}
    for t in _special_ids(tokenizer):
        weights[t] = 0.0
    return IdfWeights(weights, round(math.log(num_docs + 1), 6))


def _idf(doc_prob: float, num_docs: float) -> float:
    return round(math.log((num_docs + 1) / (num_docs * doc_prob + 1)), 6)


def _piece_ids(tokenizer: Any, pieces: Sequence[str]) -> list[list[int]]:
    """Token ids of each piece as it sits in running text, after the word ``_ANCHOR``.

    Should the anchor's tokens merge with a piece's (no tokenizer of the tests does), the piece
    is tokenized alone.
    """
    anchor = _ids(tokenizer, [_ANCHOR])[0]
    out: list[list[int]] = []
    for start in range(0, len(pieces), _CHUNK):
        chunk = pieces[start : start + _CHUNK]
        for piece, ids in zip(chunk, _ids(tokenizer, [_ANCHOR + p for p in chunk]), strict=True):
            if ids[: len(anchor)] == anchor:
                out.append(ids[len(anchor) :])
            else:
                out.append(_ids(tokenizer, [piece.strip()])[0])
    return out


def _ids(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens."""
    try:
        encoded = tokenizer(texts, add_special_tokens=False, return_attention_mask=False)
    except TypeError as exc:
        raise InputValidationError(
            f"tokenizer must be a transformers tokenizer, got {type(tokenizer).__name__}"
        ) from exc
    return [list(ids) for ids in encoded["input_ids"]]


def _is_cased(tokenizer: Any) -> bool:
    """Whether the tokenizer tells "The" from "the" (after the anchor, as in running text)."""
    upper, lower = _ids(tokenizer, [_ANCHOR + " The", _ANCHOR + " the"])
    return upper != lower


def _special_ids(tokenizer: Any) -> list[int]:
    return sorted({int(i) for i in getattr(tokenizer, "all_special_ids", []) or []})


# -- identifying a tokenizer ----------------------------------------------------------------------


def tokenizer_key(tokenizer: Any, table: WordTable | None = None) -> str:
    """A hex key for the weights ``build_idf`` gives ``tokenizer`` with the default constants.

    It hashes the sorted vocabulary, the special ids, the ids of a probe text (which depend on
    lower-casing and other normalisation), the word table's digest and the derivation's
    constants, so any change to one of them gives a new key.

    Example:
        >>> from uqlm_bert.bertscore._fixed_idf import embedded_tokenizer, tokenizer_key
        >>> len(tokenizer_key(embedded_tokenizer()))
        64
    """
    table = _shipped_word_table() if table is None else table
    try:
        vocab = sorted(tokenizer.get_vocab().items())
    except AttributeError as exc:
        raise InputValidationError(
            f"tokenizer must be a transformers tokenizer, got {type(tokenizer).__name__}"
        ) from exc
    payload = {
        "algorithm": _ALGORITHM_VERSION,
        "table": table.digest,
        "doc_words": DOC_WORDS,
        "num_docs": NUM_DOCS,
        "punctuation": PUNCTUATION,
        "special": _special_ids(tokenizer),
        "probe": _ids(tokenizer, [_PROBE]),
        "vocab": vocab,
    }
    blob = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


# -- shipped weights, cache and memo --------------------------------------------------------------


def embedded_tokenizer() -> Any:
    """The embedded all-MiniLM-L6-v2's tokenizer, loaded offline from the installed package.

    Raises:
        ModelLoadError: the package or its tokenizer files are missing.

    Example:
        >>> from uqlm_bert.bertscore._fixed_idf import embedded_tokenizer
        >>> embedded_tokenizer().tokenize("Hello, world")
        ['hello', ',', 'world']
    """
    from uqlm_bert.bertscore._loading import load_tokenizer

    return load_tokenizer(None)


def embedded_idf() -> IdfWeights:
    """The shipped weights of the embedded model's tokenizer (a fresh copy on each call).

    Example:
        >>> from uqlm_bert.bertscore._fixed_idf import embedded_idf
        >>> len(embedded_idf().weights) > 20_000
        True
    """
    return _copy(_shipped_embedded()[1])


@functools.lru_cache(maxsize=1)
def _shipped_embedded() -> tuple[str, IdfWeights]:
    return read_token_table(EMBEDDED_TABLE)


@functools.lru_cache(maxsize=1)
def _shipped_tables() -> tuple[tuple[str, IdfWeights], ...]:
    """``(key, weights)`` of every shipped token table."""
    return (_shipped_embedded(), read_token_table(ACCURATE_TABLE))


def cache_dir() -> Path:
    """The disk cache: ``$UQLM_BERT_CACHE_DIR/idf``, else ``~/.cache/uqlm_bert/idf``.

    Example:
        >>> import os
        >>> from uqlm_bert.bertscore._fixed_idf import cache_dir
        >>> os.environ["UQLM_BERT_CACHE_DIR"] = "/tmp/uqlm-cache"
        >>> cache_dir().as_posix()
        '/tmp/uqlm-cache/idf'
        >>> del os.environ["UQLM_BERT_CACHE_DIR"]
    """
    root = os.environ.get("UQLM_BERT_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "uqlm_bert"
    return base / "idf"


def idf_for_tokenizer(tokenizer: Any) -> IdfWeights:
    """Fixed idf weights for any tokenizer (a fresh copy on each call).

    The tokenizers of the shipped tables get their weights. Others are looked up in memory, then in
    :func:`cache_dir`, and otherwise built with :func:`build_idf` and written there. A cache
    write that fails is logged, not raised; an unreadable cache file is logged and rebuilt.

    Example:
        >>> from uqlm_bert.bertscore._fixed_idf import (
        ...     embedded_idf, embedded_tokenizer, idf_for_tokenizer)
        >>> idf_for_tokenizer(embedded_tokenizer()) == embedded_idf()
        True
    """
    key = tokenizer_key(tokenizer)
    if key not in _MEMO:
        for found_key, weights in _shipped_tables():
            _MEMO.setdefault(found_key, weights)
        if key not in _MEMO:
            _MEMO[key] = _cached_or_built(tokenizer, key)
    return _copy(_MEMO[key])


def _cached_or_built(tokenizer: Any, key: str) -> IdfWeights:
    path = cache_dir() / f"{key}.tsv.gz"
    if path.is_file():
        try:
            found_key, weights = read_token_table(path)
            if found_key == key:
                return weights
            logger.warning("idf cache file %s has key %s, not %s; rebuilding", path, found_key, key)
        except ConfigurationError as exc:
            logger.warning("unreadable idf cache file %s (%s); rebuilding", path, exc)
    weights = build_idf(tokenizer)
    try:
        write_token_table(path, key, weights)
    except OSError as exc:
        logger.warning("could not write the idf cache file %s: %s", path, exc)
    return weights


def _copy(w: IdfWeights) -> IdfWeights:
    return IdfWeights(dict(w.weights), w.default)


def idf_mapping(weights: IdfWeights) -> defaultdict[int, float]:
    """The ``{token_id: weight}`` mapping ``BERTScorer(idf=...)`` takes; it keeps the default.

    Example:
        >>> from uqlm_bert.bertscore._fixed_idf import idf_mapping
        >>> from uqlm_bert.bertscore._idf import IdfWeights
        >>> m = idf_mapping(IdfWeights({7: 0.5}, 3.0))
        >>> m[7], m.default_factory()
        (0.5, 3.0)
    """
    return defaultdict(functools.partial(float, weights.default), weights.weights)


# -- token table files ----------------------------------------------------------------------------


def read_token_table(path: str | os.PathLike[str]) -> tuple[str, IdfWeights]:
    """``(key, weights)`` from a token table written by :func:`write_token_table`.

    Raises:
        ConfigurationError: the file is missing or malformed.

    Example:
        >>> from uqlm_bert.bertscore._fixed_idf import EMBEDDED_TABLE, read_token_table
        >>> key, weights = read_token_table(EMBEDDED_TABLE)
        >>> len(key), weights.default
        (64, 9.21044)
    """
    path = Path(path)
    meta, rows = _table_lines(_read_gz_text(path, "token table"))
    weights: dict[int, float] = {}
    try:
        for _, line in rows:
            token, _, value = line.partition("\t")
            weights[int(token)] = float(value)
        return meta["key"], IdfWeights(weights, float(meta["default"]))
    except (ValueError, KeyError) as exc:
        raise ConfigurationError(f"{path} is not a token table: {exc!r}") from exc


def _table_lines(text: str) -> tuple[dict[str, str], list[tuple[int, str]]]:
    """A table file's ``# key: value`` header lines, and its other lines with their numbers."""
    meta: dict[str, str] = {}
    rows: list[tuple[int, str]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep:
                meta[key.strip()] = value.strip()
        else:
            rows.append((n, line))
    return meta, rows


def write_token_table(
    path: str | os.PathLike[str], key: str, weights: IdfWeights, note: str = ""
) -> None:
    """Write ``weights`` as gzip'd ``token_id<TAB>weight`` lines, atomically and byte-stably.

    The file is written beside its destination and renamed over it, so a reader never sees a
    partial file. The gzip header has no time stamp, so equal weights give equal bytes.

    Raises:
        OSError: the directory cannot be created or written.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from uqlm_bert.bertscore._fixed_idf import read_token_table, write_token_table
        >>> from uqlm_bert.bertscore._idf import IdfWeights
        >>> path = Path(tempfile.mkdtemp()) / "weights.tsv.gz"
        >>> write_token_table(path, "k1", IdfWeights({0: 0.0, 7: 1.25}, 4.5))
        >>> read_token_table(path)
        ('k1', IdfWeights(weights={0: 0.0, 7: 1.25}, default=4.5))
    """
    path = Path(path)
    lines = [f"# {note}"] if note else []
    lines += [
        "# uqlm-bert fixed idf token weights: token_id<TAB>weight; unlisted ids weigh the default",
        f"# key: {key}",
        f"# default: {weights.default!r}",
    ]
    lines += [f"{t}\t{w!r}" for t, w in sorted(weights.weights.items())]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_gz_text(path, "\n".join(lines) + "\n")


def write_gz_text(path: Path, text: str) -> None:
    """Write ``text`` gzip'd (no time stamp or file name) to ``path``, atomically (see
    :func:`uqlm_bert.io._paths.atomic_write`: a new file's permissions are the umask's, a
    replaced file keeps its own).

    Example:
        >>> import gzip, tempfile
        >>> from pathlib import Path
        >>> from uqlm_bert.bertscore._fixed_idf import write_gz_text
        >>> path = Path(tempfile.mkdtemp()) / "a.txt.gz"
        >>> write_gz_text(path, "x\\ty\\n")
        >>> gzip.decompress(path.read_bytes()).decode()
        'x\\ty\\n'
    """
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))
    data = buf.getvalue()
    atomic_write(os.fspath(path), lambda tmp: Path(tmp).write_bytes(data))


def _read_gz_text(path: Path, what: str) -> str:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the {what} {path}: {exc}") from exc
