"""The ``uqlm-bert`` command: score answer tables, generate and score, evaluate against references.

::

    uqlm-bert score answers.jsonl -o scored.jsonl --scorers bert_score
    uqlm-bert generate-and-score prompts.txt -o scored.csv --model gpt-4o-mini -m 5
    uqlm-bert evaluate predictions.txt references.txt --format json

Results go to files and stdout; progress bars, warnings and problems go to stderr. Exit codes: 0
success; 1 some rows failed (each reported on stderr with file, line and field, and written with
NaN scores in its place); 2 usage or input error (nothing is written). Output files are written
atomically, so an existing file is either replaced whole or left as it was.

:func:`main` runs the command from Python (``main(["score", ...])``) and returns its exit code.
The modules behind it are private: the options (with the defaults of the settings objects), one
module per command, and the reporting. See docs/cli.md for every option.

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

import logging
import sys
import warnings
from collections.abc import Sequence

from uqlm_bert._exceptions import UQLMBertError
from uqlm_bert.cli._parser import build_parser
from uqlm_bert.cli._reporting import EXIT_INTERRUPTED, EXIT_USAGE, error, format_warning

__all__ = ["main"]

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
    formatwarning = warnings.formatwarning
    warnings.formatwarning = format_warning
    try:
        return args.run(args)
    except UQLMBertError as exc:
        error(str(exc))
        return EXIT_USAGE
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        error(f"{where}{exc.strerror or exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        error("interrupted; no output was written")
        return EXIT_INTERRUPTED
    finally:
        logger.removeHandler(handler)
        warnings.formatwarning = formatwarning
