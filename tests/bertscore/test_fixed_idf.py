"""Fixed idf weights: the shipped files, the derivation, tokenizer kinds, batch invariance, cache.

Expected values come from the word table and the formulas of ``uqlm_bert.bertscore._fixed_idf``'s
docstring, computed here independently (plain ``tokenizer.tokenize`` per word, not the module's
code path), never from the module's own output.
"""

from __future__ import annotations

import gzip
import logging
import math
import re
import warnings

import pytest
import torch

from tests.helpers.texts import passage
from uqlm_bert.bertscore import _fixed_idf as fixed_idf
from uqlm_bert.bertscore._fixed_idf import (
    DOC_WORDS,
    EMBEDDED_TABLE,
    NUM_DOCS,
    PUNCTUATION,
    build_idf,
    embedded_idf,
    embedded_tokenizer,
    idf_for_tokenizer,
    idf_mapping,
    load_word_table,
    read_token_table,
    tokenizer_key,
)
from uqlm_bert.bertscore._idf import IdfWeights, idf_from_mapping


def hand_idf(rate: float) -> float:
    """The module doc's steps 3-4 for a token met ``rate`` times per running word."""
    doc_prob = 1 - math.exp(-DOC_WORDS * rate)
    return math.log((NUM_DOCS + 1) / (NUM_DOCS * doc_prob + 1))


@pytest.fixture(scope="module")
def tok():
    return embedded_tokenizer()


@pytest.fixture(scope="module")
def table():
    return load_word_table()


@pytest.fixture(scope="module")
def built(tok, table):
    return build_idf(tok, table)


@pytest.fixture(scope="module")
def word_tokens(tok, table):
    """Each table word's tokens, tokenized on its own (the embedded tokenizer is WordPiece)."""
    return [tok.tokenize(w) for w in table.words]


@pytest.fixture(scope="module")
def cased(tmp_path_factory):
    return tiny_wordpiece(tmp_path_factory.mktemp("cased"), lower=False)


@pytest.fixture(scope="module")
def cased_built(cased, table):
    return build_idf(cased, table)


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    """An empty disk cache under tmp_path and an empty in-process memo."""
    monkeypatch.setenv("UQLM_BERT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(fixed_idf, "_MEMO", {})
    return tmp_path / "cache" / "idf"


def tiny_wordpiece(tmp_path, lower: bool):
    """A WordPiece tokenizer of a handful of whole words, cased or lower-casing."""
    from transformers import AutoTokenizer

    directory = tmp_path / "wordpiece"
    directory.mkdir(exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "The", "of", "Of", "paris",
             "Paris", ".", ",", "violinist", "Violinist", "a"]  # fmt: skip
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = '{"tokenizer_class": "BertTokenizer"}'
    (directory / "tokenizer_config.json").write_text(config, encoding="utf-8")
    return AutoTokenizer.from_pretrained(str(directory), do_lower_case=lower)


# -- the shipped files ----------------------------------------------------------------------------


@pytest.mark.slow
def test_shipped_token_table_is_what_the_word_table_builds(tok, built):
    key, shipped = read_token_table(EMBEDDED_TABLE)
    assert key == tokenizer_key(tok)
    assert shipped.default == built.default
    assert shipped.weights == built.weights
    assert embedded_idf() == built


def test_word_table_is_the_cut_off_list_it_says(table):
    assert len(table.words) == len(set(table.words)) > 25_000
    assert min(table.zipf) >= table.min_zipf == 3.0
    assert list(table.zipf) == sorted(table.zipf, reverse=True)
    assert table.words[:4] == ("the", "to", "and", "of")
    # wordfreq's folded number shapes ("0000") are replaced by whole numbers
    numbers = [w for w in table.words if sum(c.isdigit() for c in w) >= 2]
    assert numbers and all(re.fullmatch(r"[1-9][0-9]{1,3}", w) for w in numbers)
    assert "1990" in numbers and "0000" not in table.words
    with gzip.open(fixed_idf.WORD_TABLE, "rt", encoding="utf-8") as f:
        header = [line for line in f.read().splitlines() if line.startswith("#")]
    assert f"# words: {len(table.words)}" in header


def test_num_docs_follows_the_stated_rule(table):
    # M = 1 / (L * f_min): the corpus in which the rarest listed word is expected once
    f_min = 10 ** (table.min_zipf - 9)
    assert NUM_DOCS == round(1 / (DOC_WORDS * f_min))


# -- the derivation -------------------------------------------------------------------------------


def test_weights_follow_the_formula_by_hand(tok, table, built, word_tokens):
    freqs = [10 ** (z - 9) for z in table.zipf]
    marks = {}
    for mark, per_thousand, _ in PUNCTUATION:
        marks[mark] = marks.get(mark, 0.0) + per_thousand / 1000
    for token in ["the", ".", ",", "violinist", "##s", "(", "paris", "1990"]:
        rate = marks.get(token, 0.0)
        rate += sum(f * toks.count(token) for f, toks in zip(freqs, word_tokens, strict=True))
        assert rate > 0, token
        assert built[tok.convert_tokens_to_ids(token)] == pytest.approx(hand_idf(rate), abs=1e-6)


def test_special_tokens_weigh_zero(tok, built):
    assert tok.all_special_ids
    for i in tok.all_special_ids:
        assert built.weights[i] == 0.0


def test_a_token_in_no_word_gets_the_largest_weight(tok, built, word_tokens):
    assert built.default == pytest.approx(math.log(NUM_DOCS + 1), abs=1e-6)
    assert built.default > max(built.weights.values())
    seen = {t for toks in word_tokens for t in toks}
    unseen = [t for t in tok.get_vocab() if t not in seen and t not in tok.all_special_tokens]
    unseen = [t for t in unseen if t not in {m for m, _, _ in PUNCTUATION}]
    assert "[unused5]" in unseen
    for t in unseen[:200]:
        assert built[tok.convert_tokens_to_ids(t)] == built.default


def test_frequent_words_and_punctuation_weigh_less_than_rare_words(tok, table, built):
    def single_tokens(words):
        """The token of each word that is one known token."""
        tokens = [tok.tokenize(w) for w in words]
        return [t[0] for t in tokens if len(t) == 1 and t[0] != tok.unk_token]

    top = single_tokens(table.words[:30])
    marks = [".", ",", '"', "(", ")", ";", ":", "-"]
    rare = single_tokens([w for w, z in zip(table.words, table.zipf, strict=True) if z <= 3.1])
    assert len(rare) > 100
    # each frequent token is met at least as often as its word or mark: an upper bound
    least = min(
        [10 ** (z - 9) for w, z in zip(table.words[:30], table.zipf, strict=False) if w in top]
        + [per_thousand / 1000 for m, per_thousand, _ in PUNCTUATION if m in marks]
    )
    w_frequent = [built[tok.convert_tokens_to_ids(t)] for t in top + marks]
    w_rare = [built[tok.convert_tokens_to_ids(t)] for t in rare]
    assert max(w_frequent) <= hand_idf(least) + 1e-6 < min(w_rare)


# -- tokenizer kinds ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_cased_tokenizer_credits_both_forms_of_a_word(tmp_path, table, cased, cased_built):
    lower = tiny_wordpiece(tmp_path, lower=True)
    w_cased, w_lower = cased_built, build_idf(lower, table)
    f_the = 10 ** (table.zipf[table.words.index("the")] - 9)
    the, The = cased.convert_tokens_to_ids(["the", "The"])  # noqa: N806
    assert w_cased[the] == w_cased[The] == pytest.approx(hand_idf(f_the), abs=1e-6)
    # a lower-casing tokenizer never produces "The": it stays at the default
    assert w_lower[the] == w_cased[the] and The not in w_lower.weights
    paris, Paris = cased.convert_tokens_to_ids(["paris", "Paris"])  # noqa: N806
    assert w_cased[paris] == w_cased[Paris] > w_cased[the]


@pytest.mark.slow
def test_byte_level_bpe_words_get_their_leading_space_tokens(tmp_path, table):
    from transformers import AutoTokenizer

    from tests.helpers.tiny_models import build_tiny_roberta

    directory = build_tiny_roberta(tmp_path / "roberta")
    plain = AutoTokenizer.from_pretrained(str(directory))
    spaced = AutoTokenizer.from_pretrained(str(directory), add_prefix_space=True)
    w_plain, w_spaced = build_idf(plain, table), build_idf(spaced, table)
    assert w_plain == w_spaced
    space_the = plain.convert_tokens_to_ids("\u0120the")  # "Ġthe", as in "... the"
    assert space_the != plain.unk_token_id
    # "Ġthe" is met at least as often as the word "the"
    f_the = 10 ** (table.zipf[table.words.index("the")] - 9)
    assert w_plain[space_the] <= hand_idf(f_the) + 1e-6
    for i in plain.all_special_ids:
        assert w_plain[i] == 0.0


# -- batch invariance through the engine ----------------------------------------------------------


@pytest.mark.slow
def test_a_pair_scores_the_same_alone_and_among_many():
    from uqlm_bert import BERTScorer

    cand = "Marie Curie was a physicist and chemist, born in Warsaw in 1867."
    ref = "Marie Curie, a chemist and physicist, was born in Warsaw, Poland, in 1867."
    others_c = [passage(seed, 12 + seed % 40) for seed in range(40)]
    others_r = [passage(100 + seed, 10 + seed % 35) for seed in range(40)]
    cands = others_c[:20] + [cand] + others_c[20:]
    refs = others_r[:20] + [ref] + others_r[20:]

    def target_scores(scorer, many):
        if many:
            return torch.stack(scorer.score(cands, refs))[:, 20]
        return torch.stack(scorer.score([cand], [ref]))[:, 0]

    fixed = BERTScorer(idf=idf_mapping(embedded_idf()), show_progress_bars=False)
    alone, among = target_scores(fixed, False), target_scores(fixed, True)
    assert torch.equal(alone, among)
    # the weights matter: they move the score away from the unweighted one
    plain = BERTScorer(show_progress_bars=False)
    assert abs(float(target_scores(plain, False)[2] - alone[2])) > 1e-3
    # idf over the call's references, by contrast, depends on the other pairs (alone, the one
    # reference holds every candidate token, so the engine warns that all weights are 0)
    call = BERTScorer(idf=True, show_progress_bars=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        alone_call = target_scores(call, False)
    assert abs(float(alone_call[2] - target_scores(call, True)[2])) > 1e-3


def test_idf_mapping_keeps_the_weights_and_default_through_the_engine_parser():
    w = IdfWeights({0: 0.0, 5: 1.5, 9: 2.25}, 7.0)
    assert idf_from_mapping(idf_mapping(w)) == w


# -- the disk cache and the memo ------------------------------------------------------------------


def test_the_embedded_tokenizer_gets_the_shipped_table_and_writes_nothing(fresh_cache, tok):
    assert idf_for_tokenizer(tok) == embedded_idf()
    assert not fresh_cache.exists()


@pytest.mark.slow
def test_other_tokenizers_are_cached_on_disk_and_reused(fresh_cache, monkeypatch, cased):
    first = idf_for_tokenizer(cased)
    path = fresh_cache / f"{tokenizer_key(cased)}.tsv.gz"
    assert path.is_file()
    assert read_token_table(path) == (tokenizer_key(cased), first)
    assert [p.name for p in fresh_cache.iterdir()] == [path.name]  # no temporary file left

    def no_build(*args, **kwargs):
        raise AssertionError("built again instead of read from the cache")

    monkeypatch.setattr(fixed_idf, "build_idf", no_build)
    monkeypatch.setattr(fixed_idf, "_MEMO", {})
    assert idf_for_tokenizer(cased) == first  # from disk
    path.unlink()
    assert idf_for_tokenizer(cased) == first  # from the memo
    # callers get copies: changing one does not change the next
    got = idf_for_tokenizer(cased)
    got.weights.clear()
    assert idf_for_tokenizer(cased) == first


def test_a_different_tokenizer_gets_a_different_key(tmp_path, tok, cased):
    lower = tiny_wordpiece(tmp_path, lower=True)  # same vocabulary, lower-cases its input
    keys = {tokenizer_key(tok), tokenizer_key(cased), tokenizer_key(lower)}
    assert len(keys) == 3


@pytest.mark.slow
def test_a_failed_cache_write_is_logged_not_raised(
    tmp_path, monkeypatch, caplog, cased, cased_built
):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    monkeypatch.setenv("UQLM_BERT_CACHE_DIR", str(blocker))
    monkeypatch.setattr(fixed_idf, "_MEMO", {})
    with caplog.at_level(logging.WARNING, logger="uqlm_bert"):
        got = idf_for_tokenizer(cased)
    assert got == cased_built
    assert any(
        r.name == "uqlm_bert" and "could not write the idf cache" in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.slow
def test_an_unreadable_cache_file_is_logged_and_rebuilt(fresh_cache, caplog, cased, cased_built):
    path = fresh_cache / f"{tokenizer_key(cased)}.tsv.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not gzip")
    with caplog.at_level(logging.WARNING, logger="uqlm_bert"):
        got = idf_for_tokenizer(cased)
    assert got == cased_built
    assert any("unreadable idf cache file" in r.getMessage() for r in caplog.records)
    assert read_token_table(path)[1] == got  # replaced by a good one
