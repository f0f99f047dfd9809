"""The command's options turned into what the library takes: settings objects, checked paths.

Each settings object is built once here, from the options given (an option left out keeps the
object's own default), and passed whole: the scorers' settings to ``build_scorers`` or
``BlackBoxUQ``, a :class:`~uqlm_bert.GenerationSettings` to ``BlackBoxUQ``, a
:class:`~uqlm_bert.BERTScoreSettings` to the engine of ``evaluate``. Their values are checked
by the objects, so an option's bad value gets the message the Python API gives.

Example:
    >>> import argparse
    >>> args = argparse.Namespace(
    ...     model_type=None, num_layers=3, dtype=None, device=None, batch_size=None, lang=None,
    ...     idf="off", rescale_with_baseline=False, long_texts=None)
    >>> bertscore_kwargs(args)
    {'num_layers': 3, 'idf': False}
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uqlm_bert._exceptions import InputValidationError

if TYPE_CHECKING:
    from uqlm_bert.bertscore._settings import BERTScoreSettings
    from uqlm_bert.generation._settings import GenerationSettings

__all__ = [
    "IDF_WORDS",
    "N_PARAM_WORDS",
    "bertscore_kwargs",
    "bertscore_settings",
    "checked_scorers",
    "generation_settings",
    "ray_pool",
    "refuse_same_file",
]

#: ``--idf``'s words and the ``idf`` setting each stands for.
IDF_WORDS = {"fixed": "auto", "run": True, "off": False}

#: ``--use-n-param``'s words and the ``use_n_param`` setting each stands for.
N_PARAM_WORDS = {"auto": "auto", "true": True, "false": False}


def bertscore_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The BERTScore options given, as the settings' flat keywords (those left out omitted)."""
    kwargs = {
        "model_type": args.model_type,
        "num_layers": args.num_layers,
        "dtype": args.dtype,
        "device": args.device,
        "batch_size": args.batch_size,
        "lang": args.lang,
        "idf": None if args.idf is None else IDF_WORDS[args.idf],
        "rescale_with_baseline": True if args.rescale_with_baseline else None,
        "long_texts": args.long_texts,
    }
    return {k: v for k, v in kwargs.items() if v is not None}


def checked_scorers(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """The scorer names, and their settings objects built once from the options (one
    :class:`~uqlm_bert.BERTScoreSettings` for the ``bert_score`` scorers, under
    ``"bertscore"``), before any file is read: pass them whole to ``build_scorers`` or
    ``BlackBoxUQ``."""
    from uqlm_bert.scorers._registry import check_scorer_names, scorer_settings

    names = check_scorer_names(args.scorers)
    return names, scorer_settings(names, **bertscore_kwargs(args))


def bertscore_settings(args: argparse.Namespace) -> BERTScoreSettings:
    """The :class:`~uqlm_bert.BERTScoreSettings` of ``evaluate``: the options given on top of
    :class:`~uqlm_bert.BERTScorer`'s defaults
    (:data:`~uqlm_bert.bertscore._settings.ENGINE_DEFAULTS`), which give ``bert_score``'s
    numbers."""
    from uqlm_bert.bertscore._settings import BERTScoreSettings

    return BERTScoreSettings.for_engine(**bertscore_kwargs(args))


def generation_settings(args: argparse.Namespace) -> GenerationSettings:
    """The :class:`~uqlm_bert.GenerationSettings` of ``generate-and-score``: the options given
    on top of the settings' defaults."""
    from uqlm_bert.generation._backoff import RetryPolicy
    from uqlm_bert.generation._settings import GenerationSettings

    given = {
        "system_prompt": args.system_prompt,
        "max_calls_per_min": args.max_calls_per_min,
        "max_concurrency": args.max_concurrency,
        "sampling_temperature": args.sampling_temperature,
        "request_timeout": args.request_timeout,
        "use_n_param": None if args.use_n_param is None else N_PARAM_WORDS[args.use_n_param],
        "sampling": args.sampling,
    }
    settings = {k: v for k, v in given.items() if v is not None}
    if args.max_retries is not None:
        settings["retry"] = RetryPolicy(max_retries=args.max_retries)
    return GenerationSettings(**settings)


def ray_pool(args: argparse.Namespace) -> Any:
    """The Ray pool of ``--engine ray``, as a :class:`~uqlm_bert.distributed.RayScoring` (its
    address and workers from ``--address`` and ``--num-workers``), or None for ``--engine
    local``. Refuses the Ray options without ``--engine ray``, and ``--engine ray`` without Ray,
    before any work.

    Raises:
        ConfigurationError: ``--address`` or ``--num-workers`` without ``--engine ray``; a bad
            count; Ray is not installed.
    """
    from uqlm_bert._exceptions import ConfigurationError

    if args.engine == "local":
        if args.address is not None or args.num_workers is not None:
            raise ConfigurationError("--address and --num-workers need --engine ray")
        return None
    from uqlm_bert.distributed import RayScoring
    from uqlm_bert.distributed._dataset import require_ray

    require_ray()
    return RayScoring(num_workers=args.num_workers, address=args.address)


def refuse_same_file(
    path: str | None, option: str, inputs: Sequence[tuple[str | None, str]]
) -> None:
    """Fail before any work when the file ``option`` names is one of ``inputs`` (path, name):
    writing it would destroy that input. Paths are compared resolved, and as files where both
    exist, so ``./a.csv`` and ``a.csv``, symlinks and hard links are all caught."""
    from uqlm_bert.io._paths import same_file

    if path is None:
        return
    for other, name in inputs:
        if other is not None and same_file(path, other):
            raise InputValidationError(
                f"{option} {path} is the same file as {name} {other}; writing it would destroy "
                f"{name}: give {option} another file"
            )
