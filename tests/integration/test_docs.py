"""The documentation builds, and every code example in it runs.

- The Sphinx site (``docs/``) builds with warnings as errors, as CI builds it.
- Every ``Example:`` section of every module's docstrings passes as a doctest.
- Every ```` ```python ```` block of ``docs/**/*.md`` and ``README.md`` runs. A page's blocks run in
  order in one namespace (later blocks use what earlier ones defined), in a scratch working
  directory, offline:

  * an LLM server is the scripted OpenAI-compatible server of ``fakes/openai_server.py`` on
    127.0.0.1: the address the docs give (``http://localhost:8000/v1``) is replaced by its
    address, and ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` point ``ChatOpenAI`` without a
    ``base_url`` at it;
  * a model the docs name as a placeholder (``my-org/my-model``) is the embedded model, and a
    sample size meant for real use is cut down (``STANDINS``);
  * names a page leaves to the reader (``prompts``, ``cands``, ...) are given by ``GIVENS``
    below;
  * top-level ``await`` runs, as in Jupyter;
  * a block with the line ``# docs: skip-exec (why)`` is not run; the reason is required, and
    skips are counted and kept few.
"""

from __future__ import annotations

import ast
import asyncio
import doctest
import importlib
import json
import linecache
import os
import pkgutil
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

import uqlm_bert
from fakes.openai_server import FakeOpenAIServer
from tests.conftest import REPO_ROOT
from tests.test_api import PUBLIC

DOCS = REPO_ROOT / "docs"
SKIP_MARKER = re.compile(r"^\s*#\s*docs:\s*skip-exec\b(.*)$", re.M)
MAX_SKIPPED_BLOCKS = 3
DOCS_SERVER_URL = "http://localhost:8000/v1"
EMBEDDED_MODEL = "<the embedded model's directory>"

#: Text of the examples replaced before they run: placeholders for things on the reader's machine,
#: and sizes meant for real use (the examples' behaviour does not depend on them).
STANDINS: dict[str, str] = {
    "my-org/my-model": EMBEDDED_MODEL,
    "num_pairs=100_000": "num_pairs=300",
}

#: Names a page uses without defining them, as its prose says the reader has them.
GIVENS: dict[str, str] = {
    "black_box.md": """
prompts = ["Who wrote 'The Master and Margarita'?", "At what temperature does ethanol boil?"]
""",
    "bertscore.md": """
cands = ["The cat sat on the mat.", "Paris is the capital of France."]
refs = [["A cat was sitting on the mat."], ["The capital of France is Paris.", "It is Paris."]]
my_sentences = [
    "The river floods every spring.", "She plays the violin in an orchestra.",
    "Prices rose sharply last year.", "The museum opens at nine.",
    "He repaired the old bicycle.", "Snow covered the mountain pass.",
    "The committee approved the budget.", "Our train was delayed by an hour.",
]
""",
    "scaling.md": """
import json
from uqlm_bert.examples import load_example_answers
with open("answers.jsonl", "w", encoding="utf-8") as f:
    f.writelines(json.dumps(row) + "\\n" for row in load_example_answers())
""",
    "evaluation.md": """
from uqlm_bert import UQResult
result = UQResult({"prompts": ["a", "b", "c", "d", "e", "f"],
                   "bert_score": [0.91, 0.55, 0.84, 0.77, 0.42, 0.88]})
hallucinated = [0, 1, 0, 0, 1, 1]
new_confidences = [0.95, 0.30, 0.61]
""",
}


# -- Sphinx ------------------------------------------------------------------------------------


def _offline_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


#: The public modules, as tests/test_api.py pins them; every other module is private.
PUBLIC_MODULES = tuple(sorted(PUBLIC))


@pytest.mark.slow
def test_sphinx_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    out = tmp_path / "html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(DOCS),
            str(out),
        ],
        cwd=REPO_ROOT,
        env=_offline_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stderr[-6000:]}"
    for page in _doc_pages():
        built = out / page.relative_to(DOCS).with_suffix(".html")
        assert built.is_file(), f"{page.relative_to(DOCS)} was not built"
    api_plots = (out / "api" / "plots.html").read_text(encoding="utf-8")
    for name in (
        "plot_confidence_histogram",
        "plot_accuracy_vs_fraction_kept",
        "plot_threshold",
        "plot_reliability_diagram",
    ):
        assert name in api_plots
    api_evaluation = (out / "api" / "evaluation.html").read_text(encoding="utf-8")
    for name in ("ScoreCalibrator", "expected_calibration_error", "reliability_curve"):
        assert name in api_evaluation
    core = (out / "api" / "core.html").read_text(encoding="utf-8")
    assert "generate_and_score_sync" in core and "plot_histogram" in core
    assert "calibrate" in core
    # every public class and function of every public module has its entry, under the name
    # users import it by (a face's own name, or the top level's for the top-level classes)
    api = "\n".join(p.read_text(encoding="utf-8") for p in (out / "api").glob("*.html"))
    undocumented = []
    for face in PUBLIC_MODULES:
        module = importlib.import_module(face)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if not (isinstance(value, type) or callable(value)):
                continue
            if f'id="{face}.{name}"' not in api and f'id="uqlm_bert.{name}"' not in api:
                undocumented.append(f"{face}.{name}")
    assert not undocumented, f"not in the API reference: {undocumented}"


# -- doctests ----------------------------------------------------------------------------------


def _modules() -> list[str]:
    names = ["uqlm_bert"]
    for info in pkgutil.walk_packages(uqlm_bert.__path__, "uqlm_bert."):
        names.append(info.name)
    return sorted(names)


MODULES = _modules()


def test_every_public_module_is_doctested():
    for expected in (
        "uqlm_bert._blackbox",
        "uqlm_bert.results",
        "uqlm_bert.plots",
        "uqlm_bert.bertscore._engine",
        "uqlm_bert.evaluation",
    ):
        assert expected in MODULES
    # the package's examples are doctests: there are plenty of them
    finder = doctest.DocTestFinder()
    total = sum(
        len(t.examples) for name in MODULES for t in finder.find(importlib.import_module(name))
    )
    assert total >= 100, total


#: the modules whose examples start a process (LocalLLM's server): out of the fast lane
STARTS_A_PROCESS = {"uqlm_bert._local_llm"}


@pytest.mark.parametrize(
    "module_name",
    [pytest.param(m, marks=pytest.mark.slow) if m in STARTS_A_PROCESS else m for m in MODULES],
)
def test_docstring_examples(module_name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
    tests = [t for t in finder.find(module, module_name) if t.examples]
    reports: list[str] = []
    for test in sorted(tests, key=lambda t: t.name):
        out: list[str] = []
        result = runner.run(test, out=out.append, clear_globs=True)
        if result.failed:
            reports.append("".join(out))
    assert not reports, "\n".join(reports)


# -- code blocks of the Markdown pages ---------------------------------------------------------


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str

    @property
    def skip_reason(self) -> str | None:
        m = SKIP_MARKER.search(self.code)
        return None if m is None else m.group(1).strip()


FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")


def python_blocks(path: Path) -> list[Block]:
    """The ```python blocks of a Markdown file (nested in lists too), in order."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        info = m.group("info").strip().split()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        if info and info[0] in ("python", "py", "python3"):
            blocks.append(Block(path, i + 1, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def _doc_pages() -> list[Path]:
    """Every Markdown page of the docs, in subfolders too (not the build output)."""
    return sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)


def _pages() -> list[Path]:
    return [*_doc_pages(), REPO_ROOT / "README.md"]


PAGES_WITH_CODE = [p for p in _pages() if python_blocks(p)]


def test_code_blocks_are_found_and_skips_are_rare_and_explained():
    blocks = [b for p in _pages() for b in python_blocks(p)]
    assert len(blocks) >= 10, [f"{b.path.name}:{b.line}" for b in blocks]
    skipped = [b for b in blocks if b.skip_reason is not None]
    for b in skipped:
        assert re.fullmatch(r"\(.+\)", b.skip_reason), (
            f"{b.path.name}:{b.line}: '# docs: skip-exec' needs a reason in parentheses"
        )
    assert len(skipped) <= MAX_SKIPPED_BLOCKS, [f"{b.path.name}:{b.line}" for b in skipped]


def test_block_extraction_handles_fences_and_markers(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n```python\nx = 1\n```\n\n```bash\nls\n```\n- item\n\n  ```python\n  y = 2\n"
        "  # docs: skip-exec (needs a GPU)\n  ```\n````python\nz = '```'\n````\n",
        encoding="utf-8",
    )
    blocks = python_blocks(page)
    assert [(b.line, b.code) for b in blocks] == [
        (2, "x = 1\n"),
        (11, "y = 2\n# docs: skip-exec (needs a GPU)\n"),
        (15, "z = '```'\n"),
    ]
    assert [b.skip_reason for b in blocks] == [None, "(needs a GPU)", None]


@pytest.fixture(scope="module")
def llm_server():
    with FakeOpenAIServer() as server:
        yield server


def _run_block(block: Block, namespace: dict) -> None:
    # named after the page, with the page's line numbers; tracebacks show the block's lines
    filename = f"<{block.path.name}, block at line {block.line}>"
    source = "\n" * block.line + block.code
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # noqa: S307 - the docs' own examples
    if asyncio.iscoroutine(result):
        asyncio.run(result)


def _block_failure(block: Block, exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[1:]  # from the block's own frame on
    where = "\n".join(f"  {f.filename}:{f.lineno} in {f.name}: {f.line}" for f in frames[-8:])
    return (
        f"{block.path.name}: the example at line {block.line} failed\n{where}\n"
        f"{type(exc).__name__}: {exc}"
    )


def _starts_ray(page: Path) -> bool:
    return any(
        re.search(r"\bimport ray\b|\bray\.init\b|scoring=\"ray\"|RayScoring|score_file", b.code)
        for b in python_blocks(page)
        if b.skip_reason is None
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.ray) if _starts_ray(p) else p for p in PAGES_WITH_CODE],
    ids=lambda p: p.name,
)
def test_markdown_code_blocks_run(page, llm_server, embedded_model_path, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "docs-test")
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_BASE", llm_server.base_url)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # processes the examples start (Ray workers, say) import the package from this checkout
    monkeypatch.setenv("PYTHONPATH", _offline_env()["PYTHONPATH"])
    namespace: dict = {"__name__": "__docs__"}
    given = GIVENS.get(page.name)
    if given:
        exec(compile(given, f"<givens for {page.name}>", "exec"), namespace)  # noqa: S102
    ran = 0
    for block in python_blocks(page):
        if block.skip_reason is not None:
            continue
        block.code = block.code.replace(DOCS_SERVER_URL, llm_server.base_url)
        for text, standin in STANDINS.items():
            block.code = block.code.replace(
                text, embedded_model_path if standin == EMBEDDED_MODEL else standin
            )
        try:
            _run_block(block, namespace)
        except Exception as exc:  # report the block and where in it, not the test machinery
            pytest.fail(_block_failure(block, exc), pytrace=False)
        ran += 1
    assert ran > 0


# The calls a threshold goes to, with a number written in them.
_THRESHOLD_USES = re.compile(
    r"(?:\.flag|\.filter|plot_threshold|\.plot_threshold)\(\s*(?:[a-z_\[\]\"']+,\s*)?"
    r"(?P<number>\d*\.\d+)|threshold\s*=\s*(?P<kw>\d*\.\d+)|--threshold[ =](?P<cli>\d*\.\d+)"
)


def _texts_that_show_thresholds() -> list[tuple[str, str]]:
    """README, every docs page, the quickstart and the notebooks' code cells."""
    out = [("README.md", (REPO_ROOT / "README.md").read_text(encoding="utf-8"))]
    out += [(str(p.relative_to(REPO_ROOT)), p.read_text(encoding="utf-8")) for p in _doc_pages()]
    out += [
        (str(p.relative_to(REPO_ROOT)), p.read_text(encoding="utf-8"))
        for p in (REPO_ROOT / "uqlm_bert" / "examples").glob("*.py")
    ]
    for nb in (REPO_ROOT / "notebooks").glob("*.ipynb"):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        out.append((str(nb.relative_to(REPO_ROOT)), code))
    return out


def test_every_example_uses_the_one_default_threshold_for_the_default_scorer():
    """A number written as the default scorer's threshold anywhere a user reads is the default
    threshold; lines about another scorer, a probability or a precision target are theirs."""
    from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD

    found = []
    for name, text in _texts_that_show_thresholds():
        for line in text.splitlines():
            if any(k in line for k in ("scorer=", "probability", "target_precision", "precision=")):
                continue
            for m in _THRESHOLD_USES.finditer(line):
                value = float(m.group("number") or m.group("kw") or m.group("cli"))
                found.append((name, line.strip(), value))
    assert len(found) >= 3  # the scan sees the examples
    wrong = [f for f in found if f[2] != DEFAULT_THRESHOLD]
    assert not wrong, f"thresholds other than {DEFAULT_THRESHOLD}: {wrong}"


# -- pages that map the code -------------------------------------------------------------------


def test_the_migration_page_maps_every_uqlm_argument():
    """docs/migration.md is about uqlm: every argument of uqlm's ``BlackBoxUQ`` is on it, and no
    name of this package's own history is (it was never released under other names)."""
    from tests.blackbox.test_constructor import UQLM

    page = (DOCS / "migration.md").read_text(encoding="utf-8")
    missing = [f"`{name}`" for name in UQLM if f"`{name}`" not in page]
    assert not missing, f"docs/migration.md does not name: {missing}"
    assert "earlier release" not in page and "FutureWarning" not in page


#: A dotted path through a private module or name (``uqlm_bert.bertscore._engine``,
#: ``_blackbox._pipeline``): what the pages never show.
PRIVATE_PATH = re.compile(r"\b\w+\._[a-z]\w*")


def test_the_pages_name_public_paths_only():
    pages = [*_doc_pages(), *sorted(DOCS.rglob("*.rst")), REPO_ROOT / "README.md"]
    found = [
        f"{page.relative_to(REPO_ROOT)}:{number}: {m.group(0)}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        for m in PRIVATE_PATH.finditer(line)
    ]
    assert len(pages) > 15
    assert not found, found


PACKAGE = REPO_ROOT / "uqlm_bert"
ROW = re.compile(r"^\| `(?P<room>[^`]+)` \| (?P<holds>.*) \| (?P<imports>[^|]*) \|$")


def _rooms() -> dict[str, tuple[str, str]]:
    """docs/architecture.md's table of rooms: room (a package folder ``name/`` or a root module
    ``name.py``) -> (what it holds, what it may import)."""
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = page.split("## Which room holds what", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        m = ROW.match(line.strip())
        if m and m.group("room") != "room":
            rows[m.group("room")] = (m.group("holds"), m.group("imports"))
    return rows


def _package_rooms() -> set[str]:
    """Every package folder (``name/``, at any depth) and root module (``name.py``) of uqlm_bert."""
    folders = {
        str(p.parent.relative_to(PACKAGE)).replace("\\", "/") + "/"
        for p in PACKAGE.rglob("__init__.py")
        if p.parent != PACKAGE
    }
    return folders | {p.name for p in PACKAGE.glob("*.py")}


def test_the_architecture_page_names_every_room():
    rooms = _rooms()
    assert len(rooms) >= 15
    missing = sorted(_package_rooms() - set(rooms))
    assert not missing, f"docs/architecture.md has no row for: {missing}"
    gone = sorted(set(rooms) - _package_rooms())
    assert not gone, f"docs/architecture.md has a row for what is not in the package: {gone}"


def test_the_architecture_page_names_every_module_in_its_room():
    rooms = _rooms()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        folder = path.parent.relative_to(PACKAGE)
        if folder == Path(".") or path.name == "__init__.py":
            continue
        holds = rooms.get(str(folder).replace("\\", "/") + "/", ("", ""))[0]
        if f"`{path.name}`" not in holds:
            missing.append(str(path.relative_to(PACKAGE)))
    assert not missing, f"docs/architecture.md does not name these in their room's row: {missing}"


def test_every_room_imports_only_what_the_architecture_page_allows():
    from tests.test_architecture import _import_graph

    def room(module: str) -> str:
        parts = module.split(".")
        if len(parts) == 1:
            return "__init__"
        path = PACKAGE / parts[1]
        return parts[1] + "/" if path.is_dir() else parts[1]

    allowed: dict[str, set[str]] = {}
    for name, (_, imports) in _rooms().items():
        listed = set(re.findall(r"`([^`]+)`", imports))
        key = name.removesuffix(".py").removesuffix("/")
        allowed[key] = {"__init__" if n == "uqlm_bert" else n for n in listed}
    found: dict[str, set[str]] = {}
    for module, targets in _import_graph(lazy=True).items():
        source = room(module)
        for target in targets:
            other = room(target)
            if other != source:
                found.setdefault(source.removesuffix("/"), set()).add(other.removesuffix("/"))
    wrong = {
        source: sorted(targets - allowed.get(source, set()))
        for source, targets in found.items()
        if targets - allowed.get(source, set())
    }
    assert not wrong, (
        f"imports that docs/architecture.md's 'may import' column does not list: {wrong}"
    )


def test_the_api_reference_documents_the_public_faces_only():
    """docs/api/*.rst names every public module and no private one (a module whose name, or a
    package's above it, starts with ``_``)."""
    directive = re.compile(r"^\.\. auto(?:module|class|exception|function|data)::\s+(\S+)", re.M)
    named = {
        target
        for rst in (DOCS / "api").glob("*.rst")
        for target in directive.findall(rst.read_text(encoding="utf-8"))
    }
    private = sorted(t for t in named if any(part.startswith("_") for part in t.split(".")))
    assert not private, f"the API reference documents private modules: {private}"
    automodules = {
        m
        for rst in (DOCS / "api").glob("*.rst")
        for m in re.findall(r"^\.\. automodule::\s+(\S+)", rst.read_text(encoding="utf-8"), re.M)
    }
    public = set(PUBLIC_MODULES)
    assert automodules == public, (sorted(public - automodules), sorted(automodules - public))
