"""``BlackBoxUQ``'s constructor: uqlm's 17 arguments as uqlm users write them, a few of its own,
three settings objects for the rest; the flat arguments of earlier releases still work, each
warning once with its new spelling; the scorers are read once, into one plan."""

from __future__ import annotations

import inspect
import warnings

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from uqlm_bert import (
    BERTScoreSettings,
    BlackBoxUQ,
    ConfigurationError,
    GenerationSettings,
    ScoringSettings,
)
from uqlm_bert._blackbox._moved_arguments import MOVED
from uqlm_bert.generation import RetryPolicy

#: uqlm 0.6.7's ``BlackBoxUQ.__init__``, in its order, with its defaults.
UQLM = {
    "llm": None,
    "scorers": None,
    "device": None,
    "use_best": True,
    "nli_model_name": "microsoft/deberta-large-mnli",
    "sentence_transformer": "sentence-transformers/all-MiniLM-L6-v2",
    "postprocessor": None,
    "structured_response": None,
    "output_extractor": None,
    "system_prompt": None,
    "max_calls_per_min": None,
    "sampling_temperature": 1.0,
    "return_responses": "all",
    "use_n_param": False,
    "max_length": 2000,
    "verbose": False,
    "nli_batch_size": 32,
}


def test_the_signature_is_uqlm_s_and_a_few_of_its_own():
    parameters = inspect.signature(BlackBoxUQ).parameters
    assert len(parameters) <= 22
    names = list(parameters)
    assert names[: len(UQLM)] == list(UQLM)  # uqlm's order: positional calls work too
    assert all(parameters[n].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for n in UQLM)
    assert all(parameters[n].kind is inspect.Parameter.KEYWORD_ONLY for n in names[len(UQLM) :])
    assert {"generation", "bertscore", "scoring"} <= set(names)


@pytest.mark.parametrize("scorers", [["bert_score"], ["bert_score", "cosine_sim"], None])
def test_uqlm_s_arguments_as_uqlm_users_write_them(scorers):
    """uqlm's defaults written out, by keyword and by position, construct and score: the NLI
    arguments change nothing here (no scorer uses an NLI model), and max_length=2000 (uqlm's
    characters for its NLI model) leaves the models' window as it is."""
    llm = FakeListChatModel(responses=["Paris is the capital of France."])
    given = {**UQLM, "llm": llm, "scorers": scorers}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of them is deprecated
        by_keyword = BlackBoxUQ(**given, show_progress_bars=False)
        by_position = BlackBoxUQ(*given.values(), show_progress_bars=False)
    plain = BlackBoxUQ(llm=llm, scorers=scorers, use_best=True, show_progress_bars=False)
    for uq in (by_keyword, by_position):
        assert uq.use_best and uq.generation.use_n_param is False
        assert uq.bertscore_settings == plain.bertscore_settings  # max_length 2000: as unset
        result = uq.generate_and_score_sync(["Capital of France?"], num_responses=2)
        expected = plain.generate_and_score_sync(["Capital of France?"], num_responses=2)
        assert result.data["responses"] == expected.data["responses"]
        for name in result.scorers:
            assert result.data[name] == pytest.approx(expected.data[name], abs=1e-6)


def test_what_needs_another_library_is_refused_with_what_to_do():
    with pytest.raises(ConfigurationError, match="postprocessor"):
        BlackBoxUQ(structured_response=dict, output_extractor=str)
    with pytest.raises(ConfigurationError, match="needs an NLI model"):
        BlackBoxUQ(scorers=["semantic_negentropy"])
    # uqlm's max_length in characters, above the window, says that it counts tokens here
    with pytest.raises(ConfigurationError, match="counts tokens here"):
        BlackBoxUQ(max_length=4000, show_progress_bars=False).score(["a"], [["a"]])


#: For each moved argument: a value, and how its effect shows on the object.
EFFECTS = {
    "model_type": (
        "sentence-transformers/all-MiniLM-L6-v2",
        lambda uq: uq.bertscore_settings.model_type,
    ),
    "num_layers": (4, lambda uq: uq.bertscore_settings.num_layers),
    "idf": (False, lambda uq: uq.bertscore_settings.idf),
    "idf_sents": (["a b", "c"], lambda uq: uq.bertscore_settings.idf_sents),
    "rescale_with_baseline": (True, lambda uq: uq.bertscore_settings.rescale_with_baseline),
    "baseline_path": ("base.tsv", lambda uq: uq.bertscore_settings.baseline_path),
    "lang": ("en", lambda uq: uq.bertscore_settings.lang),
    "batch_size": (3, lambda uq: uq.bertscore_settings.batch_size),
    "dtype": ("float32", lambda uq: uq.bertscore_settings.dtype),
    "long_texts": ("truncate", lambda uq: uq.bertscore_settings.long_texts),
    "max_retries": (2, lambda uq: uq.generation.retry.max_retries),
    "retry_base_delay": (0.25, lambda uq: uq.generation.retry.base_delay),
    "retry_max_delay": (7.0, lambda uq: uq.generation.retry.max_delay),
    "request_timeout": (9.0, lambda uq: uq.generation.request_timeout),
    "rate_limit_period": (30.0, lambda uq: uq.generation.rate_limit_period),
    "score_batch_size": (8, lambda uq: uq.scoring.batch_size),
    "token_supports": (False, lambda uq: uq.scoring.supports),
    "scorer_kwargs": (
        {"exact_match_normalize": False},
        lambda uq: {"exact_match_normalize": uq.scorers[-1].normalize},
    ),
}


def test_every_moved_argument_has_its_effect_checked():
    assert set(EFFECTS) == set(MOVED)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_argument_still_works_and_warns_once_with_its_new_spelling(name):
    value, effect = EFFECTS[name]
    extra = {"idf": True} if name == "idf_sents" else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        uq = BlackBoxUQ(
            scorers=["bert_score", "exact_match"],
            show_progress_bars=False,
            **{name: value},
            **extra,
        )
    told = [
        w for w in caught if issubclass(w.category, FutureWarning) and f"({name}=" in str(w.message)
    ]
    assert len(told) == 1
    group, spelling = MOVED[name]
    assert str(told[0].message) == f"BlackBoxUQ({name}=...) is now {group}={spelling}"
    assert told[0].filename == __file__  # it points at the caller's line
    got = effect(uq)
    assert got == (tuple(value) if isinstance(value, list) else value)


def test_moved_arguments_are_the_settings_objects_they_moved_into():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = BlackBoxUQ(
            device="cpu", num_layers=4, dtype="float32", max_concurrency=7, max_retries=1,
            request_timeout=5.0, score_batch_size=16, show_progress_bars=False,
        )  # fmt: skip
    new = BlackBoxUQ(
        bertscore=BERTScoreSettings(device="cpu", num_layers=4, dtype="float32"),
        generation=GenerationSettings(
            max_concurrency=7, retry=RetryPolicy(max_retries=1), request_timeout=5.0
        ),
        scoring=ScoringSettings(batch_size=16),
        show_progress_bars=False,
    )
    assert old.bertscore_settings == new.bertscore_settings
    assert old.generation == new.generation
    assert (old.scoring.batch_size, old.scoring.supports) == (new.scoring.batch_size, True)


def test_a_moved_argument_beside_its_settings_object_is_refused():
    with pytest.raises(ConfigurationError, match=r"bertscore=BERTScoreSettings\(\.\.\.\) or as "
                       r"separate arguments, not both \(given beside it: num_layers\)"):  # fmt: skip
        BlackBoxUQ(num_layers=4, bertscore=BERTScoreSettings())
    with pytest.raises(ConfigurationError, match=r"not both \(given beside it: max_retries\)"):
        BlackBoxUQ(max_retries=4, generation=GenerationSettings())
    with pytest.raises(ConfigurationError, match=r"not both \(given beside it: token_supports\)"):
        BlackBoxUQ(token_supports=False, scoring=ScoringSettings())
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_layer'"):
        BlackBoxUQ(num_layer=4)


def test_the_readme_s_call_needs_no_moved_argument():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        uq = BlackBoxUQ(llm=None, scorers=["bert_score"], max_calls_per_min=300, max_concurrency=8)
    assert (uq.max_calls_per_min, uq.max_concurrency) == (300, 8)


def test_the_scorers_are_read_once_into_one_plan(monkeypatch):
    """The list is read by one function, once per construction, and the plan it gives is what
    the scorers are built from here and what a pool of Ray actors would build them from."""
    from uqlm_bert._blackbox import _pool, _uq
    from uqlm_bert.scorers import _registry

    reads, places = [], []
    original = _registry.scorer_items
    monkeypatch.setattr(_uq, "scorer_items", lambda s: reads.append(s) or original(s))
    monkeypatch.setattr(_registry, "scorer_items", lambda s: reads.append(s) or original(s))
    real_place = _pool.scoring_place
    monkeypatch.setattr(
        _uq, "scoring_place", lambda w, p: places.append(p) or real_place("local", p)
    )
    uq = BlackBoxUQ(scorers=["bert_score", "cosine_sim"], sentence_transformer=UQLM["sentence_transformer"],
                    scoring="local", show_progress_bars=False)  # fmt: skip
    assert len(reads) == 1
    (plan,) = places
    assert plan.names == [s.name for s in uq.scorers] == ["bert_score", "cosine_sim"]
    assert [s.name for s in plan.build()] == plan.names
