"""Arguments of uqlm's ``BlackBoxUQ`` that are not this package's own: the one it maps to its
settings (``sentence_transformer``, the ``cosine_sim`` scorer's model), those that change nothing
with these scorers, as in uqlm with them (``nli_model_name``, ``nli_batch_size``, and
``max_length`` at uqlm's default), and those that need what this package does not have
(structured output), refused with what to do instead, never silently ignored.

Example:
    >>> uqlm_arguments("microsoft/deberta-large-mnli", 32, None, None, 2000) is None
    True
    >>> uqlm_arguments(None, None, dict, None, None)
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: structured_response and output_extractor are not supported: the scorers compare texts. Ask the model for text, or turn its structured replies into text with postprocessor=...
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.bertscore._known_models import EMBEDDED_MODEL_NAME

__all__ = ["UQLM_MAX_LENGTH", "sentence_transformer_setting", "uqlm_arguments"]

logger = logging.getLogger("uqlm_bert")


#: uqlm's ``max_length`` default (characters its NLI model reads): here, no cap of its own.
UQLM_MAX_LENGTH = 2000


def uqlm_arguments(
    nli_model_name: Any,
    nli_batch_size: Any,
    structured_response: Any,
    output_extractor: Any,
    max_length: int | None,
) -> int | None:
    """uqlm's arguments, as this package takes them; the ``max_length`` to use.

    ``nli_model_name`` and ``nli_batch_size`` configure uqlm's NLI model, which uqlm loads only
    for its NLI scorers: with the scorers here (none needs an NLI model) they change nothing,
    as in uqlm with ``bert_score`` or ``cosine_sim``; they are accepted and logged.
    ``max_length`` is uqlm's cap on the characters its NLI model reads (2000 by default); the
    scorers here read long texts whole, in windows, so uqlm's default means no cap of its own
    (None), and any other value keeps this package's meaning: the most tokens the models read
    at once.

    Raises:
        ConfigurationError: ``structured_response`` or ``output_extractor`` was given (the
            scorers compare texts: the message says what to use instead).

    Example:
        >>> uqlm_arguments("microsoft/deberta-large-mnli", 32, None, None, 2000) is None
        True
        >>> uqlm_arguments(None, None, None, None, 256)
        256
    """
    check_int("nli_batch_size", nli_batch_size, 1, none_ok=True)
    if nli_model_name is not None or nli_batch_size is not None:
        logger.debug(
            "nli_model_name and nli_batch_size change nothing here: no scorer of this package "
            "uses an NLI model"
        )
    if structured_response is not None or output_extractor is not None:
        raise ConfigurationError(
            "structured_response and output_extractor are not supported: the scorers compare "
            "texts. Ask the model for text, or turn its structured replies into text with "
            "postprocessor=..."
        )
    return None if max_length == UQLM_MAX_LENGTH else max_length


def sentence_transformer_setting(name: str | None, scorers: Sequence[Any]) -> dict[str, Any]:
    """``sentence_transformer`` (the ``cosine_sim`` scorer's model, by other libraries' name) as
    a flat setting for ``scorers``: empty when it is None, or names the default model with no
    ``cosine_sim`` among the scorers (harmless: code written for those libraries passes it);
    ``scorers`` as :func:`~uqlm_bert.scorers._registry.scorer_items` read them.

    Raises:
        ConfigurationError: another model is named and ``cosine_sim`` is not among the scorers.

    Example:
        >>> sentence_transformer_setting("my/model", ["bert_score", "cosine_sim"])
        {'sentence_transformer': 'my/model'}
        >>> sentence_transformer_setting("sentence-transformers/all-MiniLM-L6-v2", ["bert_score"])
        {}
    """
    if name is None:
        return {}
    if "cosine_sim" in scorers:
        return {"sentence_transformer": name}
    if name != EMBEDDED_MODEL_NAME:
        raise ConfigurationError(
            f"sentence_transformer={name!r} is the cosine_sim scorer's model, and cosine_sim is "
            "not among the scorers; add it to scorers, or remove the argument"
        )
    return {}
