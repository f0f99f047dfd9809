#!/usr/bin/env bash
# The package as users get it: build the wheel from this checkout, install it into a fresh
# virtual environment (torch first, the CPU build on a machine without an NVIDIA GPU), and, from
# a folder outside the checkout, score with it through the library and the command. A file the
# package needs but the wheel lacks (the shipped idf tables, the baselines, the example data)
# fails here, where the checkout's own tests would not notice.
#   bash scripts/check-wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
torch_version="${UQLM_BERT_TORCH_VERSION:-2.13.0}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m pip wheel -q --no-deps --wheel-dir "$work/dist" . >/dev/null
wheel=$(ls "$work"/dist/uqlm_bert-*.whl)
"$python" -m venv "$work/venv"
py="$work/venv/bin/python"
if [ "$(uname -s)" = "Darwin" ] || nvidia-smi -L >/dev/null 2>&1; then
    "$py" -m pip install -q "torch==${torch_version}"
else
    "$py" -m pip install -q "torch==${torch_version}+cpu" ||
        "$py" -m pip install -q "torch==${torch_version}+cpu" \
            --index-url https://download.pytorch.org/whl/cpu
fi
"$py" -m pip install -q "$wheel"

cd "$work"
printf '%s\n' '{"response": "Lima is the capital of Peru. It has nine moons.", "sampled_responses": ["Lima is the capital of Peru.", "Peru'"'"'s capital is Lima."]}' > answers.jsonl
"$py" - <<'PY'
import os
import sys

import uqlm_bert
from uqlm_bert import BlackBoxUQ

installed = os.path.dirname(uqlm_bert.__file__)
assert installed.startswith(sys.prefix), f"uqlm_bert imported from {installed}, not the wheel"
result = BlackBoxUQ(show_progress_bars=False).score(
    ["Lima is the capital of Peru. It has nine moons."], [["Lima is the capital of Peru."]]
)
confidence = result.data["bert_score"][0]
assert 0.0 < confidence <= 1.0, confidence
refined = result.refine()["refined_response"][0]
assert refined == "Lima is the capital of Peru.", refined
print(f"check-wheel: scored with the installed wheel (confidence {confidence:.3f})")
PY
"$work/venv/bin/uqlm-bert" --help >/dev/null
"$work/venv/bin/uqlm-bert" score answers.jsonl -o scored.jsonl -q --refine >/dev/null
grep -q '"refined_response"' scored.jsonl
echo "check-wheel: uqlm-bert --help and uqlm-bert score ran from $(basename "$wheel")"
