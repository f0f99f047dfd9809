"""The package's shape, as docs/architecture.md states it: no module over 600 lines, no import
cycle (lazy imports included), warnings through one helper, cheap imports, and no process-wide
state beyond the caches and memories the page names."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.helpers.source import parse_source

PACKAGE = REPO_ROOT / "uqlm_bert"
HEAVY = ("torch", "transformers", "langchain_core", "langchain_openai", "pandas")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, lazy: bool) -> set[str]:
    """The uqlm_bert modules a module imports: when it is imported (not inside functions and not
    under ``if TYPE_CHECKING``), or with ``lazy`` anywhere in it (inside functions, and for type
    checking, too)."""
    tree = parse_source(path)
    found: set[str] = set()
    nodes: list[ast.AST] = []
    for node in tree.body:
        if not lazy and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if not lazy and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        nodes.extend(ast.walk(node))
    for sub in nodes:
        if isinstance(sub, ast.Import):
            found.update(a.name for a in sub.names if a.name.startswith("uqlm_bert"))
        elif isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("uqlm_bert"):
            found.add(sub.module)
            found.update(f"{sub.module}.{a.name}" for a in sub.names)
    return found


def _import_graph(lazy: bool = False) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {t for t in _imports(path, lazy) if t in modules}
        # importing a submodule runs its packages' __init__ first
        graph[name] = {t for t in targets if t != name}
        for t in list(graph[name]):
            parent = t.rpartition(".")[0]
            while parent and parent != name and not name.startswith(parent + "."):
                graph[name].add(parent)
                parent = parent.rpartition(".")[0]
    return graph


@pytest.mark.parametrize("lazy", [False, True], ids=["at-import", "lazy-included"])
def test_the_import_graph_has_no_cycle(lazy):
    """Neither the imports run when a module is imported nor all of them, those inside
    functions and for type checking included, go round in a circle."""
    graph = _import_graph(lazy)
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


#: The most lines a module may have.
MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines():
    sizes = {
        str(p.relative_to(REPO_ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in PACKAGE.rglob("*.py")
    }
    assert len(sizes) > 40
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_the_results_page_stays_readable():
    # today's figures only (git keeps the earlier ones), and every section measured
    text = (REPO_ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    assert "not measured yet" not in text.lower()


#: Library code that issues a warning with ``warnings.warn`` instead of ``_warn.warn_user``,
#: and why (docs/architecture.md names them too).
WARNS_DIRECTLY = {
    # the connection warning of a run's calls: a fixed stacklevel, not yet the one helper
    "uqlm_bert/generation/_caller.py",
}


def test_every_library_warning_goes_through_warn_user():
    """Only ``_warn.py`` calls ``warnings.warn`` (and the modules named above); everything
    else warns through ``warn_user``, which points at the user's line."""
    direct = set()
    for path in PACKAGE.rglob("*.py"):
        name = str(path.relative_to(REPO_ROOT))
        for node in ast.walk(parse_source(path)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "warn"
                and ast.unparse(node.func.value) == "warnings"
            ):
                direct.add(name)
    assert direct - {"uqlm_bert/_warn.py"} <= WARNS_DIRECTLY


#: The package's process-wide state, by module: what one part of a process does there, every
#: other part sees. docs/architecture.md names each, and why it is shared.
SHARED_STATE = {
    # loaded models and tokenizers, keyed by everything that changes the numbers
    "uqlm_bert/bertscore/_cache.py": {"MODELS", "TOKENIZERS"},
    # whether this CPU's bfloat16 products beat float32's: measured once per process
    "uqlm_bert/bertscore/_resolve.py": {"cpu_prefers_bfloat16"},
    # the idf tables: the shipped ones read once, a tokenizer's table built once
    "uqlm_bert/bertscore/_fixed_idf.py": {
        "_MEMO",
        "_shipped_embedded",
        "_shipped_tables",
        "_shipped_word_table",
    },
    # what runs learned about a provider: limits belong to the provider, not to a call
    "uqlm_bert/generation/_learned_limits.py": {"_memory"},
    # the provider's live state on each event loop, shared by the calls in flight on it
    "uqlm_bert/generation/_shared_limits.py": {"_providers"},
    # one TLS context for the connection pools made for calls (a cache of the certificates)
    "uqlm_bert/generation/_clients.py": {"_tls_context"},
    # the local LLM servers started and not yet stopped, stopped when the interpreter exits
    "uqlm_bert/_local_llm.py": {"_RUNNING"},
    # the Ray session started for the objects that score on Ray, shut down when the last closes
    "uqlm_bert/distributed/_session.py": {"_HELD"},
    # the csv field limit, which the csv module keeps process-wide, lifted while CSV is read
    "uqlm_bert/io/_csv.py": {"_CSV_READERS", "_CSV_SAVED_LIMIT"},
    # the sentence splitter of each language, built once
    "uqlm_bert/scorers/_sentences.py": {"_segmenter"},
    # the scorer names: register_scorer adds one for the whole process
    "uqlm_bert/scorers/_registry.py": {"_REGISTRY"},
}

_MUTATING_METHODS = {
    "append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear",
    "remove", "discard", "add", "move_to_end", "get",
}  # fmt: skip


def _shared_state(path: Path) -> set[str]:
    """Module-level names of ``path`` that hold state its functions change: a container
    assigned to or mutated in a function (or declared ``global`` there), or a cache decorator
    on a module-level function (``functools.cache``, ``lru_cache``)."""
    tree = parse_source(path)
    top: set[str] = set()
    found: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        top.update(t.id for t in targets if isinstance(t, ast.Name))
        if isinstance(node, ast.FunctionDef) and any(
            "cache" in ast.unparse(d) for d in node.decorator_list
        ):
            found.add(node.name)
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    for function in functions:
        local = {a.arg for a in function.args.args + function.args.kwonlyargs}
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                found.update(n for n in node.names if n in top)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                targets = node.targets if not isinstance(node, ast.AugAssign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        if t.value.id in top and t.value.id not in local:
                            found.add(t.value.id)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATING_METHODS - {"get"}
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in top
                and node.func.value.id not in local
            ):
                found.add(node.func.value.id)
    # a cache object of the package's own, kept at module level and filled through .get
    for node in tree.body:
        if isinstance(node, ast.Assign) and "LRUCache(" in ast.unparse(node.value):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def test_process_wide_state_is_only_what_the_architecture_page_names():
    found = {
        str(p.relative_to(REPO_ROOT)): state
        for p in PACKAGE.rglob("*.py")
        if (state := _shared_state(p))
    }
    assert found == SHARED_STATE


def _run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow
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


@pytest.mark.slow
def test_help_loads_no_heavy_library():
    code = (
        "import sys, contextlib, io\n"
        "from uqlm_bert.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    assert _run(code).strip() == "[]"


@pytest.mark.slow
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
from uqlm_bert.io import write_table
from uqlm_bert.io._reading import read_table
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
