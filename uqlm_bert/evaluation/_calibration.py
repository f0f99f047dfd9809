"""Turn a confidence score into a probability that the answer is correct.

A confidence such as ``bert_score`` ranks answers well, but its value is not a probability: a
score of 0.8 does not mean that 80% of answers scored 0.8 are correct. :class:`ScoreCalibrator`
learns the map from score to probability on answers whose correctness you know (labels 1 =
correct, 0 = not), and applies it to new scores. The map never decreases, so calibrating never
reverses the order of two answers (it can tie them, on a flat step of the isotonic map) and
mainly changes what the numbers mean, not how they rank.

Two methods:

- ``"isotonic"`` (default): the best non-decreasing step fit of the labels (pool adjacent
  violators), linearly interpolated between the fitted points and held constant beyond the
  lowest and highest fitted score. It assumes nothing about the shape of the map but needs more
  labels (a few hundred) to be smooth. Predictions equal scikit-learn's
  ``IsotonicRegression(increasing=True, out_of_bounds="clip").predict``.
- ``"platt"``: a logistic curve ``p = 1 / (1 + exp(-(slope * score + intercept)))`` fitted by
  maximum likelihood (Newton's method), the slope constrained to be ``>= 0``. Two parameters, so
  it works with few labels, but it can only bend the score into an S shape.

The slope constraint: the unconstrained maximum-likelihood slope has the sign of the covariance
between score and label. When that covariance is negative (on these labels a higher score goes
with *fewer* correct answers), the constrained fit is slope 0 and intercept ``logit(base rate)``:
every score maps to the fraction of correct answers in the labelled data, and a
:class:`UserWarning` says so. When the labels are perfectly separated by the score (every
incorrect answer scores at most as high as every correct one), the maximum-likelihood slope is
infinite; the fit then uses Platt's (1999) smoothed targets ``(n_pos + 1) / (n_pos + 2)`` and
``1 / (n_neg + 2)`` in place of 1 and 0, which keeps the probabilities away from exactly 0 and 1,
and warns.

Fit on labelled answers that resemble the ones you will score (same LLM, same kind of prompts,
same scorer settings); a calibrator does not transfer between scorers or settings.

Example:
    >>> from uqlm_bert.evaluation._calibration import ScoreCalibrator
    >>> scores = [0.35, 0.42, 0.55, 0.61, 0.70, 0.78, 0.84, 0.91]
    >>> correct = [0, 0, 1, 0, 1, 1, 1, 1]
    >>> calibrator = ScoreCalibrator("isotonic").fit(scores, correct)
    >>> calibrator.predict([0.3, 0.58, 0.95]).tolist()
    [0.0, 0.5, 1.0]
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from uqlm_bert._exceptions import ConfigurationError, InputValidationError, NotFittedError
from uqlm_bert._inputs import check_binary, paired_arrays
from uqlm_bert._warn import warn_user

__all__ = ["ScoreCalibrator"]

logger = logging.getLogger("uqlm_bert")

ArrayLike = Sequence[float] | np.ndarray
Method = Literal["isotonic", "platt"]

#: ``format`` field of a saved calibrator, and the newest ``version`` this code reads.
FILE_FORMAT = "uqlm_bert.ScoreCalibrator"
FILE_VERSION = 1

_METHODS = ("isotonic", "platt")
_MAX_NEWTON_STEPS = 100


class ScoreCalibrator:
    """Map a confidence score to the probability that the answer is correct.

    Args:
        method: ``"isotonic"`` (default) or ``"platt"`` (see the module docstring).

    Attributes:
        method: the method.
        n_fitted: how many labelled scores the last :meth:`fit` used (NaN ones left out).
        base_rate: the fraction of those labelled correct.
        x_thresholds: isotonic only: the distinct fitted scores, increasing.
        y_thresholds: isotonic only: the probability at each of them, non-decreasing.
        slope: platt only: the slope on the score, ``>= 0``.
        intercept: platt only: the intercept.
        fit_note: ``None``, or why the fit differs from a plain one: ``"slope constrained to
            0"`` or ``"separable: smoothed targets"`` (platt only).

    Raises:
        ConfigurationError: ``method`` is not ``"isotonic"`` or ``"platt"``.

    Example:
        >>> scores = [0.2, 0.5, 0.6, 0.4, 0.9, 0.8]
        >>> calibrator = ScoreCalibrator("platt").fit(scores, [0, 0, 1, 1, 1, 1])
        >>> p = calibrator.predict([0.1, 0.5, 0.9])
        >>> bool(0 < p[0] < p[1] < p[2] < 1), bool(calibrator.slope > 0)
        (True, True)
        >>> # maximum likelihood: the fitted probabilities average to the base rate, 4/6
        >>> round(float(calibrator.predict(scores).mean()), 9)
        0.666666667
    """

    def __init__(self, method: Method = "isotonic") -> None:
        if method not in _METHODS:
            raise ConfigurationError(
                f"method must be 'isotonic' or 'platt', got {method!r}; use 'isotonic' with a "
                "few hundred labels or more, 'platt' with fewer"
            )
        self.method: str = method
        self.n_fitted: int | None = None
        self.base_rate: float | None = None
        self.x_thresholds: np.ndarray | None = None
        self.y_thresholds: np.ndarray | None = None
        self.slope: float | None = None
        self.intercept: float | None = None
        self.fit_note: str | None = None

    def __repr__(self) -> str:
        state = "not fitted" if self.n_fitted is None else f"fitted on {self.n_fitted}"
        return f"ScoreCalibrator(method={self.method!r}, {state})"

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` (or :meth:`load`) has set the map."""
        return self.n_fitted is not None

    def fit(self, scores: ArrayLike, labels: ArrayLike) -> ScoreCalibrator:
        """Learn the map from labelled scores; returns ``self``.

        Args:
            scores: one confidence per answer, higher = more trustworthy. NaN (or ``None``)
                scores, and NaN labels, are left out with a warning giving their number.
            labels: one label per answer: 1/``True`` correct, 0/``False`` not. Both classes
                must be present.

        Returns:
            This calibrator, fitted.

        Raises:
            InputValidationError: lengths differ, a score is infinite, a label is not 0/1,
                or only one class is left.

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:
            ...     warnings.simplefilter("always")
            ...     cal = ScoreCalibrator().fit([0.2, 0.4, float("nan"), 0.8], [0, 1, 1, 1])
            >>> str(caught[0].message)
            'dropped 1 of 4 items whose score or label is NaN (index 2)'
            >>> cal.n_fitted, cal.base_rate
            (3, 0.6666666666666666)
        """
        s, y = paired_arrays(scores, labels, "omit")
        positive = check_binary(y, purpose="a calibrator")
        t = positive.astype(np.float64)
        note = None
        if self.method == "isotonic":
            x, fitted = _fit_isotonic(s, t)
            self.x_thresholds, self.y_thresholds = x, fitted
            self.slope = self.intercept = None
        else:
            self.slope, self.intercept, note = _fit_platt(s, t)
            self.x_thresholds = self.y_thresholds = None
        self.n_fitted = int(s.size)
        self.base_rate = float(t.mean())
        self.fit_note = note
        logger.debug("fitted %r on %d scores", self, self.n_fitted)
        return self

    def predict(self, scores: ArrayLike) -> np.ndarray:
        """The probability that each answer is correct, in [0, 1], in the shape of ``scores``.

        The map is non-decreasing in the score: a higher score never gets a lower probability.
        A NaN (or ``None``) score gives NaN.

        Raises:
            NotFittedError: :meth:`fit` has not been called.
            InputValidationError: ``scores`` is not numeric, or a score is infinite.

        Example:
            >>> cal = ScoreCalibrator().fit([0.125, 0.375, 0.625, 0.875], [0, 1, 0, 1])
            >>> cal.y_thresholds.tolist()  # 1 then 0 violate the order: pooled to 0.5, 0.5
            [0.0, 0.5, 0.5, 1.0]
            >>> cal.predict([0.0, 0.25, 0.5, float("nan"), 1.0]).tolist()
            [0.0, 0.25, 0.5, nan, 1.0]
        """
        if not self.is_fitted:
            raise NotFittedError(
                "this ScoreCalibrator is not fitted; call fit(scores, labels) on labelled "
                "answers first, or load a saved one with ScoreCalibrator.load(path)"
            )
        s = _as_scores(scores)
        out = np.full(s.shape, np.nan)
        known = ~np.isnan(s)
        if self.method == "isotonic":
            assert self.x_thresholds is not None and self.y_thresholds is not None
            # np.interp holds the end values beyond the fitted range: out_of_bounds="clip"
            out[known] = np.interp(s[known], self.x_thresholds, self.y_thresholds)
        else:
            assert self.slope is not None and self.intercept is not None
            out[known] = _sigmoid(self.slope * s[known] + self.intercept)
        return out

    # -- persistence ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The fitted calibrator as plain JSON-ready data (what :meth:`save` writes).

        Example:
            >>> d = ScoreCalibrator().fit([0.2, 0.8], [0, 1]).to_dict()
            >>> d["format"], d["version"], d["method"], d["params"]
            ('uqlm_bert.ScoreCalibrator', 1, 'isotonic', {'x': [0.2, 0.8], 'y': [0.0, 1.0]})
        """
        if not self.is_fitted:
            raise NotFittedError("only a fitted ScoreCalibrator can be saved; call fit() first")
        if self.method == "isotonic":
            assert self.x_thresholds is not None and self.y_thresholds is not None
            params: dict[str, Any] = {
                "x": [float(v) for v in self.x_thresholds],
                "y": [float(v) for v in self.y_thresholds],
            }
        else:
            params = {"slope": float(self.slope), "intercept": float(self.intercept)}
        return {
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "method": self.method,
            "params": params,
            "n_fitted": self.n_fitted,
            "base_rate": self.base_rate,
            "fit_note": self.fit_note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScoreCalibrator:
        """Rebuild a calibrator from :meth:`to_dict`'s output, checking every field.

        Raises:
            InputValidationError: not a calibrator, a newer version, or a field is malformed.

        Example:
            >>> cal = ScoreCalibrator("platt").fit([0.1, 0.6, 0.4, 0.9], [0, 0, 1, 1])
            >>> ScoreCalibrator.from_dict(cal.to_dict()).slope == cal.slope
            True
        """
        if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
            raise InputValidationError(
                f"not a saved ScoreCalibrator: expected format {FILE_FORMAT!r}, got "
                f"{data.get('format') if isinstance(data, dict) else type(data).__name__!r}"
            )
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise InputValidationError(f"saved ScoreCalibrator has a bad version: {version!r}")
        if version > FILE_VERSION:
            raise InputValidationError(
                f"saved ScoreCalibrator has version {version}, this uqlm-bert reads up to "
                f"{FILE_VERSION}; upgrade uqlm-bert to load it"
            )
        method = data.get("method")
        if method not in _METHODS:
            raise InputValidationError(f"saved ScoreCalibrator has an unknown method {method!r}")
        params = data.get("params")
        if not isinstance(params, dict):
            raise InputValidationError("saved ScoreCalibrator has no 'params' object")
        cal = cls(method)
        if method == "isotonic":
            x = _saved_vector(params.get("x"), "x")
            y = _saved_vector(params.get("y"), "y")
            if x.size != y.size or x.size == 0:
                raise InputValidationError(
                    f"saved isotonic map needs as many x as y values (at least one), got "
                    f"{x.size} and {y.size}"
                )
            if np.any(np.diff(x) <= 0) or np.any(np.diff(y) < 0):
                raise InputValidationError(
                    "saved isotonic map must have increasing x and non-decreasing y"
                )
            if y.min() < 0 or y.max() > 1:
                raise InputValidationError("saved isotonic map has probabilities outside [0, 1]")
            cal.x_thresholds, cal.y_thresholds = x, y
        else:
            slope = _saved_number(params.get("slope"), "slope")
            intercept = _saved_number(params.get("intercept"), "intercept")
            if slope < 0:
                raise InputValidationError(f"saved platt map has a negative slope {slope!r}")
            cal.slope, cal.intercept = slope, intercept
        n_fitted = data.get("n_fitted")
        if not isinstance(n_fitted, int) or isinstance(n_fitted, bool) or n_fitted < 1:
            raise InputValidationError(f"saved ScoreCalibrator has a bad n_fitted: {n_fitted!r}")
        cal.n_fitted = n_fitted
        cal.base_rate = _saved_number(data.get("base_rate"), "base_rate")
        note = data.get("fit_note")
        if note is not None and not isinstance(note, str):
            raise InputValidationError(f"saved ScoreCalibrator has a bad fit_note: {note!r}")
        cal.fit_note = note
        return cal

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the fitted calibrator to ``path`` as JSON (no pickle); returns the path.

        Floats are written with all their digits, so :meth:`load` gives back exactly the same
        map.

        Raises:
            NotFittedError: :meth:`fit` has not been called.

        Example:
            >>> cal = ScoreCalibrator().fit([0.25, 0.5, 0.75], [0, 1, 1])
            >>> path = cal.save("calibrator.json")
            >>> ScoreCalibrator.load(path).predict([0.375]).tolist()
            [0.5]
        """
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False)
        out = Path(path)
        out.write_text(text + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ScoreCalibrator:
        """Read a calibrator written by :meth:`save`.

        Raises:
            InputValidationError: the file is not valid JSON, not a saved calibrator, written
                by a newer version, or malformed.
            OSError: the file cannot be read.

        Example:
            >>> path = ScoreCalibrator("platt").fit([0.1, 0.4, 0.6, 0.9], [0, 1, 0, 1]).save(
            ...     "platt.json")
            >>> ScoreCalibrator.load(path)
            ScoreCalibrator(method='platt', fitted on 4)
        """
        raw = Path(path).read_bytes()
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputValidationError(f"{path} is not a saved ScoreCalibrator: {exc}") from exc
        return cls.from_dict(data)


# -- isotonic ----------------------------------------------------------------------------------


def _fit_isotonic(scores: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct scores (increasing) and the isotonic fit of the mean target at each.

    Equal scores are merged first into one point carrying their mean target and their count as
    weight, as scikit-learn does; then pool adjacent violators.
    """
    x, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=targets, minlength=x.size)
    return x, _pool_adjacent_violators(sums / counts, counts.astype(np.float64))


def _pool_adjacent_violators(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence closest to ``values`` in weighted least squares."""
    block_value: list[float] = []
    block_weight: list[float] = []
    block_size: list[int] = []
    for v, w in zip(values.tolist(), weights.tolist(), strict=True):
        size = 1
        while block_value and block_value[-1] > v:
            pv, pw = block_value.pop(), block_weight.pop()
            v = (pv * pw + v * w) / (pw + w)
            w += pw
            size += block_size.pop()
        block_value.append(v)
        block_weight.append(w)
        block_size.append(size)
    return np.repeat(np.asarray(block_value, dtype=np.float64), block_size)


# -- platt -------------------------------------------------------------------------------------


def _fit_platt(scores: np.ndarray, positive: np.ndarray) -> tuple[float, float, str | None]:
    """``(slope, intercept, note)`` of the logistic fit with ``slope >= 0`` (module docstring)."""
    base_rate = float(positive.mean())
    base_logit = math.log(base_rate / (1.0 - base_rate))
    centred = scores - scores.mean()
    covariance = float(np.dot(centred, positive - base_rate))
    if np.all(scores == scores[0]):
        # every score the same: only the base rate can be learnt
        return 0.0, base_logit, None
    if covariance <= 0:
        # the log-likelihood is concave and its slope-gradient at (0, logit(base rate)) is this
        # covariance: when it is <= 0, no slope > 0 does better than a constant
        if covariance < 0:
            warn_user(
                "the scores do not rise with the labels (higher scores go with fewer correct "
                "answers here), so the unconstrained Platt slope would be negative; the slope "
                f"is held at 0 and every score maps to the base rate {base_rate:.4g}. Check the "
                "label direction (1 = correct) and that the score is a confidence",
                UserWarning,
            )
            return 0.0, base_logit, "slope constrained to 0"
        return 0.0, base_logit, None
    targets = positive
    note = None
    is_pos = positive == 1
    if scores[~is_pos].max() <= scores[is_pos].min():
        n_pos, n_neg = int(is_pos.sum()), int((~is_pos).sum())
        targets = np.where(is_pos, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        note = "separable: smoothed targets"
        warn_user(
            "the scores separate the labels perfectly (no incorrect answer scores above a "
            "correct one), so the maximum-likelihood Platt slope is infinite; fitted with "
            f"Platt's smoothed targets {targets[is_pos][0]:.4g} and {targets[~is_pos][0]:.4g} "
            "instead of 1 and 0. More labelled answers give a better-founded map",
            UserWarning,
        )
    slope, intercept = _newton_logistic(scores, targets, base_logit)
    return max(slope, 0.0), intercept, note


def _newton_logistic(
    scores: np.ndarray, targets: np.ndarray, start_intercept: float
) -> tuple[float, float]:
    """Maximum-likelihood ``(slope, intercept)`` of targets in [0, 1] on scores, by Newton.

    The score is standardised for the iterations (better conditioned) and the parameters are
    mapped back. Each step is halved until the log-likelihood does not drop (the likelihood is
    concave, so the full Newton step is taken near the optimum).
    """
    centre = float(scores.mean())
    spread = float(scores.std())
    z = (scores - centre) / spread
    design = np.column_stack((z, np.ones_like(z)))
    theta = np.array([0.0, start_intercept])

    def log_likelihood(th: np.ndarray) -> float:
        eta = design @ th
        # log(sigmoid(eta)) = -logaddexp(0, -eta)
        return float(
            -(targets * np.logaddexp(0.0, -eta) + (1 - targets) * np.logaddexp(0.0, eta)).sum()
        )

    current = log_likelihood(theta)
    for _ in range(_MAX_NEWTON_STEPS):
        p = _sigmoid(design @ theta)
        gradient = design.T @ (targets - p)
        hessian = design.T @ (design * (p * (1 - p))[:, None])
        try:
            step = np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            break
        accepted = _halve_until_no_worse(log_likelihood, theta, step, current)
        if accepted is None:  # no ascent along the Newton direction: at the optimum
            break
        theta, current, moved = accepted
        if moved <= 1e-12 * (1 + np.max(np.abs(theta))):
            break
    else:
        logger.warning("Platt fit stopped after %d Newton steps", _MAX_NEWTON_STEPS)
    slope = float(theta[0] / spread)
    intercept = float(theta[1] - theta[0] * centre / spread)
    return slope, intercept


def _halve_until_no_worse(
    objective: Any, theta: np.ndarray, step: np.ndarray, current: float
) -> tuple[np.ndarray, float, float] | None:
    """``theta + s * step`` for the largest ``s`` in 1, 1/2, 1/4, ... that does not lower the
    objective: ``(new theta, its objective, largest parameter change)``; ``None`` if none does."""
    scale = 1.0
    while scale >= 1e-10:
        candidate = theta + scale * step
        value = objective(candidate)
        if value >= current - 1e-12 * abs(current):
            return candidate, value, float(np.max(np.abs(scale * step)))
        scale /= 2
    return None


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))`` without overflow."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


# -- input checks ------------------------------------------------------------------------------


def _as_scores(values: ArrayLike) -> np.ndarray:
    """``values`` as a float64 array (``None`` becomes NaN); infinite values are an error."""
    if isinstance(values, (str, bytes)):
        raise InputValidationError("scores must be numbers, not a string")
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputValidationError(f"scores must be numbers (None/NaN for missing): {exc}") from exc
    bad = np.flatnonzero(np.isinf(arr.ravel()))
    if bad.size:
        raise InputValidationError(
            f"scores has an infinite value at flat index {bad[0]}; NaN marks a missing score"
        )
    return arr


def _saved_vector(value: Any, name: str) -> np.ndarray:
    if not isinstance(value, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise InputValidationError(f"saved isotonic map: {name!r} must be a list of numbers")
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise InputValidationError(f"saved isotonic map: {name!r} must be finite numbers")
    return arr


def _saved_number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputValidationError(f"saved ScoreCalibrator: {name!r} must be a finite number")
    return float(value)
