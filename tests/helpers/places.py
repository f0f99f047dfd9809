"""Places on this machine that tests need: a directory no new file can be created in."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest


def unwritable_directory(tmp_path: Path) -> str:
    """A directory this process cannot create files in; skips the test when there is none.

    A directory without write permission serves, unless the process runs as root, which
    ignores permissions: then a read-only system directory (``/sys`` on Linux) serves.
    """
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        return str(locked)
    for candidate in ("/sys", "/proc/sys"):
        if not os.path.isdir(candidate):
            continue
        try:
            with tempfile.NamedTemporaryFile(dir=candidate):
                pass
        except OSError:
            return candidate
    pytest.skip("no directory here refuses new files to this user")
