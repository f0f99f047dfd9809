"""``BlackBoxUQ``, the public face of the package, and what only it uses.

The one public name here is :class:`BlackBoxUQ`; the private modules behind it are its parts:

- ``_uq``: the class, its settings and calls, wiring generation to the scorers;
- ``_pipeline``: one call's prompts scored as generation finishes them, and ``score_rows``,
  the scoring step of ``BlackBoxUQ.score`` and of every batch;
- ``_queue``: the prompts of every call in flight on one ``BlackBoxUQ`` (and event loop),
  scored in shared batches;
- ``_assembly``: from a run's texts and scores to its ``UQResult``;
- ``_uqlm_face``: uqlm's arguments that are not this package's own;
- ``_fields``, ``_verbose``: the generation settings as attributes, and ``verbose=True``.

Example:
    >>> from uqlm_bert._blackbox import BlackBoxUQ
    >>> BlackBoxUQ(show_progress_bars=False).scorers[0].name
    'bert_score'
"""

from __future__ import annotations

from uqlm_bert._blackbox._scoring import ScoringSettings
from uqlm_bert._blackbox._uq import BlackBoxUQ

__all__ = ["BlackBoxUQ", "ScoringSettings"]
