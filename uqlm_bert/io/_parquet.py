"""Reading Parquet into tables, keeping the types that JSON has no word for.

A column whose Arrow type JSON cannot hold (binary, decimal, date, time, timestamp, duration,
...) and an integer column with nulls are read as ``pd.ArrowDtype`` columns, so that a Parquet
output gets them back with the same Arrow type; text, lists and structs become plain Python
values.

Example:
    >>> import pyarrow as pa, pyarrow.parquet as pq, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> pq.write_table(pa.table({"n": pa.array([1, None]), "s": ["a", "b"]}), path)
    >>> frame = read_parquet(path).frame
    >>> str(frame["n"].dtype), frame["s"].tolist()
    ('int64[pyarrow]', ['a', 'b'])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert._inputs import is_missing
from uqlm_bert.io._formats import pyarrow_parquet
from uqlm_bert.io._table import Table

__all__ = ["read_parquet"]


def read_parquet(name: str) -> Table:
    """The table of the Parquet file ``name``.

    Raises:
        InputValidationError: the file is not Parquet, repeats a column, or holds a value
            pandas cannot hold.
    """
    pq = pyarrow_parquet()
    try:
        arrow = pq.read_table(name)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad file
        raise InputValidationError(f"{name}: cannot read as Parquet: {exc}") from exc
    names = arrow.column_names
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputValidationError(f"{name}: the file repeats column(s) {duplicates}")
    kept = {f.type for f in arrow.schema if _kept_as_arrow(f.type)}
    try:
        frame = arrow.to_pandas(types_mapper=lambda t: pd.ArrowDtype(t) if t in kept else None)
    except Exception as exc:  # a value pandas cannot hold
        raise InputValidationError(f"{name}: cannot read as Parquet: {exc}") from exc
    frame = frame.reset_index(drop=True)
    for i, f in enumerate(arrow.schema):
        # an integer column with nulls would become float64 (1 -> 1.0): keep its Arrow type
        if f.name in frame.columns and _is_integer(f.type) and arrow.column(i).null_count:
            frame[f.name] = pd.Series(
                pd.arrays.ArrowExtensionArray(arrow.column(i)), index=frame.index
            )
    for column in frame.columns:
        dtype = frame[column].dtype
        if not isinstance(dtype, pd.ArrowDtype) and pd.api.types.is_string_dtype(dtype):
            # text, lists, structs: plain Python values
            frame[column] = pd.Series(
                [None if is_missing(v) else _plain(v) for v in frame[column].tolist()],
                dtype=object,
                index=frame.index,
            )
    return Table(frame, name, None)


def _is_integer(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(arrow_type))


def _kept_as_arrow(arrow_type: Any) -> bool:
    """Whether a column of this Arrow type is read as ``pd.ArrowDtype``: its values (or values
    inside it) have no JSON type (binary, decimal, temporal, extension, union, ...)."""
    import pyarrow as pa

    t, types = arrow_type, pa.types
    plain = (types.is_null, types.is_boolean, types.is_integer, types.is_floating,
             types.is_string, types.is_large_string, getattr(types, "is_string_view", None))  # fmt: skip
    if any(check is not None and check(t) for check in plain):
        return False
    if types.is_dictionary(t):
        return _kept_as_arrow(t.value_type)
    lists = (types.is_list, types.is_large_list, types.is_fixed_size_list,
             getattr(types, "is_list_view", None), getattr(types, "is_large_list_view", None))  # fmt: skip
    if any(check is not None and check(t) for check in lists):
        return _kept_as_arrow(t.value_type)
    if types.is_map(t):
        return _kept_as_arrow(t.key_type) or _kept_as_arrow(t.item_type)
    if types.is_struct(t):
        return any(_kept_as_arrow(t.field(i).type) for i in range(t.num_fields))
    return True


def _plain(value: Any) -> Any:
    """Arrays (as Parquet gives list cells) as nested lists; everything else as it is."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
