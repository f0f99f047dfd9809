"""The notebooks run top to bottom offline, and show results tables and plots.

Each notebook is executed in a fresh kernel of this Python, as ``notebooks/build.py`` executes
it, with BERTScore on the embedded model: the screening notebook generates with the local LLM
(llama.cpp's server with the embedded SmolLM2, on 127.0.0.1), the filtering pipeline replays
``notebooks/data/trivia.jsonl``. The committed copies must hold the outputs of such a run.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import json
import sys

import pytest

from tests.conftest import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
NOTEBOOK_PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
EXPECTED = {"hallucination_screening.ipynb", "filtering_pipeline.ipynb"}
CELL_TIMEOUT_S = 180


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"notebooks_{name}", NOTEBOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the model's annotations through it
    spec.loader.exec_module(module)
    return module


def _outputs(nb) -> list[tuple[int, dict]]:
    return [(i, o) for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.outputs]


def _tables(nb) -> list[str]:
    return [
        o["data"]["text/html"]
        for _, o in _outputs(nb)
        if "text/html" in o.get("data", {}) and "<table" in o["data"]["text/html"]
    ]


def _images(nb) -> list[bytes]:
    return [
        base64.b64decode(o["data"]["image/png"])
        for _, o in _outputs(nb)
        if "image/png" in o.get("data", {})
    ]


def _check_image(png: bytes) -> None:
    import matplotlib.image as mpimg

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    image = mpimg.imread(io.BytesIO(png), format="png")
    assert image.shape[0] > 100 and image.shape[1] > 100
    assert float(image[..., :3].std()) > 0.05  # not a blank canvas


def _shape(nb) -> list[list[str]]:
    """Per code cell, the kinds of its outputs (stream name, or the richest MIME type)."""
    kinds = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        row = []
        for o in cell.outputs:
            if o.output_type == "stream":
                row.append(o.name)
            else:
                data = o.get("data", {})
                row.append(next((m for m in ("image/png", "text/html") if m in data), "text/plain"))
        kinds.append(row)
    return kinds


def test_both_walkthroughs_are_there():
    assert {p.name for p in NOTEBOOK_PATHS} >= EXPECTED


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.name)
def test_committed_notebook_holds_its_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), (
        "run notebooks/build.py: the committed notebook was not executed top to bottom"
    )
    assert not [o for _, o in _outputs(nb) if o.output_type == "error"]
    assert _tables(nb), "no results table in the outputs"
    images = _images(nb)
    assert images, "no plot in the outputs"
    for png in images:
        _check_image(png)
    build = _load("build")
    assert build.machine_paths_in(nb) == []


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.name)
def test_notebook_executes_offline(path):
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nbformat = pytest.importorskip("nbformat")
    build = _load("build")
    nb = build.execute(path, timeout=CELL_TIMEOUT_S)  # raises on the first failing cell
    assert not [o for _, o in _outputs(nb) if o.output_type == "error"]
    stderr = [o["text"] for _, o in _outputs(nb) if o.get("name") == "stderr"]
    assert not stderr, f"the notebook writes to stderr: {stderr}"
    assert _tables(nb) and _images(nb)
    for png in _images(nb):
        _check_image(png)
    assert build.machine_paths_in(nb) == []
    committed = nbformat.read(path, as_version=4)
    assert _shape(nb) == _shape(committed), "outputs changed: run notebooks/build.py"


# -- the replayed LLM --------------------------------------------------------------------------


def test_replay_model_hands_out_each_sample_once_across_copies(tmp_path):
    from langchain_core.messages import HumanMessage

    replay = _load("replay_llm")
    data = tmp_path / "run.jsonl"
    data.write_text(
        json.dumps({"prompt": "2+2?", "response": "4", "sampled_responses": ["four", "4."]}) + "\n",
        encoding="utf-8",
    )
    llm = replay.ReplayChatModel.from_jsonl(data)
    hot = llm.model_copy(update={"temperature": 1.0})
    assert llm.invoke("2+2?").content == "4"
    assert [hot.invoke("2+2?").content for _ in range(3)] == ["four", "4.", "four"]
    assert llm.temperature == 0.0
    reply = asyncio.run(llm.ainvoke([HumanMessage("2+2?")], temperature=0.7))
    assert reply.content == "4."
    with pytest.raises(replay.UnrecordedPromptError, match="no recorded answer"):
        llm.invoke("3+3?")


def test_replay_model_in_blackboxuq_keeps_failures_in_their_rows(tmp_path):
    from uqlm_bert import BlackBoxUQ

    replay = _load("replay_llm")
    rows = [
        {"prompt": "a?", "response": "Alpha.", "sampled_responses": ["Alpha.", "Alpha."]},
        {"prompt": "b?", "response": "Beta.", "sampled_responses": ["Beta.", "Gamma."]},
    ]
    data = tmp_path / "run.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    uq = BlackBoxUQ(replay.ReplayChatModel.from_jsonl(data), show_progress_bars=False)
    with pytest.warns(RuntimeWarning, match=r"^3 LLM call\(s\) failed for good"):
        result = uq.generate_and_score_sync(["a?", "missing?", "b?"], num_responses=2)
    df = result.to_df()
    assert df["response"].tolist() == ["Alpha.", None, "Beta."]
    assert df["sampled_responses"][0] == ["Alpha.", "Alpha."]
    assert sorted(df["sampled_responses"][2]) == ["Beta.", "Gamma."]
    assert df["bert_score"][0] == pytest.approx(1.0, abs=1e-6)
    assert df["bert_score"].isna().tolist() == [False, True, False]
    assert "UnrecordedPromptError" in df["error"][1]
