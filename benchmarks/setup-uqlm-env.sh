#!/usr/bin/env bash
# Create benchmarks/.venv-uqlm, the environment of bench_vs_uqlm: uqlm-bert and uqlm 0.6.7 side by
# side (uqlm is a benchmark peer only, never a dependency, so it lives apart and git-ignored).
#   bash benchmarks/setup-uqlm-env.sh
#   benchmarks/.venv-uqlm/bin/python -m benchmarks.bench_vs_uqlm --prompts 12 --rounds 1
# Steps: (1) torch (default 2.13.0), only where there is none, the CPU build without an NVIDIA GPU
# (asked for by its local version label, as scripts/setup-env.sh does); (2) uqlm-bert from this
# checkout with the benchmark's needs: langchain-openai, bert-score 0.3.13 (what uqlm scores
# through) and pytest; (3) uqlm, keeping step 2's httpx (else pip backtracks through old httpx
# sources); on Python < 3.13 it pins numpy < 2 and pip downgrades it; (4) numpy raised again to
# step 2's version with --no-deps, so both run on uqlm-bert's numpy (pip reports the pin as a
# conflict; uqlm's BERTScore path runs on it); (5) a check that both import and agree.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
torch_version="${UQLM_BERT_TORCH_VERSION:-2.13.0}"
uqlm_version="${UQLM_VERSION:-0.6.7}"
venv=benchmarks/.venv-uqlm
pip_quiet="-q"

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
py="$venv/bin/python"

# 1. torch
if "$py" -c "import torch" >/dev/null 2>&1; then
    echo "setup-uqlm-env: keeping the installed torch $("$py" -c 'import torch; print(torch.__version__)')"
elif [ "$(uname -s)" = "Darwin" ] || nvidia-smi -L >/dev/null 2>&1; then
    "$py" -m pip install $pip_quiet "torch==${torch_version}"
else
    "$py" -m pip install $pip_quiet "torch==${torch_version}+cpu" ||
        "$py" -m pip install $pip_quiet "torch==${torch_version}+cpu" \
            --index-url https://download.pytorch.org/whl/cpu
fi

# 2. uqlm-bert and the client
"$py" -m pip install $pip_quiet -e . "langchain-openai>=0.2" "bert-score==0.3.13" \
    "pytest>=8" "pytest-asyncio>=0.23"
version_of() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }
numpy_ours=$(version_of numpy)

# 3. uqlm (its numpy pin may downgrade numpy; pip's resolver warning is expected)
"$py" -m pip install $pip_quiet "uqlm==${uqlm_version}" "httpx==$(version_of httpx)"

# 4. numpy back to what uqlm-bert resolved
numpy_now=$(version_of numpy)
if [ "$numpy_now" != "$numpy_ours" ]; then
    echo "setup-uqlm-env: uqlm installed numpy ${numpy_now}; raising it again to ${numpy_ours}"
    "$py" -m pip install $pip_quiet --no-deps "numpy==${numpy_ours}"
fi

# 5. both libraries import and agree
"$py" -m benchmarks.bench_vs_uqlm --check-env
