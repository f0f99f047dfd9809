"""What the command says and returns: exit codes, problems on stderr, the summary on stdout.

Results go to files and stdout; problems, warnings and errors go to stderr, each line starting
``uqlm-bert:`` (a problem with a row starts with its file and line instead), so that a user can
tell the command's messages from a result.

Example:
    >>> import pandas as pd
    >>> print(summary(pd.DataFrame({"bert_score": [0.5, 1.0, float("nan")]}), ["bert_score"],
    ...               failed=1, title="in.jsonl -> out.jsonl"))
    in.jsonl -> out.jsonl
    rows: 3  failed: 1
    <BLANKLINE>
    scorer        scored      mean    median       min       max
    bert_score         2    0.7500    0.7500    0.5000    1.0000
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from uqlm_bert.io._rows import RowProblem

__all__ = [
    "EXIT_FAILED_ROWS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "MAX_LISTED_PROBLEMS",
    "error",
    "format_warning",
    "report_lines",
    "sampling_line",
    "report_problems",
    "summary",
]

#: Exit code: everything done.
EXIT_OK = 0
#: Exit code: the output was written, but some rows failed (each is reported on stderr).
EXIT_FAILED_ROWS = 1
#: Exit code: a usage or input error; nothing was written.
EXIT_USAGE = 2
#: Exit code: interrupted (Ctrl-C), as a shell reports it.
EXIT_INTERRUPTED = 130

#: At most this many row problems are listed on stderr; the output's error column has them all.
MAX_LISTED_PROBLEMS = 20


def error(message: str) -> None:
    """Say on stderr that the command failed, and why."""
    print(f"uqlm-bert: error: {message}", file=sys.stderr)


def format_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line=None
) -> str:
    """A warning as a line of the command's own, without the code location that only means
    something to a Python caller (for ``warnings.formatwarning``)."""
    return f"uqlm-bert: warning: {message}\n"


def report_lines(lines: list[str], where: str) -> None:
    """The first :data:`MAX_LISTED_PROBLEMS` of ``lines`` on stderr, then where to find them
    all (``where``); nothing when there are none."""
    if not lines:
        return
    for line in lines[:MAX_LISTED_PROBLEMS]:
        print(line, file=sys.stderr)
    more = len(lines) - MAX_LISTED_PROBLEMS
    tail = f"... and {more} more; " if more > 0 else ""
    print(f"uqlm-bert: {tail}{where}", file=sys.stderr)


def report_problems(problems: list[RowProblem], output: str) -> None:
    """The rows that cannot be scored, each with its file, line and field."""
    from uqlm_bert.io._rows import ERROR_COLUMN

    rows = len({p.row for p in problems})
    lines = [str(p) for p in problems]
    report_lines(lines, f"{rows} row(s) not scored; see the {ERROR_COLUMN} column of {output}")


def summary(out: pd.DataFrame, names: list[str], failed: int, title: str) -> str:
    """The summary printed after scoring: rows, failed rows, and per scorer how many rows have a
    score and their mean, median, min and max."""
    import numpy as np
    import pandas as pd

    lines = [title, f"rows: {len(out)}  failed: {failed}", ""]
    header = ("scorer", "scored", "mean", "median", "min", "max")
    table = [header]
    for name in names:
        values = pd.to_numeric(out[name], errors="coerce").to_numpy(dtype=np.float64)
        present = values[~np.isnan(values)]
        if present.size:
            stats = [np.mean(present), np.median(present), np.min(present), np.max(present)]
            cells = [f"{v:.4f}" for v in stats]
        else:
            cells = ["nan"] * 4
        table.append((name, str(present.size), *cells))
    width = max(len(row[0]) for row in table)
    for row in table:
        lines.append(f"{row[0]:<{width}}" + "".join(f"  {c:>8}" for c in row[1:]))
    return "\n".join(lines)


def sampling_line(sampling: dict) -> str:
    """What a run's sampling cost against a fixed run's (``metadata["sampling"]``): samples
    drawn and calls made, each beside a fixed run's.

    Example:
        >>> print(sampling_line({"rule": "until_settled", "samples_drawn": 31,
        ...                      "samples_fixed": 50, "calls": 23, "calls_fixed": 20}))
        samples drawn: 31 of a fixed run's 50 (62%; sampling until_settled); calls: 23 (a fixed run: 20)
    """
    drawn, fixed = sampling["samples_drawn"], sampling["samples_fixed"]
    share = f"{drawn / fixed:.0%}; " if fixed else ""
    return (
        f"samples drawn: {drawn} of a fixed run's {fixed} ({share}sampling {sampling['rule']}); "
        f"calls: {sampling['calls']} (a fixed run: {sampling['calls_fixed']})"
    )
