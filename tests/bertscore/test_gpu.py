"""The engine on a CUDA GPU: parity with the reference, dtype="auto", the out-of-memory split on
real device memory, and generate_and_score end to end.

Every test here needs CUDA (marked ``gpu``, skipped where there is none). The CPU versions of
the same behaviour are in test_parity.py, test_dtype_auto.py, test_out_of_memory.py and
test_torch_calls.py; test_fast_mode.py covers the reduced dtypes on every device, and
test_mpnet.py runs MPNet's packed pass on the CPU and on CUDA alike.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from tests.bertscore.test_parity import (  # noqa: F401 - baseline_file is a fixture
    TOL,
    _ref,
    _ref_alone,
    _stack,
    baseline_file,
    grid_case,
)
from tests.helpers.devices import CUDA_ONLY
from tests.helpers.texts import LONG, SHORT, passage
from uqlm_bert import BERTScorer, BERTScoreSettings, BlackBoxUQ, DeviceOutOfMemoryError
from uqlm_bert.bertscore._encoder import Encoder

pytestmark = CUDA_ONLY


@pytest.mark.parametrize("layer", [1, 6])
@pytest.mark.parametrize("idf", [False, True])
@pytest.mark.parametrize("rescale", [False, True])
def test_float32_on_cuda_matches_the_reference(
    embedded_model_path,
    baseline_file,  # noqa: F811 - the fixture imported above
    layer,
    idf,
    rescale,
):
    ours, got, expected = grid_case(
        embedded_model_path, baseline_file, layer, idf, rescale, device="cuda"
    )
    assert ours.device.type == "cuda" and ours.dtype == torch.float32
    assert torch.allclose(got, expected, atol=TOL, rtol=0), (got - expected).abs().max()


@pytest.mark.parametrize("idf", [False, True])
def test_multi_reference_on_cuda_matches_the_reference(embedded_model_path, idf):
    cands = SHORT[:6] + LONG[:2]
    refs = [
        [SHORT[(i + 1) % len(SHORT)], SHORT[(i + 3) % len(SHORT)], LONG[i % len(LONG)]][: 1 + i % 3]
        for i in range(len(cands))
    ]
    flat = [r for group in refs for r in group]
    ours = BERTScorer(
        num_layers=5,
        idf=idf,
        idf_sents=flat if idf else None,
        device="cuda",
        show_progress_bars=False,
    )
    expected = _ref_alone(
        _ref(embedded_model_path, 5, tuple(flat) if idf else None, None), cands, refs
    )
    assert torch.allclose(_stack(ours.score(cands, refs)), expected, atol=TOL, rtol=0)


def _largest_f_difference(auto: BERTScorer, exact: BERTScorer) -> float:
    """The largest F difference of two scorers over pairs of the test texts, each text against
    three others."""
    texts = SHORT + LONG
    cands = [t for t in texts for _ in range(3)]
    refs = [texts[(i + k) % len(texts)] for i in range(len(texts)) for k in (1, 2, 5)]
    F_auto = auto.score(cands, refs)[2].double()
    F_exact = exact.score(cands, refs)[2].double()
    return float((F_auto - F_exact).abs().max())


def test_auto_is_float16_on_cuda_and_within_the_budget_of_float32():
    auto = BERTScorer(device="cuda", dtype="auto", show_progress_bars=False)
    assert auto.dtype == torch.float16  # the embedded model (BERT) is safe in float16
    exact = BERTScorer(device="cpu", show_progress_bars=False)
    assert _largest_f_difference(auto, exact) <= 5e-3


def test_the_accurate_preset_on_cuda_is_float16_within_the_budget_of_float32(accurate_model_dir):
    auto = BERTScorer(
        model_type=accurate_model_dir, device="cuda", dtype="auto", show_progress_bars=False
    )
    assert auto.dtype == torch.float16
    exact = BERTScorer(model_type=accurate_model_dir, device="cuda", show_progress_bars=False)
    assert _largest_f_difference(auto, exact) <= 5e-3


def _long_texts(n: int) -> list[str]:
    return [passage(700 + i, 280 + i) for i in range(n)]  # about 400 tokens each


def test_a_real_out_of_memory_is_split_and_every_score_kept(monkeypatch):
    """With the process allowed a few hundred MB beyond the model, a forward pass over 64 long
    texts (about 1 GB of activations in float32) runs out of memory; the split runs it in
    parts, and the scores equal those of an unconstrained run."""
    scorer = BERTScorer(device="cuda", show_progress_bars=False)
    texts = _long_texts(64)
    cands, refs = texts[:32], texts[32:]
    expected = torch.stack(scorer.score(cands, refs))
    released = []
    real_release = Encoder.release_memory
    monkeypatch.setattr(
        Encoder, "release_memory", lambda self: (released.append(1), real_release(self))
    )
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    allowed = torch.cuda.memory_reserved() + 300 * 2**20
    torch.cuda.set_per_process_memory_fraction(allowed / total)
    try:
        got = torch.stack(scorer.score(cands, refs))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()
    assert released  # at least one pass ran out of memory and was split
    assert torch.allclose(got, expected, atol=1e-5, rtol=0)


def test_a_text_that_does_not_fit_alone_on_cuda_raises_the_typed_error():
    scorer = BERTScorer(device="cuda", show_progress_bars=False)
    text = _long_texts(1)[0]
    n_tokens = len(scorer.encoder.tokenize([text])[0])
    scorer.score(["warm up"], ["the kernels"])
    torch.cuda.empty_cache()
    # The free blocks left inside the segments the allocator keeps (the model's, the warm-up's)
    # could hold a whole pass of one text. Fill them with blocks of just over 1 MB (the
    # allocator's large pool, where a pass's bigger tensors go) until two new segments had to
    # be reserved, give the second back, and allow nothing beyond what is reserved: what is
    # left free in each segment is under one block, less than the text's feed-forward tensors
    # (400 tokens x 1,536 x 4 bytes, 2.4 MB).
    fillers, grown = [], 0
    while grown < 2:
        before = torch.cuda.memory_reserved()
        fillers.append(torch.empty(2**20 + 2**12, dtype=torch.uint8, device="cuda"))
        grown += torch.cuda.memory_reserved() > before
    fillers.pop()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(torch.cuda.memory_reserved() / total)
    try:
        with pytest.raises(DeviceOutOfMemoryError) as info:
            scorer.score([text], [text])
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        del fillers
        torch.cuda.empty_cache()
    message = str(info.value)
    assert f"{n_tokens} tokens" in message and "device='cpu'" in message
    # and the scorer works again once memory is there
    assert float(scorer.score([text], [text])[2][0]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.network
async def test_generate_and_score_on_cuda_against_a_loopback_server():
    langchain_openai = pytest.importorskip("langchain_openai")
    from fakes.openai_server import FakeOpenAIServer

    def answer(prompt: str, temperature: float | None) -> str:
        return passage(zlib.crc32(f"{prompt}|{temperature}".encode()), 60)

    prompts = [f"Tell me about person {i}." for i in range(24)]
    with FakeOpenAIServer(answer=answer) as server:
        llm = langchain_openai.ChatOpenAI(
            model="fake-model", base_url=server.base_url, api_key="test-key", temperature=0.0
        )
        uq = BlackBoxUQ(llm, scorers=["bert_score"], device="cuda", show_progress_bars=False)
        result = await uq.generate_and_score(prompts, num_responses=3)
    assert result.metadata["model_dtypes"] == {"bert_score": "float16"}
    df = result.to_df()
    assert list(df["response"]) == [answer(p, 0.0) for p in prompts]
    exact = BlackBoxUQ(
        scorers=["bert_score"],
        bertscore=BERTScoreSettings(device="cpu", dtype="float32"),
        show_progress_bars=False,
    )
    expected = exact.score(list(df["response"]), [list(s) for s in df["sampled_responses"]])
    got = np.asarray(df["bert_score"], dtype=float)
    want = np.asarray(expected.to_df()["bert_score"], dtype=float)
    assert np.abs(got - want).max() <= 2e-3
