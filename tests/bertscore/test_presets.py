"""Presets: ``model_type="accurate"`` and ``"fast"``, where their models are found, and the error
that says how to provide the accurate one when it cannot be had.

No test here reaches the network: the Hugging Face cache is a temporary folder, offline mode is
on or the download is replaced by one that fails. Tests that load all-mpnet-base-v2 itself skip
without a local copy (see ``conftest.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.helpers.texts import SHORT
from tests.helpers.tiny_models import build_tiny_mpnet
from uqlm_bert import (
    BERTScorer,
    BERTScoreSettings,
    BlackBoxUQ,
    ModelLoadError,
    ModelUnavailableError,
)
from uqlm_bert.bertscore import _fixed_idf as fixed_idf
from uqlm_bert.bertscore._known_models import (
    ACCURATE_MODEL_NAME,
    EMBEDDED_MODEL_NAME,
    MODEL_LAYERS,
    known_name,
)
from uqlm_bert.bertscore._presets import PRESETS, cached_copy, preset_location
from uqlm_bert.bertscore._resolve import resolve_model
from uqlm_bert.cli import main
from uqlm_bert.scorers._registry import build_scorer

REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty Hugging Face cache in place of the machine's."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def _put_in_cache(cache: Path, model: str, files_from: Path) -> Path:
    """Lay a copy out as the Hugging Face cache does: a snapshot folder under the model's name,
    named by a revision that refs/main points at."""
    repo = cache / ("models--" + model.replace("/", "--"))
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    for f in files_from.iterdir():
        if f.is_file():
            (snapshot / f.name).symlink_to(f.resolve())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return snapshot


def _no_download(monkeypatch) -> list[str]:
    """Replace the download by one that fails as an unreachable hub does; the calls are kept."""
    import huggingface_hub

    calls: list[str] = []

    def refuse(repo_id, **kwargs):
        calls.append(repo_id)
        raise ConnectionError("the hub cannot be reached")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    return calls


def test_the_presets_name_their_models_at_their_measured_layers():
    assert PRESETS["accurate"].model == ACCURATE_MODEL_NAME
    assert PRESETS["accurate"].layer == MODEL_LAYERS[ACCURATE_MODEL_NAME] == 11
    assert PRESETS["fast"].model == EMBEDDED_MODEL_NAME
    assert PRESETS["fast"].layer == MODEL_LAYERS[EMBEDDED_MODEL_NAME] == 5


def test_the_fast_preset_is_the_embedded_default():
    assert resolve_model("fast") == resolve_model(None)
    fast = BERTScorer(model_type="fast", idf="auto", show_progress_bars=False)
    default = BERTScorer(idf="auto", show_progress_bars=False)
    assert (fast.model_type, fast.num_layers) == (EMBEDDED_MODEL_NAME, 5)
    cands, refs = SHORT[:6], SHORT[6:12]
    for a, b in zip(fast.score(cands, refs), default.score(cands, refs), strict=True):
        assert torch.equal(a, b)


def test_offline_without_a_copy_the_accurate_preset_says_how_to_provide_one(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    calls = _no_download(monkeypatch)
    for make in (
        lambda: BERTScorer(model_type="accurate"),
        lambda: build_scorer("bert_score", model_type="accurate"),
        lambda: BlackBoxUQ(
            scorers=["bert_score"], bertscore=BERTScoreSettings(model_type="accurate")
        ),
    ):
        with pytest.raises(ModelUnavailableError) as caught:
            make()
        message = str(caught.value)
        assert ACCURATE_MODEL_NAME in message and "offline mode is on" in message
        assert f"huggingface-cli download {ACCURATE_MODEL_NAME}" in message
        assert "'all-mpnet-base-v2'" in message and "model_type" in message
        assert isinstance(caught.value, ModelLoadError)  # what a caller of any model catches
    assert calls == []  # offline: no download tried


def test_the_command_reports_the_missing_accurate_model(hub_cache, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _no_download(monkeypatch)
    src = tmp_path / "answers.jsonl"
    src.write_text(json.dumps({"response": "Lima", "sampled_responses": ["Lima"]}) + "\n")
    args = ["score", str(src), "-o", str(tmp_path / "out.jsonl"), "--model-type", "accurate"]
    assert main([*args, "-q"]) != 0
    err = capsys.readouterr().err
    assert "huggingface-cli download" in err and ACCURATE_MODEL_NAME in err
    assert not (tmp_path / "out.jsonl").exists()


def test_online_a_failed_download_gives_the_same_typed_error(hub_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    calls = _no_download(monkeypatch)
    with pytest.raises(ModelUnavailableError, match="the download failed") as caught:
        preset_location("accurate")
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert calls == [ACCURATE_MODEL_NAME]


def test_the_accurate_preset_is_found_in_the_hugging_face_cache_offline(
    hub_cache, monkeypatch, tmp_path, embedded_model_path
):
    """Under its hub name in the cache, a copy is found with no network: the lookup checks the
    files, not the weights' values, so a tiny model laid out there stands in for it."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _no_download(monkeypatch)
    tiny = build_tiny_mpnet(tmp_path / "tiny", embedded_model_path)
    snapshot = _put_in_cache(hub_cache, ACCURATE_MODEL_NAME, tiny)
    assert cached_copy(ACCURATE_MODEL_NAME) == str(snapshot)
    assert resolve_model("accurate") == (ACCURATE_MODEL_NAME, str(snapshot))
    # a snapshot folder given as a path is known by its hub name too
    assert resolve_model(str(snapshot))[0] == ACCURATE_MODEL_NAME


def test_a_copy_without_weights_is_not_a_copy(
    hub_cache, monkeypatch, tmp_path, embedded_model_path
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny = build_tiny_mpnet(tmp_path / "tiny", embedded_model_path)
    (tiny / "model.safetensors").unlink()
    _put_in_cache(hub_cache, ACCURATE_MODEL_NAME, tiny)
    assert cached_copy(ACCURATE_MODEL_NAME) is None
    with pytest.raises(ModelUnavailableError):
        resolve_model("accurate")


def test_local_copies_are_known_by_their_path():
    name = ACCURATE_MODEL_NAME
    assert known_name("/models/all-mpnet-base-v2") == name
    assert known_name("/models/all-mpnet-base-v2/") == name
    assert known_name(f"/c/models--sentence-transformers--all-mpnet-base-v2/snapshots/{REVISION}")
    assert known_name("/m/models--someone--all-mpnet-base-v2/snapshots/x") is None
    assert known_name("/models/FacebookAI/roberta-large") == "roberta-large"
    assert known_name("/models/sentence-transformers/all-mpnet-base-v2") == name
    assert known_name("/models/mpnet") is None


# -- with all-mpnet-base-v2 on the machine ---------------------------------------------------------


def test_the_shipped_idf_table_of_the_accurate_model_is_what_the_word_table_builds(
    accurate_model_dir, monkeypatch
):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(accurate_model_dir)
    key, shipped = fixed_idf.read_token_table(fixed_idf.ACCURATE_TABLE)
    assert key == fixed_idf.tokenizer_key(tok)
    assert shipped == fixed_idf.build_idf(tok)
    # and the scorer takes it from the package, building nothing
    monkeypatch.setattr(fixed_idf, "_MEMO", {})
    monkeypatch.setattr(fixed_idf, "_cached_or_built", lambda *a: pytest.fail("built"))
    assert fixed_idf.idf_for_tokenizer(tok) == shipped


def test_black_box_uq_at_the_accurate_preset(accurate_model_dir, hub_cache, monkeypatch):
    """One word: the model from the cache, its measured layer, its shipped idf table, the
    scorers' dtype; the same numbers as the model named by its directory."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _put_in_cache(hub_cache, ACCURATE_MODEL_NAME, Path(accurate_model_dir))
    uq = BlackBoxUQ(
        scorers=["bert_score"],
        bertscore=BERTScoreSettings(model_type="accurate"),
        show_progress_bars=False,
    )
    engine = uq.scorers[0].engine
    assert (engine.model_type, engine.num_layers) == (ACCURATE_MODEL_NAME, 11)
    assert engine.settings.idf == "auto" and engine.settings.dtype == "auto"
    _, shipped = fixed_idf.read_token_table(fixed_idf.ACCURATE_TABLE)
    assert engine._idf_weights == shipped
    by_path = BlackBoxUQ(
        scorers=["bert_score"],
        bertscore=BERTScoreSettings(model_type=accurate_model_dir),
        show_progress_bars=False,
    )
    responses, samples = SHORT[:3], [SHORT[3:6], SHORT[6:9], SHORT[9:12]]
    got = uq.score(responses, samples).data["bert_score"]
    assert got == by_path.score(responses, samples).data["bert_score"]
