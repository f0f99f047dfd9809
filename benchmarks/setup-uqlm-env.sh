#!/usr/bin/env bash
# Create benchmarks/.venv-uqlm, bench_vs_uqlm's environment: uqlm-bert and uqlm 0.6.7 side by side
# (uqlm is a benchmark peer, never a dependency, so it lives apart and git-ignored).
#   bash benchmarks/setup-uqlm-env.sh
# (1) torch (2.13.0) where there is none, the CPU build without an NVIDIA GPU; (2) uqlm-bert from
# this checkout with langchain-openai, bert-score 0.3.13 (what uqlm scores through) and pytest;
# (3) uqlm, keeping step 2's httpx (else pip backtracks through old httpx sources; on Python < 3.13
# uqlm pins numpy < 2); (4) numpy raised again to step 2's with --no-deps (pip reports the pin as a
# conflict; uqlm's BERTScore path runs on it); (5) a check that both import and agree.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
venv=benchmarks/.venv-uqlm
torch="torch==${UQLM_BERT_TORCH_VERSION:-2.13.0}"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
py="$venv/bin/python"
pip() { "$py" -m pip install -q "$@"; }
version_of() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }

if "$py" -c "import torch" >/dev/null 2>&1; then  # 1
    echo "setup-uqlm-env: keeping the installed torch $(version_of torch)"
elif [ "$(uname -s)" = "Darwin" ] || nvidia-smi -L >/dev/null 2>&1; then
    pip "$torch"
else
    pip "$torch+cpu" || pip "$torch+cpu" --index-url https://download.pytorch.org/whl/cpu
fi
pip -e . "langchain-openai>=0.2" "bert-score==0.3.13" "pytest>=8" "pytest-asyncio>=0.23"  # 2
numpy_ours=$(version_of numpy)
pip "uqlm==${UQLM_VERSION:-0.6.7}" "httpx==$(version_of httpx)"  # 3
if [ "$(version_of numpy)" != "$numpy_ours" ]; then  # 4
    echo "setup-uqlm-env: raising numpy again to ${numpy_ours}"
    pip --no-deps "numpy==${numpy_ours}"
fi
"$py" -m benchmarks.bench_vs_uqlm --check-env  # 5
