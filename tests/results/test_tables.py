"""The word and sentence tables of token supports: columns, types, and text == response[start:end]
for every row, hostile text included."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pandas as pd
import pytest

from tests.helpers.texts_hostile import random_text
from uqlm_bert import InputValidationError
from uqlm_bert._inputs import repair_text
from uqlm_bert.bertscore._token_support import TokenSupport
from uqlm_bert.results._tables import (
    SENTENCE_FRAME_COLUMNS,
    WORD_FRAME_COLUMNS,
    sentence_frame,
    word_frame,
)
from uqlm_bert.scorers._base import score_with_supports
from uqlm_bert.scorers._registry import build_scorer


@pytest.fixture(scope="module")
def bert_f32():
    return build_scorer("bert_score", dtype="float32", device="cpu")


def _two_sentences() -> TokenSupport:
    # "Ab cd. Ef." with tokens Ab, cd, ., Ef, .
    return TokenSupport(
        "Ab cd. Ef.",
        np.array([0, 3, 5, 7, 9]),
        np.array([2, 5, 6, 9, 10]),
        np.arange(5),
        np.array([1 / 3, 1 / 3, 0, 1 / 3, 0], dtype=np.float32),
        np.array([0.9, 0.5, 0.99, 0.25, 0.99], dtype=np.float32),
        4,
    )


def test_columns_and_types_also_when_empty():
    for frame, columns in (
        (word_frame, WORD_FRAME_COLUMNS),
        (sentence_frame, SENTENCE_FRAME_COLUMNS),
    ):
        empty = frame([None, None])
        assert empty.columns.tolist() == columns and len(empty) == 0
        full = frame([None, _two_sentences()])
        assert full.columns.tolist() == columns
        assert full["prompt_index"].dtype == np.int64 and full["support"].dtype == np.float64
        assert set(full["prompt_index"]) == {1}


def test_word_and_sentence_rows_by_hand():
    words = word_frame([_two_sentences()])
    assert words["word"].tolist() == ["Ab", "cd", ".", "Ef", "."]
    assert words["counted"].tolist() == [True, True, False, True, False]
    sentences = sentence_frame([_two_sentences()], how="min")
    assert sentences["sentence"].tolist() == ["Ab cd.", "Ef."]
    assert sentences[["start", "end"]].values.tolist() == [[0, 6], [7, 10]]
    assert np.allclose(sentences["support"], [0.5, 0.25])  # full stops left out
    given = sentence_frame([_two_sentences()], sentences=[["Ab", "cd. Ef."]], how="mean")
    assert given["sentence"].tolist() == ["Ab", "cd. Ef."]
    assert np.allclose(given["support"], [0.9, (0.5 + 0.25) / 2])


def test_sentence_frame_checks_the_split():
    ts = _two_sentences()
    with pytest.raises(InputValidationError, match="one list of sentences"):
        sentence_frame([ts], sentences=[["Ab"], ["Ef"]])
    with pytest.raises(InputValidationError, match="is a string"):
        sentence_frame([ts], sentences=["Ab cd."])
    with pytest.raises(InputValidationError, match="is not in the response"):
        sentence_frame([ts], sentences=[["Ef.", "Ab"]])  # out of order
    with pytest.raises(InputValidationError, match="TokenSupport or None"):
        word_frame(["Ab cd."])


@pytest.mark.parametrize("seed", range(3))
def test_every_row_is_the_response_s_own_text(bert_f32, seed):
    rng = random.Random(seed)
    responses = [random_text(rng) for _ in range(20)] + [
        "<script>alert(1)</script> Hi!!! 日本語です。  ",
        "\u200b\u202eabc\u202c. e\u0301! 👩\u200d👩\u200d👧?",
    ]
    samples = [[random_text(rng), "Paris is the capital of France."] for _ in responses]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, supports = score_with_supports([bert_f32], responses, samples)
    texts = [repair_text(r)[0] for r in responses]  # the text scored
    for frame, column in ((word_frame(supports), "word"), (sentence_frame(supports), "sentence")):
        for row in frame.itertuples():
            assert getattr(row, column) == texts[row.prompt_index][row.start : row.end]
    words = word_frame(supports)
    assert words["support"].between(-1, 1 + 1e-6).all()


def test_a_response_without_supports_has_no_rows(bert_f32):
    _, supports = score_with_supports(
        [bert_f32], ["A cat. A dog.", None, "x"], [["A cat."], ["y"], [None]]
    )
    assert supports[1] is None and supports[2] is None
    assert set(sentence_frame(supports)["prompt_index"]) == {0}
    assert isinstance(word_frame(supports), pd.DataFrame)
