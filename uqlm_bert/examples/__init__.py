"""Example data shipped with the package, written for it: prompts, answers and sampled answers.

Example:
    >>> from uqlm_bert.examples import load_example_answers
    >>> rows = load_example_answers()
    >>> sorted(rows[0])
    ['prompt', 'response', 'sampled_responses']
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["load_example_answers", "EXAMPLE_ANSWERS"]

#: Name of the example file inside this package.
EXAMPLE_ANSWERS = "answers.jsonl"


def load_example_answers() -> list[dict]:
    """The example records: ``prompt``, ``response`` and five ``sampled_responses`` each.

    Some answers are well supported by their samples; others are the kind of confident
    invention (about a person, place or event that does not exist) that samples contradict.
    """
    text = resources.files(__package__).joinpath(EXAMPLE_ANSWERS).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
