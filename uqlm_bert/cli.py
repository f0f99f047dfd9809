"""The ``uqlm-bert`` command: score answer tables, generate and score, evaluate against references.

::

    uqlm-bert score answers.jsonl -o scored.jsonl --scorers bert_score
    uqlm-bert generate-and-score prompts.txt -o scored.csv --model gpt-4o-mini -m 5
    uqlm-bert evaluate predictions.txt references.txt --format json

Results go to files and stdout; progress bars, warnings and problems go to stderr. Exit codes: 0
success; 1 some rows failed (each reported on stderr with file, line and field, and written with
NaN scores in its place); 2 usage or input error (nothing is written). Output files are written
atomically, so an existing file is either replaced whole or left as it was.

See docs/cli.md for every option.

Example:
    >>> import contextlib, io, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> src = os.path.join(d, "answers.jsonl")
    >>> _ = open(src, "w").write('{"response": "Paris", "sampled_responses": ["Paris"]}\\n')
    >>> with contextlib.redirect_stdout(io.StringIO()):
    ...     code = main(["score", src, "-o", os.path.join(d, "out.csv"), "--quiet"])
    >>> code
    0
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from uqlm_bert.exceptions import ConfigurationError, InputValidationError, UQLMBertError

if TYPE_CHECKING:  # imported where they are used: `uqlm-bert --help` stays fast
    import numpy as np
    import pandas as pd

    from uqlm_bert.io import RowProblem, Texts

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAILED_ROWS", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_FAILED_ROWS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: At most this many row problems are listed on stderr; the output's error column has them all.
MAX_LISTED_PROBLEMS = 20

#: The columns ``evaluate`` reads texts from in a table, first found first, unless told.
PREDICTION_COLUMNS = ("prediction", "response")
REFERENCE_COLUMNS = ("reference",)

logger = logging.getLogger("uqlm_bert")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``uqlm-bert`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Example:
        >>> main(["--version"])  # doctest: +ELLIPSIS
        uqlm-bert ...
        0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("uqlm-bert: %(levelname)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    logger.addHandler(handler)
    # a warning on the terminal reads like the command's own messages, without the code
    # location that only means something to a Python caller
    formatwarning = warnings.formatwarning
    warnings.formatwarning = _format_warning
    try:
        return args.run(args)
    except UQLMBertError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror or exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _error("interrupted; no output was written")
        return EXIT_INTERRUPTED
    finally:
        logger.removeHandler(handler)
        warnings.formatwarning = formatwarning


def _format_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line=None
) -> str:
    return f"uqlm-bert: warning: {message}\n"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``uqlm-bert`` and its subcommands.

    Example:
        >>> build_parser().parse_args(["evaluate", "p.txt", "r.txt"]).format
        'table'
    """
    from uqlm_bert import __version__

    parser = argparse.ArgumentParser(
        prog="uqlm-bert",
        description="How far to trust an LLM's answers: BERTScore confidence from sampled answers.",
        epilog="Exit codes: 0 success, 1 some rows failed, 2 usage or input error.",
    )
    parser.add_argument("--version", action="version", version=f"uqlm-bert {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars (problems are still reported)"
    )
    bert = argparse.ArgumentParser(add_help=False)
    group = bert.add_argument_group("BERTScore settings")
    group.add_argument(
        "--model-type",
        help="Hugging Face model name or local path (default: the embedded all-MiniLM-L6-v2)",
    )
    group.add_argument(
        "--num-layers",
        type=int,  # its range is checked by BERTScoreSettings, as for every other entry
        help="layer whose embeddings are matched (default: the published choice for the model)",
    )
    group.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        help="model precision (default float32: exact)",
    )
    group.add_argument("--device", help="cpu, cuda, cuda:1, mps, ... (default: cuda, mps, cpu)")
    group.add_argument("--batch-size", type=_positive_int, help="texts per forward pass")
    group.add_argument(
        "--idf",
        nargs="?",
        const="run",
        choices=["fixed", "run", "off"],
        help="token weights: fixed (the default of the bert_score scorers: idf from English "
        "word frequencies, the same for every row), run (idf over the references of the run, "
        "as bert_score computes it; also what a bare --idf means), off (plain BERTScore)",
    )
    group.add_argument(
        "--rescale-with-baseline",
        action="store_true",
        help="rescale scores with the model's baseline for --lang",
    )
    group.add_argument("--lang", help="language of the texts, for the baseline (default en)")
    scorers = argparse.ArgumentParser(add_help=False)
    scorers.add_argument(
        "--scorers",
        type=_name_list,
        default=["bert_score"],
        metavar="NAMES",
        help="comma-separated scorer names (default bert_score)",
    )

    score = commands.add_parser(
        "score",
        parents=[scorers, bert, quiet],
        help="score a table of answers and their sampled answers",
        description="Score each row's response against its sampled_responses; write every "
        "input row and column plus one column per scorer and a score_error column.",
    )
    score.add_argument(
        "input",
        metavar="INPUT",
        help=".jsonl, .json, .csv or .parquet with response and sampled_responses columns",
    )
    score.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUTPUT",
        help="output table; its suffix (.jsonl, .json, .csv, .parquet) sets the format",
    )
    score.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="score in this process (default) or on a Ray cluster",
    )
    score.add_argument(
        "--address", help="Ray cluster address (--engine ray; default: a local Ray instance)"
    )
    score.add_argument(
        "--num-workers", type=_positive_int, help="Ray scoring workers (--engine ray)"
    )
    score.set_defaults(run=_run_score)

    gen = commands.add_parser(
        "generate-and-score",
        parents=[scorers, bert, quiet],
        help="ask an OpenAI-compatible server for answers and samples, and score them",
        description="For each prompt, ask the model once for an answer and -m more times for "
        "samples, score the answer against the samples, and write the table. The API key is "
        "read from the environment variable named by --api-key-env.",
    )
    gen.add_argument(
        "prompts",
        metavar="PROMPTS",
        help="a text file, one prompt per line, or a .jsonl, .json, .csv or .parquet table "
        "with a prompt column",
    )
    gen.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUTPUT",
        help="output table; its suffix (.jsonl, .json, .csv, .parquet) sets the format",
    )
    gen.add_argument("--model", required=True, help="the model name the server knows")
    gen.add_argument(
        "--base-url",
        help="the server's OpenAI-compatible base URL, e.g. http://localhost:8000/v1 "
        "(default: OpenAI's)",
    )
    gen.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the API key (default OPENAI_API_KEY)",
    )
    gen.add_argument(
        "-m",
        "--num-responses",
        type=_positive_int,
        default=5,
        metavar="M",
        help="sampled answers per prompt (default 5)",
    )
    gen.add_argument(
        "--max-calls-per-min",
        type=_positive_int,
        metavar="N",
        help="at most N HTTP calls (retries included) per minute",
    )
    gen.add_argument(
        "--max-concurrency",
        type=_positive_int,
        default=256,
        help="the most calls in flight at once (default 256); within it the number adapts to "
        "the server, growing while it keeps up and shrinking on 429s, 5xx and timeouts",
    )
    gen.add_argument(
        "--temperature", type=float, help="temperature of the answer (default: the server's)"
    )
    gen.add_argument(
        "--sampling-temperature",
        type=float,
        default=1.0,
        help="temperature of the samples (default 1.0)",
    )
    gen.add_argument("--system-prompt", help="a system message sent before every prompt")
    gen.add_argument(
        "--max-retries",
        type=_non_negative_int,
        default=5,
        help="retries after transient failures (default 5)",
    )
    gen.add_argument(
        "--request-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="seconds one call may take (default 60)",
    )
    gen.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="JSONL file recording every answer as it arrives; rerunning with it skips what "
        "is done",
    )
    gen.set_defaults(run=_run_generate_and_score)

    ev = commands.add_parser(
        "evaluate",
        parents=[bert, quiet],
        help="compare generated texts with references: BLEU, ROUGE, BERTScore",
        description="Reference-based evaluation of each prediction against the reference in "
        "the same row (or line): corpus BLEU (sacrebleu) with 1- to 4-gram precisions, "
        "ROUGE-1/2/L F-measures (rouge-score) and BERTScore P/R/F1, averaged over rows. Each "
        "file is a table (.jsonl, .ndjson, .json, .csv, .parquet, .pq) or a .txt file with one "
        "text per line.",
    )
    ev.add_argument(
        "predictions",
        metavar="PREDICTIONS",
        help="generated texts: a table, or a .txt file with one text per line",
    )
    ev.add_argument(
        "references",
        metavar="REFERENCES",
        help="reference texts, one per row (or line) of PREDICTIONS: a table or a .txt file",
    )
    ev.add_argument(
        "--prediction-column",
        metavar="NAME",
        help="the column of texts in PREDICTIONS, a table (default: prediction, else response)",
    )
    ev.add_argument(
        "--reference-column",
        metavar="NAME",
        help="the column of texts in REFERENCES, a table (default: reference)",
    )
    ev.add_argument(
        "--format",
        choices=["table", "json"],
        default="table",
        help="how to print the scores (default table)",
    )
    ev.add_argument(
        "--per-line",
        metavar="OUT",
        help="also write each row's scores to this table (.jsonl, .json, .csv or .parquet)",
    )
    ev.set_defaults(run=_run_evaluate)
    return parser


# -- score -----------------------------------------------------------------------------------------


def _run_score(args: argparse.Namespace) -> int:
    from uqlm_bert.io.scoring import score_table_file

    names, settings = _checked_scorers(args)
    _check_output(args.output)
    _refuse_same_file(args.output, "-o", [(args.input, "INPUT")])
    if args.engine == "local" and (args.address is not None or args.num_workers is not None):
        raise ConfigurationError("--address and --num-workers need --engine ray")
    if args.engine == "ray":
        score = _ray_scorer(args, names, settings)
    else:
        score = _local_scorer(names, settings, show_progress_bars=not args.quiet)
    scored = score_table_file(
        args.input,
        args.output,
        names,
        score,
        on_checked=lambda _table, _good, problems: _report_problems(problems, args.output),
    )
    failed = int((~scored.good).sum())
    print(_summary(scored.frame, names, failed=failed, title=f"{args.input} -> {args.output}"))
    return EXIT_FAILED_ROWS if scored.problems else EXIT_OK


def _local_scorer(names: list[str], settings: dict[str, Any], show_progress_bars: bool) -> Any:
    """Scores rows in this process; the models load on the first call, so a file with no row
    to score loads none."""

    def score(responses: list[str], samples: list[list[str | None]]) -> dict[str, Any]:
        from uqlm_bert.scorers import build_scorers, score_all

        scorers = build_scorers(names, **settings)
        return score_all(scorers, responses, samples, show_progress_bars)

    return score


def _ray_scorer(args: argparse.Namespace, names: list[str], settings: dict[str, Any]) -> Any:
    """Scores rows on Ray (see :func:`uqlm_bert.distributed.ray_rows_scorer`); refuses now,
    before the file is read, when Ray is missing or a count is invalid."""
    from uqlm_bert.distributed import ray_rows_scorer

    return ray_rows_scorer(
        names,
        settings,
        address=args.address,
        num_workers=args.num_workers,
        show_progress_bars=not args.quiet,
    )


# -- generate-and-score ----------------------------------------------------------------------------


def _run_generate_and_score(args: argparse.Namespace) -> int:
    from uqlm_bert.black_box import BlackBoxUQ
    from uqlm_bert.failures import FAILED_CALLS_WARNING
    from uqlm_bert.io import check_writable, load_prompts, write_table

    names, settings = _checked_scorers(args)
    _check_output(args.output)
    _refuse_same_file(args.output, "-o", [(args.prompts, "PROMPTS")])
    _refuse_same_file(
        args.checkpoint, "--checkpoint", [(args.output, "-o"), (args.prompts, "PROMPTS")]
    )
    prompts = load_prompts(args.prompts)
    check_writable(prompts.frame, args.output, source=prompts.path, lines=prompts.lines)
    llm = _chat_model(args)
    uq = BlackBoxUQ(
        llm=llm,
        scorers=names,
        system_prompt=args.system_prompt,
        max_calls_per_min=args.max_calls_per_min,
        max_concurrency=args.max_concurrency,
        sampling_temperature=args.sampling_temperature,
        max_retries=args.max_retries,
        request_timeout=args.request_timeout,
        show_progress_bars=not args.quiet,
        bertscore=settings.pop("bertscore", None),
        scorer_kwargs=settings,
    )
    with warnings.catch_warnings():
        # failed calls are reported below, one line per kind, with the rows they are in
        warnings.filterwarnings("ignore", FAILED_CALLS_WARNING, RuntimeWarning)
        result = uq.generate_and_score_sync(
            prompts.frame["prompt"].tolist(),
            num_responses=args.num_responses,
            checkpoint=args.checkpoint,
        )
    generated = result.to_df().reset_index(drop=True)
    out = prompts.frame.copy()
    for column in generated.columns:
        if column != "prompt":
            out[column] = generated[column].to_numpy()
    try:
        write_table(out, args.output)
    except (OSError, UQLMBertError) as exc:
        raise _answers_kept(args, uq, exc) from exc

    failures = result.failures()
    _report_lines(
        failures.lines(prompts.location),
        f"see the error and sample_errors columns of {args.output}",
    )
    failed = failures.failed_prompts
    print(_summary(out, names, failed=failed, title=f"{args.prompts} -> {args.output}"))
    return EXIT_FAILED_ROWS if failed else EXIT_OK


def _answers_kept(args: argparse.Namespace, uq: Any, exc: BaseException) -> UQLMBertError:
    """The error for an output that cannot be written once the calls are done. It says where
    the answers are: in ``--checkpoint``, or else in a checkpoint saved now beside the output
    (in the temporary directory when that fails), so that the same command run again with it
    writes the table without asking the model again."""
    reason = str(exc) if isinstance(exc, UQLMBertError) else (exc.strerror or str(exc))
    head = f"cannot write {args.output}: {reason}."
    if args.checkpoint is not None:
        return UQLMBertError(
            f"{head} The answers are kept in the checkpoint {args.checkpoint}: run the same "
            "command again, with -o where it can be written, and it writes the table from the "
            "checkpoint without asking the model again for the answers it holds"
        )
    saved, problems = _save_answers(args, uq)
    if saved is None:
        return UQLMBertError(
            f"{head} The answers could not be saved elsewhere either ({'; '.join(problems)})"
        )
    return UQLMBertError(
        f"{head} The answers are saved in {saved}: run the same command again with "
        f"--checkpoint {saved}, and -o where it can be written, and it writes the table from "
        "that checkpoint without asking the model again for the answers it holds"
    )


def _save_answers(args: argparse.Namespace, uq: Any) -> tuple[str | None, list[str]]:
    """Save the run's answers as a new checkpoint file beside the output, else in the temporary
    directory: its path (None when neither works) and the problems met."""
    import tempfile

    from uqlm_bert.generation.generator import ResponseGenerator

    generator = ResponseGenerator(uq.llm, uq.generation)
    name = os.path.basename(args.output)
    problems = []
    for directory in (os.path.dirname(args.output), tempfile.gettempdir()):
        path = None
        try:
            path = _new_file_path(directory, f"{name}.answers", ".jsonl")
            generator.save_checkpoint(uq.last_generation, path, args.num_responses)
            return path, problems
        except (OSError, UQLMBertError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            problems.append(f"{path or directory or '.'}: {reason}")
            if path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(path)
    return None, problems


def _new_file_path(directory: str, stem: str, suffix: str) -> str:
    """Create a new empty file ``stem + suffix`` in ``directory`` (``stem-2``, ... when taken)
    and return its path."""
    for n in range(1, 1000):
        path = os.path.join(directory, f"{stem}{'' if n == 1 else f'-{n}'}{suffix}")
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free name for {stem}{suffix} in {directory or '.'}")


def _chat_model(args: argparse.Namespace) -> Any:
    key = os.environ.get(args.api_key_env)
    if not key:
        raise ConfigurationError(
            f"the environment variable {args.api_key_env} is not set: export "
            f"{args.api_key_env}=<your API key> (a server that needs no key accepts any value), "
            "or name another variable with --api-key-env"
        )
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        raise ConfigurationError(
            f"generate-and-score needs langchain-openai ({exc}); install it with: "
            "pip install 'uqlm-bert[cli]'"
        ) from exc
    kwargs: dict[str, Any] = {"model": args.model, "api_key": key}
    if args.base_url:
        kwargs["base_url"] = args.base_url
    if args.temperature is not None:
        kwargs["temperature"] = args.temperature
    return ChatOpenAI(**kwargs)


# -- evaluate --------------------------------------------------------------------------------------


def _run_evaluate(args: argparse.Namespace) -> int:
    import numpy as np

    from uqlm_bert.evaluation.references import SUMMARY_KEYS, evaluate_references
    from uqlm_bert.io import ERROR_COLUMN, load_texts, write_table

    if args.per_line:
        _check_output(args.per_line)
        _refuse_same_file(
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
    _report_lines([str(p) for p in problems], f"{failed} row(s) not evaluated{where}")
    if not good.any():
        raise InputValidationError(
            f"no row of {args.predictions} and {args.references} has both a prediction and a "
            "reference to evaluate"
        )
    rows = np.flatnonzero(good)
    evaluation = evaluate_references(
        [predictions.texts[i] for i in rows],
        [references.texts[i] for i in rows],
        bertscore_kwargs={**_bertscore_kwargs(args), "show_progress_bars": not args.quiet},
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

    from uqlm_bert.io import ERROR_COLUMN

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


# -- shared ----------------------------------------------------------------------------------------


def _bertscore_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs = {
        "model_type": args.model_type,
        "num_layers": args.num_layers,
        "dtype": args.dtype,
        "device": args.device,
        "batch_size": args.batch_size,
        "lang": args.lang,
        "idf": _IDF_MODES[args.idf],
        "rescale_with_baseline": True if args.rescale_with_baseline else None,
    }
    return {k: v for k, v in kwargs.items() if v is not None}


_IDF_MODES = {None: None, "fixed": "auto", "run": True, "off": False}


def _checked_scorers(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """The scorer names, and their settings objects built once from the options (one
    BERTScoreSettings for the bert_score scorers, under "bertscore"), before any file is read:
    pass them whole to build_scorers or BlackBoxUQ."""
    from uqlm_bert.scorers.registry import check_scorer_names, scorer_settings

    names = check_scorer_names(args.scorers)
    return names, scorer_settings(names, **_bertscore_kwargs(args))


def _check_output(path: str) -> None:
    """Fail before any work when a table cannot be written at ``path``: unknown format, missing
    or unwritable directory, a directory in the way, Parquet without pyarrow."""
    from uqlm_bert.io import check_output_location, table_format

    check_output_location(path)
    if table_format(path) == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise ConfigurationError(
                f"{path}: Parquet output needs pyarrow: pip install 'uqlm-bert[cli]'"
            ) from exc


def _refuse_same_file(
    path: str | None, option: str, inputs: Sequence[tuple[str | None, str]]
) -> None:
    """Fail before any work when the file ``option`` names is one of ``inputs`` (path, name):
    writing it would destroy that input. Paths are compared resolved, and as files where both
    exist, so ``./a.csv`` and ``a.csv``, symlinks and hard links are all caught."""
    from uqlm_bert.io import same_file

    if path is None:
        return
    for other, name in inputs:
        if other is not None and same_file(path, other):
            raise InputValidationError(
                f"{option} {path} is the same file as {name} {other}; writing it would destroy "
                f"{name}: give {option} another file"
            )


def _report_problems(problems: list[RowProblem], output: str) -> None:
    from uqlm_bert.io import ERROR_COLUMN

    rows = len({p.row for p in problems})
    lines = [str(p) for p in problems]
    _report_lines(lines, f"{rows} row(s) not scored; see the {ERROR_COLUMN} column of {output}")


def _report_lines(lines: list[str], where: str) -> None:
    if not lines:
        return
    for line in lines[:MAX_LISTED_PROBLEMS]:
        print(line, file=sys.stderr)
    more = len(lines) - MAX_LISTED_PROBLEMS
    tail = f"... and {more} more; " if more > 0 else ""
    print(f"uqlm-bert: {tail}{where}", file=sys.stderr)


def _summary(out: pd.DataFrame, names: list[str], failed: int, title: str) -> str:
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


def _error(message: str) -> None:
    print(f"uqlm-bert: error: {message}", file=sys.stderr)


def _name_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one scorer name, e.g. bert_score")
    return names


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)
