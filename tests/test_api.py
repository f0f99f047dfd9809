"""The public API, pinned: each public module's ``__all__``, as httpx pins its exported members.

A change here is a change of the public API: make it on purpose, with the docs.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

PUBLIC = {
    "uqlm_bert": [
        "AuthenticationFailedError",
        "BERTScoreSettings",
        "BERTScorer",
        "BaselineNotFoundError",
        "BlackBoxUQ",
        "CheckpointError",
        "ConfigurationError",
        "GenerationError",
        "GenerationSettings",
        "InputValidationError",
        "ModelLoadError",
        "NotFittedError",
        "ProviderUnreachableError",
        "ScoreCalibrator",
        "UQLMBertError",
        "UQResult",
        "__version__",
    ],
    "uqlm_bert.bertscore": [
        "BERTScoreSettings",
        "BERTScorer",
        "EMBEDDED_MODEL_NAME",
        "IdfWeights",
        "LANG_MODELS",
        "MODEL_LAYERS",
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
    "uqlm_bert.bertscore.settings": [
        "BERTScoreSettings",
        "DTYPE_NAMES",
        "IDF_MODES",
        "ModelSettings",
        "SCORER_DEFAULTS",
        "check_model_type",
        "dtype_name",
    ],
    "uqlm_bert.bertscore.models": [
        "LoadedModel",
        "clear_model_cache",
        "load_encoder",
        "load_model",
        "load_token_limit",
        "load_tokenizer",
        "resolve_device",
        "resolve_dtype",
        "resolve_model",
    ],
    "uqlm_bert.bertscore.resolve": [
        "default_num_layers",
        "resolve_device",
        "resolve_dtype",
        "resolve_model",
    ],
    "uqlm_bert.bertscore.cache": ["LRUCache", "MODELS", "TOKENIZERS", "clear_model_cache"],
    "uqlm_bert.bertscore.layer_stack": [
        "LayerStack",
        "config_layers",
        "count_layers",
        "layer_stack",
        "truncate_layers",
    ],
    "uqlm_bert.bertscore.fixed_idf": [
        "DOC_WORDS",
        "EMBEDDED_TABLE",
        "NUM_DOCS",
        "PUNCTUATION",
        "WORD_TABLE",
        "WordTable",
        "build_idf",
        "cache_dir",
        "embedded_idf",
        "embedded_tokenizer",
        "idf_for_tokenizer",
        "idf_mapping",
        "load_word_table",
        "read_token_table",
        "tokenizer_key",
        "write_gz_text",
        "write_token_table",
    ],
    "uqlm_bert.generation": [
        "AdaptiveConcurrency",
        "CallFailure",
        "CallStats",
        "Checkpoint",
        "ErrorInfo",
        "EventLoopThread",
        "GenerationResult",
        "GenerationSettings",
        "LLMCaller",
        "RateLimiter",
        "ResponseGenerator",
        "RetryPolicy",
        "classify_exception",
        "derive_llm",
        "forget_learned_limits",
        "parse_retry_after",
    ],
    "uqlm_bert.generation.settings": ["GenerationSettings"],
    "uqlm_bert.scorers": [
        "CosineSettings",
        "ExactMatchSettings",
        "PairwiseScorer",
        "Scorer",
        "ScorerSpec",
        "available_scorers",
        "build_scorer",
        "build_scorers",
        "check_scorer_names",
        "mean_by_group",
        "register_scorer",
        "score_all",
        "scorer_settings",
        "scorer_spec",
    ],
    "uqlm_bert.scorers.settings": ["CosineSettings", "ExactMatchSettings", "ScorerSettings"],
    "uqlm_bert.scorers.bert": ["BERTScoreConsistency", "DEFAULT_THRESHOLD", "SCORER_DEFAULTS"],
    "uqlm_bert.scorers.best": ["BestOf", "ORIGINAL", "best_of"],
    "uqlm_bert.evaluation": [
        "ThresholdChoice",
        "accuracy_vs_fraction_kept",
        "auc_pr",
        "auroc",
        "brier_score",
        "choose_threshold",
        "expected_calibration_error",
        "pearson",
        "prr",
        "rankdata",
        "rejection_curve",
        "reliability_curve",
        "spearman",
    ],
    "uqlm_bert.evaluation.references": [
        "ReferenceEvaluation",
        "SUMMARY_KEYS",
        "evaluate_references",
    ],
    "uqlm_bert.distributed": [
        "DEFAULT_BATCH_SIZE",
        "ERROR_COLUMN",
        "PoolSettings",
        "ScoreBatch",
        "WorkerPlan",
        "plan_workers",
        "ray_rows_scorer",
        "ray_session",
        "score_dataset",
        "score_file",
        "start_local_ray",
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
    "uqlm_bert.inputs": [
        "NanPolicy",
        "ScoringInputs",
        "as_inputs",
        "check_binary",
        "check_not_constant",
        "float_vector",
        "is_missing",
        "paired_arrays",
        "present_pairs",
        "reference_lists",
        "repair_text",
        "scoring_lists",
        "text_list",
        "text_problem",
    ],
    "uqlm_bert.checks": ["check_int", "check_names", "check_number"],
    "uqlm_bert.exceptions": [
        "AuthenticationFailedError",
        "BaselineNotFoundError",
        "CheckpointError",
        "ConfigurationError",
        "GenerationError",
        "InputValidationError",
        "ModelLoadError",
        "NotFittedError",
        "ProviderUnreachableError",
        "UQLMBertError",
    ],
    "uqlm_bert.result": ["SentenceUQResult", "UQResult", "prompt_text"],
    "uqlm_bert.failures": ["FAILED_CALLS_WARNING", "FailureGroup", "Failures", "warn_failures"],
    "uqlm_bert.black_box": ["BlackBoxUQ"],
    "uqlm_bert.calibration": ["ScoreCalibrator"],
    "uqlm_bert.plots": [
        "plot_accuracy_vs_fraction_kept",
        "plot_confidence_histogram",
        "plot_reliability_diagram",
        "plot_threshold",
    ],
    "uqlm_bert.cli": ["EXIT_FAILED_ROWS", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"],
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
