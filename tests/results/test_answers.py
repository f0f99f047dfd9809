"""Where the answer is unsupported, as a result shows it: ``words()`` and ``sentences()`` on
results of ``score`` and ``generate_and_score`` (short and windowed long answers), the float32
invariant that ties the word map to the confidence, the HTML and terminal views (escaped), and
what a result without token supports says."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tests.helpers.html import Page
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel
from tests.helpers.texts_hostile import random_text
from uqlm_bert import (
    BERTScoreSettings,
    BlackBoxUQ,
    ConfigurationError,
    InputValidationError,
    ScoringSettings,
)
from uqlm_bert.bertscore._token_support import WEAK_SUPPORT

HOSTILE = [
    "<script>alert('x')</script> Paris is the capital of <b>France</b>.",
    "  Lima is in Peru.  \n",
    "Tokyo 東京 is big 😀 and \u202eevil\u202c text & <i>markup</i>.",
    "Zero\u200bwidth jo\u0301ined, and a " + "verylongword" * 40 + " here!!!",
    "\x1b[31mred\x1b[0m and \"quotes\" 'single' </td></tr></table>",
]
SAMPLES = [
    ["Paris is the capital of France.", "France's capital is Paris."],
    ["Lima is the capital of Peru.", None],
    ["Tokyo is a big city.", "Tokyo is in Japan."],
    ["Zero width joined here.", "A long word here."],
    ["red and quotes", "Quotes, red."],
]


@pytest.fixture(scope="module")
def exact_uq() -> BlackBoxUQ:
    return BlackBoxUQ(
        scorers=["bert_score", "bert_score_precision"],
        bertscore=BERTScoreSettings(dtype="float32"),
        show_progress_bars=False,
    )


def _check_invariant_and_spans(result) -> None:
    """Each answer's weighted token supports are its mean precision (float32: 1e-6), and every
    word and sentence row is the answer's own characters."""
    supports = result.data["supports"]
    precision = result.data["bert_score_precision"]
    for response, ts, p in zip(result.data["responses"], supports, precision, strict=True):
        if ts is None:
            assert response is None or np.isnan(p)
            continue
        assert ts.text == response
        got = float(np.dot(ts.weights.astype(np.float64), ts.support.astype(np.float64)))
        assert got == pytest.approx(p, abs=1e-6)
    responses = dict(zip(result.index, result.data["responses"], strict=True))
    for table in (result.words(), result.sentences()):
        text = table["word"] if "word" in table else table["sentence"]
        for label, start, end, shown in zip(
            table["prompt_index"], table["start"], table["end"], text, strict=True
        ):
            assert responses[label][start:end] == shown


def test_score_keeps_token_supports_tied_to_the_confidence(exact_uq):
    rng = random.Random(11)
    responses = list(HOSTILE)
    samples = [list(s) for s in SAMPLES]
    prompts = ["What is the capital of France?", None, "Tokyo?", None, None]
    for _ in range(10):
        responses.append(random_text(rng, surrogates=False)[:400] or "x")
        samples.append([random_text(rng, surrogates=False)[:400] or "y", "Paris."])
        prompts.append(random_text(rng, surrogates=False)[:60] or None)
    responses.append(None)
    samples.append(["orphan"])
    prompts.append("q")
    result = exact_uq.score(responses, samples, prompts=prompts)
    _check_invariant_and_spans(result)
    words = result.words()
    assert list(words.columns) == [
        "prompt_index", "start", "end", "word", "support", "flagged", "counted"
    ]  # fmt: skip
    assert words["support"].between(0, 1 + 1e-6).all()
    # flagged: counted and below the word threshold, the result's default
    expected = words["counted"] & (words["support"] < WEAK_SUPPORT)
    assert words["flagged"].tolist() == expected.tolist()
    # the prompt's own words and punctuation are listed, not counted
    first = words[words["prompt_index"] == 0]
    assert not first[first["word"] == "."]["counted"].any()
    assert not first[first["word"].str.lower() == "capital"]["counted"].any()
    assert first[first["word"] == "Paris"]["counted"].all()


def test_windowed_long_answers_get_a_support_for_every_word(exact_uq):
    head = "Marie Curie was a physicist and chemist who worked in Paris. " * 60
    tail = "She also flew to the Moon in 1911 on a steam rocket of her own design. " * 20
    long_answer = head + tail
    samples = [head, head + "She won two Nobel prizes."]
    result = exact_uq.score([long_answer], [samples])
    _check_invariant_and_spans(result)
    words = result.words()
    assert words["end"].max() > 3000  # past the model's window of 512 tokens
    sentences = result.sentences()
    made_up = sentences[sentences["sentence"].str.contains("Moon")]["support"]
    supported = sentences[sentences["sentence"].str.contains("physicist")]["support"]
    assert made_up.mean() < supported.mean()


def test_generate_and_score_results_hold_supports_at_the_default_dtype():
    llm = ScriptedChatModel(temperature=0.25, recorder=Recorder())
    uq = BlackBoxUQ(llm, show_progress_bars=False, scoring=ScoringSettings(batch_size=2))
    prompts = [f"Tell me about <city {i}> & its river" for i in range(5)]
    result = uq.generate_and_score_sync(prompts, num_responses=3)
    supports = result.data["supports"]
    assert len(supports) == len(prompts) and all(s is not None for s in supports)
    words = result.words()
    assert sorted(set(words["prompt_index"])) == list(range(len(prompts)))
    for label, start, end, text in zip(
        words["prompt_index"], words["start"], words["end"], words["word"], strict=True
    ):
        assert result.data["responses"][label][start:end] == text
    # a filtered result keeps each row's own supports and labels
    kept = result.filter(threshold=-1.0).filter(keep="above", threshold=-1.0)
    assert kept.words().equals(words)
    low = result.filter(threshold=2.0, keep="below")
    assert low.index == result.index
    # the result travels as JSON, supports included
    restored = json.loads(json.dumps(result.to_dict()))["data"]["supports"]
    assert restored[0]["starts"] == supports[0].starts.tolist()


def test_token_supports_off_gives_the_same_confidences_and_says_why_there_are_none():
    responses, samples = HOSTILE[:3], SAMPLES[:3]
    on = BlackBoxUQ(show_progress_bars=False).score(responses, samples)
    off = BlackBoxUQ(scoring=ScoringSettings(supports=False), show_progress_bars=False).score(
        responses, samples
    )
    assert off.data["bert_score"] == on.data["bert_score"]
    assert "supports" not in off.data
    with pytest.raises(ConfigurationError, match="holds no supports"):
        off.words()
    with pytest.raises(ConfigurationError, match="holds no supports"):
        BlackBoxUQ(scorers=["rouge_l"], show_progress_bars=False).score(
            responses, samples
        ).sentences()


def test_the_html_views_escape_every_answer_and_mark_the_weak_words(exact_uq):
    result = exact_uq.score(HOSTILE, SAMPLES)
    page = Page("mark")
    page.feed(result._repr_html_())
    assert "script" not in page.tags and "b" not in page.tags and "i" not in page.tags
    shown = "".join(page.text)
    for response in HOSTILE:
        assert response.strip()[:30] in shown
    for label in result.index:
        answer = result.answer(label)
        one = Page("mark")
        one.feed(answer._repr_html_())
        assert set(one.tags) <= {"div", "b", "span", "mark", "del"}
        assert one.tags.count("b") == 1  # the prompt's bold, none of the answer's markup
        assert "".join(one.inside) == "".join(answer.weak_words)
        # readable without colour: a weak word is underlined as well as highlighted
        if answer.weak_words:
            assert "text-decoration:underline" in answer._repr_html_()


def test_an_answer_in_a_terminal_marks_weak_words_and_shows_control_characters():
    result = BlackBoxUQ(show_progress_bars=False).score(
        ["Paris is in France. It has \x1b[2J nine moons."], [["Paris is in France."]]
    )
    answer = result.answer(0, threshold=2.0)  # every counted word is below 2
    plain = str(answer)
    assert "\x1b" not in plain and "\\x1b[" in plain
    assert "[Paris]" in plain and "[.]" not in plain  # punctuation is not counted
    coloured = answer.terminal(colour=True)
    assert "\x1b[4;31mParis\x1b[0m" in coloured and "\x1b[2J" not in coloured
    with pytest.raises(InputValidationError, match="no row labelled prompt_index=5"):
        result.answer(5)
    with pytest.raises(TypeError):
        result.answer(0, 0.5)  # the threshold is a keyword, as everywhere
