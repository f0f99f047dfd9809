"""``uqlm-bert evaluate``: compare generated texts with references (BLEU, ROUGE, BERTScore).

Each file is a table or a ``.txt`` file with one text per line; a row without a usable text on
either side is reported (file, line and field) and left out of the averages, and ``--per-line``
writes it with NaN scores and the reasons. BERTScore runs with :class:`~uqlm_bert.BERTScorer`'s
defaults, which give ``bert_score``'s numbers, under the options given.

Example:
    >>> import contextlib, io, os, tempfile
    >>> from uqlm_bert.cli._parser import build_parser
    >>> d = tempfile.mkdtemp()
    >>> preds, refs = os.path.join(d, "preds.txt"), os.path.join(d, "refs.txt")
    >>> _ = open(preds, "w").write("the cat sat on the mat\\n")
    >>> _ = open(refs, "w").write("the cat sat on the mat\\n")
    >>> args = build_parser().parse_args(["evaluate", preds, refs, "--format", "json", "-q"])
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     code = run(args)
    >>> import json; summary = json.loads(out.getvalue())
    >>> code, round(summary["bleu"], 4), round(summary["bertscore_f1"], 4)
    (0, 100.0, 1.0)
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert.cli._options import bertscore_settings, refuse_same_file
from uqlm_bert.cli._reporting import EXIT_FAILED_ROWS, EXIT_OK, report_lines

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from uqlm_bert.io._reading import Texts
    from uqlm_bert.io._rows import RowProblem

__all__ = ["PREDICTION_COLUMNS", "REFERENCE_COLUMNS", "run"]

#: The columns ``evaluate`` reads texts from in a table, first found first, unless told.
PREDICTION_COLUMNS = ("prediction", "response")
REFERENCE_COLUMNS = ("reference",)


def run(args: argparse.Namespace) -> int:
    """Run ``uqlm-bert evaluate`` with its parsed options; return the exit code."""
    import numpy as np

    from uqlm_bert.bertscore._engine import BERTScorer
    from uqlm_bert.evaluation._references import SUMMARY_KEYS, evaluate_references
    from uqlm_bert.io import write_table
    from uqlm_bert.io._paths import check_output_location
    from uqlm_bert.io._reading import load_texts
    from uqlm_bert.io._rows import ERROR_COLUMN

    settings = bertscore_settings(args)
    if args.per_line:
        check_output_location(args.per_line)
        refuse_same_file(
            args.per_line,
            "--per-line",
            [(args.predictions, "PREDICTIONS"), (args.references, "REFERENCES")],
        )
    predictions = load_texts(
        args.predictions, args.prediction_column, default_columns=PREDICTION_COLUMNS
    )
    references = load_texts(
        args.references, args.reference_column, default_columns=REFERENCE_COLUMNS
    )
    n = len(predictions.texts)
    if n != len(references.texts):
        raise InputValidationError(
            f"{args.predictions} has {n} {_unit(predictions)} but {args.references} has "
            f"{len(references.texts)} {_unit(references)}; give one reference per prediction, "
            "in the same order"
        )
    if not n:
        raise InputValidationError(f"{args.predictions}: no {_unit(predictions)} to evaluate")
    problems = sorted(predictions.problems + references.problems, key=lambda p: p.row)
    good = predictions.good & references.good
    failed = int((~good).sum())
    where = f"; see the {ERROR_COLUMN} column of {args.per_line}" if args.per_line else ""
    report_lines([str(p) for p in problems], f"{failed} row(s) not evaluated{where}")
    if not good.any():
        raise InputValidationError(
            f"no row of {args.predictions} and {args.references} has both a prediction and a "
            "reference to evaluate"
        )
    rows = np.flatnonzero(good)
    evaluation = evaluate_references(
        [predictions.texts[i] for i in rows],
        [references.texts[i] for i in rows],
        bertscorer=BERTScorer.from_settings(settings, show_progress_bars=not args.quiet),
        show_progress_bars=not args.quiet,
    )
    if args.per_line:
        per_line = _per_line(evaluation.per_line, predictions, references, rows, problems)
        write_table(per_line, args.per_line)
    status = EXIT_FAILED_ROWS if problems else EXIT_OK
    summary = evaluation.summary
    if args.format == "json":
        print(json.dumps({k: summary[k] for k in SUMMARY_KEYS}))
        return status
    table = [("lines", str(n))]
    if failed:
        table.append(("not_evaluated", str(failed)))
    table.append(("bleu", f"{summary['bleu']:.4f}"))
    table += [
        (f"bleu_precision_{k}", f"{p:.4f}") for k, p in enumerate(summary["bleu_precisions"], 1)
    ]
    table += [(k, f"{summary[k]:.4f}") for k in SUMMARY_KEYS[2:]]
    width = max(len(k) for k, _ in table)
    print("\n".join(f"{k:<{width}}  {v:>10}" for k, v in table))
    return status


def _unit(texts: Texts) -> str:
    return "lines" if texts.column is None else "rows"


def _per_line(
    scored: pd.DataFrame,
    predictions: Texts,
    references: Texts,
    rows: np.ndarray,
    problems: list[RowProblem],
) -> pd.DataFrame:
    """One row per input row, in order: the scores of the rows evaluated (``scored``, one row
    per entry of ``rows``), NaN and the reasons (file, line and field) for the others."""
    import numpy as np
    import pandas as pd

    from uqlm_bert.io._rows import ERROR_COLUMN

    n = len(predictions.texts)
    out = pd.DataFrame(
        {
            "line": np.arange(1, n + 1),
            "prediction": pd.Series(predictions.texts, dtype=object),
            "reference": pd.Series(references.texts, dtype=object),
        }
    )
    for column in scored.columns:
        if column not in out.columns:
            values = np.full(n, np.nan)
            values[rows] = scored[column].to_numpy(dtype=np.float64)
            out[column] = values
    reasons: list[list[str]] = [[] for _ in range(n)]
    for p in problems:
        reasons[p.row].append(str(p))
    out[ERROR_COLUMN] = pd.Series(["; ".join(r) or None for r in reasons], dtype=object)
    return out
