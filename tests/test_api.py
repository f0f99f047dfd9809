"""The public API, pinned: the public modules (each subpackage's face, and the package) and
each one's ``__all__``, as httpx pins its exported members; every other module is private by
name.

A change here is a change of the public API: make it on purpose, with the docs.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from tests.conftest import REPO_ROOT

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
        "ENVIRONMENT",
        "QuestionService",
        "ServeAppSettings",
        "build_serve_app",
        "create_asgi_app",
        "create_asgi_app_from_env",
        "serve_app_builder",
    ],
    "uqlm_bert.bertscore": [
        "BERTScoreSettings",
        "BERTScorer",
        "EMBEDDED_MODEL_NAME",
        "IdfWeights",
        "LANG_MODELS",
        "MODEL_LAYERS",
        "SENTENCE_THRESHOLD",
        "TokenSupport",
        "WEAK_SUPPORT",
        "clear_model_cache",
        "compute_baseline",
        "find_baseline",
        "greedy_match",
        "greedy_match_padded",
        "idf_from_token_ids",
        "load_encoder",
        "load_tokenizer",
        "read_baseline",
        "rescale",
        "resolve_device",
    ],
    "uqlm_bert.cli": [
        "EXIT_FAILED_ROWS",
        "EXIT_OK",
        "EXIT_USAGE",
        "build_parser",
        "main",
    ],
    "uqlm_bert.distributed": [
        "DEFAULT_BATCH_SIZE",
        "ERROR_COLUMN",
        "PoolSettings",
        "RayScoring",
        "ScoreBatch",
        "WorkerPlan",
        "plan_workers",
        "ray_rows_scorer",
        "ray_session",
        "score_dataset",
        "score_file",
        "start_local_ray",
    ],
    "uqlm_bert.evaluation": [
        "ReferenceEvaluation",
        "ScoreCalibrator",
        "ThresholdChoice",
        "accuracy_vs_fraction_kept",
        "auc_pr",
        "auroc",
        "brier_score",
        "choose_threshold",
        "evaluate_references",
        "expected_calibration_error",
        "pearson",
        "prr",
        "rankdata",
        "rejection_curve",
        "reliability_curve",
        "spearman",
    ],
    "uqlm_bert.examples": [
        "EXAMPLE_ANSWERS",
        "QUESTIONS",
        "is_correct",
        "load_example_answers",
        "load_questions",
    ],
    "uqlm_bert.generation": [
        "AdaptiveConcurrency",
        "CallFailure",
        "CallStats",
        "Checkpoint",
        "ClusterLimits",
        "ErrorInfo",
        "EventLoopThread",
        "GenerationResult",
        "GenerationSettings",
        "LLMCaller",
        "NUM_RESPONSES",
        "RateLimiter",
        "ResponseGenerator",
        "RetryPolicy",
        "classify_exception",
        "derive_llm",
        "forget_learned_limits",
        "parse_retry_after",
    ],
    "uqlm_bert.io": [
        "ERROR_COLUMN",
        "FORMATS",
        "MAX_NESTING",
        "RowCheck",
        "RowProblem",
        "RowScorer",
        "ScoredTable",
        "TEXT_SUFFIXES",
        "Table",
        "Texts",
        "check_output_location",
        "check_row",
        "check_writable",
        "load_prompts",
        "load_table",
        "load_texts",
        "parse_samples",
        "read_table",
        "same_file",
        "score_table_file",
        "scoring_inputs",
        "table_format",
        "validate_rows",
        "with_scores",
        "write_table",
    ],
    "uqlm_bert.plots": [
        "plot_accuracy_vs_fraction_kept",
        "plot_confidence_histogram",
        "plot_reliability_diagram",
        "plot_supports",
        "plot_threshold",
    ],
    "uqlm_bert.results": [
        "Answer",
        "FailureGroup",
        "Failures",
        "UQResult",
    ],
    "uqlm_bert.scorers": [
        "CosineSettings",
        "DEFAULT_SCORERS",
        "DEFAULT_THRESHOLD",
        "ExactMatchSettings",
        "PairwiseScorer",
        "Scorer",
        "ScorerPlan",
        "ScorerSpec",
        "available_scorers",
        "build_scorer",
        "build_scorers",
        "check_scorer_names",
        "mean_by_group",
        "register_scorer",
        "score_all",
        "score_with_supports",
        "scorer_settings",
        "scorer_spec",
    ],
}

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
