"""Arguments of uqlm's ``BlackBoxUQ`` that are not this package's own: the one it maps to its
settings (``sentence_transformer``, the ``cosine_sim`` scorer's model), and those that need what
this package does not have (an NLI model, structured output), refused with what to do instead,
never silently ignored.

Example:
    >>> refuse_what_needs_another_model(None, None, None, None)
    >>> refuse_what_needs_another_model("microsoft/deberta-large-mnli", None, None, None)
    Traceback (most recent call last):
    ...
    uqlm_bert._exceptions.ConfigurationError: nli_model_name and nli_batch_size configure an NLI model, which this package does not use: its scorers (bert_score, cosine_sim, rouge_l, bleu, exact_match) need no NLI model. Remove the argument; scorers=['bert_score'] is the closest measure of agreement between the answer and its samples
"""

from __future__ import annotations

from typing import Any

from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.bertscore._known_models import EMBEDDED_MODEL_NAME

__all__ = ["refuse_what_needs_another_model", "sentence_transformer_setting"]


def refuse_what_needs_another_model(
    nli_model_name: Any,
    nli_batch_size: Any,
    structured_response: Any,
    output_extractor: Any,
) -> None:
    """Refuse the arguments that need what this package does not have, saying what to do
    instead; None (their default) passes.

    Raises:
        ConfigurationError: one of them was given.
    """
    if nli_model_name is not None or nli_batch_size is not None:
        raise ConfigurationError(
            "nli_model_name and nli_batch_size configure an NLI model, which this package does "
            "not use: its scorers (bert_score, cosine_sim, rouge_l, bleu, exact_match) need no "
            "NLI model. Remove the argument; scorers=['bert_score'] is the closest measure of "
            "agreement between the answer and its samples"
        )
    if structured_response is not None or output_extractor is not None:
        raise ConfigurationError(
            "structured_response and output_extractor are not supported: the scorers compare "
            "texts. Ask the model for text, or turn its structured replies into text with "
            "postprocessor=..."
        )


def sentence_transformer_setting(name: str | None, scorers: Any) -> dict[str, Any]:
    """``sentence_transformer`` (the ``cosine_sim`` scorer's model, by other libraries' name) as
    a flat setting for ``scorers``: empty when it is None, or names the default model with no
    ``cosine_sim`` among the scorers (harmless: code written for those libraries passes it).

    Raises:
        ConfigurationError: another model is named and ``cosine_sim`` is not among the scorers.

    Example:
        >>> sentence_transformer_setting("my/model", ["bert_score", "cosine_sim"])
        {'sentence_transformer': 'my/model'}
        >>> sentence_transformer_setting("sentence-transformers/all-MiniLM-L6-v2", None)
        {}
    """
    if name is None:
        return {}
    names = [scorers] if isinstance(scorers, str) else list(scorers or ["bert_score"])
    if "cosine_sim" in names:
        return {"sentence_transformer": name}
    if name != EMBEDDED_MODEL_NAME:
        raise ConfigurationError(
            f"sentence_transformer={name!r} is the cosine_sim scorer's model, and cosine_sim is "
            "not among the scorers; add it to scorers, or remove the argument"
        )
    return {}
