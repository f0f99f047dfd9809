"""``uqlm-bert score``: score a table of answers and their samples, in this process or on Ray.

Both engines go through :func:`uqlm_bert.io.score_table_file`, which reads the input, checks
every row, scores the good ones, attaches the scores and writes the output; they differ only in
what scores the rows. Problems with rows are reported on stderr before any scoring. In this
process, ``--explain``, ``--words`` and ``--refine`` read the answers' supports from the same
scoring pass (:mod:`uqlm_bert.cli._supports`).

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

from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.cli._options import checked_scorers, ray_pool, refuse_same_file
from uqlm_bert.cli._reporting import EXIT_FAILED_ROWS, EXIT_OK, report_problems, summary
from uqlm_bert.cli._supports import (
    REFINE_COLUMNS,
    WORDS_COLUMN,
    colour,
    explanation,
    support_columns,
    wants_supports,
)

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Run ``uqlm-bert score`` with its parsed options; return the exit code."""
    from uqlm_bert.io._file_scoring import score_table_file
    from uqlm_bert.io._paths import check_output_location

    names, settings = checked_scorers(args)
    check_output_location(args.output)
    refuse_same_file(args.output, "-o", [(args.input, "INPUT")])
    pool = ray_pool(args)
    supports = wants_supports(args)
    results: list[Any] = []  # the scored rows' result, where the supports are asked for
    if pool is not None:
        if supports:
            raise ConfigurationError(
                "--explain, --words and --refine read the supports of the scoring pass, which "
                "the Ray engine does not send back: score with --engine local for them"
            )
        score = _ray_scorer(args, names, settings, pool)
    elif supports:
        score = _result_scorer(args, names, settings, results)
    else:
        score = _local_scorer(names, settings, show_progress_bars=not args.quiet)
    extra = [*([WORDS_COLUMN] if args.words else []), *(REFINE_COLUMNS if args.refine else [])]
    scored = score_table_file(
        args.input,
        args.output,
        names,
        score,
        on_checked=lambda _table, _good, problems: report_problems(problems, args.output),
        extra_columns=extra,
    )
    if args.explain and results:
        print(explanation(results[0], colour=colour()))
    failed = int((~scored.good).sum())
    print(summary(scored.frame, names, failed=failed, title=f"{args.input} -> {args.output}"))
    return EXIT_FAILED_ROWS if scored.problems else EXIT_OK


def _local_scorer(names: list[str], settings: dict[str, Any], show_progress_bars: bool) -> Any:
    """Scores rows in this process; the models load on the first call, so a file with no row
    to score loads none."""

    def score(responses: list[str], samples: list[list[str | None]]) -> dict[str, Any]:
        from uqlm_bert.scorers import build_scorers
        from uqlm_bert.scorers._base import score_all

        scorers = build_scorers(names, settings)
        return score_all(scorers, responses, samples, show_progress_bars)

    return score


def _result_scorer(
    args: argparse.Namespace, names: list[str], settings: dict[str, Any], results: list[Any]
) -> Any:
    """Scores rows in this process as ``BlackBoxUQ.score`` does, keeping the result (appended
    to ``results``) for ``--explain``, and giving the columns of ``--words`` and ``--refine``
    beside the scores. Its rows are labelled by their position among the rows scored."""

    def score(responses: list[str], samples: list[list[str | None]]) -> dict[str, Any]:
        from uqlm_bert._blackbox._assembly import Assembly
        from uqlm_bert._inputs import ScoringInputs
        from uqlm_bert.scorers import build_scorers

        scorers = build_scorers(names, settings)
        inputs = ScoringInputs(list(responses), [list(s) for s in samples])
        result = Assembly().score_result(scorers, inputs, None, not args.quiet)
        results.append(result)
        return {
            **{name: result.data[name] for name in names},
            **support_columns(result, args),
        }

    return score


def _ray_scorer(
    args: argparse.Namespace, names: list[str], settings: dict[str, Any], pool: Any
) -> Any:
    """Scores rows on Ray (see ``ray_rows_scorer`` of :mod:`uqlm_bert.distributed`), with the pool of
    ``--num-workers`` actors on ``--address``."""
    from uqlm_bert.distributed._files import ray_rows_scorer

    return ray_rows_scorer(
        names, settings, pool, address=pool.address, show_progress_bars=not args.quiet
    )
