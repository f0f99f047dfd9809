"""Sampling in rounds: a prompt's samples come a round at a time, and it stops once settled.

What a user pays for is the LLM calls, and most prompts' samples agree (or disagree) with the
answer clearly long before the last one. With ``GenerationSettings(sampling="until_settled")``
(the default of ``generate_and_score``) a prompt draws its samples in rounds: the first round
goes out with the answer, and after each round a judge (the scoring side: it scores the round's
samples and applies the stopping rule, see ``docs/black_box.md``) says whether the prompt draws
the next one. The rounds' sizes are fixed in advance by :func:`round_ends`; a prompt never draws
fewer samples than the first round nor more than ``num_responses``, and the rounds of different
prompts interleave: one prompt's next round never waits for another's. ``sampling="fixed"``
draws every prompt's ``num_responses`` samples at once, as uqlm does.

Example:
    >>> round_ends(5), round_ends(10), round_ends(1)
    ([3, 5], [3, 6, 10], [1])
"""

from __future__ import annotations

from typing import Any, Protocol

from uqlm_bert._checks import check_int

__all__ = ["FIRST_ROUND", "SAMPLING", "RoundJudge", "round_ends"]

#: The values of ``GenerationSettings.sampling``: stop a prompt's samples once its answer is
#: settled, or draw all ``num_responses`` of them.
SAMPLING = ("until_settled", "fixed")

#: Samples drawn in a prompt's first round, with its answer (the rule that chose it with the
#: stopping rule's constants, and its figures: docs/black_box.md).
FIRST_ROUND = 3


def round_ends(num_responses: int, first: int = FIRST_ROUND) -> list[int]:
    """How many samples a prompt has drawn at the end of each of its rounds: ``first``, then
    twice as many at each round, up to ``num_responses`` (the last).

    Doubling keeps the rounds few (a round costs a round trip to the provider and a scoring
    batch): ``num_responses`` samples take about ``log2(num_responses / first) + 1`` rounds.

    Raises:
        ConfigurationError: ``num_responses`` or ``first`` is not an int >= 1.
    """
    check_int("num_responses", num_responses, 1)
    check_int("first", first, 1)
    ends = [min(first, num_responses)]
    while ends[-1] < num_responses:
        ends.append(min(num_responses, 2 * ends[-1]))
    return ends


class RoundJudge(Protocol):
    """What decides, after each round of a prompt but its last, whether it draws the next."""

    def describe(self) -> dict[str, Any]:
        """What changes the decisions (the rule, its threshold, the scorer), as plain data: a
        checkpoint written under one judge is not resumed under another."""

    async def __call__(self, index: int, response: str | None, samples: list[str | None]) -> bool:
        """Whether prompt ``index`` draws another round, given its answer and every sample it
        has drawn so far, in slot order (``None`` where a call failed)."""
