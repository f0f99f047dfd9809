"""The test tree's own shape: it mirrors the package, each fixture is defined once, and the
benchmarks lean on nothing of it."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.conftest import REPO_ROOT

TESTS = REPO_ROOT / "tests"


def _fixtures() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                "fixture" in ast.unparse(d) for d in node.decorator_list
            ):
                found[node.name].append(str(path.relative_to(REPO_ROOT)))
    return found


def test_no_fixture_is_defined_twice():
    fixtures = _fixtures()
    assert len(fixtures) > 30  # the walk saw the tree
    twice = {name: places for name, places in fixtures.items() if len(places) > 1}
    assert not twice, f"share these from a conftest.py instead of copying them: {twice}"


def test_the_tree_mirrors_the_package():
    packages = {p.parent.name.lstrip("_") for p in (REPO_ROOT / "uqlm_bert").glob("*/__init__.py")}
    folders = {p.name for p in TESTS.iterdir() if (p / "__init__.py").is_file()}
    # examples is the quickstart and its data: run by the README test in integration/
    assert packages - {"examples"} <= folders, sorted(packages - folders)
    assert folders - packages <= {"helpers", "integration"}, sorted(folders - packages)


def test_the_benchmarks_import_nothing_from_the_tests():
    leaning = []
    for path in sorted((REPO_ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            leaning += [
                f"{path.name}: {n}" for n in names if n == "tests" or n.startswith("tests.")
            ]
    assert not leaning, leaning


def test_every_test_file_the_docs_name_is_there():
    """The docs point readers at tests (``tests/test_api.py`` holds the list, ...): a move of a
    test file moves the pointer too."""
    import re

    named = {
        (doc.relative_to(REPO_ROOT), path)
        for doc in [
            REPO_ROOT / "README.md",
            REPO_ROOT / "CONTRIBUTING.md",
            *REPO_ROOT.glob("docs/*.md"),
        ]
        for path in re.findall(r"tests/[\w/]+\.py", doc.read_text(encoding="utf-8"))
    }
    assert len(named) > 5  # the docs do point at tests
    gone = sorted(f"{doc}: {path}" for doc, path in named if not (REPO_ROOT / path).is_file())
    assert not gone, gone
