"""A JSON Lines file of every LLM answer as it arrives, so a stopped run can resume.

The first line is a header with a fingerprint of the prompts and of the settings that change what
is generated. Each further line is one finished slot of one prompt::

    {"type": "slot", "i": 3, "pf": "<prompt fingerprint>", "slot": -1, "text": "...", "error": null}

``slot`` is ``-1`` for the original response and ``0 .. num_responses - 1`` for samples. Every
line is flushed and fsync'd before the next call's result is handled, so a crash or Ctrl-C loses
nothing already received. A later line for the same slot replaces an earlier one (a failure
retried successfully on resume). A prompt that stopped sampling once its answer was settled
(sampling in rounds) has a line saying how many sample slots it drew::

    {"type": "stop", "i": 3, "pf": "<prompt fingerprint>", "drawn": 2}

A prompt without one resumes in the last round its slots show begun (see
:mod:`uqlm_bert.generation._rounds`): a round is the unit the file records.

On resume, slots holding text and slots that failed permanently (HTTP 400, say) are kept; slots
that failed transiently (timeouts, 5xx, rate limits) are tried again.

While a run has the checkpoint open, it holds an operating-system lock on ``<path>.lock``: a
second process (or a second run in this one) pointed at the same checkpoint is refused at once
with :class:`~uqlm_bert._exceptions.CheckpointError`, rather than repeating calls and mixing the
two runs' answers.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.jsonl")
    >>> ckpt = Checkpoint(path)
    >>> ckpt.open(["p0"], {"num_responses": 1})
    {}
    >>> ckpt.write(0, -1, "an answer", None)
    >>> ckpt.close()
    >>> Checkpoint(path).open(["p0"], {"num_responses": 1})
    {(0, -1): ('an answer', None)}
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import filelock

from uqlm_bert._exceptions import CheckpointError
from uqlm_bert._warn import warn_user
from uqlm_bert.generation._prompts import fingerprint_run
from uqlm_bert.generation._records import CallFailure

__all__ = ["Checkpoint", "SlotKey", "ORIGINAL_SLOT"]

logger = logging.getLogger("uqlm_bert")

_FORMAT = "uqlm-bert-checkpoint"
_VERSION = 2
_HEADER_START = b'{"type": "header"'
#: The slot number of a prompt's original response; samples are 0, 1, ...
ORIGINAL_SLOT = -1
SlotKey = tuple[int, int]


class Checkpoint:
    """Append-only record of finished LLM calls for one run.

    Args:
        path: the file; created if missing, resumed from if it exists.
        fsync: force each record to disk (on by default; off trades safety for speed: the
            records reach the disk when the file is closed).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._fh: IO[str] | None = None
        self._lock: filelock.BaseFileLock | None = None
        self._prompt_fps: list[str] = []
        #: the prompts that stopped sampling early, and the sample slots each drew (read by
        #: :meth:`open`)
        self.stops: dict[int, int] = {}

    @property
    def lock_path(self) -> Path:
        """The file whose operating-system lock marks the checkpoint as in use."""
        return self.path.with_name(self.path.name + ".lock")

    def open(
        self, prompt_fingerprints: Sequence[str], settings: dict[str, Any]
    ) -> dict[SlotKey, tuple[str | None, CallFailure | None]]:
        """Lock the checkpoint, validate or create the file, and return the slots it holds.

        Args:
            prompt_fingerprints: one fingerprint per prompt of the run
                (``fingerprint_prompt``).
            settings: the settings that change what is generated.

        Raises:
            CheckpointError: the checkpoint is in use by another run, is unreadable or not a
                checkpoint, or was written for other prompts or settings (the message names
                the first difference).
        """
        self._prompt_fps = list(prompt_fingerprints)
        self.stops = {}
        run_fingerprint = fingerprint_run(self._prompt_fps, settings)
        self._refuse_foreign()  # before the lock: not even a lock file beside someone's file
        self._acquire_lock()
        try:
            return self._open(run_fingerprint, settings)
        except BaseException:
            self._release_lock()
            raise

    def _refuse_foreign(self) -> None:
        """Refuse a file that is not a checkpoint, and leave it as it is."""
        try:
            with open(self.path, "rb") as fh:
                start = fh.read(len(_HEADER_START))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise CheckpointError(
                f"cannot read checkpoint file {str(self.path)!r}: {exc.strerror or exc}"
            ) from exc
        if start and start != _HEADER_START:
            raise _not_a_checkpoint(self.path)

    def _acquire_lock(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = filelock.FileLock(self.lock_path, timeout=0, is_singleton=False)
            lock.acquire()
        except filelock.Timeout:
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} is in use by another run (it holds the lock "
                f"{str(self.lock_path)!r}); wait for that run to finish, or give another path"
            ) from None
        except OSError as exc:
            raise CheckpointError(
                f"cannot lock checkpoint {str(self.path)!r}: {exc.strerror or exc}; the folder "
                "must be writable"
            ) from exc
        self._lock = lock

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _open(
        self, run_fingerprint: str, settings: dict[str, Any]
    ) -> dict[SlotKey, tuple[str | None, CallFailure | None]]:
        done: dict[SlotKey, tuple[str | None, CallFailure | None]] = {}
        good_bytes = 0
        if self.path.exists() and self.path.stat().st_size > 0:
            done, good_bytes = self._read(run_fingerprint, settings)
        try:
            fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - kept open for the run
        except OSError as exc:
            raise CheckpointError(
                f"cannot open checkpoint file {str(self.path)!r}: {exc.strerror or exc}"
            ) from exc
        if good_bytes:
            fh.truncate(good_bytes)  # drop a line cut short by a crash
        self._fh = fh
        if not good_bytes:
            fh.truncate(0)
            self._append(
                {
                    "type": "header",
                    "format": _FORMAT,
                    "version": _VERSION,
                    "run": run_fingerprint,
                    "num_prompts": len(self._prompt_fps),
                    "prompts": self._prompt_fps,
                    "settings": settings,
                }
            )
        if done:
            logger.info("resuming from %s: %d finished calls on file", self.path, len(done))
        return done

    def write(self, index: int, slot: int, text: str | None, failure: CallFailure | None) -> None:
        """Record one finished call (``slot`` -1 for the original response)."""
        self._append(
            {
                "type": "slot",
                "i": index,
                "pf": self._prompt_fps[index],
                "slot": slot,
                "text": text,
                "error": failure.to_dict() if failure is not None else None,
            }
        )

    def write_stop(self, index: int, drawn: int) -> None:
        """Record that prompt ``index`` stopped sampling after ``drawn`` sample slots."""
        self._append({"type": "stop", "i": index, "pf": self._prompt_fps[index], "drawn": drawn})

    def close(self) -> None:
        """Close the file (its records on disk) and release the lock."""
        if self._fh is not None:
            if not self.fsync:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None
        self._release_lock()

    def _append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            raise CheckpointError("the checkpoint file is not open; call open() first")
        # ASCII escapes: a text that is not valid Unicode (a lone surrogate) is still written
        self._fh.write(json.dumps(record, ensure_ascii=True) + "\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())

    def _read(
        self, run_fingerprint: str, settings: dict[str, Any]
    ) -> tuple[dict[SlotKey, Any], int]:
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint file {str(self.path)!r}: {exc}") from exc
        # A file that does not start with the header's first bytes is someone else's, however
        # short: a text of one "{" is no checkpoint to overwrite.
        if not raw.startswith(_HEADER_START):
            raise _not_a_checkpoint(self.path)
        lines = raw.split(b"\n")
        complete, tail = lines[:-1], lines[-1]
        records = [_parse_line(self.path, n, line) for n, line in enumerate(complete, 1)]
        records = [r for r in records if r is not None]
        if tail.strip():
            warn_user(
                f"checkpoint file {str(self.path)!r} ends in a line cut short (a crash while "
                "writing?); that line is dropped and its call will be made again",
                RuntimeWarning,
            )
        if not records:
            return {}, 0
        good_bytes = sum(len(line) + 1 for line in complete)
        _check_header(self.path, records[0], run_fingerprint, self._prompt_fps, settings)
        done: dict[SlotKey, Any] = {}
        for n, rec in enumerate(records[1:], 2):
            if rec.get("type") == "stop":
                index, drawn = _parse_stop(self.path, n, rec, self._prompt_fps)
                self.stops[index] = drawn
                continue
            key, value = _parse_slot(self.path, n, rec, self._prompt_fps)
            done[key] = value
        return done, good_bytes


def _not_a_checkpoint(path: Path) -> CheckpointError:
    return CheckpointError(
        f"{str(path)!r} is not a uqlm-bert checkpoint file (it does not start with a checkpoint "
        "header), so it is left alone: give the path of a new file for the checkpoint"
    )


def _parse_line(path: Path, n: int, line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        rec = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"checkpoint file {str(path)!r}, line {n}, is not valid JSON ({exc}); the "
            "checkpoint is damaged: give a new path to start over"
        ) from exc
    if not isinstance(rec, dict):
        raise CheckpointError(f"checkpoint file {str(path)!r}, line {n}, is not a JSON object")
    return rec


def _check_header(
    path: Path,
    header: dict[str, Any],
    run_fingerprint: str,
    prompt_fps: Sequence[str],
    settings: dict[str, Any],
) -> None:
    if header.get("type") != "header" or header.get("format") != _FORMAT:
        raise CheckpointError(
            f"{str(path)!r} is not a uqlm-bert checkpoint file (no header line); give the path "
            "of a new file for the checkpoint"
        )
    if header.get("version") != _VERSION:
        raise CheckpointError(
            f"checkpoint file {str(path)!r} has format version {header.get('version')!r}; this "
            f"version reads {_VERSION}: give a new path to start over"
        )
    if header.get("run") != run_fingerprint:
        raise CheckpointError(
            f"checkpoint file {str(path)!r} belongs to a different run: "
            f"{_first_difference(header, prompt_fps, settings)}. Give a new path to start a new "
            "run, or run again with the prompts and settings of the checkpoint"
        )


def _first_difference(
    header: dict[str, Any], prompt_fps: Sequence[str], settings: dict[str, Any]
) -> str:
    """What first differs between the checkpoint's run and this one, in words."""
    old_settings = header.get("settings") or {}
    for key in sorted(set(old_settings) | set(settings)):
        old, new = old_settings.get(key), json.loads(json.dumps(settings.get(key), default=str))
        if old != new:
            return f"the setting {key!r} was {old!r} and is now {new!r}"
    old_prompts = header.get("prompts") or []
    if len(old_prompts) != len(prompt_fps):
        return f"it has {len(old_prompts)} prompts and this run has {len(prompt_fps)}"
    for i, (old, new) in enumerate(zip(old_prompts, prompt_fps, strict=True)):
        if old != new:
            return f"prompt {i} differs (the first of the prompts that do)"
    return "its fingerprint differs"


def _parse_stop(
    path: Path, n: int, rec: dict[str, Any], prompt_fps: Sequence[str]
) -> tuple[int, int]:
    try:
        index, drawn, pf = int(rec["i"]), int(rec["drawn"]), rec["pf"]
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint file {str(path)!r}, line {n}, is not a valid record ({exc!r})"
        ) from exc
    _check_prompt(path, n, index, pf, prompt_fps)
    return index, drawn


def _check_prompt(path: Path, n: int, index: int, pf: Any, prompt_fps: Sequence[str]) -> None:
    if not 0 <= index < len(prompt_fps) or pf != prompt_fps[index]:
        raise CheckpointError(
            f"checkpoint file {str(path)!r}, line {n}: prompt {index} does not match the prompts "
            "of this run; give a new path or delete the file"
        )


def _parse_slot(
    path: Path, n: int, rec: dict[str, Any], prompt_fps: Sequence[str]
) -> tuple[SlotKey, tuple[str | None, CallFailure | None]]:
    try:
        index, slot, pf = int(rec["i"]), int(rec["slot"]), rec["pf"]
        text = rec.get("text")
        failure = CallFailure.from_dict(rec["error"]) if rec.get("error") else None
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint file {str(path)!r}, line {n}, is not a valid record ({exc!r})"
        ) from exc
    _check_prompt(path, n, index, pf, prompt_fps)
    if text is not None and not isinstance(text, str):
        raise CheckpointError(f"checkpoint file {str(path)!r}, line {n}: text is not a string")
    return (index, slot), (text, failure)
