"""One idea, one name: where the answers are unsupported is "support" (a word's or a sentence's),
listed by ``words()`` and ``sentences()``, serialised as ``words``, kept by
``ScoringSettings(supports=...)``. The package was never released under other names, so none
of the names it had while it was written (``token_supports=``, ``supports()``, the
``word_supports`` column, the ``spans`` field and option, ``response_index``,
``SentenceUQResult``) is on any page, in the command's help or in the public API."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import REPO_ROOT
from tests.test_api import PUBLIC

OLD = re.compile(
    r"token_supports|word_supports|answer_spans|SentenceUQResult|(?<!best_)response_index|--spans|"
    r"\"spans\"|\.supports\(\)|SPANS_COLUMN"
)
PAGES = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md")])


def _stale_paragraphs(text: str) -> list[str]:
    return [para.strip()[:120] for para in re.split(r"\n\s*\n", text) if OLD.search(para)]


def test_the_rule_finds_an_old_name():
    assert _stale_paragraphs("Call `result.supports()` for the words.")
    assert _stale_paragraphs("`--spans`, the earlier name of `--words`, still works.")
    assert not _stale_paragraphs("Call `result.words()` for the words.")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_pages_use_one_name(page):
    assert not _stale_paragraphs(page.read_text(encoding="utf-8"))


def test_the_command_s_help_uses_one_name():
    from uqlm_bert.cli._parser import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name in ("score", "generate-and-score"):
        shown = commands[name].format_help()
        assert "--words" in shown and "--refine" in shown and "--explain" in shown
        assert not OLD.search(shown) and "spans" not in shown


def test_the_public_api_uses_one_name():
    for module_name, names in PUBLIC.items():
        module = importlib.import_module(module_name)
        assert not [n for n in names if OLD.search(n)]
        doc = module.__doc__ or ""
        assert not _stale_paragraphs(doc), module_name
    from uqlm_bert import UQResult

    public = [n for n in dir(UQResult) if not n.startswith("_")]
    assert {"words", "sentences", "refine", "answer"} <= set(public)
    assert "supports" not in public
