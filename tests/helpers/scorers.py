"""Cheap, exact, model-free scorers for tests of what happens around scoring (generation,
queues, Ray, failures), where a model's numbers would only cost time."""

from __future__ import annotations

import math
import time

import numpy as np

from uqlm_bert.scorers import Scorer


class LengthRatio(Scorer):
    """Mean over the present samples of min/max character length of response and sample (NaN
    without one); ``delay`` seconds per call, so that a batch stays on a worker for a while."""

    name = "length_ratio"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def score(self, responses, sampled_responses, show_progress_bars=False):
        if self.delay:
            time.sleep(self.delay)  # the work the scorer stands for
        out = []
        for r, samples in zip(responses, sampled_responses, strict=True):
            vals = [
                min(len(r), len(s)) / max(len(r), len(s), 1)
                for s in samples
                if s is not None and r is not None
            ]
            out.append(sum(vals) / len(vals) if vals else math.nan)
        return np.asarray(out)
