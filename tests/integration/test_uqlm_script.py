"""A uqlm user's script, as the migration page shows it, runs against this package unchanged
but for the import, through ChatOpenAI and the loopback server."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from fakes.openai_server import FakeOpenAIServer
from tests.conftest import REPO_ROOT

MIGRATION = REPO_ROOT / "docs" / "migration.md"


def _uqlm_block() -> str:
    text = MIGRATION.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (block,) = [b for b in blocks if "from uqlm import" in b]
    return block


@pytest.mark.network
def test_the_uqlm_script_of_the_migration_page_runs_here(monkeypatch):
    code = _uqlm_block().replace("from uqlm import BlackBoxUQ", "from uqlm_bert import BlackBoxUQ")
    assert "from uqlm_bert import BlackBoxUQ" in code
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "migration-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        namespace: dict = {}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(MIGRATION), "exec"), namespace)  # noqa: S102
        calls = len(server.log)
    results = namespace["results"]
    df = namespace["df"]
    assert calls == 2  # one call for the answer, one for the five samples (n)
    assert list(df.columns[:6]) == ["prompt_index", "prompt", "response", "sampled_responses",
                                    "bert_score", "cosine_sim"]  # fmt: skip
    assert 0.0 < df["bert_score"][0] <= 1.0 and 0.0 < df["cosine_sim"][0] <= 1.0
    as_dict = results.to_dict()
    assert as_dict["metadata"]["num_responses"] == 5
    assert as_dict["data"]["prompts"] == ["What is the capital of Peru?"]
    assert out.getvalue().strip().endswith("5")


@pytest.mark.network
async def test_uqlm_async_methods_by_their_uqlm_names():
    from langchain_openai import ChatOpenAI

    from uqlm_bert import BlackBoxUQ

    with FakeOpenAIServer() as server:
        llm = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", temperature=0.0)
        bbuq = BlackBoxUQ(llm=llm, scorers=["exact_match"], use_best=False, verbose=False)
        responses = await bbuq.generate_original_responses(["q1", "q2"])
        samples = await bbuq.generate_candidate_responses(["q1", "q2"], num_responses=2)
        result = bbuq.score(responses=responses, sampled_responses=samples)
    assert len(responses) == 2 and [len(s) for s in samples] == [2, 2]
    assert result.to_df()["exact_match"].notna().all()
