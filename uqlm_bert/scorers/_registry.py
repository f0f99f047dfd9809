"""The scorer registry: the names accepted in ``scorers=[...]``, and the one place they are built.

Each entry is a :class:`ScorerSpec`: a name, a factory, and the settings the factory takes. A
built-in scorer with settings takes them as one frozen object (``bert_score``: a
:class:`~uqlm_bert.BERTScoreSettings`; ``cosine_sim`` and ``exact_match``: the classes of
:mod:`uqlm_bert.scorers._settings`), given whole (``build_scorers(bertscore=settings)``) or built
here, once, from flat keywords (``num_layers=4``) on top of the scorers' defaults.
:func:`scorer_settings` is that one step, for the library, the command and the Ray workers alike:
an unknown name lists the known ones, and a setting that none of the chosen scorers accepts is an
error naming it and the accepted ones, never ignored. What it builds is a :class:`BuiltSettings`:
passed whole to :func:`build_scorers` it is used as it is, not checked or built again.

A settings object given whole gets the scorers' defaults for what it leaves unset, as flat
keywords do: ``build_scorers(num_layers=4)`` and
``build_scorers(bertscore=BERTScoreSettings(num_layers=4))`` build the same scorer.

The built-in scorers are registered here, when this module is imported; the model-based ones
import torch only when a scorer is built. The built-in BERTScore scorers named together
(``bert_score``, ``bert_score_precision``, ``bert_score_recall``) share one engine, loaded once.

Example:
    >>> available_scorers()[:3]
    ['bert_score', 'bert_score_precision', 'bert_score_recall']
    >>> build_scorers(["rouge_l"], num_layers=3)
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: unknown setting 'num_layers' for scorers rouge_l; accepted: (none)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, is_dataclass, replace
from typing import TYPE_CHECKING, Any

from uqlm_bert._checks import check_names
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.bertscore._settings import BERTScoreSettings
from uqlm_bert.scorers._base import Scorer
from uqlm_bert.scorers._bertscore import BERTSCORE_SCORERS, BERTScoreConsistency
from uqlm_bert.scorers._settings import CosineSettings, ExactMatchSettings, settings_object

if TYPE_CHECKING:
    from uqlm_bert.bertscore._engine import BERTScorer

__all__ = [
    "BERTSCORE_SCORERS",
    "DEFAULT_SCORERS",
    "BuiltSettings",
    "ScorerPlan",
    "ScorerSpec",
    "available_scorers",
    "build_scorer",
    "build_scorers",
    "check_scorer_names",
    "merge_scorer_kwargs",
    "register_scorer",
    "scorer_settings",
    "scorer_items",
    "scorer_spec",
]


@dataclass(frozen=True)
class ScorerSpec:
    """A registered scorer: how to build it, and which settings it takes.

    Attributes:
        name: the key in ``scorers=[...]``.
        factory: builds the scorer: called with one settings object when ``settings`` is a
            settings class, else with the named settings the user gave, as keyword arguments.
        settings: a settings class (see :class:`~uqlm_bert.scorers._settings.ScorerSettings`),
            or the names of the keyword arguments the factory accepts.
    """

    name: str
    factory: Callable[..., Scorer]
    settings: frozenset[str] | type = frozenset()

    @property
    def settings_type(self) -> type | None:
        """The settings class, or None for a factory of keyword arguments."""
        return self.settings if isinstance(self.settings, type) else None

    @property
    def keywords(self) -> frozenset[str]:
        """The flat keywords this scorer takes."""
        kind = self.settings_type
        return frozenset(kind.scorer_keywords()) if kind is not None else frozenset(self.settings)

    def build(self, **settings: Any) -> Scorer:
        """Build the scorer from its settings (see :func:`build_scorers`).

        Example:
            >>> scorer_spec("exact_match").build(exact_match_normalize=False).normalize
            False
        """
        return self.make(_settings_for([self], settings))

    def make(self, settings: Mapping[str, Any]) -> Scorer:
        """Build the scorer from settings already built by :func:`scorer_settings`."""
        kind = self.settings_type
        if kind is not None:
            return self.factory(settings[kind.keyword])
        return self.factory(**{k: v for k, v in settings.items() if k in self.settings})


_REGISTRY: dict[str, ScorerSpec] = {}

#: The scorers when none are named: the mean BERTScore F1 of the answer against its samples.
DEFAULT_SCORERS = ("bert_score",)


def register_scorer(
    name: str, factory: Callable[..., Scorer], settings: Iterable[str] | type = ()
) -> None:
    """Make a scorer available under ``name`` in ``scorers=[...]``.

    Args:
        name: the scorer's name.
        factory: builds the scorer. With a settings class as ``settings``, it is called with
            one instance of it; else with the settings named in ``settings`` that the user gave,
            as keyword arguments.
        settings: a settings class (see ``ScorerSettings``),
            or the setting names the factory accepts.

    Example:
        >>> import numpy as np
        >>> from uqlm_bert.scorers import Scorer, build_scorers
        >>> class Length(Scorer):
        ...     name = "length"
        ...     def score(self, responses, sampled_responses, show_progress_bars=False):
        ...         return np.array([float(len(r)) for r in responses])
        >>> register_scorer("length", Length)
        >>> build_scorers(["length"])[0].score(["abc"], [["x"]]).tolist()
        [3.0]
    """
    if not name or not isinstance(name, str):
        raise ConfigurationError(f"a scorer name must be a non-empty string, got {name!r}")
    if not isinstance(settings, type):
        settings = frozenset(settings)
    _REGISTRY[name] = ScorerSpec(name, factory, settings)


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
        return list(DEFAULT_SCORERS)
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


class BuiltSettings(dict):
    """The settings of an entry point's scorers as :func:`scorer_settings` built them, each
    object once: passed whole to :func:`build_scorers` (``settings=``), they are used as they
    are, not checked or built again."""


def build_scorers(
    scorers: Sequence[str | Scorer] | str | Scorer | ScorerPlan | None = None,
    settings: BuiltSettings | None = None,
    **flat: Any,
) -> list[Scorer]:
    """Build the scorers named (or take the instances given), in order: the scorers of a
    :class:`ScorerPlan`, made here from the arguments or given whole.

    Args:
        scorers: names (default ``["bert_score"]``), :class:`Scorer` instances, or a
            :class:`ScorerPlan` (then nothing else).
        settings: the settings :func:`scorer_settings` built for these scorers, used as they
            are (then no flat settings).
        flat: the named scorers' settings, either whole (``bertscore=BERTScoreSettings(...)``,
            ``cosine_sim=CosineSettings(...)``, ``exact_match=ExactMatchSettings(...)``) or as
            flat keywords (``model_type``, ``num_layers``, ``idf``, ``device``,
            ``exact_match_normalize``, ...) from which each settings object is built once, on
            top of the scorers' defaults; a flat keyword goes to every named scorer that takes
            it. ``None`` means "the default". See :func:`scorer_settings`.

    Raises:
        ConfigurationError: an unknown, repeated or missing name, a setting that none of the
            named scorers accepts, a bad value, or settings given both whole and flat.

    Example:
        >>> [s.name for s in build_scorers(["exact_match", "bleu"], exact_match_normalize=False)]
        ['exact_match', 'bleu']
        >>> from uqlm_bert import BERTScoreSettings
        >>> s = BERTScoreSettings.for_scorers(num_layers=3)
        >>> build_scorers(["bert_score"], bertscore=s)[0].engine.settings is s
        True
    """
    if isinstance(scorers, ScorerPlan):
        if settings is not None or flat:
            raise ConfigurationError("a ScorerPlan holds its settings: give it alone")
        return scorers.build()
    if settings is None:
        return ScorerPlan.of(scorers, **flat).build()
    if flat or not isinstance(settings, BuiltSettings):
        raise ConfigurationError(
            "settings= takes what scorer_settings() built, and no other settings beside it"
        )
    return ScorerPlan.of_settings(scorers, settings).build()


@dataclass(frozen=True)
class ScorerPlan:
    """An entry point's scorers, read once: the scorers as given (names and :class:`Scorer`
    objects), their settings objects built once (:class:`BuiltSettings`), and the registered
    specs of the names, so that a process that did not register them (a Ray actor) builds the
    same scorers. Picklable; ``BlackBoxUQ`` builds its scorers from one, and sends the same one
    to its Ray actors.

    Example:
        >>> plan = ScorerPlan.of(["bert_score", "rouge_l"], num_layers=4)
        >>> plan.names, plan.settings["bertscore"].num_layers
        (['bert_score', 'rouge_l'], 4)
        >>> [s.name for s in ScorerPlan.of(["exact_match"]).build()]
        ['exact_match']
    """

    items: tuple[str | Scorer, ...]
    settings: BuiltSettings
    specs: tuple[ScorerSpec, ...]

    @classmethod
    def of(
        cls,
        scorers: Sequence[str | Scorer] | str | Scorer | None = None,
        scorer_kwargs: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> ScorerPlan:
        """The plan of ``scorers`` (default ``["bert_score"]``) with these settings (see
        :func:`scorer_settings`), each settings object built once.

        Raises:
            ConfigurationError: an unknown scorer or setting name, a bad value, or settings
                given both whole and flat.
        """
        return cls.of_items(scorer_items(scorers), scorer_kwargs, **settings)

    @classmethod
    def of_items(
        cls,
        items: Sequence[str | Scorer],
        scorer_kwargs: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> ScorerPlan:
        """:meth:`of` for a list of scorers already read by :func:`scorer_items` (an entry
        point that reads it once and looks at it before building its settings)."""
        specs = _specs(items)
        built = _settings_for(specs, merge_scorer_kwargs(scorer_kwargs, settings))
        return cls(tuple(items), built, specs)

    @classmethod
    def of_settings(
        cls, scorers: Sequence[str | Scorer] | str | Scorer | None, settings: Mapping[str, Any]
    ) -> ScorerPlan:
        """The plan of ``scorers`` with settings objects already built (by
        :func:`scorer_settings`, or changed since: run-wide idf weights, say), used as they are.

        Example:
            >>> ScorerPlan.of_settings(["rouge_l"], {}).names
            ['rouge_l']
        """
        items = scorer_items(scorers)
        return cls(tuple(items), BuiltSettings(settings), _specs(items))

    @property
    def names(self) -> list[str]:
        """The scorers' names, in order."""
        return [item if isinstance(item, str) else item.name for item in self.items]

    def on_device(self, device: str | None) -> ScorerPlan:
        """The same scorers with their models on ``device`` where their settings leave the
        device open (an actor given a GPU runs its models there)."""
        if device is None:
            return self
        moved = {
            key: replace(value, device=device)
            if is_dataclass(value) and getattr(value, "device", "") is None
            else value
            for key, value in self.settings.items()
        }
        return replace(self, settings=BuiltSettings(moved))

    def build(self) -> list[Scorer]:
        """Register the specs in this process (where they are not yet) and build the scorers,
        in order; the built-in BERTScore scorers named together share one engine, loaded once.

        Raises:
            ConfigurationError: a bad value, or a scorer named twice.
        """
        for spec in self.specs:
            if _REGISTRY.get(spec.name) != spec:
                register_scorer(spec.name, spec.factory, spec.settings)
        engine = _shared_bert_engine(self.specs, self.settings)
        built: list[Scorer] = []
        for item in self.items:
            if isinstance(item, Scorer):
                scorer = item
            elif isinstance((spec := _REGISTRY[item]).factory, _BERTFactory):
                scorer = BERTScoreConsistency(spec.factory.metric, engine=engine)
            else:
                scorer = spec.make(self.settings)
            if any(s.name == scorer.name for s in built):
                raise ConfigurationError(f"scorer {scorer.name!r} is listed twice")
            built.append(scorer)
        return built


def _specs(items: Sequence[str | Scorer]) -> tuple[ScorerSpec, ...]:
    """The registered specs of the names among ``items`` (known: checked already)."""
    return tuple(_REGISTRY[item] for item in items if isinstance(item, str))


def scorer_settings(
    names: Sequence[str | Scorer] | str | Scorer | None,
    scorer_kwargs: Mapping[str, Any] | None = None,
    **settings: Any,
) -> BuiltSettings:
    """The settings of the named scorers (:class:`Scorer` objects among them take none), each
    settings object built once: from the flat keywords on top of the scorers' defaults, or
    given whole and given the scorers' defaults for what it leaves unset.

    The returned mapping (settings objects under their keywords, such as ``"bertscore"``, and
    the flat settings of scorers registered with keyword factories) is passed whole to
    :func:`build_scorers` (``settings=``) and not checked again; its objects can be passed
    whole to another entry point (``BlackBoxUQ(bertscore=...)``). ``scorer_kwargs`` are more
    settings beside ``settings`` (an entry point's catch-all, as ``BlackBoxUQ``'s); a setting
    given in both is an error (see :func:`merge_scorer_kwargs`).

    Raises:
        ConfigurationError: an unknown scorer or setting name, a bad value, or settings given
            both whole and flat.

    Example:
        >>> out = scorer_settings(["bert_score", "rouge_l"], num_layers=4)
        >>> sorted(out), out["bertscore"].num_layers
        (['bertscore'], 4)
    """
    return ScorerPlan.of(names, scorer_kwargs, **settings).settings


def scorer_items(scorers: Sequence[str | Scorer] | str | Scorer | None) -> list[Any]:
    """The scorers as a list of names and objects (default ``["bert_score"]``), the names
    known and none twice.

    Raises:
        ConfigurationError: the list is empty, holds something else, or names a scorer twice or
            one that is not registered.

    Example:
        >>> scorer_items(None), scorer_items("bleu")
        (['bert_score'], ['bleu'])
    """
    if scorers is None:
        items: list[Any] = list(DEFAULT_SCORERS)
    elif isinstance(scorers, (str, Scorer)):
        items = [scorers]
    else:
        items = list(scorers)
    if not items:
        raise ConfigurationError("scorers is empty; give at least one, e.g. ['bert_score']")
    for item in items:
        if not isinstance(item, (str, Scorer)):
            raise ConfigurationError(
                f"scorers must hold scorer names or Scorer objects, got {type(item).__name__}"
            )
    names = [s for s in items if isinstance(s, str)]
    if names:
        check_scorer_names(names)
    return items


def merge_scorer_kwargs(
    scorer_kwargs: Mapping[str, Any] | None, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """An entry point's scorer settings: its own ``arguments``, by name (``None``: not given),
    with ``scorer_kwargs`` beside them, as :func:`build_scorers` and
    :func:`scorer_settings` take them (which check the names and values).

    Raises:
        ConfigurationError: a setting given both as an argument and in ``scorer_kwargs``.

    Example:
        >>> merge_scorer_kwargs({"exact_match_normalize": False}, {"num_layers": 4, "idf": None})
        {'num_layers': 4, 'idf': None, 'exact_match_normalize': False}
        >>> merge_scorer_kwargs({"num_layers": 5}, {"num_layers": 4})
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: num_layers given both as an argument and in scorer_kwargs; give it once
    """
    given = {k for k, v in arguments.items() if v is not None}
    overlap = sorted(set(scorer_kwargs or {}) & given)
    if overlap:
        raise ConfigurationError(
            f"{', '.join(overlap)} given both as an argument and in scorer_kwargs; give it once"
        )
    return {**arguments, **(scorer_kwargs or {})}


def build_scorer(name: str, **settings: Any) -> Scorer:
    """Build the scorer registered under ``name`` (see :func:`build_scorers`).

    Example:
        >>> build_scorer("exact_match").name
        'exact_match'
    """
    return build_scorers([name], **settings)[0]


def _check_accepted(specs: Sequence[ScorerSpec], given: Mapping[str, Any]) -> None:
    """Refuse a setting none of ``specs`` takes, flat or whole."""
    accepted = {k for spec in specs for k in spec.keywords}
    accepted |= {spec.settings_type.keyword for spec in specs if spec.settings_type is not None}
    names = [spec.name for spec in specs]
    where = f" for scorers {', '.join(names)}" if names else " (only Scorer objects were given)"
    kinds = {s.settings_type.keyword: s.name for s in _REGISTRY.values() if s.settings_type}
    for name in given:
        if name in kinds and name not in accepted:  # a settings object, whole, for no scorer
            takers = sorted(
                n
                for n, s in _REGISTRY.items()
                if s.settings_type and s.settings_type.keyword == name
            )
            raise ConfigurationError(
                f"{name}= holds the settings of the {', '.join(takers)} scorer(s), and none of "
                f"them is among the scorers ({', '.join(names) or 'Scorer objects only'}): add "
                f"one to scorers, or leave {name}= out"
            )
    check_names(given, accepted, "setting", where)


def _settings_for(specs: Sequence[ScorerSpec], settings: Mapping[str, Any]) -> BuiltSettings:
    """See :func:`scorer_settings` (``specs`` are known): each settings object built once."""
    given = {k: v for k, v in settings.items() if v is not None}
    _check_accepted(specs, given)
    kinds = list(dict.fromkeys(s.settings_type for s in specs if s.settings_type is not None))
    by_keyword = {k for spec in specs if spec.settings_type is None for k in spec.settings}
    return BuiltSettings(
        {
            **{
                kind.keyword: settings_object(
                    kind,
                    given.get(kind.keyword),
                    {k: v for k, v in given.items() if k in kind.scorer_keywords()},
                )
                for kind in kinds
            },
            **{k: v for k, v in given.items() if k in by_keyword},
        }
    )


# -- the built-in scorers -------------------------------------------------------------------------

# Names of scorers that need a natural-language-inference model (as in other uncertainty
# libraries): refused with a message that says so.
_NLI_NAMES = frozenset(
    {"noncontradiction", "entailment", "semantic_negentropy", "semantic_density"}
)


@dataclass(frozen=True)
class _BERTFactory:
    """The factory of a built-in BERTScore scorer: :func:`build_scorers` gives the built-in
    ones named together one engine instead (the same scorers, the model loaded once)."""

    metric: str

    def __call__(self, settings: BERTScoreSettings) -> Scorer:
        return BERTScoreConsistency(metric=self.metric, bertscore=settings)


def _shared_bert_engine(
    specs: Sequence[ScorerSpec], built_settings: Mapping[str, Any]
) -> BERTScorer | None:
    """The one engine of the built-in BERTScore scorers among ``specs``, from the BERTScore
    settings object :func:`build_scorers` built (a custom scorer of that family gets the same
    object), or None where there are none."""
    if not any(isinstance(spec.factory, _BERTFactory) for spec in specs):
        return None
    from uqlm_bert.bertscore._engine import BERTScorer

    return BERTScorer.from_settings(built_settings[BERTScoreSettings.keyword])


def _cosine(settings: CosineSettings) -> Scorer:
    from uqlm_bert.scorers._cosine import CosineSimScorer

    return CosineSimScorer.from_settings(settings)


def _exact_match(settings: ExactMatchSettings) -> Scorer:
    from uqlm_bert.scorers._lexical import ExactMatchScorer

    return ExactMatchScorer.from_settings(settings)


def _text(kind: str) -> Callable[[], Scorer]:
    def make() -> Scorer:
        from uqlm_bert.scorers._lexical import BleuScorer, RougeLScorer

        return RougeLScorer() if kind == "rouge_l" else BleuScorer()

    return make


def _register_builtins() -> None:
    for metric, name in BERTSCORE_SCORERS.items():
        register_scorer(name, _BERTFactory(metric), BERTScoreSettings)
    register_scorer("cosine_sim", _cosine, CosineSettings)
    register_scorer("exact_match", _exact_match, ExactMatchSettings)
    register_scorer("rouge_l", _text("rouge_l"))
    register_scorer("bleu", _text("bleu"))


_register_builtins()
