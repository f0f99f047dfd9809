"""The benchmarks, on one harness (``benchmarks.harness``); run each as ``python -m benchmarks.NAME``
from the repository root. Figures: ``benchmarks/RESULTS.md``."""
