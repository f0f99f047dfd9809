"""A table as read from a file, with where each row came from: the readers' one result.

Example:
    >>> import pandas as pd
    >>> Table(pd.DataFrame({"a": [1, 2]}), "t.parquet").location(1)
    't.parquet: row 2'
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

__all__ = ["Table"]


@dataclass(frozen=True)
class Table:
    """A table as read from a file, with where each row came from.

    Attributes:
        frame: the rows, in file order; columns in first-seen order.
        path: the file.
        lines: the line each row starts on (JSON Lines and CSV), or None (Parquet).
        unreadable: row position -> why that record could not be parsed (its fields are missing).

    Example:
        >>> Table(pd.DataFrame({"a": [1]}), "t.jsonl", [1]).location(0)
        't.jsonl:1'
    """

    frame: pd.DataFrame
    path: str
    lines: list[int] | None = None
    unreadable: dict[int, str] = field(default_factory=dict)

    def location(self, row: int) -> str:
        """``file:line`` (or ``file: row N`` for Parquet) of the row at position ``row``."""
        if self.lines is not None:
            return f"{self.path}:{self.lines[row]}"
        return f"{self.path}: row {row + 1}"
