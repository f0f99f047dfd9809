"""Which format a file's suffix names, and the wording shared by the readers' messages.

Example:
    >>> table_format("out/answers.JSONL"), FORMATS[".pq"]
    ('jsonl', 'parquet')
    >>> clip("x" * 300, 5)
    'xxxxx... (300 characters)'
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from uqlm_bert._exceptions import ConfigurationError, InputValidationError

__all__ = [
    "FORMATS",
    "MAX_NESTING",
    "nests_deeper_than",
    "TEXT_SUFFIXES",
    "clip",
    "json_error",
    "json_type",
    "number_error",
    "pyarrow_parquet",
    "table_format",
]

#: Table formats by file suffix.
FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}

#: Suffixes of plain text files, read by :func:`~uqlm_bert.io._reading.load_texts` as one text per line.
TEXT_SUFFIXES = (".txt",)

#: How deeply lists and objects may nest in a JSON record; a deeper record is unreadable.
MAX_NESTING = 100

# A quoted string (JSON's double quotes, or Python's single ones); a bracket.
_QUOTED = re.compile(r""""[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'""", re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}()]")


def nests_deeper_than(text: str, limit: int = MAX_NESTING) -> bool:
    """Whether brackets outside quoted strings nest more than ``limit`` deep in ``text``.

    Scans without recursion, so that a parser is never handed a text that would take it to
    Python's recursion limit: there, a garbage collection that runs a finalizer (any object's
    ``__del__``, the caller's included) fails with ``RecursionError`` too.

    Example:
        >>> nests_deeper_than("[" * 101 + "]" * 101), nests_deeper_than('["[[[[", "x"]', 2)
        (True, False)
    """
    if sum(text.count(c) for c in "[{(") <= limit:
        return False
    depth = 0
    # strings are cut out and the brackets found by the regex engine: the loop below sees
    # brackets only, not every quoted string of a large file
    for token in _BRACKET.findall(_QUOTED.sub("", text)):
        if token in "[{(":
            depth += 1
            if depth > limit:
                return True
        elif token in "]})":
            depth = max(0, depth - 1)
    return False


def table_format(path: str | os.PathLike[str]) -> str:
    """The format (``"jsonl"``, ``"json"``, ``"csv"`` or ``"parquet"``) that ``path``'s suffix names.

    Raises:
        InputValidationError: the suffix is not one of :data:`FORMATS`.

    Example:
        >>> table_format("out/answers.JSONL"), table_format("answers.json")
        ('jsonl', 'json')
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(FORMATS)
        raise InputValidationError(
            f"{os.fspath(path)}: unknown table format {suffix or '(no suffix)'!r}; "
            f"use one of {known}"
        )
    return FORMATS[suffix]


def pyarrow_parquet() -> Any:
    """``pyarrow.parquet``, imported on first use: only Parquet files need it.

    Raises:
        ConfigurationError: pyarrow is not installed.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigurationError(
            "Parquet files need pyarrow: pip install pyarrow (or 'uqlm-bert[cli]')"
        ) from exc
    return pq


def json_error(exc: json.JSONDecodeError) -> str:
    """json's message with the column: ``Unterminated string starting at column 12``.

    json ends some messages with "at", meaning the position it adds itself.
    """
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


def number_error(exc: ValueError) -> str:
    """Why json could not read a number: Python caps the digits of an int it converts."""
    if "integer string conversion" in str(exc):
        return f"a number longer than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type: ``object``, ``array``, ``number``, ..."""
    names = {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters for a message, saying how long it was."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"
