"""The command's defaults are the settings objects': options left out keep them, options given
build one settings object, and the help shows each default as the object has it."""

from __future__ import annotations

import contextlib
import io

import pytest

from uqlm_bert.bertscore._settings import ENGINE_DEFAULTS, SCORER_DEFAULTS
from uqlm_bert.cli._options import bertscore_settings, checked_scorers, generation_settings
from uqlm_bert.cli._parser import build_parser
from uqlm_bert.generation import RetryPolicy
from uqlm_bert.generation._settings import GenerationSettings

GENERATE = ["generate-and-score", "prompts.txt", "-o", "out.csv", "--model", "m"]


def _help(command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    return " ".join(out.getvalue().split())


def test_generation_options_build_one_settings_object_on_its_defaults():
    assert generation_settings(build_parser().parse_args(GENERATE)) == GenerationSettings()
    argv = [*GENERATE, "--max-concurrency", "4", "--max-retries", "2", "--use-n-param", "false",
            "--request-timeout", "5", "--sampling-temperature", "0.5"]  # fmt: skip
    assert generation_settings(build_parser().parse_args(argv)) == GenerationSettings(
        max_concurrency=4,
        retry=RetryPolicy(max_retries=2),
        use_n_param=False,
        request_timeout=5.0,
        sampling_temperature=0.5,
    )


def test_bertscore_options_build_on_the_defaults_of_their_command():
    scorers_args = build_parser().parse_args(["score", "in.jsonl", "-o", "out.jsonl"])
    _, settings = checked_scorers(scorers_args)
    assert settings["bertscore"] == SCORER_DEFAULTS
    evaluate_args = build_parser().parse_args(["evaluate", "p.txt", "r.txt", "--idf"])
    assert bertscore_settings(evaluate_args) == ENGINE_DEFAULTS.replace(idf=True)


def test_help_shows_the_defaults_of_the_settings_objects():
    generation = GenerationSettings()
    text = _help("generate-and-score")
    budget = "passes sized by a budget of padded tokens"  # what a batch_size of None means
    for shown in (
        f"up (default {generation.max_concurrency})",
        f"transient failures (default {generation.retry.max_retries})",
        f"samples (default {generation.sampling_temperature})",
        f"may take (default {generation.request_timeout})",
        f"per sample) (default {generation.use_n_param})",
        f"texts per forward pass at most (default {SCORER_DEFAULTS.batch_size or budget})",
        f"model precision (default {SCORER_DEFAULTS.dtype})",
        "plain BERTScore) (default fixed)",
    ):
        assert shown in text, shown
    assert "plain BERTScore) (default off)" in _help("evaluate")
