"""``ScoringSettings``: how and where ``BlackBoxUQ`` scores, and what its results keep.

The third of ``BlackBoxUQ``'s settings objects, beside :class:`~uqlm_bert.GenerationSettings`
(how the LLM is asked) and :class:`~uqlm_bert.BERTScoreSettings` (how BERTScore scores): frozen,
checked when made, its defaults here only.

Example:
    >>> ScoringSettings(batch_size=64).batch_size
    64
    >>> ScoringSettings.of("ray").where
    'ray'
    >>> ScoringSettings(supports="no")
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: supports must be True or False, got 'no'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from uqlm_bert._checks import check_int, check_number
from uqlm_bert._exceptions import ConfigurationError

if TYPE_CHECKING:
    from uqlm_bert.distributed import RayScoring

__all__ = ["ScoringSettings"]


@dataclass(frozen=True)
class ScoringSettings:
    """How and where the answers are scored, and what a result keeps of the scoring pass.

    Attributes:
        where: ``"local"`` (this process), ``"ray"`` or a
            :class:`~uqlm_bert.distributed.RayScoring` (a pool of Ray actors that each build
            the scorers, while generation stays in this process; see docs/scaling.md).
            ``generate_and_score`` scores there; ``score`` always scores in this process.
        batch_size: the most prompts scored in one batch while generating (prompts are scored
            in batches as their samples come in).
        supports: keep each answer's token supports from the scoring pass, for
            ``UQResult.words()``, ``sentences()``, ``refine()`` and the views; off, a result
            holds the confidences alone (their cost is in benchmarks/RESULTS.md).
        threshold: the answer threshold of the first scorer, instead of its default: where
            ``flag()``, ``filter()`` and the views of the results flag an answer, and what
            sampling until settled settles against (``GenerationSettings(sampling=...)``);
            ``None`` keeps the scorer's default (``bert_score``'s at its default settings; a
            scorer with none then flags nothing by default and samples fully).
        scorer_settings: the other scorers' settings: flat keywords
            (``{"exact_match_normalize": False}``) or settings objects by keyword
            (``{"cosine_sim": CosineSettings(...)}``); a setting no chosen scorer takes is an
            error. The BERTScore scorers' settings are ``BlackBoxUQ``'s ``bertscore=``.

    Example:
        >>> from uqlm_bert import BlackBoxUQ
        >>> uq = BlackBoxUQ(scorers=["exact_match"], show_progress_bars=False,
        ...                 scoring=ScoringSettings(scorer_settings={"exact_match_normalize": False}))
        >>> uq.scorers[0].normalize
        False
    """

    where: str | RayScoring = "local"
    batch_size: int = 256
    supports: bool = True
    threshold: float | None = None
    scorer_settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int("batch_size", self.batch_size, 1)
        check_number("threshold", self.threshold, none_ok=True)
        if not isinstance(self.supports, bool):
            raise ConfigurationError(f"supports must be True or False, got {self.supports!r}")
        if not isinstance(self.scorer_settings, Mapping):
            raise ConfigurationError(
                "scorer_settings must be a mapping of setting names to values, got "
                f"{type(self.scorer_settings).__name__}"
            )
        # read-only, so that the frozen object cannot be changed through it
        object.__setattr__(self, "scorer_settings", MappingProxyType(dict(self.scorer_settings)))
        if isinstance(self.where, str) and self.where in ("local", "ray"):
            return
        from uqlm_bert.distributed._actor_pool import RayScoring

        RayScoring.of(self.where)  # refuses anything else, saying what is accepted

    @classmethod
    def of(cls, scoring: Any) -> ScoringSettings:
        """``BlackBoxUQ``'s ``scoring``: a :class:`ScoringSettings`, or where to score
        (``"local"``, ``"ray"``, a ``RayScoring``) with the other settings' defaults.

        Raises:
            ConfigurationError: anything else.
        """
        return scoring if isinstance(scoring, cls) else cls(where=scoring)

    def __reduce__(self) -> Any:  # the read-only mapping does not pickle (Ray sends it)
        return (
            type(self),
            (
                self.where,
                self.batch_size,
                self.supports,
                self.threshold,
                dict(self.scorer_settings),
            ),
        )
