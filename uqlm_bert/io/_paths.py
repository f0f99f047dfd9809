"""Where a table can be written, and writing it there atomically.

A write goes to a new hidden file in the target's directory, which then replaces the target,
so that a failed or interrupted write never leaves a half-written file.

Example:
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> directory = tempfile.mkdtemp()
    >>> target = os.path.join(directory, "out.txt")
    >>> atomic_write(target, lambda tmp: Path(tmp).write_text("done"))
    >>> Path(target).read_text(), os.listdir(directory)
    ('done', ['out.txt'])
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert.io._formats import pyarrow_parquet, table_format

__all__ = ["atomic_write", "check_output_location", "new_file", "same_file"]


def check_output_location(path: str | os.PathLike[str]) -> None:
    """Fail now if a table cannot be written at ``path``: before any work, not after it.

    The suffix must name a format (and, for Parquet, pyarrow must be installed), the directory
    must exist, ``path`` must not be a directory, and a file must be creatable (and is then
    removed) in the directory, which is what an atomic write needs.

    Raises:
        InputValidationError: the path, and what is wrong with it.
        ConfigurationError: Parquet was asked for and pyarrow is not installed.

    Example:
        >>> import tempfile
        >>> check_output_location(tempfile.mkdtemp() + "/scored.csv")
        >>> check_output_location("no/such/dir/scored.csv")
        Traceback (most recent call last):
        uqlm_bert.InputValidationError: no/such/dir/scored.csv: the directory no/such/dir does not exist
    """
    name = os.fspath(path)
    if table_format(name) == "parquet":
        pyarrow_parquet()
    target = Path(name)
    directory = target.parent
    if not directory.is_dir():
        raise InputValidationError(f"{name}: the directory {directory} does not exist")
    if target.is_dir():
        raise InputValidationError(f"{name}: is a directory; give the output file's name")
    try:
        os.unlink(new_file(directory, target.name))
    except OSError as exc:
        raise InputValidationError(
            f"{name}: cannot write in the directory {directory}: {exc.strerror or exc}"
        ) from None


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether the paths ``a`` and ``b`` name one file.

    True when both exist and are the same file (:func:`os.path.samefile`: through symlinks and
    hard links too), or when they resolve to the same path (``./a.csv`` and ``a.csv``).

    Example:
        >>> same_file("answers.csv", "./answers.csv"), same_file("a.csv", "b.csv")
        (True, False)
    """
    with contextlib.suppress(OSError):
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    resolved = [os.path.normcase(os.path.realpath(p)) for p in (a, b)]
    return resolved[0] == resolved[1]


def atomic_write(name: str, write: Callable[[str], Any]) -> None:
    """Call ``write`` with a new temporary file beside ``name``, then make it ``name``.

    The file is synced before it replaces ``name``, and takes the permissions of the file it
    replaces; on any failure it is removed and ``name`` is left as it was.

    Raises:
        FileNotFoundError: the directory does not exist; or whatever ``write`` raises.
    """
    target = Path(name)
    directory = target.parent
    if not directory.is_dir():
        raise FileNotFoundError(2, "the directory does not exist", str(directory))
    tmp = new_file(directory, target.name)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o777)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def new_file(directory: Path, name: str) -> str:
    """Create a new empty file, hidden, beside ``name`` in ``directory``; return its path.

    It is created with mode 0o666, so that the umask (and a default ACL) set its permissions as
    for any new file: the umask is never read, which could only be done by changing it, for
    every thread of the process.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        path = os.path.join(directory, f".{name[:64]}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(path, flags, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise FileExistsError(17, "no free temporary file name", str(directory))
