"""Every public parameter that takes a count refuses a bool, with a message that names it.

Python says ``True == 1``, so a bool slips through any check that only asks for an int: the
package checks counts with :func:`uqlm_bert._checks.check_int`, which refuses it. The parameters
are found, not listed by hand: every parameter of the public API (the modules ``test_api``
pins) annotated as an int. Each one needs a call below that passes it ``True``; a new int
parameter without one fails :func:`test_every_public_int_parameter_is_covered`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.helpers.scripted_chat import ScriptedChatModel
from tests.test_api import PUBLIC
from uqlm_bert import UQLMBertError

#: An annotation that says the parameter takes a count.
INT_ANNOTATION = re.compile(r"^int( \| (None|Sequence\[float\]))?( \| NotGiven)?$")

#: Int parameters the package passes from its own counters or from a checked settings object,
#: or fields of records it builds and hands back: not values a user gives.
NOT_GIVEN_BY_USERS = {
    # one answer of a result, as UQResult.answer() builds it
    "uqlm_bert.results._answers.Answer.prompt_index",
    # the retry policy's and the checkpoint's own counters, passed by the generator
    "uqlm_bert.generation._backoff.RetryPolicy.delay.retry_index",
    "uqlm_bert.generation._checkpoint.Checkpoint.write.index",
    "uqlm_bert.generation._checkpoint.Checkpoint.write.slot",
    "uqlm_bert.generation._checkpoint.Checkpoint.write_stop.index",
    "uqlm_bert.generation._checkpoint.Checkpoint.write_stop.drawn",
    *(
        f"uqlm_bert.results._failures.Failures.{name}"
        for name in ("responses", "samples", "prompts_with_failures", "failed_prompts")
    ),
    # a failed call, as the generator records it
    "uqlm_bert.generation._records.CallFailure.attempts",
    "uqlm_bert.generation._records.CallFailure.status_code",
}


def _callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    seen: set[str] = set()
    for module_name, names in PUBLIC.items():
        module = importlib.import_module(module_name)
        for name in names:
            obj = getattr(module, name)
            found: list[tuple[str, Any]] = []
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            if inspect.isclass(obj):
                found.append((f"{obj.__module__}.{obj.__qualname__}", obj))
                # its own methods, and those it takes from the package's own classes
                own = [c for c in obj.__mro__ if c.__module__.startswith("uqlm_bert")]
                for cls in own:
                    for attr, value in vars(cls).items():
                        if isinstance(value, (classmethod, staticmethod)):
                            value = value.__func__
                        if inspect.isfunction(value) and not attr.startswith("_"):
                            found.append((f"{cls.__module__}.{cls.__qualname__}.{attr}", value))
            elif inspect.isfunction(obj):
                found.append((f"{obj.__module__}.{obj.__qualname__}", obj))
            for qualname, fn in found:
                if qualname not in seen:
                    seen.add(qualname)
                    yield qualname, fn


def public_int_parameters() -> set[str]:
    found = set()
    for qualname, fn in _callables():
        for parameter in inspect.signature(fn).parameters.values():
            if INT_ANNOTATION.match(str(parameter.annotation)):
                found.add(f"{qualname}.{parameter.name}")
    return found


# -- one call per parameter, passing True ----------------------------------------------------------


def _black_box(**kwargs: Any) -> Any:
    from uqlm_bert import BlackBoxUQ

    return BlackBoxUQ(scorers=["exact_match"], show_progress_bars=False, **kwargs)


def _black_box_bert(**kwargs: Any) -> Any:
    from uqlm_bert import BlackBoxUQ

    return BlackBoxUQ(scorers=["bert_score"], show_progress_bars=False, **kwargs)


def _scoring(**kwargs: Any) -> Any:
    from uqlm_bert import ScoringSettings

    return ScoringSettings(**kwargs)


def _run(method: str, value: Any) -> Any:
    from uqlm_bert import BlackBoxUQ

    uq = BlackBoxUQ(llm=ScriptedChatModel(), scorers=["exact_match"], show_progress_bars=False)
    call = getattr(uq, method)(["q"], num_responses=value)
    return asyncio.run(call) if inspect.iscoroutine(call) else call


def _generation(**kwargs: Any) -> Any:
    from uqlm_bert import GenerationSettings

    return GenerationSettings(**kwargs)


def _bertscore_settings(**kwargs: Any) -> Any:
    from uqlm_bert import BERTScoreSettings

    return BERTScoreSettings(**kwargs)


def _bert_scorer(**kwargs: Any) -> Any:
    from uqlm_bert import BERTScorer

    return BERTScorer(**kwargs)


def _scorers(name: str, **kwargs: Any) -> Any:
    from uqlm_bert.scorers import build_scorers

    return build_scorers([name], **kwargs)


def _cosine_settings(**kwargs: Any) -> Any:
    from uqlm_bert.scorers import CosineSettings

    return CosineSettings(**kwargs)


def _reliability(fn: str, value: Any) -> Any:
    from uqlm_bert import evaluation

    return getattr(evaluation, fn)([0.2, 0.8], [0, 1], n_bins=value)


def _plot(fn: str, **kwargs: Any) -> Any:
    pytest.importorskip("matplotlib")
    from uqlm_bert import plots

    return getattr(plots, fn)([0.2, 0.8], [0, 1], **kwargs)


def _plan(**kwargs: Any) -> Any:
    from uqlm_bert.distributed._dataset import plan_workers

    return plan_workers({"CPU": 4.0}, **kwargs)


def _score_file(tmp_path: Any, **kwargs: Any) -> Any:
    from uqlm_bert.distributed import score_file

    source = tmp_path / "in.jsonl"
    source.write_text('{"response": "a", "sampled_responses": ["a"]}\n', encoding="utf-8")
    return score_file(source, tmp_path / "out.jsonl", scorers=["exact_match"], **kwargs)


def _score_dataset(**kwargs: Any) -> Any:
    from uqlm_bert.distributed import score_dataset

    return score_dataset(None, scorers=["exact_match"], **kwargs)


def _failure_lines(value: Any) -> Any:
    from uqlm_bert.results._failures import Failures

    return Failures.of([], []).lines(str, shown=value)


def _pool(**kwargs: Any) -> Any:
    from uqlm_bert.distributed._dataset import PoolSettings

    return PoolSettings(**kwargs)


def _ray_scoring(**kwargs: Any) -> Any:
    from uqlm_bert.distributed import RayScoring

    return RayScoring(**kwargs)


def _score_batch(value: Any) -> Any:
    from uqlm_bert.distributed import ScoreBatch

    return ScoreBatch(scorers=["exact_match"], num_threads=value)


def _generator() -> Any:
    from uqlm_bert.generation._generator import ResponseGenerator
    from uqlm_bert.generation._settings import GenerationSettings

    return ResponseGenerator(ScriptedChatModel(), GenerationSettings())


def _generate(value: Any) -> Any:
    return asyncio.run(_generator().generate(["q"], num_responses=value, show_progress_bars=False))


def _save_checkpoint(value: Any, tmp_path: Any) -> Any:
    generator = _generator()
    result = asyncio.run(generator.generate(["q"], num_responses=1, show_progress_bars=False))
    return generator.save_checkpoint(result, tmp_path / "answers.jsonl", value)


def _limits(kind: str, **kwargs: Any) -> Any:
    from uqlm_bert.generation import _limiters

    return getattr(_limiters, kind)(**kwargs)


def _caller(value: Any, **kwargs: Any) -> Any:
    from uqlm_bert.generation._caller import LLMCaller
    from uqlm_bert.generation._settings import GenerationSettings

    return LLMCaller(ScriptedChatModel(), GenerationSettings(), total_calls=value, **kwargs)


def _baseline(**kwargs: Any) -> Any:
    from uqlm_bert.bertscore import compute_baseline

    sentences = ["The sky is blue.", "Stocks fell on Monday."]
    return compute_baseline(sentences, **{"num_pairs": 2, "show_progress_bars": False, **kwargs})


def _read_baseline(value: Any) -> Any:
    import io

    from uqlm_bert.bertscore._baseline import read_baseline

    return read_baseline(io.StringIO("LAYER,P,R,F\n0,0.5,0.4,0.45\n1,0.8,0.7,0.75\n"), value)


def _models(fn: str, **kwargs: Any) -> Any:
    from uqlm_bert.bertscore import _loading as models

    return getattr(models, fn)(None, **kwargs)


def _windows(fn: str, **kwargs: Any) -> Any:
    from uqlm_bert.bertscore import _windows as windows

    frame = windows.Frame((101,), (102,), 8)
    calls = {
        "plan_windows": lambda n=20, capacity=6, min_overlap=1: windows.plan_windows(
            n, capacity, min_overlap
        ),
        "Frame": lambda window: windows.Frame((), (), window),
        "Frame.of": lambda window: windows.Frame.of(_NoSpecials(), window),
        "split_in_windows": lambda min_overlap: windows.split_in_windows([[1]], frame, min_overlap),
        "texts_done": lambda sequences_done: windows.split_in_windows([[1]], frame).texts_done(
            sequences_done
        ),
    }
    return calls[fn](**kwargs)


class _NoSpecials:
    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": [ord(c) for c in text]}


def _score(value: Any) -> Any:
    from uqlm_bert import BERTScorer

    return BERTScorer(show_progress_bars=False).score(["a"], ["a"], batch_size=value)


def _score_matches(value: Any) -> Any:
    from uqlm_bert import BERTScorer

    return BERTScorer(show_progress_bars=False).score_matches(["a"], ["a"], batch_size=value)


def _one_answer(method: str, **row: Any) -> Any:
    from uqlm_bert import UQResult

    result = UQResult({"prompts": ["q"], "responses": ["a"], "bert_score": [0.5]})
    return getattr(result, method)(**row)


def _question_service(value: Any) -> Any:
    from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel

    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.apps._asgi import QuestionService

    uq = BlackBoxUQ(ParrotFakeChatModel(), scorers=["exact_match"], show_progress_bars=False)
    return QuestionService(uq, num_responses=value)


def _asgi_app(**kwargs: Any) -> Any:
    from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel

    from uqlm_bert.apps import create_asgi_app

    return create_asgi_app(ParrotFakeChatModel(), **kwargs)


def _serve_settings(**kwargs: Any) -> Any:
    from uqlm_bert.apps import ServeAppSettings

    return ServeAppSettings(**kwargs)


def _load_questions(value: Any) -> Any:
    from uqlm_bert.examples import load_questions

    return load_questions(limit=value)


def _supports_plot(value: Any) -> Any:
    pytest.importorskip("matplotlib")
    from uqlm_bert.plots import plot_supports

    words = {"word": ["a"], "support": [0.5], "counted": [True]}
    return plot_supports(words, 0.5, max_words=value)


def _local_llm(**kwargs: Any) -> Any:
    from uqlm_bert._local_llm import LocalLLM

    return LocalLLM(**kwargs)  # the counts are checked before the model is looked for


def _retry(value: Any) -> Any:
    from uqlm_bert.generation import RetryPolicy

    return RetryPolicy(max_retries=value)


#: ``parameter -> call(value, tmp_path)``; the parameter's name must appear in the error.
CALLS: dict[str, Callable[[Any, Any], Any]] = {
    **{
        f"uqlm_bert._local_llm.LocalLLM.{name}": (lambda v, _, n=name: _local_llm(**{n: v}))
        for name in (
            "num_responses",
            "slots",
            "threads",
            "context_per_slot",
            "max_tokens",
            "seed",
            "top_k",
        )
    },
    **{
        f"uqlm_bert._blackbox._uq.BlackBoxUQ.{name}": (lambda v, _, n=name: _black_box(**{n: v}))
        for name in ("max_calls_per_min", "max_concurrency", "nli_batch_size")
    },
    "uqlm_bert._blackbox._uq.BlackBoxUQ.max_length": lambda v, _: _black_box_bert(max_length=v),
    "uqlm_bert._blackbox._scoring.ScoringSettings.batch_size": lambda v, _: _scoring(batch_size=v),
    **{
        f"uqlm_bert._blackbox._uq.BlackBoxUQ.{method}.num_responses": (
            lambda v, _, m=method: _run(m, v)
        )
        for method in (
            "generate_and_score",
            "generate_and_score_sync",
            "generate_candidate_responses",
        )
    },
    **{
        f"uqlm_bert.generation._settings.GenerationSettings.{name}": (
            lambda v, _, n=name: _generation(**{n: v})
        )
        for name in (
            "max_concurrency",
            "initial_concurrency",
            "max_calls_per_min",
            "max_samples_per_call",
        )
    },
    "uqlm_bert.generation._backoff.RetryPolicy.max_retries": lambda v, _: _retry(v),
    **{
        f"uqlm_bert.bertscore._settings.BERTScoreSettings.{name}": (
            lambda v, _, n=name: _bertscore_settings(**{n: v})
        )
        for name in ("num_layers", "batch_size", "max_length", "chunk_size")
    },
    **{
        f"uqlm_bert.bertscore._engine.BERTScorer.{name}": (
            lambda v, _, n=name: _bert_scorer(**{n: v})
        )
        for name in ("num_layers", "batch_size", "max_length", "chunk_size")
    },
    "uqlm_bert.evaluation._reliability.reliability_curve.n_bins": (
        lambda v, _: _reliability("reliability_curve", v)
    ),
    "uqlm_bert.evaluation._reliability.expected_calibration_error.n_bins": (
        lambda v, _: _reliability("expected_calibration_error", v)
    ),
    "uqlm_bert.plots.plot_confidence_histogram.bins": (
        lambda v, _: _plot("plot_confidence_histogram", bins=v)
    ),
    "uqlm_bert.plots.plot_reliability_diagram.n_bins": (
        lambda v, _: _plot("plot_reliability_diagram", n_bins=v)
    ),
    "uqlm_bert.distributed._dataset.plan_workers.num_workers": lambda v, _: _plan(num_workers=v),
    "uqlm_bert.distributed._dataset.score_dataset.num_workers": (
        lambda v, _: _score_dataset(num_workers=v)
    ),
    "uqlm_bert.distributed._dataset.score_dataset.batch_size": (
        lambda v, _: _score_dataset(batch_size=v)
    ),
    "uqlm_bert.distributed._files.score_file.num_workers": (
        lambda v, tmp: _score_file(tmp, num_workers=v)
    ),
    "uqlm_bert.distributed._files.score_file.batch_size": (
        lambda v, tmp: _score_file(tmp, batch_size=v)
    ),
    "uqlm_bert.distributed._batches.ScoreBatch.num_threads": lambda v, _: _score_batch(v),
    "uqlm_bert.results._failures.Failures.lines.shown": lambda v, _: _failure_lines(v),
    **{
        f"uqlm_bert.distributed._dataset.PoolSettings.{name}": (
            lambda v, _, n=name: _pool(**{n: v})
        )
        for name in ("num_workers", "batch_size")
    },
    **{
        f"uqlm_bert.distributed._actor_pool.RayScoring.{name}": (
            lambda v, _, n=name: _ray_scoring(**{n: v})
        )
        for name in ("num_workers", "batch_size", "batches_per_worker")
    },
    "uqlm_bert.generation._generator.ResponseGenerator.generate.num_responses": (
        lambda v, _: _generate(v)
    ),
    "uqlm_bert.generation._generator.ResponseGenerator.save_checkpoint.num_responses": (
        _save_checkpoint
    ),
    "uqlm_bert.generation._limiters.AdaptiveConcurrency.initial": (
        lambda v, _: _limits("AdaptiveConcurrency", initial=v)
    ),
    "uqlm_bert.generation._limiters.AdaptiveConcurrency.maximum": (
        lambda v, _: _limits("AdaptiveConcurrency", initial=1, maximum=v)
    ),
    "uqlm_bert.generation._limiters.RateLimiter.max_calls": (
        lambda v, _: _limits("RateLimiter", max_calls=v, period=60.0)
    ),
    "uqlm_bert.generation._caller.LLMCaller.total_calls": lambda v, _: _caller(v),
    "uqlm_bert.generation._caller.LLMCaller.first_round": lambda v, _: _caller(1, first_round=v),
    **{
        f"uqlm_bert.bertscore._baseline.compute_baseline.{name}": (
            lambda v, _, n=name: _baseline(**{n: v})
        )
        for name in ("num_pairs", "seed", "batch_size")
    },
    "uqlm_bert.bertscore._baseline.read_baseline.num_layers": lambda v, _: _read_baseline(v),
    "uqlm_bert.bertscore._engine.BERTScorer.score.batch_size": lambda v, _: _score(v),
    "uqlm_bert.bertscore._engine.BERTScorer.score_matches.batch_size": (
        lambda v, _: _score_matches(v)
    ),
    **{
        f"uqlm_bert.results.{owner}.{method}.{name}": (
            lambda v, _, m=method, n=name: _one_answer(m, **{n: v})
        )
        for owner, method in (
            ("_result.UQResult", "answer"),
            ("_plotting.ResultPlots", "plot_supports"),
        )
        for name in ("prompt_index",)
    },
    "uqlm_bert.apps._asgi.QuestionService.num_responses": lambda v, _: _question_service(v),
    **{
        f"uqlm_bert.apps._asgi.create_asgi_app.{name}": (lambda v, _, n=name: _asgi_app(**{n: v}))
        for name in ("num_responses", "max_question_chars")
    },
    **{
        f"uqlm_bert.apps._serve.ServeAppSettings.{name}": (
            lambda v, _, n=name: _serve_settings(**{n: v})
        )
        for name in (
            "num_responses",
            "ingress_replicas",
            "max_calls_per_min",
            "max_concurrency",
            "max_question_chars",
            "max_batch_size",
            "max_ongoing_requests",
        )
    },
    "uqlm_bert.examples.load_questions.limit": lambda v, _: _load_questions(v),
    "uqlm_bert.plots.plot_supports.max_words": lambda v, _: _supports_plot(v),
    "uqlm_bert.bertscore._loading.load_encoder.max_length_default": (
        lambda v, _: _models("load_encoder", max_length_default=v)
    ),
    **{
        f"uqlm_bert.scorers._settings.CosineSettings.{name}": (
            lambda v, _, n=name: _cosine_settings(**{n: v})
        )
        for name in ("batch_size", "max_length")
    },
    **{
        f"uqlm_bert.bertscore._windows.plan_windows.{name}": (
            lambda v, _, n=name: _windows("plan_windows", **{n: v})
        )
        for name in ("n", "capacity", "min_overlap")
    },
    "uqlm_bert.bertscore._windows.Frame.window": lambda v, _: _windows("Frame", window=v),
    "uqlm_bert.bertscore._windows.Frame.of.window": lambda v, _: _windows("Frame.of", window=v),
    "uqlm_bert.bertscore._windows.split_in_windows.min_overlap": (
        lambda v, _: _windows("split_in_windows", min_overlap=v)
    ),
    "uqlm_bert.bertscore._windows.WindowSplit.texts_done.sequences_done": (
        lambda v, _: _windows("texts_done", sequences_done=v)
    ),
}

#: Errors whose message refuses the parameter whatever its value.
REFUSED_WHATEVER_THE_VALUE: set[str] = set()

#: Int settings that reach a scorer through ``build_scorers(**settings)``, where no annotation
#: shows them.
SCORER_SETTINGS: dict[str, Callable[[Any, Any], Any]] = {
    "cosine_sim.batch_size": lambda v, _: _scorers("cosine_sim", batch_size=v),
    "cosine_sim.max_length": lambda v, _: _scorers("cosine_sim", max_length=v),
    "bert_score.num_layers": lambda v, _: _scorers("bert_score", num_layers=v),
    "bert_score.batch_size": lambda v, _: _scorers("bert_score", batch_size=v),
}


def test_every_public_int_parameter_is_covered():
    found = public_int_parameters()
    assert len(found) > 40  # the walk really saw the API
    missing = sorted(found - set(CALLS) - NOT_GIVEN_BY_USERS)
    assert not missing, f"give these int parameters a call in CALLS: {missing}"
    # (CALLS may also hold parameters of private functions whose checks the public ones rely on)
    stale = sorted(NOT_GIVEN_BY_USERS - found)
    assert not stale, f"no longer public int parameters: {stale}"


@pytest.mark.parametrize("parameter", sorted({**CALLS, **SCORER_SETTINGS}))
def test_a_bool_is_refused_where_a_count_is_asked(parameter, tmp_path):
    call = {**CALLS, **SCORER_SETTINGS}[parameter]
    name = parameter.rsplit(".", 1)[1]
    with pytest.raises(UQLMBertError, match=rf"\b{name}\b") as caught:
        call(True, tmp_path)
    if parameter not in REFUSED_WHATEVER_THE_VALUE:
        assert "got True" in str(caught.value)
