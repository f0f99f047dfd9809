"""Every import path the README and the docs show works: each ``from uqlm_bert... import ...``
line and each dotted ``uqlm_bert.`` name they give (modules, and names inside them) resolves, so
moving a module inside the package cannot silently break what users were told to write."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
PAGES += sorted((REPO_ROOT / "docs").rglob("*.rst"))

FROM_IMPORT = re.compile(r"^\s*(?:>>>\s*)?from\s+(uqlm_bert[\w.]*)\s+import\s+\(?([\w, ]+)", re.M)
DOTTED = re.compile(r"(?<![\w/])(uqlm_bert(?:\.\w+)+)")


def _shown() -> dict[str, set[str]]:
    """Each dotted path the pages show, with the pages that show it."""
    found: dict[str, set[str]] = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        where = str(page.relative_to(REPO_ROOT))
        for module, names in FROM_IMPORT.findall(text):
            for name in (n.strip() for n in names.split(",")):
                if name:
                    found.setdefault(f"{module}.{name}", set()).add(where)
        for dotted in DOTTED.findall(text):
            found.setdefault(dotted, set()).add(where)
    return found


SHOWN = _shown()


def _resolve(dotted: str) -> object:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_the_pages_show_import_paths():
    assert len(SHOWN) > 40, sorted(SHOWN)
    assert "uqlm_bert.BlackBoxUQ" in SHOWN and "uqlm_bert.LocalLLM" in SHOWN


@pytest.mark.parametrize("dotted", sorted(SHOWN))
def test_every_path_the_pages_show_resolves(dotted):
    try:
        _resolve(dotted)
    except (ImportError, AttributeError) as exc:
        pytest.fail(
            f"{dotted} (shown in {', '.join(sorted(SHOWN[dotted]))}) does not resolve: {exc}"
        )


def test_resolve_refuses_a_path_that_is_not_there():
    with pytest.raises((ImportError, AttributeError)):
        _resolve("uqlm_bert.black_box.BlackBoxUQ")
