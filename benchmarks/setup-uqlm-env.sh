#!/usr/bin/env bash
# Create benchmarks/.venv-uqlm, the environment of bench_vs_uqlm.py: uqlm-bert and uqlm 0.6.7
# side by side. uqlm is a benchmark peer only, never a dependency of uqlm-bert, so it lives in this
# separate, git-ignored environment.
#
#   bash benchmarks/setup-uqlm-env.sh
#   benchmarks/.venv-uqlm/bin/python benchmarks/bench_vs_uqlm.py --quick
#
# Steps, in order:
#   1. torch (default 2.13.0) first, and only when the environment has none. Without an NVIDIA GPU
#      the CPU build is asked for by its local version label, so that no later requirement pulls
#      CUDA wheels (the same rule as scripts/setup-env.sh).
#   2. uqlm-bert from this checkout, editable, with what the benchmark needs from its test extra:
#      langchain-openai (the client both libraries call the server through), bert-score 0.3.13
#      (the version uqlm-bert's parity tests pin; uqlm scores through it) and pytest, to run the
#      benchmark's tests (tests/integration/test_benchmark_scripts.py) with uqlm present.
#   3. uqlm==0.6.7, keeping the httpx that step 2 installed (otherwise pip's resolver backtracks
#      through old httpx source releases that no longer build). On Python < 3.13 uqlm pins
#      numpy < 2 (and transformers < 5, sentence-transformers < 6, pandas < 3), so pip downgrades
#      those.
#   4. numpy raised again to the version step 2 resolved for uqlm-bert, with --no-deps: both
#      libraries then run on the numpy uqlm-bert is developed against. pip reports uqlm's numpy pin
#      as a conflict; uqlm's BERTScore path runs on it (step 5 checks).
#   5. A check that both libraries import and score the same pairs alike on the embedded model
#      (bench_vs_uqlm.py --check-env).
#
# uqlm's BertScorer builds bert_score.BERTScorer(device=..., lang="en"), i.e. roberta-large layer
# 17, with no parameter to change it; the benchmark points it at the embedded all-MiniLM-L6-v2,
# layer 5, idf=False, no rescaling, by patching that constructor (see bench_vs_uqlm.py). Nothing is
# downloaded at run time.
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
"$py" benchmarks/bench_vs_uqlm.py --check-env
