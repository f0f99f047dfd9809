"""A ``sampled_responses`` cell as a list of strings and missing values.

Files hold the samples of a row in many shapes: a list (JSON Lines, JSON, Parquet), JSON text
(``["a", null]``, as :func:`~uqlm_bert.io.write_table` writes a CSV cell) or a Python list
literal (``['a', None]``, as ``df.to_csv`` writes one). A Python literal is parsed, never
evaluated.

Example:
    >>> parse_samples("['Paris', None, nan]")  # a cell of df.to_csv
    ['Paris', None, None]
"""

from __future__ import annotations

import ast
import io
import json
import tokenize
from typing import Any

import numpy as np

import uqlm_bert.io._formats as formats
from uqlm_bert._inputs import is_missing

__all__ = ["parse_samples"]


def parse_samples(value: Any) -> list[str | None]:
    """A ``sampled_responses`` cell as a list of strings and Nones.

    Accepts a list, tuple or array, or a string holding a list: JSON (``["a", null]``, as
    :func:`write_table` writes CSV cells) or, failing that, a Python list literal as ``repr``
    writes it (``['a', None]``, as ``df.to_csv`` writes list cells), where ``nan`` is a missing
    sample. A Python literal is parsed, never evaluated: only string constants, ``None``,
    ``nan`` and ``np.str_('...')`` are accepted as items.

    Raises:
        ValueError: the cell is missing, not a list, or holds an item that is not a string or
            null; the message says which.

    Example:
        >>> parse_samples('["a", null]')
        ['a', None]
        >>> parse_samples("['Paris', \\"it's\\", None, nan]")
        ['Paris', "it's", None, None]
        >>> parse_samples("['a' 'b']")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: not a JSON list (...) nor a Python list (two strings with no comma between ...)
    """
    if isinstance(value, str):
        value = _list_from_text(value)
    elif is_missing(value):
        raise ValueError("missing (empty or null); give a list of sampled responses, [] for none")
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    elif not isinstance(value, (list, tuple)):
        raise ValueError(f"a {type(value).__name__}, expected a list of strings")
    out: list[str | None] = []
    for j, item in enumerate(value):
        if is_missing(item):
            out.append(None)
        elif isinstance(item, str):
            out.append(str(item))
        else:
            raise ValueError(f"item {j} is a {type(item).__name__}, expected a string or null")
    return out


def _list_from_text(text: str) -> list[Any]:
    """The list a text cell holds: JSON, else (for text that starts with ``[``) Python."""
    if formats.nests_deeper_than(text):  # no samples list nests; and no parser recursing that deep
        raise ValueError(
            f"not a JSON list (nested too deeply to read) nor a Python list (nested more than "
            f"{formats.MAX_NESTING} levels deep)"
        )
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        json_problem = formats.json_error(exc)
    except RecursionError:
        json_problem = "nested too deeply to read"
    except ValueError as exc:  # a number longer than Python converts
        json_problem = formats.number_error(exc)
    else:
        if not isinstance(parsed, list):
            raise ValueError(f"a JSON {formats.json_type(parsed)}, expected a list of strings")
        return parsed
    if not text.lstrip().startswith("["):
        raise ValueError(f"not a JSON list ({json_problem})")
    try:
        return _python_list(text)
    except ValueError as exc:
        raise ValueError(f"not a JSON list ({json_problem}) nor a Python list ({exc})") from None


def _python_list(text: str) -> list[Any]:
    """A Python list literal, as ``repr`` writes a list, parsed without evaluating anything.

    Items may be constants (a string, None, a number: :func:`parse_samples` then says which
    item is not a string), ``nan`` (how ``repr`` writes a float NaN: a missing sample) and
    ``np.str_('...')`` (how NumPy 2 writes its strings). Anything else is refused.
    """
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        where = f"column {exc.offset}"
        if "\n" in source:
            where = f"line {exc.lineno}, {where}"
        raise ValueError(f"{exc.msg} at {where}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, too deep, too big
        raise ValueError(str(exc) or type(exc).__name__) from None
    node = tree.body
    if not isinstance(node, ast.List):
        raise ValueError("not a list literal")
    if _adjacent_strings(source):
        # 'a' 'b' is one string to Python: refuse, rather than join two samples into one
        raise ValueError(
            "two strings with no comma between them, as NumPy writes an array; "
            "write lists, or write JSON"
        )
    items: list[Any] = []
    for j, item in enumerate(node.elts):
        if isinstance(item, ast.Constant):
            items.append(item.value)
        elif isinstance(item, ast.Name) and item.id == "nan":
            items.append(None)
        elif _is_numpy_string(item):
            items.append(item.args[0].value)  # type: ignore[attr-defined]
        else:
            segment = ast.get_source_segment(source, item) or type(item).__name__
            raise ValueError(
                f"item {j} is not a literal string or None: {formats.clip(segment, 40)} "
                f"at column {item.col_offset + 1}"
            )
    return items


def _adjacent_strings(source: str) -> bool:
    """Whether two string tokens follow each other in ``source`` (valid Python)."""
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in skip:
            continue
        if token.type == tokenize.STRING and previous == tokenize.STRING:
            return True
        previous = token.type
    return False


def _is_numpy_string(node: ast.expr) -> bool:
    """``np.str_('...')`` or ``numpy.str_('...')`` with one string constant, and nothing else."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "str_"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("np", "numpy")
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )
