"""Reading JSON Lines and JSON arrays into tables, one row per record, never dropping a row.

A ``.jsonl`` line, or an item of a ``.json`` array, that is not a JSON object, or that nests more
than :data:`~uqlm_bert.io._formats.MAX_NESTING` levels deep, is a row with every field missing and the
reason in :attr:`~uqlm_bert.io._table.Table.unreadable`, so that the output stays aligned with the input.
A JSON array is decoded item by item, with each item's line, so that one item too deep for
Python's recursion fails only its own row; a syntax error stops the file, since where the items
begin and end is then unknown.

Example:
    >>> table = read_jsonl("t.jsonl", '{"response": "a"}\\n\\n[1]\\n')
    >>> table.lines, table.unreadable
    ([1, 3], {1: "a JSON array, expected an object with the row's fields"})
    >>> read_json("t.json", '[{"response": "a"},\\n {"response": "b"}]').lines
    [1, 2]
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert._inputs import repair_text
from uqlm_bert._warn import warn_user
from uqlm_bert.io._formats import (
    MAX_NESTING,
    clip,
    json_error,
    json_type,
    nests_deeper_than,
    number_error,
)
from uqlm_bert.io._table import Table

__all__ = ["read_json", "read_jsonl"]

_TOO_DEEP = f"nested more than {MAX_NESTING} levels deep"
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
#: A JSON string, or one of the characters that nest or separate JSON values.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]', re.DOTALL)


def read_jsonl(name: str, text: str) -> Table:
    """The table of a JSON Lines text (blank lines skipped) read from the file ``name``."""
    records: list[Any] = []
    lines: list[int] = []
    unreadable: dict[int, str] = {}
    for number, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            continue
        record, problem = _parse_json(line.rstrip("\n"))
        if problem is not None:
            unreadable[len(records)] = f"not valid JSON ({problem}): {clip(line.strip())}"
        elif not isinstance(record, dict):
            hint = ""
            if isinstance(record, list) and record and all(isinstance(r, dict) for r in record):
                hint = " (a JSON array of records is read from a .json file)"
            unreadable[len(records)] = (
                f"a JSON {json_type(record)}, expected an object with the row's fields{hint}"
            )
        records.append(record)
        lines.append(number)
    return _records_table(name, records, lines, unreadable)


def read_json(name: str, text: str) -> Table:
    """The table of a ``.json`` file's text: a JSON array of records, else JSON Lines.

    Raises:
        InputValidationError: the array is not valid JSON, or the file is one JSON object.
    """
    start = _JSON_SPACE.match(text).end()  # type: ignore[union-attr]  # always matches
    if text.startswith("[", start):
        return _read_json_array(name, text, start)
    try:
        # a text nested too deep is not handed to the decoder (it would recurse to Python's
        # limit): read as JSON Lines, each line is refused on its own
        whole = None if nests_deeper_than(text) else json.loads(text)
    except (ValueError, RecursionError):
        whole = None  # several values (JSON Lines), or broken: each line is checked on its own
    if isinstance(whole, dict):
        over_lines = "\n" in text.strip()
        if over_lines or (whole and all(isinstance(v, dict) for v in whole.values())):
            raise InputValidationError(
                f"{name}: one JSON object{' over several lines' if over_lines else ''}, not a "
                "table; a .json table is a JSON array of records, as "
                "df.to_json(path, orient='records') writes it, or JSON Lines, one object per line"
            )
    return read_jsonl(name, text)


def _read_json_array(name: str, text: str, start: int) -> Table:
    """The records of a JSON array, each with the line it starts on.

    The array is decoded item by item, so that an item nested too deeply is one unreadable row;
    such an item is found by a scan without recursion and never handed to the decoder. A syntax
    error stops the file: where items begin and end is then unknown.
    """
    decoder = json.JSONDecoder()
    # one scan of the whole text; only when it finds brackets too deep is each item scanned
    deep_items = nests_deeper_than(text, MAX_NESTING + 1)  # the array's own bracket counts
    records: list[Any] = []
    lines: list[int] = []
    unreadable: dict[int, str] = {}
    where = _Lines(text)

    def fail(pos: int, what: str) -> InputValidationError:
        return InputValidationError(
            f"{name}:{where.line(pos)}: not valid JSON ({what} at column {where.column(pos)}); "
            "a .json file is one JSON array and is read as a whole: fix it, or write JSON "
            "Lines (.jsonl), where a broken line fails only its own row"
        )

    pos = _skip_space(text, start + 1)
    if text.startswith("]", pos):
        pos += 1
    else:
        while True:
            problem: str | None = None
            try:
                # an item too deep is refused before the decoder recurses into it
                if deep_items and nests_deeper_than(text[pos : _end_of_item(text, pos)]):
                    raise RecursionError
                record, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise fail(exc.pos, exc.msg.removesuffix(" at")) from None
            except (RecursionError, ValueError) as exc:  # too deep, or a number too long
                end = _end_of_item(text, pos)
                if end is None:
                    raise fail(pos, "an array item that never ends") from None
                problem = _TOO_DEEP if isinstance(exc, RecursionError) else number_error(exc)
                record = None
            if problem is not None:
                unreadable[len(records)] = (
                    f"not valid JSON ({problem}): {clip(text[pos:end].strip())}"
                )
            elif not isinstance(record, dict):
                unreadable[len(records)] = (
                    f"a JSON {json_type(record)}, expected an object with the row's fields"
                )
            records.append(record)
            lines.append(where.line(pos))
            pos = _skip_space(text, end)
            if text.startswith(",", pos):
                pos = _skip_space(text, pos + 1)
            elif text.startswith("]", pos):
                pos += 1
                break
            else:
                raise fail(pos, f"expecting ',' or ']' after item {len(records)} of the array")
    pos = _skip_space(text, pos)
    if pos != len(text):
        raise fail(pos, "extra data after the array")
    return _records_table(name, records, lines, unreadable)


class _Lines:
    """Line and column of positions in a text, counting forward from the last one asked."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.number = text, 0, 1

    def line(self, pos: int) -> int:
        if pos < self.pos:
            return self.text.count("\n", 0, pos) + 1
        self.number += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.number

    def column(self, pos: int) -> int:
        return pos - self.text.rfind("\n", 0, pos)


def _skip_space(text: str, pos: int) -> int:
    return _JSON_SPACE.match(text, pos).end()  # type: ignore[union-attr]  # always matches


def _end_of_item(text: str, pos: int) -> int | None:
    """Where the array item starting at ``pos`` ends: the ``,`` or ``]`` after it (None: never).

    Scans without recursion, counting brackets outside strings, for an item the decoder could
    not finish (nested deeper than Python recurses).
    """
    depth = 0
    for match in _JSON_TOKEN.finditer(text, pos):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
        elif token in ("]", "}"):
            if depth == 0:
                return match.start()
            depth -= 1
        elif token == "," and depth == 0:
            return match.start()
    return None


def _parse_json(text: str) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, why)`` when ``text`` is not one readable JSON value."""
    if nests_deeper_than(text):  # refused before the decoder recurses that deep
        return None, _TOO_DEEP
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, json_error(exc)
    except RecursionError:
        return None, _TOO_DEEP
    except ValueError as exc:  # a number longer than Python converts
        return None, number_error(exc)
    return value, None


def _records_table(
    name: str, records: list[Any], lines: list[int], unreadable: dict[int, str]
) -> Table:
    """A table of parsed records; an unreadable one is a row with every field missing.

    Text that is not valid Unicode (a lone surrogate, which only a JSON ``\\ud800`` escape can
    give) is repaired to U+FFFD, as everywhere in this package, with one warning that counts it.
    """
    rows = [{} if i in unreadable else r for i, r in enumerate(records)]
    rows, repaired = _repair_records(rows)
    if repaired:
        first = lines[repaired[0]]
        warn_user(
            f"{name}: {len(repaired)} record(s) held text that is not valid Unicode (lone "
            f"surrogates, first on line {first}); each was replaced by U+FFFD",
            UserWarning,
        )
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    frame = pd.DataFrame(
        {j: pd.Series([r.get(c) for r in rows], dtype=object) for j, c in enumerate(columns)},
        index=pd.RangeIndex(len(rows)),
    )
    # the names as they are: a string index pandas infers cannot hold a lone surrogate
    frame.columns = pd.Index(list(columns), dtype=object)
    return Table(frame, name, lines, unreadable)


def _repair_records(rows: list[Any]) -> tuple[list[Any], list[int]]:
    """The records with lone surrogates replaced in every key and string, and which changed."""
    out: list[Any] = []
    changed: list[int] = []
    for i, row in enumerate(rows):
        fixed, did = _repair_value(row)
        out.append(fixed)
        if did:
            changed.append(i)
    return out, changed


def _repair_value(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, list):
        items = [_repair_value(v) for v in value]
        return [v for v, _ in items], any(d for _, d in items)
    if isinstance(value, dict):
        pairs = [(repair_text(k), _repair_value(v)) for k, v in value.items()]
        fixed = {k: v for (k, _), (v, _) in pairs}
        return fixed, any(dk or dv for (_, dk), (_, dv) in pairs)
    return value, False
