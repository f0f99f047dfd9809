"""How far one pair's score may move when it is scored in other company: another batch, another
call, another process (docs/bertscore.md, "A pair's scores do not depend on the other pairs").

Nothing of a pair's own computation depends on the rest of the call; what the company changes is
the order of float sums inside the kernels (the width of the padded attention, the shape of a
GEMM). In float32 that is float rounding, inside the tests' own tolerances. In a reduced dtype a
sum that lands on the other side of a rounding boundary moves a token's embedding by one unit in
the last place of that dtype, and the score with it: on a CPU with AMX tiles, whose bfloat16
kernels block their sums by the matrix's shape, a confidence moves by up to ``REDUCED``.
Elsewhere (AVX512-BF16 alone) the same kernels happened to sum alike, but nothing promises it.
"""

from __future__ import annotations

import torch

# the bound docs/bertscore.md gives for a confidence scored in other company in a reduced dtype
# (its rounding), as the benchmarks hold their runs to it
from benchmarks.loopback import REDUCED_TOLERANCE as REDUCED
from uqlm_bert.bertscore._resolve import resolve_dtype


def in_company(tol: float, dtype: str | None = "auto", device: str = "cpu") -> float:
    """The bound on how far a score computed with ``dtype`` on ``device`` may move in other
    company: ``tol`` where the dtype resolves to float32, ``REDUCED`` where it resolves to a
    reduced one (``"auto"`` on a CPU with bfloat16 units, on CUDA)."""
    if resolve_dtype(dtype, torch.device(device)) == torch.float32:
        return tol
    return max(tol, REDUCED)
