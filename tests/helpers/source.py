"""Reading the package's own source as a syntax tree, for tests that check its code."""

from __future__ import annotations

import ast
from pathlib import Path


def parse_source(path: Path) -> ast.Module:
    """``ast.parse`` of a source file, tried once more on Python's spurious ``SystemError``.

    CPython before 3.11.8 and 3.12.1 keeps the syntax-tree builder's recursion counter in state
    shared by all threads, and it can fall out of step (python/cpython#106905): ``ast.parse``
    then fails with "AST constructor recursion depth mismatch" on valid code. It happened once
    in a full run of the suite, with threads of earlier tests still alive. A second try starts
    from a fresh counter; a real syntax error still fails, as a ``SyntaxError``.
    """
    text = path.read_text(encoding="utf-8")
    try:
        return ast.parse(text, filename=str(path))
    except SystemError as exc:
        if "recursion depth mismatch" not in str(exc):
            raise
        return ast.parse(text, filename=str(path))
