"""Where the modules of earlier releases went: their old import paths still work, with a
``FutureWarning`` naming the new spelling.

Every module inside a subpackage is private now (``uqlm_bert.bertscore._engine``), behind its
subpackage's face (``uqlm_bert.bertscore``), and the web services moved from ``examples`` to
:mod:`uqlm_bert.apps`. Code written against the old paths
(``from uqlm_bert.bertscore.engine import BERTScorer``) keeps running: importing an old path
gives the module it became, once per process with a ``FutureWarning`` that says where to import
from instead. The old paths will go in a later release; docs/migration.md lists them.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     from uqlm_bert.bertscore.matching import greedy_match
    >>> greedy_match.__module__
    'uqlm_bert.bertscore._matching'
    >>> print(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
    uqlm_bert.bertscore.matching is private now (uqlm_bert.bertscore._matching): import its
    public names from uqlm_bert.bertscore
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

from uqlm_bert._warn import warn_user

__all__ = ["MOVED", "face_of", "install"]

#: Old module path (below ``uqlm_bert.``) -> the module it is now.
MOVED: dict[str, str] = {
    "blackbox": "_blackbox",
    "bertscore.baseline": "bertscore._baseline",
    "bertscore.batching": "bertscore._batching",
    "bertscore.cache": "bertscore._cache",
    "bertscore.encoder": "bertscore._encoder",
    "bertscore.engine": "bertscore._engine",
    "bertscore.fixed_idf": "bertscore._fixed_idf",
    "bertscore.idf": "bertscore._idf",
    "bertscore.layer_stack": "bertscore._layer_truncation",
    "bertscore.layers": "bertscore._known_models",
    "bertscore.matching": "bertscore._matching",
    "bertscore.models": "bertscore._loading",
    "bertscore.packed": "bertscore._packed_forward",
    "bertscore.pair_scoring": "bertscore._pair_scoring",
    "bertscore.presets": "bertscore._presets",
    "bertscore.resolve": "bertscore._resolve",
    "bertscore.settings": "bertscore._settings",
    "bertscore.support": "bertscore._token_support",
    "bertscore.texts": "bertscore._call_texts",
    "bertscore.windows": "bertscore._windows",
    "generation.caller": "generation._caller",
    "generation.checkpoint": "generation._checkpoint",
    "generation.classify": "generation._error_kinds",
    "generation.clients": "generation._clients",
    "generation.cluster": "generation._cluster_limits",
    "generation.generator": "generation._generator",
    "generation.grants": "generation._cluster_keeper",
    "generation.lanes": "generation._shared_limits",
    "generation.limits": "generation._limiters",
    "generation.loop": "generation._event_loop",
    "generation.memory": "generation._learned_limits",
    "generation.prompts": "generation._prompts",
    "generation.records": "generation._records",
    "generation.retry": "generation._backoff",
    "generation.settings": "generation._settings",
    "scorers.base": "scorers._base",
    "scorers.bert": "scorers._bertscore",
    "scorers.best": "scorers._best",
    "scorers.cosine": "scorers._cosine",
    "scorers.registry": "scorers._registry",
    "scorers.sentences": "scorers._sentences",
    "scorers.settings": "scorers._settings",
    "scorers.text": "scorers._lexical",
    "distributed.batches": "distributed._batches",
    "distributed.dataset": "distributed._dataset",
    "distributed.files": "distributed._files",
    "distributed.pool": "distributed._actor_pool",
    "distributed.session": "distributed._session",
    "io.csv_reading": "io._csv",
    "io.formats": "io._formats",
    "io.json_reading": "io._json",
    "io.parquet_reading": "io._parquet",
    "io.paths": "io._paths",
    "io.reading": "io._reading",
    "io.rows": "io._rows",
    "io.samples": "io._samples",
    "io.scoring": "io._file_scoring",
    "io.table": "io._table",
    "io.writing": "io._writing",
    "evaluation.classification": "evaluation._classification",
    "evaluation.correlation": "evaluation._correlation",
    "evaluation.references": "evaluation._references",
    "evaluation.rejection": "evaluation._rejection",
    "evaluation.reliability": "evaluation._reliability",
    "calibration": "evaluation._calibration",
    "results.answers": "results._answers",
    "results.failures": "results._failures",
    "results.fields": "results._fields",
    "results.identical_samples": "results._identical_samples",
    "results.render": "results._render",
    "results.result": "results._result",
    "results.supports": "results._tables",
    "cli.evaluate": "cli._evaluate",
    "cli.generate": "cli._generate",
    "cli.options": "cli._options",
    "cli.parser": "cli._parser",
    "cli.reporting": "cli._reporting",
    "cli.score": "cli._score",
    "examples.asgi_app": "apps._asgi",
    "examples.serve_app": "apps._serve",
    "checks": "_checks",
    "inputs": "_inputs",
    "exceptions": "_exceptions",
    "local_llm": "_local_llm",
}


def face_of(new: str) -> str:
    """Where the public names of module ``new`` (below ``uqlm_bert.``) are imported from: its
    subpackage's face, or the package itself for a root module.

    Example:
        >>> face_of("bertscore._engine"), face_of("_exceptions"), face_of("_blackbox")
        ('uqlm_bert.bertscore', 'uqlm_bert', 'uqlm_bert')
    """
    package = new.rpartition(".")[0]
    return "uqlm_bert" + ("." + package if package and not package.startswith("_") else "")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of :data:`MOVED`, and loads each as the module it became."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        old = fullname.removeprefix("uqlm_bert.")
        if old == fullname or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        old = spec.name.removeprefix("uqlm_bert.")
        new = MOVED[old]
        warn_user(
            f"uqlm_bert.{old} is private now (uqlm_bert.{new}): import its public names from "
            f"{face_of(new)}",
            FutureWarning,
        )
        return importlib.import_module(f"uqlm_bert.{new}")

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported under its new name."""


def install() -> None:
    """Put the old paths' finder on ``sys.meta_path`` (once; the package's import does it)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
