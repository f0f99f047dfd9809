"""The argument parser of ``uqlm-bert``: one subcommand per command module, and the defaults of
the settings objects.

An option that stands for a setting has no default of its own: left out, the setting keeps the
default of its object (:class:`~uqlm_bert.GenerationSettings`, the ``bert_score`` scorers'
:data:`~uqlm_bert.bertscore._settings.SCORER_DEFAULTS`, or :class:`~uqlm_bert.BERTScorer`'s
:data:`~uqlm_bert.bertscore._settings.ENGINE_DEFAULTS` for ``evaluate``), and the help shows
that default, read from the object. Values are checked by the objects, so a bad one gets the
message the Python API gives.

Example:
    >>> argv = ["generate-and-score", "p.txt", "-o", "o.csv", "--model", "m", "-m", "3"]
    >>> args = build_parser().parse_args(argv)
    >>> args.num_responses, args.max_concurrency, args.dtype  # left to the settings objects
    (3, None, None)
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from uqlm_bert.cli._evaluate import PREDICTION_COLUMNS, REFERENCE_COLUMNS
from uqlm_bert.cli._evaluate import run as run_evaluate
from uqlm_bert.cli._generate import run as run_generate
from uqlm_bert.cli._options import IDF_WORDS, N_PARAM_WORDS
from uqlm_bert.cli._score import run as run_score
from uqlm_bert.cli._supports import support_options

__all__ = ["NUM_RESPONSES", "build_parser"]

from uqlm_bert.generation._settings import NUM_RESPONSES


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``uqlm-bert`` and its subcommands.

    Example:
        >>> build_parser().parse_args(["evaluate", "p.txt", "r.txt"]).format
        'table'
    """
    from uqlm_bert import __version__
    from uqlm_bert.bertscore._settings import ENGINE_DEFAULTS, SCORER_DEFAULTS

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
    scorers = argparse.ArgumentParser(add_help=False)
    scorers.add_argument(
        "--scorers",
        type=_name_list,
        default=["bert_score"],
        metavar="NAMES",
        help="comma-separated scorer names (default bert_score)",
    )
    scorer_bert = _bertscore_options(vars(SCORER_DEFAULTS))
    engine = _engine_options()
    supports = support_options()
    _score_command(commands, [scorers, scorer_bert, engine, supports, quiet])
    _generate_command(commands, [scorers, scorer_bert, engine, supports, quiet])
    _evaluate_command(commands, [_bertscore_options(vars(ENGINE_DEFAULTS)), quiet])
    return parser


def _field_defaults(cls: type) -> dict[str, Any]:
    """The defaults of a settings class's fields, read without building an object (an entry
    point builds one settings object, from the options)."""
    return {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(cls)
    }


def _bertscore_options(defaults: dict[str, Any]) -> argparse.ArgumentParser:
    """The BERTScore options, their help giving the settings' ``defaults`` (by field)."""
    from uqlm_bert.bertscore._settings import DTYPE_NAMES, LONG_TEXT_MODES, dtype_name

    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("BERTScore settings")
    _setting(
        group,
        "--model-type",
        "Hugging Face model name, local path, or a preset: fast (the embedded model) or "
        "accurate (all-mpnet-base-v2 at its measured layer, several times the CPU time)",
        defaults["model_type"],
        none="the model for --lang; for en the embedded all-MiniLM-L6-v2",
    )
    _setting(
        group,
        "--num-layers",
        "layer whose embeddings are matched",
        defaults["num_layers"],
        none="the published choice for the model",
        type=int,
    )
    _setting(
        group,
        "--dtype",
        "model precision",
        dtype_name(defaults["dtype"]),
        none="float32: exact; auto is the fastest safe one for the device",
        choices=list(dict.fromkeys(dtype_name(name) for name in DTYPE_NAMES)),
    )
    _setting(
        group, "--device", "cpu, cuda, cuda:1, mps, ...", defaults["device"], none="cuda, mps, cpu"
    )
    _setting(
        group,
        "--batch-size",
        "texts per forward pass at most",
        defaults["batch_size"],
        none="passes sized by a budget of padded tokens",
        type=int,
    )
    _setting(
        group,
        "--idf",
        "token weights: fixed (idf from English word frequencies, the same for every row), run "
        "(idf over the references of the run, as bert_score computes it; also what a bare --idf "
        "means), off (plain BERTScore)",
        defaults["idf"],
        words=IDF_WORDS,
        nargs="?",
        const="run",
    )
    _setting(
        group,
        "--long-texts",
        "a text longer than the model reads at once (512 tokens for the embedded model): "
        "window reads it in overlapping windows and scores it whole; truncate cuts it there, as "
        "bert_score does (evaluate's default)",
        defaults["long_texts"],
        choices=list(LONG_TEXT_MODES),
    )
    group.add_argument(
        "--rescale-with-baseline",
        action="store_true",
        help="rescale scores with the model's baseline for --lang",
    )
    _setting(
        group, "--lang", "language of the texts, for the model and the baseline", defaults["lang"]
    )
    return options


def _setting(
    group: Any,
    flag: str,
    text: str,
    default: Any,
    *,
    none: str = "none",
    words: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """An option that stands for a setting. It has no default of its own (left out, the setting
    keeps its object's), and its help ends with that default: ``none`` where it is None, its
    word where ``words`` names the option's values."""
    if words is not None:
        shown = next(word for word, value in words.items() if value == default)
        kwargs["choices"] = list(words)
    else:
        shown = none if default is None else default
    group.add_argument(flag, help=f"{text} (default {shown})", **kwargs)


def _engine_options() -> argparse.ArgumentParser:
    """Where the scores are computed: this process, or a pool of Ray actors."""
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("where to score")
    _choice(group, "--engine", ["local", "ray"], "score in this process or on a Ray cluster")
    group.add_argument(
        "--address", help="Ray cluster address (--engine ray; default: a local Ray instance)"
    )
    group.add_argument("--num-workers", type=int, help="Ray scoring workers (--engine ray)")
    return options


def _choice(command: Any, flag: str, choices: list[str], text: str) -> None:
    """An option of the command's own that takes one of ``choices``, the first by default."""
    command.add_argument(
        flag, choices=choices, default=choices[0], help=f"{text} (default {choices[0]})"
    )


def _add_output(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUTPUT",
        help="output table; its suffix (.jsonl, .json, .csv, .parquet) sets the format",
    )


def _score_command(commands: argparse._SubParsersAction, parents: list) -> None:
    command = commands.add_parser(
        "score",
        parents=parents,
        help="score a table of answers and their sampled answers",
        description="Score each row's response against its sampled_responses; write every "
        "input row and column plus one column per scorer and a score_error column.",
    )
    command.add_argument(
        "input",
        metavar="INPUT",
        help=".jsonl, .json, .csv or .parquet with response and sampled_responses columns",
    )
    _add_output(command)
    command.set_defaults(run=run_score)


def _generate_command(commands: argparse._SubParsersAction, parents: list) -> None:
    from uqlm_bert.generation._rounds import SAMPLING
    from uqlm_bert.generation._settings import GenerationSettings

    defaults = _field_defaults(GenerationSettings)
    command = commands.add_parser(
        "generate-and-score",
        parents=parents,
        help="ask an OpenAI-compatible server for answers and samples, and score them",
        description="For each prompt, ask the model once for an answer and -m more times for "
        "samples, score the answer against the samples, and write the table. The API key is "
        "read from the environment variable named by --api-key-env.",
    )
    command.add_argument(
        "prompts",
        metavar="PROMPTS",
        help="a text file, one prompt per line, or a .jsonl, .json, .csv or .parquet table "
        "with a prompt column",
    )
    _add_output(command)
    command.add_argument("--model", help="the model name the server knows")
    command.add_argument(
        "--local",
        nargs="?",
        const="embedded",
        metavar="GGUF",
        help="start the local LLM (llama.cpp's server on 127.0.0.1) for the run, with the "
        "embedded SmolLM2-135M-Instruct or the GGUF file given, instead of --model/--base-url",
    )
    command.add_argument(
        "--base-url",
        help="the server's OpenAI-compatible base URL, e.g. http://localhost:8000/v1 "
        "(default: OpenAI's)",
    )
    command.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the API key (default OPENAI_API_KEY)",
    )
    command.add_argument(
        "-m",
        "--num-responses",
        type=int,
        default=NUM_RESPONSES,
        metavar="M",
        help=f"sampled answers per prompt (default {NUM_RESPONSES}): all of them with "
        "--sampling fixed, at most that many with until_settled",
    )
    _setting(
        command,
        "--sampling",
        "until_settled: draw each prompt's samples in rounds and stop once its answer is "
        "clearly above or below the flag threshold; fixed: draw all -m of them at once",
        defaults["sampling"],
        words={word: word for word in SAMPLING},
    )
    _setting(
        command,
        "--max-calls-per-min",
        "at most N HTTP calls (retries included) per minute",
        defaults["max_calls_per_min"],
        none="no limit",
        type=int,
        metavar="N",
    )
    _setting(
        command,
        "--max-concurrency",
        "the most calls in flight at once; within it the number adapts to the server, dropping "
        "to what it was serving on 429s, 5xx and timeouts and growing while it keeps up",
        defaults["max_concurrency"],
        none="no cap",
        type=int,
        metavar="N",
    )
    _setting(
        command,
        "--use-n-param",
        "ask for a prompt's samples in one call with the server's n parameter: auto (for "
        "OpenAI's clients), true, or false (one call per sample)",
        defaults["use_n_param"],
        words=N_PARAM_WORDS,
    )
    command.add_argument(
        "--temperature", type=float, help="temperature of the answer (default: the server's)"
    )
    _setting(
        command,
        "--sampling-temperature",
        "temperature of the samples",
        defaults["sampling_temperature"],
        type=float,
    )
    _setting(
        command,
        "--system-prompt",
        "a system message sent before every prompt",
        defaults["system_prompt"],
    )
    _setting(
        command,
        "--max-retries",
        "retries after transient failures",
        defaults["retry"].max_retries,
        type=int,
    )
    _setting(
        command,
        "--request-timeout",
        "seconds one call may take",
        defaults["request_timeout"],
        none="the client's",
        type=float,
        metavar="SECONDS",
    )
    command.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="JSONL file recording every answer as it arrives; rerunning with it skips what "
        "is done",
    )
    command.set_defaults(run=run_generate)


def _evaluate_command(commands: argparse._SubParsersAction, parents: list) -> None:
    command = commands.add_parser(
        "evaluate",
        parents=parents,
        help="compare generated texts with references: BLEU, ROUGE, BERTScore",
        description="Reference-based evaluation of each prediction against the reference in "
        "the same row (or line): corpus BLEU (sacrebleu) with 1- to 4-gram precisions, "
        "ROUGE-1/2/L F-measures (rouge-score) and BERTScore P/R/F1, averaged over rows. Each "
        "file is a table (.jsonl, .ndjson, .json, .csv, .parquet, .pq) or a .txt file with one "
        "text per line.",
    )
    command.add_argument(
        "predictions",
        metavar="PREDICTIONS",
        help="generated texts: a table, or a .txt file with one text per line",
    )
    command.add_argument(
        "references",
        metavar="REFERENCES",
        help="reference texts, one per row (or line) of PREDICTIONS: a table or a .txt file",
    )
    command.add_argument(
        "--prediction-column",
        metavar="NAME",
        help="the column of texts in PREDICTIONS, a table "
        f"(default: {', else '.join(PREDICTION_COLUMNS)})",
    )
    command.add_argument(
        "--reference-column",
        metavar="NAME",
        help="the column of texts in REFERENCES, a table "
        f"(default: {', else '.join(REFERENCE_COLUMNS)})",
    )
    _choice(command, "--format", ["table", "json"], "how to print the scores")
    command.add_argument(
        "--per-line",
        metavar="OUT",
        help="also write each row's scores to this table (.jsonl, .json, .csv or .parquet)",
    )
    command.set_defaults(run=run_evaluate)


def _name_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one scorer name, e.g. bert_score")
    return names
