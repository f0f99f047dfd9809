"""How long ``import uqlm_bert`` and ``uqlm-bert --help`` take, from a fresh interpreter.

Each command runs in a new process ``--runs`` times (5 by default) and the minimum wall time is
reported, with the interpreter's own start-up (``python -c pass``) for reference. Nothing heavy
(torch, transformers, LangChain, pandas) may be imported by either: the script also lists the
modules of those that got loaded.

    python benchmarks/bench_import.py [--runs 5]

Writes ``benchmarks/out/import.md`` and prints it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    script = shutil.which("uqlm-bert", path=str(Path(sys.executable).parent) + os.pathsep)
    help_cmd = [script, "--help"] if script else [sys.executable, "-m", "uqlm_bert", "--help"]
    rows = [
        ("python -c pass (start-up alone)", [sys.executable, "-c", "pass"], None),
        (
            "python -c 'import uqlm_bert'",
            [sys.executable, "-c", "import uqlm_bert"],
            "import uqlm_bert",
        ),  # fmt: skip
        (
            "uqlm-bert --help",
            help_cmd,
            "import contextlib, io\nfrom uqlm_bert.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])",
        ),  # fmt: skip
    ]
    lines = [
        f"| command | min of {args.runs} (s) | median (s) | heavy modules loaded |",
        "|---|---|---|---|",
    ]
    for name, cmd, probe in rows:
        times = sorted(wall_times(cmd, args.runs))
        heavy = ", ".join(heavy_modules(probe)) or "none" if probe else ""
        lines.append(f"| `{name}` | {times[0]:.3f} | {times[len(times) // 2]:.3f} | {heavy} |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    report = "\n".join(lines) + f"\n\n1-minute load average at the end: {load:.2f}\n"
    write_report(OUT, "import.md", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
