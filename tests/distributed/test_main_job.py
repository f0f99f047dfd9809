"""The main job with its scoring on Ray: ``BlackBoxUQ(scoring="ray")`` against one process.

Generation runs here, against the scripted OpenAI-compatible server on 127.0.0.1 through a real
``ChatOpenAI``; the scoring runs on a pool of Ray actors of the local Ray this module starts (2
CPUs, 127.0.0.1 only) and shuts down at the end. Expected values come from scoring the same
texts in this process (``BlackBoxUQ.score``, or the command's local engine), never from the
pool's own output.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from fakes.openai_server import FakeOpenAIServer
from tests.helpers.company import REDUCED
from tests.helpers.deadline import deadline
from tests.helpers.scorers import LengthRatio
from tests.helpers.texts import passage
from tests.helpers.waiting import until
from uqlm_bert import BERTScoreSettings, BlackBoxUQ, ConfigurationError
from uqlm_bert.cli import main
from uqlm_bert.distributed import RayScoring
from uqlm_bert.generation._rounds import round_ends
from uqlm_bert.io._reading import read_table
from uqlm_bert.scorers import Scorer, register_scorer
from uqlm_bert.scorers import _registry as scorer_registry

#: the reference's dtype: one process and the pool give the same numbers
FLOAT32 = BERTScoreSettings(dtype="float32")

langchain_openai = pytest.importorskip("langchain_openai")

TOL = 1e-6


class Answers:
    """Each prompt's own LLM-answer sized texts: the answer, and a different text per sample,
    the same in every run (a function of the prompt and the choice's place)."""

    def choices(self, prompt: str, temperature: float | None, n: int) -> list[str]:
        seed = sum(map(ord, prompt)) * 1009 + len(prompt)
        if not temperature:
            return [passage(seed, 14 + seed % 17)]
        return [passage(seed + 1 + j, 12 + (seed + 5 * j) % 19) for j in range(n)]

    def __call__(self, prompt: str, temperature: float | None) -> str:
        return self.choices(prompt, temperature, 1)[0]


#: the scripted server's options in this module (the ``server`` fixture reads them)
SERVER_OPTIONS = {"default_latency": 0.02, "answer": Answers(), "request_queue_size": 1024}


class ShortAnswers(Answers):
    """One-sentence answers (4 to 11 words): the main job's size, at the scoring cost a test
    can afford twice (on the pool and in this process)."""

    def choices(self, prompt: str, temperature: float | None, n: int) -> list[str]:
        seed = sum(map(ord, prompt)) * 1009 + len(prompt)
        if not temperature:
            return [passage(seed, 4 + seed % 8)]
        return [passage(seed + 1 + j, 4 + (seed + 5 * j) % 8) for j in range(n)]


class PoisonScorer(Scorer):
    """Raises on a batch that holds the poisoned answer, scores 1.0 otherwise."""

    name = "poison"

    def score(self, responses, sampled_responses, show_progress_bars=False):
        if any(r is not None and "poison" in r for r in responses):
            raise ValueError("this scorer cannot read a poisoned answer")
        return np.ones(len(responses))


@pytest.fixture
def slow_length_ratio():
    """A scorer registered by name in this process only: the actors build it from its spec."""
    register_scorer(
        "slow_length_ratio", lambda: _named(LengthRatio(delay=0.5), "slow_length_ratio")
    )
    yield "slow_length_ratio"
    scorer_registry._REGISTRY.pop("slow_length_ratio", None)


def _named(scorer: Scorer, name: str) -> Scorer:
    scorer.name = name
    return scorer


def chat(server: FakeOpenAIServer):
    return langchain_openai.ChatOpenAI(
        model="fake-model", base_url=server.base_url, api_key="test-key", temperature=0.0
    )


def _assert_prompt_order(
    result, prompts: list[str], m: int, answers: Answers | None = None
) -> None:
    """Each prompt's own answer, and its own samples: the replies of the rounds it drew (a call
    per round, asking for the round's samples with ``n``; sampling until settled, the default,
    stops a prompt after any round)."""
    answers = answers or Answers()
    assert result.data["prompts"] == prompts
    assert result.data["responses"] == [answers(p, 0.0) for p in prompts]
    ends = round_ends(m)
    for p, samples in zip(prompts, result.data["sampled_responses"], strict=True):
        assert len(samples) in ends
        drawn = ends[: ends.index(len(samples)) + 1]
        sizes = [b - a for a, b in zip([0, *drawn], drawn, strict=False)]
        want = [text for size in sizes for text in answers.choices(p, 1.0, size)]
        assert sorted(samples) == sorted(want)


def _assert_one_process_scores(uq: BlackBoxUQ, result, names: list[str]) -> None:
    """The run's confidences are those of scoring its texts in this process."""
    alone = uq.score(
        result.data["responses"], result.data["sampled_responses"], prompts=result.data["prompts"]
    )
    for name in names:
        got, want = np.asarray(result.data[name]), np.asarray(alone.data[name])
        assert not np.isnan(want).any()
        np.testing.assert_allclose(got, want, rtol=0, atol=TOL, err_msg=name)


def _pool(uq: BlackBoxUQ):
    return uq._queues.place.pool


# -- without Ray running -------------------------------------------------------------------------


def test_scoring_names_where_and_is_checked_before_any_work():
    with pytest.raises(ConfigurationError, match="scoring must be 'local', 'ray' or a RayScoring"):
        BlackBoxUQ(scorers=["exact_match"], scoring="cluster")
    with pytest.raises(ConfigurationError, match="num_workers must be an int >= 1"):
        RayScoring(num_workers=0)
    with pytest.raises(ConfigurationError, match="address must be a string"):
        RayScoring(address=6379)
    assert RayScoring.of("ray") == RayScoring() and RayScoring.of("local") is None


def test_scoring_on_ray_without_ray_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    with pytest.raises(ConfigurationError, match=r"pip install 'uqlm-bert\[ray\]'"):
        BlackBoxUQ(scorers=["exact_match"], scoring="ray")


# -- on a local Ray ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.network
def test_a_few_hundred_prompts_get_the_scores_of_one_process_in_prompt_order(local_ray, server):
    prompts = [f"Tell me about item number {i}." for i in range(240)]
    names = ["bert_score", "length_ratio"]
    uq = BlackBoxUQ(
        chat(server),
        scorers=["bert_score", LengthRatio()],
        bertscore=FLOAT32,
        show_progress_bars=False,
        scoring=RayScoring(num_workers=2, batch_size=16),
    )
    with deadline(150), uq:
        result = uq.generate_and_score_sync(prompts, num_responses=3)
        _assert_prompt_order(result, prompts, 3)
        _assert_one_process_scores(uq, result, names)
        pool, queue = _pool(uq), next(iter(uq._queues))
        # batches of at most 16 prompts, several sent at once, every prompt once
        assert sum(queue.batch_sizes) == 240 and max(queue.batch_sizes) <= 16
        assert pool.peak_in_flight >= 2
        assert (pool.retried, pool.replaced) == (0, 0)
    # the session was open before: it is left open, and the pool's actors are gone
    assert local_ray.is_initialized() and pool.actors == []


@pytest.mark.ray
@pytest.mark.network
@pytest.mark.slow
def test_two_thousand_prompts_at_one_second_get_the_scores_of_one_process(local_ray):
    # the main job at its size: 2,000 prompts x 5 samples, each call answered after 1 s, the
    # scoring on 2 actors while generation goes on; float32, so one process gives the same
    prompts = [f"Tell me about item number {i}." for i in range(2000)]
    answers = ShortAnswers()
    with FakeOpenAIServer(default_latency=1.0, answer=answers, request_queue_size=4096) as srv:
        uq = BlackBoxUQ(
            chat(srv),
            bertscore=FLOAT32,
            show_progress_bars=False,
            scoring=RayScoring(num_workers=2),
        )
        with deadline(600), uq:
            result = uq.generate_and_score_sync(prompts, num_responses=5)
            _assert_prompt_order(result, prompts, 5, answers)
            _assert_one_process_scores(uq, result, ["bert_score"])
            # sampled until settled, each round scored on the actors: one process's numbers
            assert result.metadata["sampling"]["rule"] == "until_settled"
            queue = next(iter(uq._queues))
            assert sum(queue.batch_sizes) == 2000 and len(queue.batch_sizes) > 1


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.network
async def test_an_actor_killed_mid_run_loses_no_row(local_ray, server, slow_length_ratio):
    prompts = [f"Who is person {i}?" for i in range(120)]
    names = ["bert_score", slow_length_ratio]
    uq = BlackBoxUQ(
        chat(server),
        scorers=names,
        bertscore=FLOAT32,
        show_progress_bars=False,
        scoring=RayScoring(num_workers=2, batch_size=8),
    )
    with deadline(150), uq:
        task = asyncio.ensure_future(uq.generate_and_score(prompts, num_responses=2))
        pool = _pool(uq)
        # a batch has come back (the actors are up) and one is on its way on some actor
        await until(lambda: any(q.batch_sizes for q in uq._queues) and any(pool.in_flight()), 140)
        busy = pool.in_flight()
        victim = pool.actors[busy.index(max(busy))]
        local_ray.kill(victim)
        result = await task
        assert pool.retried >= 1 and pool.replaced >= 1
        assert victim not in pool.actors and len(pool.actors) == 2
        _assert_prompt_order(result, prompts, 2)
        _assert_one_process_scores(uq, result, names)
        assert result.metadata["failures"]["unscored_prompts"] == 0


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.network
async def test_a_failure_in_one_calls_rows_reaches_only_that_call(local_ray, server):
    uq = BlackBoxUQ(
        chat(server),
        scorers=[PoisonScorer()],
        show_progress_bars=False,
        scoring=RayScoring(num_workers=1),
    )
    calls = {name: [f"{name}-{i}" for i in range(4)] for name in ("a", "b", "c")}
    calls["poison"] = ["poison-0"]
    server.answer = lambda prompt, temperature: prompt  # the poisoned prompt's answer too
    with deadline(100), uq:
        outcome = await asyncio.gather(
            *(uq.generate_and_score(p, num_responses=2) for p in calls.values()),
            return_exceptions=True,
        )
    results = dict(zip(calls, outcome, strict=True))
    assert isinstance(results["poison"], ValueError)
    assert "cannot read a poisoned answer" in str(results["poison"])
    for name in ("a", "b", "c"):
        assert results[name].data["responses"] == calls[name]
        assert results[name].data["poison"] == [1.0] * 4
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.network
async def test_an_interrupted_run_resumes_from_its_checkpoint_with_the_ray_engine(
    local_ray, server, tmp_path
):
    """In bfloat16, the reduced dtype ``dtype="auto"`` picks on CPUs with bfloat16 units: the
    pool's confidences are one process's within that dtype's promised bound."""
    prompts = [f"k{i}" for i in range(30)]
    path = tmp_path / "run.jsonl"
    names = ["bert_score", "length_ratio"]

    def settings(**kwargs):
        return dict(
            scorers=["bert_score", LengthRatio()],
            bertscore=BERTScoreSettings(dtype="bfloat16"),
            **kwargs,
        )

    local = BlackBoxUQ(chat(server), show_progress_bars=False, **settings())
    clean = await local.generate_and_score(prompts, num_responses=2)
    server.default_latency = 0.05
    uq = BlackBoxUQ(
        chat(server),
        show_progress_bars=False,
        max_concurrency=2,
        **settings(scoring=RayScoring(num_workers=2, batch_size=4)),
    )
    with deadline(150), uq:
        task = asyncio.ensure_future(uq.generate_and_score(prompts, 2, checkpoint=path))
        await until(lambda: path.exists() and len(path.read_text().splitlines()) >= 20, 140)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        done = {(r["i"], r["slot"]) for r in map(json.loads, path.read_text().splitlines()[1:])}
        assert 19 <= len(done) < 90
        server.log.clear()
        uq.max_concurrency = None
        resumed = await uq.generate_and_score(prompts, 2, checkpoint=path)
    # no call for a slot the checkpoint holds, and the run of one process, uninterrupted
    asked = {(r.prompt, r.temperature) for r in server.log}
    assert all(((prompts[i], 0.0) in asked) == ((i, -1) not in done) for i in range(30))
    assert resumed.metadata["calls"]["from_checkpoint"] == len(done)
    for column in ("prompts", "responses", "sampled_responses"):
        assert resumed.data[column] == clean.data[column]
    for name in names:
        np.testing.assert_allclose(resumed.data[name], clean.data[name], rtol=0, atol=REDUCED)


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.network
def test_generate_and_score_with_engine_ray_writes_the_local_engines_table(
    local_ray, server, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("UQLM_BERT_TEST_KEY", "test-key")
    src = tmp_path / "prompts.txt"
    src.write_text("".join(f"What happened in year {1900 + i}?\n" for i in range(40)))
    outputs = {engine: tmp_path / f"{engine}.csv" for engine in ("local", "ray")}
    with deadline(150):
        for engine, out in outputs.items():
            argv = ["generate-and-score", src, "-o", out, "--model", "fake-model", "--base-url",
                    server.base_url, "--api-key-env", "UQLM_BERT_TEST_KEY", "-m", "3", "--dtype",
                    "float32", "--scorers", "bert_score,bert_score_recall", "--engine", engine,
                    "-q"]  # fmt: skip
            if engine == "ray":
                argv += ["--num-workers", "2"]
            assert main([str(a) for a in argv]) == 0
    capsys.readouterr()
    local, ray_table = (read_table(outputs[e]) for e in ("local", "ray"))
    assert list(ray_table.columns) == list(local.columns)
    assert len(local) == 40 and local["bert_score"].notna().all()
    for column in local.columns:
        if column.startswith("bert_score"):
            np.testing.assert_allclose(
                ray_table[column].astype(float), local[column].astype(float), rtol=0, atol=TOL
            )
        else:
            assert ray_table[column].tolist() == local[column].tolist(), column


def test_the_engine_options_need_engine_ray_on_generate_and_score(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UQLM_BERT_TEST_KEY", "test-key")
    src = tmp_path / "prompts.txt"
    src.write_text("hello\n")
    argv = ["generate-and-score", str(src), "-o", str(tmp_path / "out.csv"), "--model", "m",
            "--api-key-env", "UQLM_BERT_TEST_KEY", "--num-workers", "2"]  # fmt: skip
    assert main(argv) == 2
    assert "--address and --num-workers need --engine ray" in capsys.readouterr().err
    assert not Path(tmp_path / "out.csv").exists()
