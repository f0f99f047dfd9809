"""The scorer registry: the names accepted in ``scorers=[...]``, and the one place they are built.

Each entry is a :class:`ScorerSpec`: a name, a factory, and the settings the factory accepts.
:func:`build_scorers` is the only place names and settings are checked, for the library, the
command and the Ray workers alike: an unknown name lists the known ones, and a setting that none
of the chosen scorers accepts is an error naming it and the accepted ones, never ignored.

The built-in scorers are registered here, when this module is imported; their factories import
the scorer modules (and torch, for the model-based ones) only when a scorer is built.

Example:
    >>> available_scorers()[:3]
    ['bert_score', 'bert_score_precision', 'bert_score_recall']
    >>> build_scorers(["rouge_l"], num_layers=3)
    Traceback (most recent call last):
    ...
    uqlm_bert.exceptions.ConfigurationError: unknown setting 'num_layers' for scorers rouge_l; accepted: (none)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from uqlm_bert.config import check_names
from uqlm_bert.exceptions import ConfigurationError
from uqlm_bert.scorers.base import Scorer

__all__ = [
    "BERTSCORE_SCORERS",
    "ScorerSpec",
    "available_scorers",
    "build_scorer",
    "build_scorers",
    "check_scorer_names",
    "check_scorer_settings",
    "register_scorer",
    "scorer_spec",
]

#: The names of the BERTScore consistency scorers, by BERTScore component.
BERTSCORE_SCORERS = {
    "f1": "bert_score",
    "precision": "bert_score_precision",
    "recall": "bert_score_recall",
}


@dataclass(frozen=True)
class ScorerSpec:
    """A registered scorer: how to build it, and which settings it takes.

    Attributes:
        name: the key in ``scorers=[...]``.
        factory: called with the accepted settings the user gave, as keyword arguments.
        settings: the names of the settings the factory accepts.
    """

    name: str
    factory: Callable[..., Scorer]
    settings: frozenset[str] = frozenset()

    def build(self, **settings: Any) -> Scorer:
        """Build the scorer with those of ``settings`` it accepts."""
        return self.factory(**{k: v for k, v in settings.items() if k in self.settings})


_REGISTRY: dict[str, ScorerSpec] = {}


def register_scorer(name: str, factory: Callable[..., Scorer], settings: Iterable[str] = ()) -> None:
    """Make a scorer available under ``name`` in ``scorers=[...]``.

    Args:
        name: the scorer's name.
        factory: builds the scorer; called with the settings below, as keyword arguments, for
            those the user gave.
        settings: the setting names the factory accepts.

    Example:
        >>> from uqlm_bert.scorers.text import ExactMatchScorer
        >>> register_scorer("strict_match", lambda: ExactMatchScorer(normalize=False))
        >>> build_scorer("strict_match").normalize
        False
    """
    if not name or not isinstance(name, str):
        raise ConfigurationError(f"a scorer name must be a non-empty string, got {name!r}")
    _REGISTRY[name] = ScorerSpec(name, factory, frozenset(settings))


def available_scorers() -> list[str]:
    """The names accepted in ``scorers=[...]``, sorted."""
    return sorted(_REGISTRY)


def scorer_spec(name: str) -> ScorerSpec:
    """The registered :class:`ScorerSpec` of ``name``: ship it to another process (a Ray worker,
    say) to build the same scorer there, registered there or not.

    Raises:
        ConfigurationError: ``name`` is unknown; the message lists the known names.

    Example:
        >>> scorer_spec("rouge_l").build().name
        'rouge_l'
    """
    check_scorer_names([name])
    return _REGISTRY[name]


def check_scorer_names(names: Sequence[str] | str | None) -> list[str]:
    """The scorer names as a list (default ``["bert_score"]``), each known and listed once.

    Raises:
        ConfigurationError: empty, repeated or unknown names (the message lists the known ones).

    Example:
        >>> check_scorer_names("bleu")
        ['bleu']
    """
    if names is None:
        return ["bert_score"]
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise ConfigurationError("scorers is empty; give at least one, e.g. ['bert_score']")
    for i, name in enumerate(names):
        if not isinstance(name, str) or name not in _REGISTRY:
            hint = ""
            if isinstance(name, str) and name.lower() in _NLI_NAMES:
                hint = (
                    f" ({name!r} needs an NLI model, which this package does not use: the "
                    "BERTScore and lexical scorers here need no extra model)"
                )
            raise ConfigurationError(
                f"unknown scorer {name!r}{hint}; known scorers: {', '.join(available_scorers())}"
            )
        if name in names[:i]:
            raise ConfigurationError(f"scorer {name!r} is listed twice")
    return names


def build_scorers(
    scorers: Sequence[str | Scorer] | str | Scorer | None = None, **settings: Any
) -> list[Scorer]:
    """Build the scorers named (or take the instances given), in order; the one place names and
    settings are checked.

    Args:
        scorers: names (default ``["bert_score"]``) or :class:`Scorer` instances.
        settings: settings for the named scorers (``model_type``, ``num_layers``, ``idf``,
            ``device``, ...); each goes to the scorers that accept it. ``None`` means "the
            default" and is passed to none.

    Raises:
        ConfigurationError: an unknown, repeated or missing name, or a setting that none of the
            named scorers accepts.

    Example:
        >>> [s.name for s in build_scorers(["exact_match", "bleu"], exact_match_normalize=False)]
        ['exact_match', 'bleu']
    """
    if scorers is None:
        items: list[Any] = ["bert_score"]
    elif isinstance(scorers, (str, Scorer)):
        items = [scorers]
    else:
        items = list(scorers)
    if not items:
        raise ConfigurationError("scorers is empty; give at least one, e.g. ['bert_score']")
    names = [s for s in items if isinstance(s, str)]
    if names:
        check_scorer_names(names)
    given = check_scorer_settings(names, settings)
    built: list[Scorer] = []
    for item in items:
        if isinstance(item, Scorer):
            scorer = item
        elif isinstance(item, str):
            scorer = _REGISTRY[item].build(**given)
        else:
            raise ConfigurationError(
                f"scorers must hold scorer names or Scorer objects, got {type(item).__name__}"
            )
        if any(s.name == scorer.name for s in built):
            raise ConfigurationError(f"scorer {scorer.name!r} is listed twice")
        built.append(scorer)
    return built


def check_scorer_settings(names: Sequence[str], settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that are not None, after checking that each is accepted by a scorer named.

    Raises:
        ConfigurationError: a setting none of ``names`` accepts (the message lists those
            they accept).

    Example:
        >>> check_scorer_settings(["bert_score"], {"num_layers": 4, "idf": None})
        {'num_layers': 4}
    """
    given = {k: v for k, v in settings.items() if v is not None}
    accepted = sorted({k for n in names for k in _REGISTRY[n].settings})
    where = f" for scorers {', '.join(names)}" if names else " (only Scorer objects were given)"
    check_names(given, accepted, "setting", where)
    return given


def build_scorer(name: str, **settings: Any) -> Scorer:
    """Build the scorer registered under ``name`` (see :func:`build_scorers`).

    Example:
        >>> build_scorer("exact_match").name
        'exact_match'
    """
    return build_scorers([name], **settings)[0]


# -- the built-in scorers -------------------------------------------------------------------------

# Names of scorers that need a natural-language-inference model (as in other uncertainty
# libraries): refused with a message that says so.
_NLI_NAMES = frozenset({"noncontradiction", "entailment", "semantic_negentropy", "semantic_density"})


def _bertscore_settings() -> frozenset[str]:
    from uqlm_bert.bertscore.settings import BERTScoreSettings

    return frozenset(BERTScoreSettings.accepted())


def _bert(metric: str) -> Callable[..., Scorer]:
    def make(**settings: Any) -> Scorer:
        from uqlm_bert.scorers.bert import BERTScoreConsistency

        return BERTScoreConsistency(metric=metric, **settings)

    return make


def _cosine(sentence_transformer: str | None = None, **settings: Any) -> Scorer:
    from uqlm_bert.scorers.cosine import CosineSimScorer

    if sentence_transformer is not None:  # the name other libraries give this model
        settings["model_type"] = sentence_transformer
    return CosineSimScorer(**settings)


def _exact_match(exact_match_normalize: bool = True) -> Scorer:
    from uqlm_bert.scorers.text import ExactMatchScorer

    return ExactMatchScorer(normalize=exact_match_normalize)


def _text(kind: str) -> Callable[[], Scorer]:
    def make() -> Scorer:
        from uqlm_bert.scorers import text

        return text.RougeLScorer() if kind == "rouge_l" else text.BleuScorer()

    return make


def _register_builtins(bertscore_settings: Iterable[str]) -> None:
    for metric, name in BERTSCORE_SCORERS.items():
        register_scorer(name, _bert(metric), bertscore_settings)
    register_scorer(
        "cosine_sim",
        _cosine,
        ("model_type", "sentence_transformer", "device", "dtype", "batch_size", "max_length"),
    )
    register_scorer("exact_match", _exact_match, ("exact_match_normalize",))
    register_scorer("rouge_l", _text("rouge_l"))
    register_scorer("bleu", _text("bleu"))


_register_builtins(_bertscore_settings())
