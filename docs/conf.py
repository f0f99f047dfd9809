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

html_theme = "furo"
html_title = f"uqlm-bert {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
