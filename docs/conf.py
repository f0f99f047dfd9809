"""Sphinx configuration for the uqlm-bert documentation.

Build it with ``python -m sphinx -W -b html docs docs/_build/html`` (the ``docs`` extra installs
what it needs). The build needs no network: no intersphinx, no remote assets, and the package is
imported from this checkout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))
# autodoc imports the package; nothing it imports may reach the network
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import uqlm_bert  # noqa: E402

project = "uqlm-bert"
author = "uqlm-bert developers"
copyright = "uqlm-bert developers"
release = uqlm_bert.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Markdown pages: `#section` links resolve to headings down to level 3, as on GitHub.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# API reference from the docstrings (Google style). Ray is optional and imported lazily by
# uqlm_bert.distributed; it is mocked so the reference builds without it.
autodoc_mock_imports = ["ray"]
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_class_signature = "separated"
autoclass_content = "class"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False


# A constant that a package's face re-exports from one of its private modules keeps the ``#:``
# comment written where it is defined, and is documented under the face's name: the comments
# are added to what autodoc's source analyzer found in the face itself.
def _reexported_attr_docs(face: str) -> dict[tuple[str, str], list[str]]:
    import importlib
    import pkgutil

    from sphinx.errors import PycodeError
    from sphinx.pycode import ModuleAnalyzer

    package = importlib.import_module(face)
    exported = set(getattr(package, "__all__", ()))
    docs: dict[tuple[str, str], list[str]] = {}
    for info in pkgutil.iter_modules(package.__path__, face + "."):
        try:
            found = ModuleAnalyzer.for_module(info.name).find_attr_docs()
        except PycodeError:  # no source to read comments from
            continue
        for (scope, attr), lines in found.items():
            if not scope and attr in exported:
                docs.setdefault((scope, attr), list(lines))
    return docs


def _document_reexported_constants(app) -> None:
    import pkgutil

    from sphinx.pycode import ModuleAnalyzer

    faces = [
        info.name
        for info in pkgutil.iter_modules(uqlm_bert.__path__, "uqlm_bert.")
        if info.ispkg and not info.name.rpartition(".")[2].startswith("_")
    ]
    for face in faces:
        analyzer = ModuleAnalyzer.for_module(face)
        analyzer.analyze()
        for key, lines in _reexported_attr_docs(face).items():
            analyzer.attr_docs.setdefault(key, lines)


def setup(app):
    app.connect("builder-inited", _document_reexported_constants)


html_theme = "furo"
html_title = f"uqlm-bert {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
