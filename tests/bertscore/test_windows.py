"""Cutting a long text into windows and stitching the windows' outputs back: the pure parts.

The rules are checked against their definitions, computed here the slow way: every token is
covered, windows overlap by at least the minimum and hold at most the capacity, no fewer windows
would do, and each token's output is the mean of its outputs in the windows that hold it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uqlm_bert.bertscore._loading import load_tokenizer
from uqlm_bert.bertscore._windows import WINDOW_TOKENS, Frame, plan_windows, split_in_windows

CASES = [
    (n, cap, o)
    for cap in (4, 9, 62, 126, 510)
    for o in (0, 1, 16, 64)
    for n in (1, cap - 1, cap, cap + 1, 2 * cap, 3 * cap + 7, 20_000)
]


@pytest.mark.parametrize(("n", "capacity", "min_overlap"), CASES)
def test_windows_cover_the_text_with_the_overlap_and_no_more_windows_than_needed(
    n, capacity, min_overlap
):
    windows = plan_windows(n, capacity, min_overlap)
    assert windows[0][0] == 0 and windows[-1][1] == n
    assert all(0 < b - a <= capacity for a, b in windows)
    if n <= capacity:
        assert windows == [(0, n)]
        return
    overlap = min(min_overlap, capacity // 4)
    for (a, b), (a2, b2) in zip(windows, windows[1:], strict=False):
        assert a < a2 and b < b2  # in order
        assert b - a2 >= overlap  # neighbours share at least the overlap
    # one window fewer cannot cover n tokens with that overlap: (k - 1) windows of capacity
    # tokens reach at most (k - 1) * capacity - (k - 2) * overlap tokens
    k = len(windows)
    assert (k - 1) * capacity - (k - 2) * overlap < n
    assert len({b - a for a, b in windows}) == 1  # one length: no window is a short tail


@pytest.fixture(scope="module")
def bert_frame():
    return Frame.of(load_tokenizer(None), 16)


def test_frame_of_a_bert_tokenizer(bert_frame):
    tok = load_tokenizer(None)
    assert bert_frame.prefix == (tok.cls_token_id,)
    assert bert_frame.suffix == (tok.sep_token_id,)
    assert bert_frame.capacity == 14


def test_frame_of_a_roberta_tokenizer(tmp_path):
    from tests.helpers.tiny_models import build_tiny_roberta

    tok = load_tokenizer(str(build_tiny_roberta(tmp_path / "tiny-roberta")))
    frame = Frame.of(tok, 128)
    assert frame.prefix == (tok.bos_token_id,) and frame.suffix == (tok.eos_token_id,)


class _NoSpecials:
    """A tokenizer that adds nothing around a text (as GPT-2's does)."""

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}


def test_a_tokenizer_without_special_tokens_has_an_empty_frame():
    assert Frame.of(_NoSpecials(), 8) == Frame((), (), 8)


def _ids(n, start=1000):
    return [101, *range(start, start + n), 102]


def _rows(seqs):
    """An "embedding" of each token: its id, its place in its sequence and its sequence."""
    return [
        torch.stack(
            [
                torch.as_tensor(s, dtype=torch.float64),
                torch.arange(len(s)).double(),
                torch.full((len(s),), float(k), dtype=torch.float64),
            ],
            dim=1,
        )
        for k, s in enumerate(seqs)
    ]


def _stitched(split, outputs, normalize):
    """Each text's stitched rows: the packed result of ``stitch_packed``, cut per text."""
    return list(split.stitch_packed(torch.cat(outputs), normalize).split(split.lengths))


@pytest.mark.parametrize("min_overlap", [0, 3])
def test_stitching_averages_each_token_over_the_windows_that_hold_it(bert_frame, min_overlap):
    texts = [_ids(3), _ids(14), _ids(15), _ids(40), _ids(100, 5000), _ids(0)]
    split = split_in_windows(texts, bert_frame, min_overlap)
    assert all(len(s) <= bert_frame.window for s in split.sequences)
    for s in split.sequences:
        assert s[0] == 101 and s[-1] == 102  # every window is framed as a text is
    # the texts that fit come first, as given, unchanged
    fits = [t for t in texts if len(t) <= bert_frame.window]
    assert [s.tolist() for s in split.sequences[: len(fits)]] == fits
    assert sum(len(p) > 1 for p in split.pieces) == 3  # three texts are cut into windows
    outputs = _rows(split.sequences)
    stitched = _stitched(split, outputs, normalize=False)
    for t, ids in enumerate(texts):
        got = stitched[t]
        assert got[:, 0].tolist() == ids  # every token once, in order
        mine = [k for k, owner in enumerate(split.sequence_texts) if owner == t]
        if len(mine) == 1:
            assert torch.equal(got, outputs[mine[0]])  # a text that fits: its sequence's output
            continue
        # by hand: the windows over its own tokens, each token's place in every one holding it
        windows = plan_windows(len(ids) - 2, bert_frame.capacity, min_overlap)
        order = sorted(mine)  # its windows are read in their order (one length: stable)
        assert got[0, 1:].tolist() == [0, order[0]]  # [CLS] from the first window
        assert got[-1, 1:].tolist() == [len(split.sequences[order[-1]]) - 1, order[-1]]
        for p in range(len(ids) - 2):
            holding = [(p - a + 1, order[j]) for j, (a, b) in enumerate(windows) if a <= p < b]
            expected = np.mean(holding, axis=0)
            assert got[p + 1, 1:].tolist() == pytest.approx(expected.tolist())


def test_stitched_embeddings_are_unit_length_again(bert_frame):
    split = split_in_windows([_ids(40)], bert_frame, 3)
    g = torch.Generator().manual_seed(0)
    outs = [
        torch.nn.functional.normalize(torch.randn(len(s), 8, generator=g), dim=-1)
        for s in split.sequences
    ]
    emb = _stitched(split, outs, normalize=True)[0]
    assert torch.allclose(emb.norm(dim=-1), torch.ones(len(emb), dtype=emb.dtype))


def test_a_long_text_without_its_frame_is_cut_as_it_is(bert_frame):
    bare = list(range(2000, 2040))  # no [CLS]/[SEP] around it
    split = split_in_windows([bare], bert_frame, 2)
    assert all(len(s) <= bert_frame.window for s in split.sequences)
    assert _stitched(split, _rows(split.sequences), normalize=False)[0][:, 0].tolist() == bare


def test_texts_done_counts_texts_whose_windows_are_all_read(bert_frame):
    split = split_in_windows([_ids(3), _ids(40)], bert_frame, 2)
    n = len(split.sequences)
    assert split.texts_done(0) == 0
    assert split.texts_done(1) == 1  # the short text comes first
    assert split.texts_done(n - 1) == 1
    assert split.texts_done(n) == 2


def test_a_text_longer_than_the_model_window_is_read_in_windows_of_at_most_256_tokens():
    """The embedded model reads 512 tokens at once: a text of up to 512 tokens is one sequence,
    as in truncate mode; a longer one is read in windows of at most WINDOW_TOKENS (256) tokens,
    special tokens included, as few as overlap by MIN_OVERLAP."""
    frame = Frame.of(load_tokenizer(None), 512)
    assert WINDOW_TOKENS == 256 and frame.window_capacity == 254
    whole, longer = _ids(510), _ids(511)  # 512 and 513 tokens with [CLS] and [SEP]
    split = split_in_windows([whole, longer, _ids(1500)], frame)
    assert [s.tolist() for s in split.sequences[:1]] == [whole]
    lengths = [len(s) for s, t in zip(split.sequences, split.sequence_texts, strict=True) if t == 1]
    # 511 own tokens in windows of at most 254 overlapping by 32: three of 192
    assert lengths == [192 + 2] * 3
    lengths = [len(s) for s, t in zip(split.sequences, split.sequence_texts, strict=True) if t == 2]
    # 1,500 own tokens: 1500 + 6 * 32 <= 7 * 254, and six windows hold at most 1,364
    assert len(lengths) == 7 and max(lengths) <= 256 and 6 * 254 - 5 * 32 < 1500
    # a model whose window is smaller than 256 keeps its own
    assert Frame.of(load_tokenizer(None), 64).window_capacity == 62
