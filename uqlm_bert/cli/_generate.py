"""``uqlm-bert generate-and-score``: ask an OpenAI-compatible server for answers and samples,
score them, and write the table.

The generation settings are built once from the options (:func:`~uqlm_bert.cli._options.
generation_settings`) and handed to ``BlackBoxUQ`` whole. A failed call never moves another
prompt's data; each kind of failure is reported once on stderr, with the prompts' lines (the
library's warning about them is silenced, so nothing is said twice). When the output cannot be
written at the end, the answers are kept in a checkpoint and the error says how to write the
table from it without asking the model again.

Example:
    >>> import os, tempfile
    >>> from uqlm_bert.cli._parser import build_parser
    >>> d = tempfile.mkdtemp()
    >>> prompts = os.path.join(d, "prompts.txt")
    >>> _ = open(prompts, "w").write("What is 2+2?\\n")
    >>> args = build_parser().parse_args(["generate-and-score", prompts, "-o",
    ...     os.path.join(d, "out.csv"), "--model", "m", "--api-key-env", "UQLM_BERT_NO_KEY"])
    >>> run(args)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: the environment variable UQLM_BERT_NO_KEY is not set: ...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

from uqlm_bert._exceptions import ConfigurationError, UQLMBertError
from uqlm_bert.cli._options import (
    checked_scorers,
    generation_settings,
    ray_pool,
    refuse_same_file,
)
from uqlm_bert.cli._reporting import (
    EXIT_FAILED_ROWS,
    EXIT_OK,
    report_lines,
    sampling_line,
    summary,
)
from uqlm_bert.cli._supports import colour, explanation, support_columns, wants_supports

__all__ = ["LOCAL_EMBEDDED", "run"]

#: ``--local`` without a file: the embedded model.
LOCAL_EMBEDDED = "embedded"


def run(args: argparse.Namespace) -> int:
    """Run ``uqlm-bert generate-and-score`` with its parsed options; return the exit code."""
    from uqlm_bert.io._paths import check_output_location
    from uqlm_bert.io._reading import load_prompts
    from uqlm_bert.io._writing import check_writable

    names, settings = checked_scorers(args)
    wants_supports(args)  # checks --refine's threshold before any call
    generation = generation_settings(args)
    pool = ray_pool(args)
    check_output_location(args.output)
    refuse_same_file(args.output, "-o", [(args.prompts, "PROMPTS")])
    refuse_same_file(
        args.checkpoint, "--checkpoint", [(args.output, "-o"), (args.prompts, "PROMPTS")]
    )
    prompts = load_prompts(args.prompts)
    check_writable(prompts.frame, args.output, source=prompts.path, lines=prompts.lines)
    with _llm(args) as llm:
        from uqlm_bert import BlackBoxUQ, ScoringSettings

        bertscore = settings.pop("bertscore", None)
        where = "local" if pool is None else pool
        uq = BlackBoxUQ(
            llm=llm,
            scorers=names,
            generation=generation,
            show_progress_bars=not args.quiet,
            bertscore=bertscore,
            scoring=ScoringSettings(where=where, scorer_settings=settings),
        )
        with uq:  # stops a pool of Ray actors at the end
            return _generate(args, uq, names, prompts)


def _generate(args: argparse.Namespace, uq: Any, names: list[str], prompts: Any) -> int:
    """Generate, score and write the table, with ``uq``."""
    import pandas as pd

    from uqlm_bert.io import write_table
    from uqlm_bert.results._failures import FAILED_CALLS_WARNING

    with warnings.catch_warnings():
        # failed calls are reported below, one line per kind, with the rows they are in
        warnings.filterwarnings("ignore", FAILED_CALLS_WARNING, RuntimeWarning)
        result = uq.generate_and_score_sync(
            prompts.frame["prompt"].tolist(),
            num_responses=args.num_responses,
            checkpoint=args.checkpoint,
        )
    generated = result.to_df()
    out = prompts.frame.copy()
    for column in generated.columns:
        if column not in ("prompt_index", "prompt"):  # the file's own rows and prompts
            out[column] = generated[column].to_numpy()
    for column, values in support_columns(result, args).items():
        out[column] = pd.Series(values, index=out.index, dtype=object)
    try:
        write_table(out, args.output)
    except (OSError, UQLMBertError) as exc:
        raise _answers_kept(args, uq, exc) from exc

    failures = result.failures()
    report_lines(
        failures.lines(prompts.location),
        f"see the error and sample_errors columns of {args.output}",
    )
    failed = failures.failed_prompts
    if args.explain:
        print(explanation(result, colour=colour()))
    print(summary(out, names, failed=failed, title=f"{args.prompts} -> {args.output}"))
    print(sampling_line(result.metadata["sampling"]))
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

    from uqlm_bert.generation._generator import ResponseGenerator

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


@contextlib.contextmanager
def _llm(args: argparse.Namespace) -> Iterator[Any]:
    """The chat model of the options: the local LLM, started for the run and stopped after it
    (``--local``), or ``ChatOpenAI`` on ``--base-url`` with ``--model``."""
    if args.local is None:
        yield _chat_model(args)
        return
    if args.model is not None or args.base_url is not None:
        raise ConfigurationError(
            "--local starts its own server: leave out --model and --base-url, or leave out "
            "--local to use the server they name"
        )
    from uqlm_bert._local_llm import LocalLLM

    model = None if args.local == LOCAL_EMBEDDED else args.local
    kwargs = {} if args.temperature is None else {"temperature": args.temperature}
    with LocalLLM(model, num_responses=args.num_responses, **kwargs) as llm:
        yield llm


def _chat_model(args: argparse.Namespace) -> Any:
    if args.model is None:
        raise ConfigurationError(
            "give the model: --model NAME (with --base-url for a server other than OpenAI's), "
            "or --local for the local LLM"
        )
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
