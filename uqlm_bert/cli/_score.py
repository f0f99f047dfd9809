"""``uqlm-bert score``: score a table of answers and their samples, in this process or on Ray.

Both engines go through :func:`uqlm_bert.io.score_table_file`, which reads the input, checks
every row, scores the good ones, attaches the scores and writes the output; they differ only in
what scores the rows. Problems with rows are reported on stderr before any scoring.

Example:
    >>> import os, tempfile
    >>> from uqlm_bert.cli._parser import build_parser
    >>> src = os.path.join(tempfile.mkdtemp(), "in.jsonl")
    >>> _ = open(src, "w").write('{"response": "a", "sampled_responses": ["a", "b"]}\\n')
    >>> argv = ["score", src, "-o", src + ".csv", "--scorers", "exact_match", "-q"]
    >>> run(build_parser().parse_args(argv))  # doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE
    /...in.jsonl -> /...in.jsonl.csv
    rows: 1  failed: 0
    <BLANKLINE>
    scorer  scored  mean  median  min  max
    exact_match  1  0.5000  0.5000  0.5000  0.5000
    0
"""

from __future__ import annotations

import argparse
from typing import Any

from uqlm_bert.cli._options import checked_scorers, ray_pool, refuse_same_file
from uqlm_bert.cli._reporting import EXIT_FAILED_ROWS, EXIT_OK, report_problems, summary

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Run ``uqlm-bert score`` with its parsed options; return the exit code."""
    from uqlm_bert.io import check_output_location
    from uqlm_bert.io._file_scoring import score_table_file

    names, settings = checked_scorers(args)
    check_output_location(args.output)
    refuse_same_file(args.output, "-o", [(args.input, "INPUT")])
    pool = ray_pool(args)
    if pool is not None:
        score = _ray_scorer(args, names, settings, pool)
    else:
        score = _local_scorer(names, settings, show_progress_bars=not args.quiet)
    scored = score_table_file(
        args.input,
        args.output,
        names,
        score,
        on_checked=lambda _table, _good, problems: report_problems(problems, args.output),
    )
    failed = int((~scored.good).sum())
    print(summary(scored.frame, names, failed=failed, title=f"{args.input} -> {args.output}"))
    return EXIT_FAILED_ROWS if scored.problems else EXIT_OK


def _local_scorer(names: list[str], settings: dict[str, Any], show_progress_bars: bool) -> Any:
    """Scores rows in this process; the models load on the first call, so a file with no row
    to score loads none."""

    def score(responses: list[str], samples: list[list[str | None]]) -> dict[str, Any]:
        from uqlm_bert.scorers import build_scorers, score_all

        scorers = build_scorers(names, settings)
        return score_all(scorers, responses, samples, show_progress_bars)

    return score


def _ray_scorer(
    args: argparse.Namespace, names: list[str], settings: dict[str, Any], pool: Any
) -> Any:
    """Scores rows on Ray (see :func:`uqlm_bert.distributed.ray_rows_scorer`), with the pool of
    ``--num-workers`` actors on ``--address``."""
    from uqlm_bert.distributed import ray_rows_scorer

    return ray_rows_scorer(
        names, settings, pool, address=pool.address, show_progress_bars=not args.quiet
    )
