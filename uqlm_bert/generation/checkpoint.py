"""A JSON Lines file of every LLM answer as it arrives, so a stopped run can resume.

The first line is a header with a fingerprint of the prompts and of the settings that change what
is generated. Each further line is one finished slot of one prompt::

    {"type": "slot", "i": 3, "pf": "<prompt fingerprint>", "slot": -1, "text": "...", "error": null}

``slot`` is ``-1`` for the original response and ``0 .. num_responses - 1`` for samples. Every
line is flushed and fsync'd before the next call's result is handled, so a crash or Ctrl-C loses
nothing already received. A later line for the same slot replaces an earlier one (a failure
retried successfully on resume).

On resume, slots holding text and slots that failed permanently (HTTP 400, say) are kept; slots
that failed transiently (timeouts, 5xx, rate limits) are tried again.

Example:
    >>> import tempfile, os
    >>> from uqlm_bert.generation.records import CallFailure
    >>> path = os.path.join(tempfile.mkdtemp(), "run.jsonl")
    >>> ckpt = Checkpoint(path)
    >>> ckpt.open("run-fp", ["p0"], {"num_responses": 1})
    {}
    >>> ckpt.write(0, -1, "an answer", None)
    >>> ckpt.close()
    >>> Checkpoint(path).open("run-fp", ["p0"], {"num_responses": 1})
    {(0, -1): ('an answer', None)}
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from uqlm_bert.exceptions import CheckpointError
from uqlm_bert.generation.records import CallFailure

__all__ = ["Checkpoint", "SlotKey", "ORIGINAL_SLOT"]

logger = logging.getLogger("uqlm_bert")

_FORMAT = "uqlm-bert-checkpoint"
_VERSION = 1
#: The slot number of a prompt's original response; samples are 0, 1, ...
ORIGINAL_SLOT = -1
SlotKey = tuple[int, int]


class Checkpoint:
    """Append-only record of finished LLM calls for one run.

    Args:
        path: the file; created if missing, resumed from if it exists.
        fsync: force each record to disk (on by default; off trades safety for speed).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._fh: IO[str] | None = None
        self._prompt_fps: list[str] = []

    def open(
        self, run_fingerprint: str, prompt_fingerprints: Sequence[str], settings: dict[str, Any]
    ) -> dict[SlotKey, tuple[str | None, CallFailure | None]]:
        """Validate or create the file and return the slots it already holds.

        Raises:
            CheckpointError: the file is unreadable, or was written for other prompts or
                settings.
        """
        self._prompt_fps = list(prompt_fingerprints)
        done: dict[SlotKey, tuple[str | None, CallFailure | None]] = {}
        good_bytes = 0
        if self.path.exists() and self.path.stat().st_size > 0:
            done, good_bytes = self._read(run_fingerprint)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - kept open for the run
        except OSError as exc:
            raise CheckpointError(f"cannot open checkpoint file {str(self.path)!r}: {exc}") from exc
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

    def close(self) -> None:
        """Close the file (records are already on disk)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            raise CheckpointError("the checkpoint file is not open; call open() first")
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())

    def _read(self, run_fingerprint: str) -> tuple[dict[SlotKey, Any], int]:
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint file {str(self.path)!r}: {exc}") from exc
        lines = raw.split(b"\n")
        complete, tail = lines[:-1], lines[-1]
        records = [_parse_line(self.path, n, line) for n, line in enumerate(complete, 1)]
        records = [r for r in records if r is not None]
        if not records and tail.strip() and not tail.startswith(b'{"type": "header"'):
            raise CheckpointError(
                f"{str(self.path)!r} is not a uqlm-bert checkpoint file; give a new path"
            )
        if tail.strip():
            warnings.warn(
                f"checkpoint file {str(self.path)!r} ends in a line cut short (a crash while "
                "writing?); that line is dropped and its call will be made again",
                RuntimeWarning,
                stacklevel=4,
            )
        if not records:
            return {}, 0
        good_bytes = sum(len(line) + 1 for line in complete)
        _check_header(self.path, records[0], run_fingerprint)
        done: dict[SlotKey, Any] = {}
        for n, rec in enumerate(records[1:], 2):
            key, value = _parse_slot(self.path, n, rec, self._prompt_fps)
            done[key] = value
        return done, good_bytes


def _parse_line(path: Path, n: int, line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        rec = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"checkpoint file {str(path)!r}, line {n}, is not valid JSON ({exc}); the file is "
            "damaged: delete it to start over"
        ) from exc
    if not isinstance(rec, dict):
        raise CheckpointError(f"checkpoint file {str(path)!r}, line {n}, is not a JSON object")
    return rec


def _check_header(path: Path, header: dict[str, Any], run_fingerprint: str) -> None:
    if header.get("type") != "header" or header.get("format") != _FORMAT:
        raise CheckpointError(
            f"{str(path)!r} is not a uqlm-bert checkpoint file (no header line); give a new "
            "path or delete the file"
        )
    if header.get("version") != _VERSION:
        raise CheckpointError(
            f"checkpoint file {str(path)!r} has format version {header.get('version')!r}; this "
            f"version reads {_VERSION}"
        )
    if header.get("run") != run_fingerprint:
        raise CheckpointError(
            f"checkpoint file {str(path)!r} belongs to a different run: the prompts or the "
            f"settings differ (file: {header.get('num_prompts')} prompts, "
            f"settings {header.get('settings')}). Give a new path, or delete the file to start "
            "over"
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
    if not 0 <= index < len(prompt_fps) or pf != prompt_fps[index]:
        raise CheckpointError(
            f"checkpoint file {str(path)!r}, line {n}: prompt {index} does not match the prompts "
            "of this run; give a new path or delete the file"
        )
    if text is not None and not isinstance(text, str):
        raise CheckpointError(f"checkpoint file {str(path)!r}, line {n}: text is not a string")
    return (index, slot), (text, failure)
