"""Where device tests run: the CPU always, a CUDA GPU where the machine has one.

Parametrize a test by ``DEVICES`` to run it on both; set a module's ``pytestmark = CUDA_ONLY``
where every test in it needs CUDA.
"""

from __future__ import annotations

import pytest
import torch

#: The marks of a test that needs a CUDA GPU: marked ``gpu``, skipped with a reason without one.
CUDA_ONLY = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU"),
]
#: The CPU, and a CUDA GPU (its case marked and skipped as :data:`CUDA_ONLY` says).
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA_ONLY)]
