"""The plots of a result, as its methods: ``UQResult`` takes them from :class:`ResultPlots`.

Each draws with :mod:`uqlm_bert.plots` on a matplotlib ``Axes`` (``ax=``, a new figure by
default) and returns it; the first argument is what the plot is about (the labels, the
threshold, the row), and every option is keyword-only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["ResultPlots"]


class ResultPlots:
    """The plot methods of :class:`~uqlm_bert.UQResult`, which they read through its
    ``_scores`` and ``answer``."""

    def plot_histogram(
        self,
        *,
        scorer: str | None = None,
        labels: Sequence[Any] | None = None,
        ax: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Histogram of one scorer's confidence, split by correct/incorrect when labels are given.

        Args:
            scorer: whose confidence (default: the first scorer).
            labels: one 1/0/``None`` correctness label per row of this result.
            ax: a matplotlib Axes to draw on (default: a new figure).
            kwargs: passed to :func:`uqlm_bert.plots.plot_confidence_histogram` (``bins``).

        Returns:
            The matplotlib Axes. Needs matplotlib: ``pip install 'uqlm-bert[plot]'``.

        Example:
            >>> from uqlm_bert import UQResult
            >>> r = UQResult({"prompts": ["a", "b", "c"], "bert_score": [0.9, 0.2, 0.8]})
            >>> ax = r.plot_histogram(labels=[1, 0, 1], bins=4)
            >>> ax.get_xlabel(), len(ax.patches)
            ('bert_score', 8)
        """
        from uqlm_bert.plots import plot_confidence_histogram

        name, values = self._scores(scorer)
        kwargs.setdefault("score_name", name)
        return plot_confidence_histogram(values, labels=labels, ax=ax, **kwargs)

    def plot_accuracy_vs_fraction_kept(
        self, correct: Sequence[Any], *, scorer: str | None = None, ax: Any = None, **kwargs: Any
    ) -> Any:
        """Accuracy of the rows kept against the fraction kept, most confident first.

        Args:
            correct: one label per row: 1/0 correctness or a graded quality.
            scorer: whose confidence (default: the first scorer).
            ax: a matplotlib Axes to draw on (default: a new figure).
            kwargs: passed to :func:`uqlm_bert.plots.plot_accuracy_vs_fraction_kept`
                (``threshold`` marks that operating point).

        Returns:
            The matplotlib Axes. Needs matplotlib: ``pip install 'uqlm-bert[plot]'``.

        Example:
            >>> from uqlm_bert import UQResult
            >>> r = UQResult({"prompts": ["a", "b", "c"], "bert_score": [0.9, 0.2, 0.8]})
            >>> ax = r.plot_accuracy_vs_fraction_kept([1, 0, 1])
            >>> ax.lines[0].get_ydata().tolist()
            [1.0, 1.0, 0.6666666666666666]
        """
        from uqlm_bert.plots import plot_accuracy_vs_fraction_kept

        name, values = self._scores(scorer)
        kwargs.setdefault("score_name", name)
        return plot_accuracy_vs_fraction_kept(values, correct, ax=ax, **kwargs)

    def plot_threshold(
        self,
        *,
        threshold: float | None = None,
        scorer: str | None = None,
        labels: Sequence[Any] | None = None,
        ax: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Every row by increasing confidence, with the threshold and the rows :meth:`flag` flags.

        Args:
            threshold: rows below it (or with a NaN confidence) are flagged; ``None`` is the
                scorer's default (:meth:`threshold`).
            scorer: whose confidence (default: the first scorer).
            labels: optional 1/0/``None`` correctness labels, one per row.
            ax: a matplotlib Axes to draw on (default: a new figure).
            kwargs: passed to :func:`uqlm_bert.plots.plot_threshold`.

        Returns:
            The matplotlib Axes. Needs matplotlib: ``pip install 'uqlm-bert[plot]'``.

        Raises:
            ConfigurationError: no threshold given, and no default for this scorer.

        Example:
            >>> from uqlm_bert import UQResult
            >>> r = UQResult({"prompts": ["a", "b", "c"], "bert_score": [0.9, 0.2, 0.8]})
            >>> r.plot_threshold(threshold=0.5).get_title()
            'threshold 0.5: 1 of 3 flagged'
        """
        from uqlm_bert.plots import plot_threshold
        from uqlm_bert.results._levels import required_threshold

        name, values = self._scores(scorer)
        kwargs.setdefault("score_name", name)
        cut = required_threshold(self, "answer", threshold, name)
        return plot_threshold(values, cut, labels=labels, ax=ax, **kwargs)

    def plot_supports(
        self, prompt_index: int, *, threshold: float | None = None, ax: Any = None
    ) -> Any:
        """The answer labelled ``prompt_index`` word by word, with how well its samples support
        each word (:func:`uqlm_bert.plots.plot_supports`; ``threshold`` as in :meth:`words`).

        Raises:
            ConfigurationError: no threshold given, and no default word threshold for these
                supports.

        Example:
            >>> from uqlm_bert import BlackBoxUQ
            >>> r = BlackBoxUQ(show_progress_bars=False).score(["Lima is in Peru."], [["Lima."]])
            >>> r.plot_supports(0).get_ylabel()
            'support'
        """
        from uqlm_bert.plots import plot_supports
        from uqlm_bert.results._levels import required_threshold

        answer = self.answer(prompt_index, threshold=threshold)  # checks the label first
        cut = required_threshold(self, "word", threshold)
        return plot_supports(answer.words, cut, ax=ax)
