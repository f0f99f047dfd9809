"""BERTScorer with ``long_texts="window"``: long texts matched whole, short ones untouched.

- Texts that fit the model's window give the very same numbers in both modes, over the grid of
  settings the parity tests use (layers, idf, baseline rescaling, several references).
- A long text's score is greedy matching over embeddings built here by hand: each window run
  through the model on its own, each token the mean of its embeddings in the windows holding it.
- A 20,000-token answer against a 20,000-token sample is scored in a fresh process whose peak
  memory grows by less than half of what their similarity matrix alone would take.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from tests.bertscore.test_parity import _pairs, baseline_file  # noqa: F401 (a fixture)
from tests.helpers.texts import LONG, OVERLONG, SHORT
from tests.helpers.tiny_models import build_tiny_bert
from uqlm_bert import BERTScorer
from uqlm_bert.bertscore._matching import greedy_match, greedy_match_tiled
from uqlm_bert.bertscore._windows import MIN_OVERLAP, plan_windows


def _stack(prf) -> torch.Tensor:  # in the scores' own dtype (float32), as the matching below
    return torch.stack([torch.as_tensor(x) for x in prf])


@pytest.mark.parametrize("layer", [1, 3, 6])
@pytest.mark.parametrize("idf", [False, True, "auto"])
@pytest.mark.parametrize("rescale", [False, True])
def test_texts_that_fit_score_the_same_in_both_modes(baseline_file, layer, idf, rescale):  # noqa: F811
    cands, refs = _pairs()
    settings = {
        "num_layers": layer,
        "idf": idf,
        "idf_sents": refs if idf is True else None,
        "rescale_with_baseline": rescale,
        "baseline_path": baseline_file if rescale else None,
        "show_progress_bars": False,
    }
    window = _stack(BERTScorer(long_texts="window", **settings).score(cands, refs))
    truncate = _stack(BERTScorer(long_texts="truncate", **settings).score(cands, refs))
    assert torch.equal(window, truncate)


@pytest.mark.parametrize("idf", [False, True])
def test_several_references_score_the_same_in_both_modes(idf):
    cands = SHORT[:6] + LONG[:2]
    refs = [
        [SHORT[(i + 1) % len(SHORT)], SHORT[(i + 3) % len(SHORT)], LONG[i % len(LONG)]][: 1 + i % 3]
        for i in range(len(cands))
    ]
    kw = {"num_layers": 2, "idf": idf, "show_progress_bars": False}
    window = _stack(BERTScorer(long_texts="window", **kw).score(cands, refs))
    truncate = _stack(BERTScorer(**kw).score(cands, refs))
    assert torch.equal(window, truncate)


def test_idf_over_the_call_scores_the_same_in_both_modes():
    cands, refs = _pairs()
    both = [
        _stack(BERTScorer(idf=True, long_texts=m, show_progress_bars=False).score(cands, refs))
        for m in ("window", "truncate")
    ]
    assert torch.equal(both[0], both[1])


@pytest.fixture(scope="module")
def window_engines():
    return {
        mode: BERTScorer(num_layers=4, idf="auto", long_texts=mode, show_progress_bars=False)
        for mode in ("window", "truncate")
    }


def test_a_tail_past_the_window_counts_only_in_window_mode(window_engines):
    head = OVERLONG[0]  # 700 tokens: its first 512 are all the truncating scorer reads
    same, other = head + " " + LONG[2], head + " " + LONG[3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cut = _stack(window_engines["truncate"].score([same, same], [same, other]))
    whole = _stack(window_engines["window"].score([same, same], [same, other]))
    assert torch.equal(cut[:, 0], cut[:, 1])  # blind past the window
    assert torch.allclose(whole[:, 0], torch.ones(3), atol=1e-6)  # a text against itself
    assert (whole[:, 1] < 1 - 1e-3).all()  # the other tail is seen


def test_truncation_warns_only_in_truncate_mode_and_names_the_setting(window_engines):
    with pytest.warns(UserWarning, match="long_texts='window'"):
        window_engines["truncate"].score(OVERLONG, OVERLONG[::-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        window_engines["window"].score(OVERLONG, OVERLONG[::-1])


def _by_hand(scorer, text: str, ref: str, window: int):
    """P, R, F of ``text`` against ``ref`` from windows embedded one at a time here."""
    enc = scorer.encoder
    tok = enc.tokenizer

    def embed(ids):
        own = ids[1:-1]
        n, cap = len(own), window - 2
        if n <= cap:
            return enc.embed_packed([ids])
        wins = plan_windows(n, cap, MIN_OVERLAP)
        rows = [enc.embed_packed([[ids[0], *own[a:b], ids[-1]]]) for a, b in wins]
        out = [rows[0][0]]  # [CLS] from the first window
        for p in range(n):  # each token: the mean over the windows holding it, unit length
            held = [rows[j][1 + p - a] for j, (a, b) in enumerate(wins) if a <= p < b]
            mean = torch.stack(held).mean(dim=0)
            out.append(mean / mean.norm())
        out.append(rows[-1][-1])  # [SEP] from the last
        return torch.stack(out)

    from uqlm_bert.bertscore._fixed_idf import idf_for_tokenizer

    idf = idf_for_tokenizer(tok)
    special = {tok.cls_token_id, tok.sep_token_id}

    def weights(ids):
        w = torch.tensor([0.0 if i in special and i not in idf.weights else idf[i] for i in ids])
        return w / w.sum()

    ids_t = enc.tokenize([text], 10**6)[0]
    ids_r = enc.tokenize([ref], 10**6)[0]
    return greedy_match(embed(ids_t) @ embed(ids_r).T, weights(ids_t), weights(ids_r))


def test_a_long_pair_matches_embeddings_stitched_by_hand():
    scorer = BERTScorer(
        num_layers=3, idf="auto", max_length=64, long_texts="window", show_progress_bars=False
    )
    text, ref = LONG[3], LONG[4] + " " + SHORT[0]  # 250 and 400 words: several windows of 64
    expected = torch.stack(_by_hand(scorer, text, ref, 64))
    got = _stack(scorer.score([text, SHORT[1]], [ref, SHORT[2]]))[:, 0]
    assert torch.allclose(got, expected, atol=1e-5), (got, expected)


def test_tiled_matching_equals_the_whole_matrix():
    g = torch.Generator().manual_seed(0)
    c = torch.nn.functional.normalize(torch.randn(301, 16, generator=g), dim=-1)
    r = torch.nn.functional.normalize(torch.randn(97, 16, generator=g), dim=-1)
    wc, wr = torch.rand(301, generator=g), torch.rand(97, generator=g)
    wc, wr = wc / wc.sum(), wr / wr.sum()
    whole = torch.stack(greedy_match(c @ r.T, wc, wr))
    for budget in (1, 97, 1000, 10**6):  # one row at a time, ..., all at once
        assert torch.allclose(torch.stack(greedy_match_tiled(c, wc, r, wr, budget)), whole)


_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    from uqlm_bert import BERTScorer

    def peak_kib():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

    path, words = sys.argv[1], int(sys.argv[2])
    scorer = BERTScorer(model_type=path, num_layers=2, long_texts="window",
                        show_progress_bars=False)
    vocab = ["river", "mountain", "city", "history", "music", "science", "garden", "ocean"]
    def text(seed):
        return " ".join(vocab[(i * seed + i // 7) % len(vocab)] for i in range(words))
    answer, sample = text(3), text(5)
    scorer.score(["a warm-up"], ["text"])
    before = peak_kib()
    tokens = [len(scorer.encoder.tokenize([t], 10**6)[0]) for t in (answer, sample)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P, R, F = scorer.score([answer], [sample])
    print(json.dumps({"tokens": tokens, "grew_kib": peak_kib() - before, "F": F.tolist()}))
    """
)


@pytest.mark.slow
def test_a_20000_token_answer_is_scored_with_bounded_memory(tmp_path, embedded_model_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("reads the peak memory from /proc")
    tiny = build_tiny_bert(tmp_path / "tiny-bert", embedded_model_path)  # a window of 64 tokens
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(tiny), "20000"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    answer, sample = result["tokens"]
    assert answer >= 20_000 and sample >= 20_000
    # their float32 similarity matrix is 1.6 GB: matching it whole would grow the peak by that
    # much at least; windows, tiles and chunks keep it far below
    whole_matrix_kib = answer * sample * 4 // 1024
    assert result["grew_kib"] < whole_matrix_kib // 2, result
    assert 0 < result["F"][0] < 1
