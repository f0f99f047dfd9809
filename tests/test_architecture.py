"""The package's shape: no import cycles, cheap imports, and no process-wide state changed."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.source import parse_source

PACKAGE = REPO_ROOT / "uqlm_bert"
HEAVY = ("torch", "transformers", "langchain_core", "langchain_openai", "pandas")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _top_level_imports(path: Path) -> set[str]:
    """The uqlm_bert modules a module imports when it is imported (not inside functions and not
    under ``if TYPE_CHECKING``)."""
    tree = parse_source(path)
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []:
            if isinstance(sub, ast.Import):
                found.update(a.name for a in sub.names if a.name.startswith("uqlm_bert"))
            elif isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("uqlm_bert"):
                found.add(sub.module)
                found.update(f"{sub.module}.{a.name}" for a in sub.names)
    return found


def _import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {t for t in _top_level_imports(path) if t in modules}
        # importing a submodule runs its packages' __init__ first
        graph[name] = {t for t in targets if t != name}
        for t in list(graph[name]):
            parent = t.rpartition(".")[0]
            while parent and parent != name and not name.startswith(parent + "."):
                graph[name].add(parent)
                parent = parent.rpartition(".")[0]
    return graph


def test_the_import_graph_has_no_cycle():
    graph = _import_graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if state.get(nxt) is None:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if state.get(node) is None:
            visit(node)
    assert len(graph) > 40  # the walk really saw the package


def _run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(
    "statement",
    [
        "import uqlm_bert",
        "import uqlm_bert.scorers",
        "import uqlm_bert.generation",
        "import uqlm_bert.bertscore",
        "from uqlm_bert.cli import build_parser; build_parser().format_help()",
    ],
)
def test_importing_loads_no_heavy_library(statement):
    out = _run(f"import sys; {statement}; print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert out.strip() == "[]"


def test_help_loads_no_heavy_library():
    code = (
        "import sys, contextlib, io\n"
        "from uqlm_bert.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    assert _run(code).strip() == "[]"


def test_using_the_package_changes_no_process_wide_state(tmp_path):
    """Scoring, plotting, reading and writing tables and running the command leave the process's
    global settings as they were: umask, logging, warning filters, matplotlib's backend, the
    csv field limit and torch's thread count."""
    code = f"""
import csv, json, logging, os, sys, warnings, contextlib, io
def umask():
    for line in open('/proc/self/status'):
        if line.startswith('Umask:'):
            return line.split()[1]
def state():
    import matplotlib
    torch = sys.modules.get('torch')
    return {{
        'umask': umask(),
        'root_handlers': [type(h).__name__ for h in logging.getLogger().handlers],
        'root_level': logging.getLogger().level,
        'pkg_level': logging.getLogger('uqlm_bert').level,
        'filters': len(warnings.filters),
        'backend': str(matplotlib.rcParams._get_backend_or_none()),
        'csv_limit': csv.field_size_limit(),
        'threads': torch.get_num_threads() if torch else None,
    }}
# the libraries themselves first: what their imports set up is theirs, not this package's
import torch, pandas as pd, transformers, tokenizers, langchain_core, matplotlib, pysbd
import scipy.sparse, scipy.special, sympy  # transformers imports them on first use
before = state()
from uqlm_bert import BlackBoxUQ
from uqlm_bert.cli import main
from uqlm_bert.io import read_table, write_table
from uqlm_bert.plots import plot_confidence_histogram
uq = BlackBoxUQ(scorers=['bert_score', 'rouge_l'], show_progress_bars=False)
uq.score(['Paris is in France.'], [['Paris is a French city.', None]])
ax = plot_confidence_histogram([0.2, 0.9], labels=[0, 1])
ax.figure.savefig({str(tmp_path / "h.png")!r})
path = {str(tmp_path / "a.csv")!r}
write_table(pd.DataFrame({{'response': ['a'], 'sampled_responses': [['a', None]]}}), path)
read_table(path)
with contextlib.redirect_stdout(io.StringIO()):
    main(['score', path, '-o', {str(tmp_path / "out.jsonl")!r}, '--quiet'])
after = state()
print(json.dumps([before, after]))
"""
    before, after = json.loads(_run(code).strip().splitlines()[-1])
    assert after == before
