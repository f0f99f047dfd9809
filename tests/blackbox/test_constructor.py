"""``BlackBoxUQ``'s constructor: uqlm's 17 arguments as uqlm users write them, a few of its own,
three settings objects for the rest (a setting given flat is refused with where it goes); the
scorers are read once, into one plan."""

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


def test_a_setting_given_flat_is_refused_with_where_it_goes():
    """The package was never released with these as flat arguments: each raises an error
    naming its settings object, and nothing is built."""
    with pytest.raises(ConfigurationError, match=r"BERTScoreSettings\(dtype=\.\.\.\)"):
        BlackBoxUQ(dtype="float32")
    with pytest.raises(
        ConfigurationError, match=r"GenerationSettings\(retry=RetryPolicy\(max_retries=\.\.\.\)\)"
    ):
        BlackBoxUQ(max_retries=2)
    with pytest.raises(ConfigurationError, match=r"ScoringSettings\(supports=\.\.\.\)"):
        BlackBoxUQ(supports=False)
    with pytest.raises(ConfigurationError) as info:
        BlackBoxUQ(num_layers=4, request_timeout=5.0)
    message = str(info.value)
    assert "bertscore=BERTScoreSettings(num_layers=...)" in message
    assert "generation=GenerationSettings(request_timeout=...)" in message
    # a setting two objects hold names both
    with pytest.raises(ConfigurationError) as info:
        BlackBoxUQ(batch_size=8)
    assert "BERTScoreSettings(batch_size=...)" in str(info.value)
    assert "ScoringSettings(batch_size=...)" in str(info.value)
    # what no settings object holds is Python's own error
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_layer'"):
        BlackBoxUQ(num_layer=4)


def test_every_setting_of_every_settings_object_has_its_place():
    """The table is read from the settings objects: every field of each is in it, and a flat
    argument of the signature is taken as it is."""
    import dataclasses

    from uqlm_bert._blackbox._misplaced import SETTINGS_PLACES

    for cls in (BERTScoreSettings, GenerationSettings, RetryPolicy, ScoringSettings):
        for field in dataclasses.fields(cls):
            assert f"{cls.__name__}(" in SETTINGS_PLACES[field.name], field.name
    uq = BlackBoxUQ(device="cpu", max_concurrency=8, show_progress_bars=False)
    assert uq.bertscore_settings.device == "cpu" and uq.max_concurrency == 8


def test_the_settings_objects_hold_what_the_flat_arguments_of_the_signature_do_not():
    uq = BlackBoxUQ(
        bertscore=BERTScoreSettings(device="cpu", num_layers=4, dtype="float32"),
        generation=GenerationSettings(
            max_concurrency=7, retry=RetryPolicy(max_retries=1), request_timeout=5.0
        ),
        scoring=ScoringSettings(batch_size=16, supports=False),
        show_progress_bars=False,
    )
    assert (uq.bertscore_settings.num_layers, uq.bertscore_settings.dtype) == (4, "float32")
    assert uq.generation.retry.max_retries == 1 and uq.generation.request_timeout == 5.0
    assert (uq.scoring.batch_size, uq.scoring.supports) == (16, False)


def test_the_readme_s_call_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
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
