"""Out of device memory is not a crash: batches split down to one text, then a typed error.

The faults are injected on the CPU: the encoder's forward (or matching) raises the error a GPU
raises when a batch is larger than a limit the test sets.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.texts import LONG, SHORT, passage
from uqlm_bert import BERTScorer, DeviceOutOfMemoryError, UQLMBertError
from uqlm_bert.bertscore import _pair_scoring as pair_scoring
from uqlm_bert.bertscore._batching import (
    embed_in_batches,
    is_out_of_memory,
    plan_batches,
    too_long_message,
)
from uqlm_bert.bertscore._encoder import Encoder

CANDS = [passage(300 + i, 20 + 7 * i) for i in range(12)] + SHORT[:4]
REFS = [passage(400 + i, 90 - 5 * i) for i in range(12)] + LONG[:4]


@pytest.fixture(scope="module")
def oom_engine() -> BERTScorer:
    return BERTScorer(device="cpu", show_progress_bars=False)


def _fail_above(monkeypatch, max_tokens: int, log: list) -> None:
    """Make the forward pass raise CUDA's out-of-memory error on batches of more than
    ``max_tokens`` tokens; ``log`` records ``(texts, tokens, ok)`` per pass."""
    real = Encoder.embed_packed

    def embed_packed(self, batch, normalize=True):
        tokens = sum(len(ids) for ids in batch)
        if tokens > max_tokens:
            log.append((len(batch), tokens, False))
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {tokens} tokens' worth"
            )
        log.append((len(batch), tokens, True))
        return real(self, batch, normalize)

    monkeypatch.setattr(Encoder, "embed_packed", embed_packed)


def test_plan_batches_by_count_and_by_padded_tokens():
    # widths round up to 16 (the packed pass pads attention so): 10 and 20 -> 16 and 32
    assert plan_batches([10, 20, 30, 40], max_texts=None, max_tokens=64) == [(0, 2), (2, 3), (3, 4)]
    assert plan_batches([10, 20, 30, 40], max_texts=3, max_tokens=None) == [(0, 3), (3, 4)]
    # a text longer than the budget still gets a batch of its own
    assert plan_batches([5, 500, 600], max_texts=None, max_tokens=64) == [(0, 1), (1, 2), (2, 3)]
    assert plan_batches([], max_texts=2, max_tokens=64) == []


@pytest.mark.slow
def test_a_batch_out_of_memory_is_split_and_nothing_is_lost_or_counted_twice(
    oom_engine, monkeypatch
):
    enc = oom_engine.encoder
    seqs = sorted(enc.tokenize(CANDS + REFS), key=len)
    expected = torch.cat(embed_in_batches(enc, seqs, max_tokens=10**9))
    log: list = []
    _fail_above(monkeypatch, 300, log)
    told: list[int] = []
    got = embed_in_batches(enc, seqs, max_tokens=10**9, on_embedded=told.append)
    assert any(not ok for *_, ok in log)  # the first pass failed and was split
    assert sum(told) == len(seqs)  # each text reported once
    assert sum(n for n, _, ok in log if ok) == len(seqs)  # and embedded once
    assert all(tokens <= 300 for _, tokens, ok in log if ok)
    got = torch.cat(got)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_scores_are_the_same_when_batches_run_out_of_memory(oom_engine, monkeypatch):
    P, R, F = oom_engine.score(CANDS, REFS)
    log: list = []
    _fail_above(monkeypatch, 400, log)
    P2, R2, F2 = oom_engine.score(CANDS, REFS)
    assert any(not ok for *_, ok in log)
    for a, b in ((P, P2), (R, R2), (F, F2)):
        assert torch.allclose(a, b, atol=1e-6, rtol=0)


def test_a_text_that_does_not_fit_alone_raises_a_typed_error_naming_its_length(
    oom_engine, monkeypatch
):
    long_text = passage(7, 150)
    n_tokens = len(oom_engine.encoder.tokenize([long_text])[0])
    released: list[bool] = []
    monkeypatch.setattr(Encoder, "release_memory", lambda self: released.append(True))
    _fail_above(monkeypatch, n_tokens - 1, [])
    with pytest.raises(DeviceOutOfMemoryError) as info:
        oom_engine.score(["A short answer.", long_text], ["A short sample.", "Another sample."])
    message = str(info.value)
    assert f"{n_tokens} tokens" in message
    assert "max_length" in message and "smaller model" in message
    assert isinstance(info.value, UQLMBertError) and isinstance(info.value, MemoryError)
    assert released  # memory was handed back before each retry


def test_on_an_accelerator_the_remedy_names_the_cpu():
    message = too_long_message("a text of 900 tokens", torch.device("cuda:0"))
    assert "900 tokens" in message and "cuda:0" in message
    assert "max_length" in message and "smaller model" in message and "device='cpu'" in message


def test_other_errors_are_not_taken_for_out_of_memory(oom_engine, monkeypatch):
    def broken(self, batch, normalize=True):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(Encoder, "embed_packed", broken)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        oom_engine.score(["a"], ["b"])
    assert is_out_of_memory(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory"))
    assert not is_out_of_memory(ValueError("out of memory"))


@pytest.mark.slow
def test_a_matching_block_out_of_memory_is_split(oom_engine, monkeypatch):
    P, R, F = oom_engine.score(CANDS, REFS)
    real = pair_scoring.greedy_match_rows
    sizes: list[tuple[int, bool]] = []

    def limited(emb, aux, rows, cand_width):
        pairs = rows.shape[1]
        if pairs > 3:
            sizes.append((pairs, False))
            raise torch.OutOfMemoryError("CUDA out of memory.")
        sizes.append((pairs, True))
        return real(emb, aux, rows, cand_width)

    monkeypatch.setattr(pair_scoring, "greedy_match_rows", limited)
    P2, R2, F2 = oom_engine.score(CANDS, REFS)
    assert any(not ok for _, ok in sizes)
    assert sum(n for n, ok in sizes if ok) == len(CANDS)  # each pair matched once
    for a, b in ((P, P2), (R, R2), (F, F2)):
        assert torch.allclose(a, b, atol=1e-6, rtol=0)
