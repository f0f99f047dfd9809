"""The BERTScore scorers' default weighting: the prompt's tokens and punctuation weigh 0, and
``bert_score`` is the F-measure with beta :data:`~uqlm_bert.scorers._bertscore.F_BETA` (F1).

Expected numbers come from a hand computation on the engine's own token embeddings and idf
weights (``greedy_match`` with the weights masked), from the F-measure's formula, and from
invariants (a prompt's score does not depend on the others in the batch; generation and
``score(prompts=...)`` agree).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uqlm_bert.bertscore._engine import BERTScorer
from uqlm_bert.bertscore._matching import greedy_match
from uqlm_bert.scorers._bertscore import F_BETA, BERTScoreConsistency, f_beta, punctuation_ids

QUESTION = "What is the capital of Peru?"
ANSWER = "The capital of Peru is Lima."
SAMPLES = ["The capital of Peru is Lima, on the coast.", "The capital of Peru is Cusco."]


@pytest.fixture(scope="module")
def engine() -> BERTScorer:
    return BERTScorer(idf="auto", dtype="float32", num_layers=5)


def _by_hand(engine: BERTScorer, cand: str, ref: str, zero: set[int]) -> tuple[float, float]:
    enc = engine.encoder
    a, b = enc.tokenize([cand, ref])
    ea, eb = enc.embed_packed([a, b]).split([len(a), len(b)])
    lookup = engine._weight_lookup  # the engine's idf weights, [CLS]/[SEP] 0
    wa = lookup(np.array(a)) * ~np.isin(a, list(zero))
    wb = lookup(np.array(b)) * ~np.isin(b, list(zero))
    P, R, _ = greedy_match(
        ea @ eb.T, torch.tensor(wa, dtype=torch.float32), torch.tensor(wb, dtype=torch.float32)
    )
    return float(P), float(R)


def test_engine_zero_weight_matches_a_hand_computation(engine):
    zero = set(engine.encoder.tokenize([QUESTION])[0]) | punctuation_ids(engine.encoder.tokenizer)
    P, R, F = engine.score([ANSWER] * 2, SAMPLES, zero_weight=[zero, set()])
    for k, (sample, z) in enumerate(zip(SAMPLES, [zero, set()], strict=True)):
        p, r = _by_hand(engine, ANSWER, sample, z)
        assert float(P[k]) == pytest.approx(p, abs=1e-5)
        assert float(R[k]) == pytest.approx(r, abs=1e-5)
        assert float(F[k]) == pytest.approx(2 * p * r / (p + r), abs=1e-5)
    # without zero_weight, the numbers are the engine's as before
    plain = engine.score([ANSWER] * 2, SAMPLES)
    again = engine.score([ANSWER] * 2, SAMPLES, zero_weight=[set(), set()])
    for x, y in zip(plain, again, strict=True):
        assert torch.equal(x, y)


def test_a_text_in_two_contexts_is_weighed_apart(engine):
    other = set(engine.encoder.tokenize(["Where is Lima?"])[0])
    peru = set(engine.encoder.tokenize([QUESTION])[0])
    P, R, _ = engine.score([ANSWER, ANSWER], [SAMPLES[1], SAMPLES[1]], zero_weight=[peru, other])
    assert float(P[0]) == pytest.approx(_by_hand(engine, ANSWER, SAMPLES[1], peru)[0], abs=1e-5)
    assert float(P[1]) == pytest.approx(_by_hand(engine, ANSWER, SAMPLES[1], other)[0], abs=1e-5)
    assert float(P[0]) != pytest.approx(float(P[1]), abs=1e-3)


def test_f_beta_formula():
    P, R = np.array([0.9, 0.5, 0.0]), np.array([0.6, 0.5, 0.0])
    b2 = 0.49
    expected = [(1 + b2) * 0.9 * 0.6 / (b2 * 0.9 + 0.6), 0.5, 0.0]
    assert f_beta(P, R, 0.7).tolist() == pytest.approx(expected)
    assert f_beta(P, R, 1.0).tolist() == pytest.approx([2 * 0.54 / 1.5, 0.5, 0.0])


def test_the_default_scorer_is_f_beta_with_prompt_and_punctuation_weighed_0(engine):
    from uqlm_bert import BlackBoxUQ

    scorer = BERTScoreConsistency(engine=engine)
    uq = BlackBoxUQ(scorers=[scorer], show_progress_bars=False)
    got = uq.score([ANSWER], [SAMPLES], prompts=[QUESTION]).data["bert_score"][0]
    zero = set(engine.encoder.tokenize([QUESTION])[0]) | punctuation_ids(engine.encoder.tokenizer)
    pr = [_by_hand(engine, ANSWER, s, zero) for s in SAMPLES]
    expected = np.mean([f_beta(np.array([p]), np.array([r]), F_BETA)[0] for p, r in pr])
    assert got == pytest.approx(expected, abs=1e-5)
    # without prompts, punctuation alone weighs 0
    alone = uq.score([ANSWER], [SAMPLES]).data["bert_score"][0]
    punct = punctuation_ids(engine.encoder.tokenizer)
    pr = [_by_hand(engine, ANSWER, s, punct) for s in SAMPLES]
    assert alone == pytest.approx(
        np.mean([f_beta(np.array([p]), np.array([r]), F_BETA)[0] for p, r in pr]), abs=1e-5
    )
    # the question's words no longer count as agreement: the answer the samples disagree on
    # (Lima against Cusco) loses more once they weigh 0
    assert got < alone


def test_bertscore_f1_with_idf_alone_is_one_setting_away(engine):
    scorer = BERTScoreConsistency(engine=engine, beta=1.0, zero_weight=None)
    got = scorer.score([ANSWER], [SAMPLES])[0]
    _, _, F = engine.score([ANSWER] * 2, SAMPLES)
    assert got == pytest.approx(float(F.mean()), abs=1e-6)
    assert scorer.default_threshold is None  # not the default scorer's settings
    assert BERTScoreConsistency(engine=engine).default_threshold is not None


def test_a_prompts_score_does_not_depend_on_the_batch(engine):
    from uqlm_bert import BlackBoxUQ

    uq = BlackBoxUQ(scorers=[BERTScoreConsistency(engine=engine)], show_progress_bars=False)
    other = ("Who wrote Hamlet?", "Hamlet was written by Shakespeare.", ["Shakespeare wrote it."])
    together = uq.score(
        [ANSWER, other[1], ANSWER],
        [SAMPLES, other[2], SAMPLES],
        prompts=[QUESTION, other[0], "Name a city in Peru."],
    ).data["bert_score"]
    alone = uq.score([ANSWER], [SAMPLES], prompts=[QUESTION]).data["bert_score"][0]
    assert together[0] == pytest.approx(alone, abs=1e-6)
    assert together[2] != pytest.approx(alone, abs=1e-4)  # its own prompt, its own weights


def test_generation_scores_with_the_prompts_as_score_does():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from uqlm_bert import BlackBoxUQ

    replies = [ANSWER, *SAMPLES, SAMPLES[0]]
    llm = FakeListChatModel(responses=replies)
    uq = BlackBoxUQ(llm=llm, show_progress_bars=False, use_n_param=False, max_concurrency=1)
    result = uq.generate_and_score_sync([QUESTION], num_responses=3)
    data = result.data
    again = uq.score(data["responses"], data["sampled_responses"], prompts=[QUESTION])
    assert data["bert_score"][0] == pytest.approx(again.data["bert_score"][0], abs=1e-6)
    without = uq.score(data["responses"], data["sampled_responses"])
    assert data["bert_score"][0] != pytest.approx(without.data["bert_score"][0], abs=1e-4)


def test_an_answer_that_only_repeats_the_question_scores_0_without_a_warning(engine):
    import warnings

    scorer = BERTScoreConsistency(engine=engine)
    from uqlm_bert import BlackBoxUQ

    uq = BlackBoxUQ(scorers=[scorer], show_progress_bars=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = uq.score(["The capital of Peru?"], [SAMPLES], prompts=[QUESTION]).data
    assert got["bert_score"][0] == 0.0


def test_with_one_sample_the_default_is_f1_of_the_same_calls_precision_and_recall():
    """F1 by construction: with one sample per answer, ``bert_score`` is ``2PR / (P + R)`` of
    the same call's ``bert_score_precision`` and ``bert_score_recall``, on clean and hostile
    text, with and without prompts."""
    import random

    from tests.helpers.texts_hostile import random_text
    from uqlm_bert import BlackBoxUQ

    rng = random.Random(7)
    responses = ["Paris is the capital of France.", "It boils at 100 C.", "Lima, Peru!"]
    samples = [["Paris is in France."], ["Water boils at 100 degrees."], ["Quito."]]
    prompts = ["Capital of France?", "Boiling point of water?", None]
    for _ in range(12):
        responses.append(random_text(rng, surrogates=False)[:300] or "x")
        samples.append([random_text(rng, surrogates=False)[:300] or "y"])
        prompts.append(random_text(rng, surrogates=False)[:80] or None)
    uq = BlackBoxUQ(
        scorers=["bert_score", "bert_score_precision", "bert_score_recall"],
        show_progress_bars=False,
    )
    for given in (None, prompts):
        data = uq.score(responses, samples, prompts=given).data
        P = np.asarray(data["bert_score_precision"])
        R = np.asarray(data["bert_score_recall"])
        F = np.asarray(data["bert_score"])
        expected = np.divide(2 * P * R, P + R, out=np.zeros_like(P), where=(P + R) != 0)
        np.testing.assert_allclose(F, expected, rtol=0, atol=1e-6)
