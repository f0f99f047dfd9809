"""Inverse document frequency weights for BERTScore, exactly as the reference computes them.

``idf(t) = log((M + 1) / (df(t) + 1))`` where M is the number of documents and ``df(t)`` the
number of documents whose token ids contain t; a token seen in no document gets
``log((M + 1) / 1)``. Special tokens occur in every document, so their weight is 0.

Example:
    >>> from math import log
    >>> from uqlm_bert.bertscore._idf import idf_from_token_ids
    >>> w = idf_from_token_ids([[101, 7, 102], [101, 8, 102]])
    >>> w[7] == log(3 / 2), w[101] == 0.0, w.default == log(3)
    (True, True, True)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import log

from uqlm_bert._exceptions import InputValidationError

__all__ = ["IdfWeights", "idf_from_token_ids", "idf_from_mapping"]


@dataclass
class IdfWeights:
    """Token-id to weight mapping with a default for unseen ids."""

    weights: dict[int, float] = field(default_factory=dict)
    default: float = 1.0

    def __getitem__(self, token_id: int) -> float:
        return self.weights.get(token_id, self.default)


def idf_from_token_ids(docs: Sequence[Sequence[int]]) -> IdfWeights:
    """idf weights over documents given as token-id lists (special tokens included)."""
    m = len(docs)
    df: Counter[int] = Counter()
    for ids in docs:
        df.update(set(ids))
    return IdfWeights({t: log((m + 1) / (c + 1)) for t, c in df.items()}, log((m + 1) / 1))


def idf_from_mapping(mapping: Mapping[int, float]) -> IdfWeights:
    """Weights from a user's ``{token_id: weight}`` mapping.

    A ``collections.defaultdict`` keeps its default for unseen ids; for a plain mapping an unseen
    id gets the largest weight in it (as rare as the rarest known token, which is what the idf
    formula gives a token seen in no document).
    """
    from collections import defaultdict

    weights = {}
    for k, v in mapping.items():
        if isinstance(k, bool) or not isinstance(k, int):
            raise InputValidationError(
                f"idf must map token ids (int) to weights; key {k!r} is a {type(k).__name__}"
            )
        weights[k] = float(v)
    if isinstance(mapping, defaultdict) and mapping.default_factory is not None:
        default = float(mapping.default_factory())
    else:
        default = max(weights.values()) if weights else 1.0
    return IdfWeights(weights, default)
