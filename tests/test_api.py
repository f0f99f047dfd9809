"""The public API, pinned: the public modules (each subpackage's face, and the package) and
each one's ``__all__``, as httpx pins its exported members; every other module is private by
name.

A change here is a change of the public API: make it on purpose, with the docs.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.helpers.source import parse_source

PUBLIC = {
    "uqlm_bert": [
        "AuthenticationFailedError",
        "BERTScoreSettings",
        "BERTScorer",
        "BaselineNotFoundError",
        "BlackBoxUQ",
        "CheckpointError",
        "ConfigurationError",
        "DeviceOutOfMemoryError",
        "GenerationError",
        "GenerationSettings",
        "InputValidationError",
        "LimitsUnavailableError",
        "LocalLLM",
        "LocalServerError",
        "ModelLoadError",
        "ModelUnavailableError",
        "NotFittedError",
        "ProviderUnreachableError",
        "ScoreCalibrator",
        "ScoringSettings",
        "ScoringWorkerError",
        "UQLMBertError",
        "UQResult",
        "__version__",
    ],
    "uqlm_bert.apps": [
        "ServeAppSettings",
        "build_serve_app",
        "create_asgi_app",
        "create_asgi_app_from_env",
        "serve_app_builder",
    ],
    "uqlm_bert.bertscore": [
        "BERTScoreSettings",
        "BERTScorer",
        "MODEL_LAYERS",
        "clear_model_cache",
        "compute_baseline",
    ],
    "uqlm_bert.cli": ["main"],
    "uqlm_bert.distributed": ["RayScoring", "ScoreBatch", "score_dataset", "score_file"],
    "uqlm_bert.evaluation": [
        "accuracy_vs_fraction_kept",
        "auc_pr",
        "auroc",
        "brier_score",
        "choose_threshold",
        "evaluate_references",
        "expected_calibration_error",
        "pearson",
        "prr",
        "rejection_curve",
        "reliability_curve",
        "spearman",
    ],
    "uqlm_bert.examples": ["is_correct", "load_example_answers", "load_questions"],
    "uqlm_bert.generation": [
        "CallFailure",
        "Checkpoint",
        "ClusterLimits",
        "RetryPolicy",
        "forget_learned_limits",
    ],
    "uqlm_bert.io": ["load_table", "score_table_file", "write_table"],
    "uqlm_bert.plots": [
        "plot_accuracy_vs_fraction_kept",
        "plot_confidence_histogram",
        "plot_reliability_diagram",
        "plot_supports",
        "plot_threshold",
    ],
    "uqlm_bert.results": ["Answer", "Failures", "UQResult"],
    "uqlm_bert.scorers": [
        "CosineSettings",
        "ExactMatchSettings",
        "PairwiseScorer",
        "Scorer",
        "available_scorers",
        "build_scorers",
        "register_scorer",
    ],
}

#: What only the package uses: never a public name, in any public module.
INTERNALS = {
    "LLMCaller",
    "RateLimiter",
    "EventLoopThread",
    "greedy_match_padded",
    "same_file",
    "MAX_NESTING",
    "ResponseGenerator",
    "TokenSupport",
    "ScorerPlan",
    "check_row",
}


def test_the_public_names_are_few():
    """What users call, across every public module; what only the package uses is private."""
    names = [name for module in PUBLIC.values() for name in module]
    assert len(names) <= 80, len(names)
    assert not INTERNALS & set(names)


def test_no_internal_name_resolves_on_a_public_module():
    """A private name is not reachable from a face either (a face imports what it exports)."""
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        reachable = {n for n in INTERNALS if hasattr(module, n)}
        assert not reachable, (module_name, reachable)


#: Modules inside a subpackage that are public by name without being its face, and why.
PUBLIC_BY_NAME = {
    # a command: ``python -m uqlm_bert.examples.quickstart`` is the README's first command
    "uqlm_bert.examples.quickstart": "run as a command",
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_all_is_pinned_and_every_name_resolves(module_name):
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == PUBLIC[module_name]
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None or name == "__version__", name


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_what_a_module_defines_in_public_is_exported(module_name):
    """Public classes and functions defined in a module are in its __all__ (no hidden API)."""
    module = importlib.import_module(module_name)
    defined = {
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == module_name
    }
    assert defined <= set(module.__all__), sorted(defined - set(module.__all__))


def test_the_public_modules_are_few():
    assert len(PUBLIC) <= 12


def _module_names() -> list[str]:
    names = []
    for path in sorted((REPO_ROOT / "uqlm_bert").rglob("*.py")):
        parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def test_every_module_but_the_faces_is_private_by_name():
    """A module is public when it is a face pinned above, a ``__main__``, or one of the few
    named in PUBLIC_BY_NAME (each with why); every other module has a private name (a leading
    underscore in its own name or a folder's), so a reader sees at once what may change."""
    public_by_name = [
        name
        for name in _module_names()
        if not any(part.startswith("_") for part in name.split(".")[1:])
    ]
    assert sorted(set(public_by_name) - set(PUBLIC)) == sorted(PUBLIC_BY_NAME)
    assert len(PUBLIC_BY_NAME) <= 3


#: A dotted path through a private module (``uqlm_bert.evaluation._calibration``).
PRIVATE_PATH = re.compile(r"uqlm_bert(?:\.\w+)*\._\w+")


def _message_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants inside ``raise`` statements and ``warn_user``/``warn`` calls."""
    found = []
    for node in ast.walk(parse_source(path)):
        is_warning = isinstance(node, ast.Call) and getattr(
            node.func, "id", getattr(node.func, "attr", "")
        ) in ("warn_user", "warn")
        if isinstance(node, ast.Raise) or is_warning:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    found.append((sub.lineno, sub.value))
    return found


def test_no_error_or_warning_text_names_a_private_path():
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {text[:80]!r}"
        for path in sorted((REPO_ROOT / "uqlm_bert").rglob("*.py"))
        for line, text in _message_strings(path)
        if PRIVATE_PATH.search(text)
    ]
    assert not offenders, offenders


def _raised(call) -> BaseException:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - whatever it raises is looked at
        return exc
    raise AssertionError("expected an error")


def test_errors_users_meet_name_public_paths_and_public_types():
    """Errors a user meets, as a traceback shows them: the type by its public name
    (``uqlm_bert.ConfigurationError``) and a message with no private path."""
    import traceback

    import numpy as np

    from uqlm_bert import BERTScoreSettings, BlackBoxUQ, UQResult
    from uqlm_bert.evaluation import reliability_curve

    hand_made = UQResult({"prompts": ["a"], "bert_score": [0.5]})
    errors = [
        _raised(lambda: BlackBoxUQ(dtype="float32")),
        _raised(lambda: BERTScoreSettings(num_layer=3)),
        _raised(lambda: hand_made.calibrate("isotonic")),
        _raised(lambda: hand_made.filter()),
        _raised(lambda: hand_made.words()),
        _raised(lambda: hand_made.flag(threshold="high")),
        _raised(lambda: reliability_curve(np.array([2.0, 0.5]), [1, 0])),
    ]
    for exc in errors:
        shown = "".join(traceback.format_exception_only(type(exc), exc))
        assert shown.startswith("uqlm_bert.") or shown.startswith("TypeError"), shown
        assert not PRIVATE_PATH.search(shown), shown
