"""Example data shipped with the package: answers to score, and questions to ask an LLM.

- ``answers.jsonl``, written for this package: prompts, answers and sampled answers
  (:func:`load_example_answers`).
- ``questions.jsonl``: 216 factual questions with their gold answers, from BIG-bench's
  ``qa_wikidata`` task (Apache License 2.0; the facts are Wikidata's, CC0), turned into questions
  by ``scripts/make_questions.py`` (:func:`load_questions`; see ``QUESTIONS.md`` beside it).
  :func:`is_correct` is the rule that says whether an answer is right.

Example:
    >>> from uqlm_bert.examples import load_example_answers, load_questions
    >>> rows = load_example_answers()
    >>> sorted(rows[0])
    ['prompt', 'response', 'sampled_responses']
    >>> sorted(load_questions()[0])
    ['answers', 'question', 'relation', 'source_prompt']
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from importlib import resources

__all__ = ["is_correct", "load_example_answers", "load_questions"]

#: Name of the example answers file inside this package.
_EXAMPLE_ANSWERS = "answers.jsonl"
#: Name of the questions file inside this package.
_QUESTIONS = "questions.jsonl"


def _read_jsonl(name: str) -> list[dict]:
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_example_answers() -> list[dict]:
    """The example records: ``prompt``, ``response`` and five ``sampled_responses`` each.

    Some answers are well supported by their samples; others are the kind of confident
    invention (about a person, place or event that does not exist) that samples contradict.
    """
    return _read_jsonl(_EXAMPLE_ANSWERS)


def load_questions(limit: int | None = None) -> list[dict]:
    """The shipped questions: ``question``, ``answers`` (the accepted gold answers),
    ``relation`` and ``source_prompt`` (BIG-bench's prompt it was made from); the first
    ``limit`` of them, or all 216.

    Example:
        >>> q = load_questions(limit=3)
        >>> len(q), isinstance(q[0]["answers"], list)
        (3, True)
    """
    rows = _read_jsonl(_QUESTIONS)
    if limit is None:
        return rows
    from uqlm_bert._checks import check_int

    check_int("limit", limit, 0)
    return rows[:limit]


def _words(text: str) -> str:
    """Lower case, accents dropped, every run of other than letters and digits one space."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return " " + " ".join(re.findall(r"[a-z0-9]+", text)) + " "


def is_correct(answer: str | None, gold: Sequence[str]) -> bool:
    """Whether ``answer`` names one of the ``gold`` answers: a gold answer appears in it as
    whole words, ignoring case, accents and punctuation. A missing answer is not correct.

    The rule is lenient with wording (``"It is Paris, France."`` names ``Paris``) and strict
    with facts: an answer that names another place, or that names nothing, is wrong.

    Example:
        >>> is_correct("The capital of Slovakia is Bratislava.", ["Bratislava"])
        True
        >>> is_correct("Palermo is the capital of Italy.", ["Sicily"])
        False
        >>> is_correct("Its currency is the Euro", ["euro"]), is_correct(None, ["euro"])
        (True, False)
    """
    if answer is None:
        return False
    words = _words(answer)
    return any(_words(g).strip() and _words(g) in words for g in gold)
