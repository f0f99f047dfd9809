"""Execute the notebooks and save them with their outputs, so the repository shows the results.

    python notebooks/build.py                    # every notebook in this folder
    python notebooks/build.py NAME.ipynb ...     # just these
    python notebooks/build.py --check            # execute, save nothing; fail on any error

Each notebook runs top to bottom in a fresh kernel of this Python (ipykernel), with the working
directory set to this folder, offline (the LLM runs on this machine, started on 127.0.0.1, or is
replayed; BERTScore uses the embedded model), and with the repository root on ``PYTHONPATH`` so a
checkout works without installing. The saved
file holds no timing metadata, so executing an unchanged notebook again changes nothing but the
outputs that really changed. Needs ``nbclient`` and ``ipykernel`` (the ``docs`` extra).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
CELL_TIMEOUT_S = 300

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def notebook_paths() -> list[Path]:
    """The notebooks of this folder, in name order."""
    return sorted(HERE.glob("*.ipynb"))


def kernel_env() -> dict[str, str]:
    """The kernel's environment: this one, offline, with the repository importable."""
    env = dict(os.environ)
    env.update(OFFLINE_ENV)
    env.pop("MPLBACKEND", None)  # the kernel chooses its inline backend
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + path if path else "")
    return env


def _this_python_kernels() -> Any:
    """A kernel-spec manager whose ``python3`` kernel is ipykernel on this very interpreter.

    A ``python3`` kernel spec installed elsewhere (a system Jupyter's, say) is not used: the
    notebooks must run on the Python that has this checkout's dependencies.
    """
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name="Python 3 (ipykernel)",
                language="python",
                resource_dir="",
            )

    return ThisPython()


def execute(path: Path, timeout: int = CELL_TIMEOUT_S) -> Any:
    """Run the notebook at ``path`` in a fresh kernel; return it with its outputs.

    Raises ``nbclient.exceptions.CellExecutionError`` on the first cell that fails.
    """
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name="python3", kernel_spec_manager=_this_python_kernels())
    client = NotebookClient(
        nb,
        km=km,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
    )
    client.execute(env=kernel_env())
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def machine_paths_in(nb: Any) -> list[str]:
    """Outputs that name a folder of this machine (a traceback or warning location, say)."""
    needles = {str(REPO_ROOT), str(Path.home())} - {"/"}
    found = []
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            text = str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
            if any(n in text for n in needles):
                found.append(f"cell {i}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook here")
    parser.add_argument("--check", action="store_true", help="execute only; write nothing")
    args = parser.parse_args(argv)

    import nbformat

    paths = [p.resolve() for p in args.notebooks] or notebook_paths()
    for path in paths:
        nb = execute(path)
        leaks = machine_paths_in(nb)
        if leaks:
            print(f"{path.name}: outputs name local folders ({', '.join(leaks)})", file=sys.stderr)
            return 1
        if not args.check:
            nbformat.write(nb, path)
        print(f"{path.name}: executed{'' if args.check else ' and saved'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
