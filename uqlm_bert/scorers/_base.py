"""The scorer contract, the pairwise template, and scoring several scorers in one pass.

A scorer turns each response and its sampled responses into one confidence, higher meaning the
samples agree more with the response. Every scorer is batched across all the responses it is
given: it never loops over prompts calling a model once each.

Most scorers compare the response with each sample and average: :class:`PairwiseScorer` is that
template. :func:`score_all` runs several scorers on one input: the input is normalised once (by
:func:`uqlm_bert._inputs.scoring_lists`), the (response, sample) pairs are listed once, and
scorers that share a computation (the three BERTScore components) compute it once per call.

Missing samples (None, from failed LLM calls) are skipped; a response with no samples left, or a
missing response, scores NaN.

Example:
    >>> from uqlm_bert.scorers._lexical import ExactMatchScorer, RougeLScorer
    >>> out = score_all([ExactMatchScorer(), RougeLScorer()], ["a b"], [["a b", "a c", None]])
    >>> out["exact_match"].tolist(), out["rouge_l"].round(3).tolist()
    ([0.5], [0.75])
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from uqlm_bert._inputs import ScoringInputs, as_inputs, present_pairs

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport

__all__ = [
    "Pairs",
    "PairwiseScorer",
    "Pass",
    "Scorer",
    "mean_by_group",
    "score_all",
    "score_pass",
    "score_with_supports",
]

#: Texts of which some may be missing (None: a failed LLM call).
Texts = Sequence[str | None]


class Scorer(abc.ABC):
    """A black-box confidence scorer over (response, sampled responses).

    Subclasses set ``name`` (the key in ``scorers=[...]`` and the result column) and implement
    :meth:`score`; most should derive from :class:`PairwiseScorer` instead.
    """

    name: str = ""
    #: True when a response's score depends only on its own samples, not on the other responses
    #: scored in the same call; BlackBoxUQ then scores prompts in batches as they complete.
    batch_invariant: bool = True
    #: The confidence below which ``UQResult.flag`` and ``filter`` flag an answer when no
    #: threshold is given; None when this scorer, with its settings, has none.
    default_threshold: float | None = None
    #: For a scorer that gives token supports: the support below which a sentence
    #: (``"sentence"``) or a word (``"word"``) is flagged when no threshold is given; None
    #: where it has none at its settings (the table of both: ``metadata["thresholds"]``).
    support_thresholds: dict[str, float] | None = None

    @abc.abstractmethod
    def score(
        self, responses: Texts, sampled_responses: Sequence[Texts], show_progress_bars: bool = False
    ) -> np.ndarray:
        """Return one float64 confidence per response (NaN where it cannot be computed)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


@dataclass
class Pairs:
    """The (response, sample) pairs of one scoring call, as a pairwise scorer gets them.

    Attributes:
        cands: the response of each pair (the candidate).
        refs: the sample of each pair (the reference).
        show_progress_bars: show the scorer's progress.
        shared: lives for one :func:`score_all` call: scorers that can reuse one another's work
            (the BERTScore components) keep it here, keyed by what makes it the same.
        prompts: the prompt of each pair (None where unknown), or None without prompts.
        supports: whether the call collects token supports (:func:`score_with_supports`):
            scorers that can give them keep what they need in ``shared``.
        group: the response of each pair (its position in ``responses``), where known.
        responses: the call's responses, where known (a scorer that gives token supports from
            elsewhere, a Serve deployment say, sends them with the pairs).
    """

    cands: list[str]
    refs: list[str]
    show_progress_bars: bool = False
    shared: dict[Any, Any] = field(default_factory=dict)
    prompts: list[str | None] | None = None
    supports: bool = False
    group: list[int] | None = None
    responses: list[str | None] | None = None


class PairwiseScorer(Scorer):
    """The template: present (response, sample) pairs -> a score per pair -> mean per response.

    Subclasses implement :meth:`score_pairs`. Example:

        >>> class Longer(PairwiseScorer):
        ...     name = "longer"
        ...     def score_pairs(self, pairs):
        ...         return np.array([float(len(c) >= len(r)) for c, r in zip(pairs.cands, pairs.refs)])
        >>> Longer().score(["abc", None], [["ab", "abcd"], ["x"]]).tolist()
        [0.5, nan]
    """

    @abc.abstractmethod
    def score_pairs(self, pairs: Pairs) -> np.ndarray:
        """One score per pair: ``pairs.cands[k]`` (the response) against ``pairs.refs[k]``."""

    def token_supports(
        self, pairs: Pairs, group: Sequence[int], inputs: ScoringInputs
    ) -> list[TokenSupport | None] | None:
        """Each response's token supports from this call (after :meth:`score_pairs` ran on
        ``pairs``, collected with ``pairs.supports``), or None where this scorer has none (the
        default). ``group[k]`` is the response of pair ``k``."""
        return None

    def score(
        self, responses: Texts, sampled_responses: Sequence[Texts], show_progress_bars: bool = False
    ) -> np.ndarray:
        """One confidence per response: the mean pair score over its present samples."""
        return score_all([self], responses, sampled_responses, show_progress_bars)[self.name]


def score_all(
    scorers: Sequence[Scorer],
    responses: Sequence[str | None] | ScoringInputs,
    sampled_responses: Sequence[Sequence[str | None]] | None = None,
    show_progress_bars: bool = False,
) -> dict[str, np.ndarray]:
    """Run every scorer on one input; ``{scorer name: one confidence per response}``.

    Args:
        scorers: the scorers, each with a distinct name.
        responses: one response per prompt, or inputs already normalised (then
            ``sampled_responses`` is None).
        sampled_responses: one list of samples per prompt.
        show_progress_bars: show each scorer's progress.

    Raises:
        InputValidationError: the input is malformed (see :func:`uqlm_bert._inputs.scoring_lists`).
    """
    return score_pass(scorers, as_inputs(responses, sampled_responses), show_progress_bars).scores


def score_with_supports(
    scorers: Sequence[Scorer],
    responses: Sequence[str | None] | ScoringInputs,
    sampled_responses: Sequence[Sequence[str | None]] | None = None,
    show_progress_bars: bool = False,
) -> tuple[dict[str, np.ndarray], list[TokenSupport | None] | None]:
    """:func:`score_all`, and each response's token supports from the same pass.

    The token supports (:class:`~uqlm_bert.bertscore._token_support.TokenSupport`: which tokens of
    each answer its samples support) come from the first BERTScore scorer among ``scorers``
    (``bert_score``, ``bert_score_precision`` or ``bert_score_recall``), in the same engine call
    as its confidence: no text is embedded twice. :func:`score_all` collects none (what
    ``score_with_supports`` adds is the per-token best matches and one tokenization of each
    answer for its character offsets).

    Returns:
        ``(scores, supports)``: the scores as :func:`score_all` gives them (the same numbers);
        one :class:`~uqlm_bert.bertscore._token_support.TokenSupport` per response, None for a missing
        response or one without samples; ``supports`` is None when no scorer gives them.

    Example:
        >>> from uqlm_bert.scorers._registry import build_scorer
        >>> scores, supports = score_with_supports(
        ...     [build_scorer("bert_score")], ["Lima is in Peru."],
        ...     [["Lima is in Peru.", "Lima is the capital of Peru."]])
        >>> words = supports[0].word_rows()
        >>> words.text, words.counted.tolist()
        (['Lima', 'is', 'in', 'Peru', '.'], [True, True, True, True, False])
    """
    found = score_pass(scorers, as_inputs(responses, sampled_responses), show_progress_bars, True)
    return found.scores, found.supports


@dataclass(frozen=True)
class Pass:
    """What one scoring pass over some responses gives (:func:`score_pass`).

    Attributes:
        scores: each scorer's confidences, one per response (:func:`score_all`'s).
        supports: each response's token supports, where collected and a scorer gives them.
        pairs: each pairwise scorer's score of every present (response, sample) pair, per
            response, in the order of its present samples (a response's confidence is their
            mean): what scores drawn in several rounds are combined from.
    """

    scores: dict[str, np.ndarray]
    supports: list[TokenSupport | None] | None = None
    pairs: dict[str, list[np.ndarray]] = field(default_factory=dict)


def score_pass(
    scorers: Sequence[Scorer],
    inputs: ScoringInputs,
    show_progress_bars: bool = False,
    supports: bool = False,
) -> Pass:
    """Every scorer on normalised ``inputs`` in one pass (:func:`score_all`), with each pairwise
    scorer's pair scores per response and, with ``supports``, the token supports
    (:func:`score_with_supports`)."""
    n = len(inputs)
    group, cands, refs = present_pairs(inputs)
    prompts = None if inputs.prompts is None else [inputs.prompts[g] for g in group]
    pairs = Pairs(
        cands,
        refs,
        show_progress_bars,
        prompts=prompts,
        supports=supports,
        group=list(group),
        responses=list(inputs.responses),
    )
    out: dict[str, np.ndarray] = {}
    per_response: dict[str, list[np.ndarray]] = {}
    # where each response's pairs end in the pair list (pairs come response by response)
    ends = np.cumsum(np.bincount(np.asarray(group, dtype=np.int64), minlength=n))[:-1]
    for scorer in scorers:
        if not isinstance(scorer, PairwiseScorer):
            values = scorer.score(inputs.responses, inputs.samples, show_progress_bars)
            out[scorer.name] = np.asarray(values, dtype=np.float64)
        elif not cands:
            out[scorer.name] = np.full(n, np.nan)
            per_response[scorer.name] = [np.empty(0) for _ in range(n)]
        else:
            values = np.asarray(scorer.score_pairs(pairs), dtype=np.float64)
            out[scorer.name] = mean_by_group(values, group, n)
            per_response[scorer.name] = np.split(values, ends) if n else []
    found = None
    if supports:
        for scorer in scorers:
            if isinstance(scorer, PairwiseScorer):
                found = scorer.token_supports(pairs, group, inputs)
                if found is not None:
                    break
    return Pass(out, found, per_response)


def mean_by_group(values: np.ndarray, group: Sequence[int], n_groups: int) -> np.ndarray:
    """Mean of ``values`` per group index; NaN for groups with no values.

    Example:
        >>> mean_by_group(np.array([1.0, 3.0, 5.0]), [0, 0, 2], 3).tolist()
        [2.0, nan, 5.0]
    """
    values = np.asarray(values, dtype=np.float64)
    g = np.asarray(group, dtype=np.int64)
    sums = np.bincount(g, weights=values, minlength=n_groups) if len(g) else np.zeros(n_groups)
    counts = np.bincount(g, minlength=n_groups) if len(g) else np.zeros(n_groups)
    out = np.full(n_groups, np.nan)
    nz = counts > 0
    out[nz] = sums[nz] / counts[nz]
    return out
