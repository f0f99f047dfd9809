"""Where the answers are unsupported, on the command line: ``--explain``, ``--words`` and
``--refine``, the same for ``score`` and ``generate-and-score``.

- ``--explain`` prints every answer with its weakly supported words marked and its unsupported
  sentences struck through (colour on a terminal; ``[brackets]`` and ``~~tildes~~`` otherwise);
- ``--words`` adds a ``words`` column: each counted word of the answer in the one serialised
  form of word supports, the web services' too
  (``word_records``);
- ``--refine [THRESHOLD]`` adds ``refined_response``, ``removed_sentences`` and ``refinement``
  (``UQResult.refine()``), removing the sentences below the sentence threshold (by default the
  result's, for the default encoder and layer).

All three read the token supports of the ``bert_score`` scorers, from the scoring pass itself.

Example:
    >>> from uqlm_bert import BlackBoxUQ
    >>> result = BlackBoxUQ(show_progress_bars=False).score(
    ...     ["Lima is in Peru. It has nine moons."], [["Lima is the capital of Peru."]])
    >>> args = argparse.Namespace(explain=False, words=True, refine=REFINE_DEFAULT)
    >>> columns = support_columns(result, args)
    >>> sorted(columns), columns["refined_response"]
    (['refined_response', 'refinement', 'removed_sentences', 'words'], ['Lima is in Peru.'])
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from uqlm_bert._exceptions import ConfigurationError

__all__ = [
    "REFINE_COLUMNS",
    "REFINE_DEFAULT",
    "WORDS_COLUMN",
    "colour",
    "explanation",
    "support_columns",
    "support_options",
    "wants_supports",
]

#: ``--words``: the column of each answer's words with their supports.
WORDS_COLUMN = "words"
#: ``--refine``: the columns it adds.
REFINE_COLUMNS = ("refined_response", "removed_sentences", "refinement")
#: ``--refine`` given without a threshold: the result's own sentence threshold.
REFINE_DEFAULT = "default"


def support_options() -> argparse.ArgumentParser:
    """The options of both commands that read the answers' supports."""
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("where the answers are unsupported")
    group.add_argument(
        "--explain",
        action="store_true",
        help="print each answer with its weakly supported words marked and the sentences "
        "--refine would remove struck through (colour on a terminal, [brackets] and ~~tildes~~ "
        "otherwise; NO_COLOR turns colour off)",
    )
    group.add_argument(
        "--words",
        action="store_true",
        help="add a words column: for each counted word of the answer, its start and end "
        "(character offsets into the response), the word, its support (0 to 1) and weak",
    )
    group.add_argument(
        "--refine",
        nargs="?",
        const=REFINE_DEFAULT,
        metavar="THRESHOLD",
        help="add refined_response (the answer without its sentences whose support is below "
        "THRESHOLD, by default the sentence threshold chosen for the default encoder and "
        "layer), removed_sentences (what went, and why) and refinement (what happened)",
    )
    return options


def wants_supports(args: argparse.Namespace) -> bool:
    """Whether the options ask for anything read from the supports; checks ``--refine``'s
    threshold before any work.

    Raises:
        ConfigurationError: ``--refine`` was given something other than a number.
    """
    if args.refine not in (None, REFINE_DEFAULT):
        try:
            float(args.refine)
        except ValueError:
            raise ConfigurationError(
                "--refine takes a sentence threshold such as 0.5, or nothing for the default; "
                f"got {args.refine!r}"
            ) from None
    return bool(args.explain or args.words or args.refine is not None)


def support_columns(result: Any, args: argparse.Namespace) -> dict[str, list[Any]]:
    """The columns ``--words`` and ``--refine`` add, one value per row of ``result`` (None for
    a row without an answer).

    Raises:
        ConfigurationError: the result holds no supports (no ``bert_score`` scorer), or has no
            default threshold for its settings and none was given.
    """
    from uqlm_bert.results._tables import word_records

    out: dict[str, list[Any]] = {}
    if args.words:
        words = result.words(threshold=result.threshold(level="word"))
        by_label = dict(iter(words.groupby("prompt_index", sort=False)))
        responses = result.data.get("responses") or [None] * len(result)
        out[WORDS_COLUMN] = [
            None if response is None else word_records(by_label[label]) if label in by_label else []
            for label, response in zip(result.index, responses, strict=True)
        ]
    if args.refine is not None:
        threshold = None if args.refine == REFINE_DEFAULT else float(args.refine)
        refined = result.refine(threshold=threshold)
        for column in REFINE_COLUMNS:
            out[column] = refined[column].tolist()
    return out


def explanation(result: Any, colour: bool) -> str:
    """``--explain``: every answer with its weakly supported words marked and its unsupported
    sentences struck through, one block per row (its label, prompt, answer and confidences),
    and what the marks mean."""
    from uqlm_bert.results._answers import _answer_at
    from uqlm_bert.results._render import terminal_safe

    blocks = []
    for row in range(len(result)):  # by position: a label lookup per row is quadratic
        answer = _answer_at(result, row)
        scores = ", ".join(f"{k} {v:.3f}" for k, v in answer.scores.items())
        text = answer.terminal(colour)
        prompt = terminal_safe(answer.prompt or "")
        blocks.append(f"[{answer.prompt_index}] {prompt}\n    {text}\n    {scores}")
    try:
        word = result.threshold(level="word")
        sentence = result.threshold(level="sentence")
    except ConfigurationError:
        legend = (
            "(no marks: these supports come from another encoder or layer than the default "
            "thresholds were chosen for)"
        )
    else:
        marks = "red and underlined" if colour else "in [brackets]"
        struck = "struck through" if colour else "in ~~tildes~~"
        legend = (
            f"(words the samples support below {word:g} are {marks}; sentences below "
            f"{sentence:g}, which --refine removes, are {struck})"
        )
    return "\n".join([*blocks, legend])


def colour() -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
