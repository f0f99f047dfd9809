"""How long ``import uqlm_bert`` and ``uqlm-bert --help`` take, from a fresh interpreter.

Each command runs in a new process ``--runs`` times (5 by default) and the minimum wall time is
reported, with the interpreter's own start-up (``python -c pass``) for reference. Nothing heavy
(torch, transformers, LangChain, pandas) may be imported by either: the script also lists the
modules of those that got loaded.

    python -m benchmarks.bench_import [--runs 5]

Writes ``import.md``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import harness

ROOT = harness.REPO
HEAVY = ("torch", "transformers", "langchain_core", "pandas", "numpy")


def wall_times(argv: list[str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` fresh runs of ``argv`` (output discarded; must exit 0)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return times


def heavy_modules(code: str) -> list[str]:
    """Which of :data:`HEAVY` a fresh interpreter has loaded after running ``code``."""
    probe = f"import sys\n{code}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=ROOT
    )
    return eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 - our own repr of a list


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "out")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    script = shutil.which("uqlm-bert", path=str(Path(sys.executable).parent) + os.pathsep)
    help_cmd = [script, "--help"] if script else [sys.executable, "-m", "uqlm_bert", "--help"]
    help_probe = (
        "import contextlib, io\nfrom uqlm_bert.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])"
    )
    commands = [
        ("python -c pass (start-up alone)", [sys.executable, "-c", "pass"], None),
        ("python -c 'import uqlm_bert'", [sys.executable, "-c", "import uqlm_bert"], "import uqlm_bert"),
        ("uqlm-bert --help", help_cmd, help_probe),
    ]  # fmt: skip
    rows = []
    for name, cmd, probe in commands:
        times = sorted(wall_times(cmd, args.runs))
        heavy = ", ".join(heavy_modules(probe)) or "none" if probe else ""
        rows.append([f"`{name}`", f"{times[0]:.3f}", f"{times[len(times) // 2]:.3f}", heavy])
    head = ["command", f"min of {args.runs} (s)", "median (s)", "heavy modules loaded"]
    lines = [harness.machine_summary(), "", *harness.md_table(head, rows), ""]
    report = "\n".join(lines) + f"\n1-minute load average at the end: {os.getloadavg()[0]:.2f}"
    harness.write_report(args.out, "import.md", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
