"""Loading any model through the real code path: tiny models the tests build, layers, devices."""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.helpers.reference import scored_alone as _ref_alone
from tests.helpers.reference import stack as _stack
from tests.helpers.spies import spy
from tests.helpers.texts import LONG, SHORT
from tests.helpers.tiny_models import build_tiny_roberta
from uqlm_bert import BERTScorer, ConfigurationError, ModelLoadError
from uqlm_bert.bertscore import MODEL_LAYERS, compute_baseline
from uqlm_bert.bertscore._baseline import read_baseline
from uqlm_bert.bertscore._loading import resolve_device
from uqlm_bert.bertscore._settings import BERTScoreSettings

bert_score = pytest.importorskip("bert_score")
TOL = 1e-5


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory) -> str:
    return str(build_tiny_roberta(tmp_path_factory.mktemp("tiny") / "tiny-roberta"))


def test_published_layer_table():
    # the published choices named in the design
    assert MODEL_LAYERS["roberta-large"] == 17
    assert MODEL_LAYERS["bert-base-uncased"] == 9
    assert MODEL_LAYERS["microsoft/deberta-xlarge-mnli"] == 40
    assert MODEL_LAYERS["distilbert-base-uncased"] == 5
    # and the reference's whole table
    from bert_score.utils import model2layers

    for name, layer in model2layers.items():
        assert MODEL_LAYERS[name] == layer


def test_unknown_model_without_layer_uses_last_layer_with_warning(tiny_bert):
    with pytest.warns(UserWarning, match="no published default layer"):
        scorer = BERTScorer(model_type=tiny_bert, show_progress_bars=False)
    assert scorer.num_layers == 3


@pytest.mark.slow
def test_local_bert_matches_reference_at_each_layer(tiny_bert):
    cands, refs = SHORT[:8], SHORT[8:16]
    for layer in (0, 1, 3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = bert_score.BERTScorer(model_type=tiny_bert, num_layers=layer)
        ours = BERTScorer(model_type=tiny_bert, num_layers=layer, show_progress_bars=False)
        assert torch.allclose(
            _stack(ours.score(cands, refs)), _ref_alone(ref, cands, refs), atol=TOL, rtol=0
        )


@pytest.mark.slow
def test_roberta_gets_a_leading_space_and_otherwise_matches_reference(tiny_roberta):
    from transformers import AutoTokenizer

    ours = BERTScorer(model_type=tiny_roberta, num_layers=2, show_progress_bars=False)
    prefixed = AutoTokenizer.from_pretrained(tiny_roberta, add_prefix_space=True)
    plain = AutoTokenizer.from_pretrained(tiny_roberta)
    text = "hello world"
    assert ours.encoder.tokenize([text])[0] == prefixed(text)["input_ids"]
    assert ours.encoder.tokenize([text])[0] == plain(" " + text)["input_ids"]
    # The reference asks for the leading space with encode(add_prefix_space=True), a keyword that
    # transformers 5 ignores; given a tokenizer built with the space it scores exactly like us.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = bert_score.BERTScorer(model_type=tiny_roberta, num_layers=2)
    ref._tokenizer = prefixed
    cands, refs = SHORT[:6], SHORT[6:12]
    assert torch.allclose(
        _stack(ours.score(cands, refs)), _ref_alone(ref, cands, refs), atol=TOL, rtol=0
    )


def test_overlong_text_truncated_to_position_limit(tiny_roberta):
    ours = BERTScorer(model_type=tiny_roberta, num_layers=1, show_progress_bars=False)
    assert ours.encoder.max_length == 128
    with pytest.warns(UserWarning, match="truncated"):
        P, R, F = ours.score([LONG[-1]], [LONG[-2]])
    assert torch.isfinite(F).all()


def test_max_length_option(tiny_bert):
    ours = BERTScorer(model_type=tiny_bert, num_layers=1, max_length=8, show_progress_bars=False)
    assert all(len(ids) <= 8 for ids in ours.encoder.tokenize(LONG))
    with pytest.raises(ConfigurationError, match="longer than the model accepts"):
        BERTScorer(model_type=tiny_bert, num_layers=1, max_length=10_000)


def test_layer_out_of_range(tiny_bert):
    with pytest.raises(ConfigurationError, match="out of range"):
        BERTScorer(model_type=tiny_bert, num_layers=4)
    with pytest.raises(ConfigurationError, match="num_layers"):
        BERTScorer(model_type=tiny_bert, num_layers=-1)


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="could not load model"):
        BERTScorer(model_type=str(tmp_path / "no-such-model"), num_layers=1)


def test_bad_device_and_dtype():
    with pytest.raises(ConfigurationError, match="device"):
        BERTScorer(device="tpu-of-dreams")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigurationError, match="CUDA"):
            BERTScorer(device="cuda")
        with pytest.raises(ConfigurationError, match="float16"):
            BERTScorer(device="cpu", dtype="float16")
    with pytest.raises(ConfigurationError, match="dtype"):
        BERTScorer(dtype="int8")


def test_device_auto_choice_order():
    dev = resolve_device(None)
    if torch.cuda.is_available():
        assert dev.type == "cuda"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        assert dev.type == "mps"
    else:
        assert dev.type == "cpu"


def _accelerators():
    out = []
    if torch.cuda.is_available():
        out.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        out.append("mps")
    return out or [pytest.param("none", marks=pytest.mark.skip(reason="no CUDA or MPS device"))]


@pytest.mark.gpu
@pytest.mark.parametrize("device", _accelerators())
def test_accelerator_matches_cpu(device):
    cands, refs = SHORT + LONG, LONG + SHORT
    cpu = _stack(BERTScorer(device="cpu", show_progress_bars=False).score(cands, refs))
    acc = _stack(BERTScorer(device=device, show_progress_bars=False).score(cands, refs))
    assert torch.allclose(acc, cpu, atol=1e-4, rtol=0)


@pytest.mark.slow
def test_compute_baseline_writes_reference_format(tmp_path, tiny_bert):
    corpus = SHORT + LONG
    path = tmp_path / "tiny.tsv"
    table = compute_baseline(
        corpus, model_type=tiny_bert, num_pairs=40, path=path, show_progress_bars=False
    )
    assert list(table["LAYER"]) == [0, 1, 2, 3]
    # each row is the mean score of the sampled pairs at that layer: recompute layer 2
    import random

    distinct = sorted({s for s in corpus if s.strip()})
    rng = random.Random(0)
    pairs = [rng.sample(distinct, 2) for _ in range(40)]
    P, R, F = BERTScorer(model_type=tiny_bert, num_layers=2, show_progress_bars=False).score(
        [a for a, _ in pairs], [b for _, b in pairs]
    )
    assert read_baseline(path, 2) == pytest.approx(
        [float(P.mean()), float(R.mean()), float(F.mean())], abs=1e-6
    )
    # and the file drives rescaling: a pair scoring exactly the baseline rescales to 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = bert_score.BERTScorer(
            model_type=tiny_bert,
            num_layers=2,
            lang="en",
            rescale_with_baseline=True,
            baseline_path=str(path),
        )
    ours = BERTScorer(
        model_type=tiny_bert,
        num_layers=2,
        rescale_with_baseline=True,
        baseline_path=path,
        show_progress_bars=False,
    )
    cands, refs = SHORT[:5], SHORT[5:10]
    assert torch.allclose(
        _stack(ours.score(cands, refs)), _ref_alone(ref, cands, refs), atol=TOL, rtol=0
    )


def _transformers_states(enc, ids: list[list[int]]) -> list[torch.Tensor]:
    """Each text's last-layer states from the model's own (transformers) forward, one text at a
    time: no padding, nothing of ours."""
    with torch.inference_mode():
        return [enc.model(torch.tensor([i]))[0][0] for i in ids]


@pytest.mark.slow
def test_packed_forward_equals_transformers_forward(tiny_bert, tiny_roberta, embedded_model_path):
    """The packed pass (BERT/RoBERTa) gives the transformers forward's hidden states."""
    from uqlm_bert.bertscore._loading import load_encoder

    texts = SHORT + LONG[:2]
    for location, layers in ((None, 6), (tiny_bert, 2), (tiny_roberta, 3)):
        enc = load_encoder(BERTScoreSettings(model_type=location, num_layers=layers, device="cpu"))
        assert enc.loaded.packed is not None
        ids = enc.tokenize(texts)
        packed = enc.embed_packed(ids, normalize=False).split([len(i) for i in ids])
        for a, b in zip(packed, _transformers_states(enc, ids), strict=True):
            assert a.shape == b.shape
            assert torch.allclose(a, b, atol=1e-4, rtol=1e-4)
        unit = enc.embed_packed(ids)
        assert torch.allclose(unit.norm(dim=-1), torch.ones(len(unit)), atol=1e-6)


@pytest.mark.slow
def test_packed_workspace_reuse_across_batches_changes_nothing(embedded_model_path):
    """Batches that share one workspace (growing, shrinking, with and without padding, widths on
    and off a multiple of 16) give the same states as batches that each allocate their own."""
    from uqlm_bert.bertscore._loading import load_encoder

    enc = load_encoder(BERTScoreSettings(num_layers=6, device="cpu"))
    ids = enc.tokenize(SHORT + LONG[:3])
    same_length = [ids[0], list(ids[0])]  # no padding at all
    batches = [ids[:3], ids[3:], ids[:2], same_length, [ids[-1]], ids]
    fresh = [enc.embed_packed(b) for b in batches]
    with enc.reuse_workspace():
        shared = [enc.embed_packed(b) for b in batches]
        assert enc.loaded.packed._local.buffer is not None
    assert enc.loaded.packed._local.buffer is None  # freed on leaving the block
    for a, b in zip(fresh, shared, strict=True):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_a_big_bfloat16_batch_gives_the_same_states_on_rounded_rows(embedded_model_path):
    """On the CPU in bfloat16, a batch of at least 16,384 tokens runs its row-wise steps on a
    multiple of 256 rows (spare rows, dropped at the end): each token's states are the ones the
    exact row count gives, and only the tokens' rows come back."""
    from uqlm_bert.bertscore import _packed_forward as packed_module
    from uqlm_bert.bertscore._loading import load_encoder

    enc = load_encoder(BERTScoreSettings(num_layers=2, device="cpu", dtype="bfloat16"))
    packed = enc.loaded.packed
    assert packed.round_rows
    ids = enc.tokenize(LONG)
    batch: list[list[int]] = []
    while sum(map(len, batch)) < packed_module._ROW_ROUNDING_FROM:
        batch.append(ids[len(batch) % len(ids)][: 20 + 7 * len(batch) % 150])
    if sum(map(len, batch)) % packed_module._ROW_MULTIPLE == 0:
        batch.append(ids[0][:5])
    tokens = sum(map(len, batch))
    assert tokens >= packed_module._ROW_ROUNDING_FROM and tokens % packed_module._ROW_MULTIPLE
    rounded = packed(batch, all_layers=True)
    packed.round_rows = False
    try:
        exact = packed(batch, all_layers=True)
    finally:
        packed.round_rows = True
    for a, b in zip(rounded, exact, strict=True):
        assert a.shape == (tokens, enc.hidden_size)
        assert torch.equal(a, b)


def test_embedded_model_by_path_is_the_embedded_model(embedded_model_path, tiny_bert):
    """Naming the embedded model by its directory gives the same model, layer and baseline as
    model_type=None, whichever is loaded first; other models never share its cache entry."""
    from uqlm_bert.bertscore import clear_model_cache
    from uqlm_bert.bertscore._known_models import EMBEDDED_MODEL_NAME

    clear_model_cache()
    by_path = BERTScorer(model_type=embedded_model_path, show_progress_bars=False)
    default = BERTScorer(show_progress_bars=False)
    assert by_path.model_type == default.model_type == EMBEDDED_MODEL_NAME
    assert by_path.num_layers == default.num_layers == MODEL_LAYERS[EMBEDDED_MODEL_NAME]
    with pytest.warns(UserWarning, match="no published default layer"):
        other = BERTScorer(model_type=tiny_bert, show_progress_bars=False)
    assert other.num_layers == 3 and default.num_layers == MODEL_LAYERS[EMBEDDED_MODEL_NAME]


# --- the one model cache ----------------------------------------------------------------------


@pytest.mark.slow
def test_clearing_the_cache_frees_a_model_nothing_else_holds():
    import gc
    import weakref

    from uqlm_bert.bertscore import clear_model_cache
    from uqlm_bert.scorers._registry import build_scorer

    clear_model_cache()
    scorer = build_scorer("bert_score", num_layers=2, device="cpu")
    scorer.score(["Paris is in France."], [["Paris is a French city."]])
    model = weakref.ref(scorer.engine.encoder.model)
    del scorer
    gc.collect()
    assert model() is not None  # still cached: the next scorer reuses it
    clear_model_cache()
    gc.collect()
    assert model() is None


@pytest.mark.slow
def test_scoring_keeps_no_reference_to_the_texts():
    import sys

    from uqlm_bert.scorers import build_scorers
    from uqlm_bert.scorers._base import score_all

    scorers = build_scorers(["bert_score", "bert_score_precision", "rouge_l"])
    text = "A text no other test uses: " + "x" * 50
    before = sys.getrefcount(text)
    score_all(scorers, [text], [[text + " and more"]])
    assert sys.getrefcount(text) == before


def test_a_model_and_its_tokenizer_load_once_for_every_scorer_that_uses_them(monkeypatch):
    from uqlm_bert.bertscore import _loading as models
    from uqlm_bert.bertscore import clear_model_cache
    from uqlm_bert.scorers import build_scorers

    clear_model_cache()
    calls = spy(monkeypatch, models, "_load_model")
    first = build_scorers(["bert_score", "bert_score_recall"], device="cpu")
    second = build_scorers(["bert_score"], device="cpu")
    assert [found.layers for (found, _), _ in calls] == [
        MODEL_LAYERS["sentence-transformers/all-MiniLM-L6-v2"]
    ]
    assert first[0].engine.encoder.model is second[0].engine.encoder.model


def test_lang_selects_the_model_as_the_reference_does():
    from uqlm_bert.bertscore._loading import resolve_model

    assert resolve_model(None, "zh") == ("bert-base-chinese", "bert-base-chinese")
    assert resolve_model(None, "de")[0] == "bert-base-multilingual-cased"
    assert resolve_model(None, "en")[0] == "sentence-transformers/all-MiniLM-L6-v2"
    # offline, a model that is not in the cache is a clear error naming it (not the English one)
    with pytest.raises(ModelLoadError, match="bert-base-chinese"):
        BERTScorer(lang="zh", show_progress_bars=False)


@pytest.mark.slow
def test_compute_baseline_loads_the_model_once_for_every_layer(tmp_path, tiny_bert, monkeypatch):
    from uqlm_bert.bertscore import _loading as models

    calls = spy(monkeypatch, models, "_load_model")
    models.clear_model_cache()
    table = compute_baseline(SHORT + LONG, model_type=tiny_bert, num_pairs=10,
                             show_progress_bars=False)  # fmt: skip
    assert list(table["LAYER"]) == [0, 1, 2, 3] and [found.layers for (found, _), _ in calls] == [3]


def test_idf_over_a_run_for_ray_needs_only_the_tokenizer(monkeypatch):
    from uqlm_bert.bertscore import _loading as models
    from uqlm_bert.distributed._files import _run_wide_idf
    from uqlm_bert.scorers._registry import scorer_settings

    def no_weights(*args, **kwargs):
        raise AssertionError("the model's weights were loaded")

    monkeypatch.setattr(models, "_load_model", no_weights)
    settings = scorer_settings(["bert_score"], idf=True)
    run = _run_wide_idf(settings, ["a cat", "a dog"], [["a cat sat", None], ["the dog"]])
    assert isinstance(run["bertscore"].idf, dict) and len(run["bertscore"].idf) > 3
