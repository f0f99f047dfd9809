#!/usr/bin/env bash
# Run every benchmark with the commands benchmarks/RESULTS.md gives; reports in benchmarks/out/.
#   bash benchmarks/run_all.sh            (CPU; DEVICE=cuda runs the GPU variants)
# Each benchmark skips (exit 0) what needs the shared WikiBio passages where they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
device=${DEVICE:-cpu}
out=benchmarks/out
run() { echo "== $*" >&2; "$py" -m "benchmarks.$1" "${@:2}"; }

run bench_bertscore --device "$device" --prompts 24 --rounds 7
run bench_end_to_end --prompts 119 --latencies 0 1000 --rounds 3 --device "$device"
run bench_memory --sizes 2000 20000 --reference
run bench_ray
run bench_ray_main_job --prompts 2000 --rounds 3
run bench_cluster_limits
run bench_supports --device "$device"
run bench_import
run bench_long_texts --device "$device" --rounds 7
run bench_long_texts --device "$device" --rounds 5 --dtype float32 --out "$out/float32"
run bench_generation --prompts 119 --rounds 3 --latencies 1000 0
run bench_sampling_rounds --prompts 60 --rounds 3
# the presets: the accurate model where a copy is given, else its architecture with random weights
if [ -n "${UQLM_BERT_ACCURATE_MODEL_DIR:-}" ]; then
    random=$([ -f "$UQLM_BERT_ACCURATE_MODEL_DIR/model.safetensors" ] || echo --random-weights)
    run bench_presets --device "$device" $random
    [ "$device" = cpu ] || run bench_presets --device "$device" --samples 20 --rounds 3 $random --out "$out/m20"
fi
if "$py" -c "import xllamacpp, langchain_openai" 2>/dev/null; then  # the local LLM (extra "local")
    run eval_real_llm --no-progress
fi
# against uqlm 0.6.7, in its own environment (bash benchmarks/setup-uqlm-env.sh creates it)
if [ -x benchmarks/.venv-uqlm/bin/python ]; then
    if [ "$device" = cpu ]; then latencies=(0 1000); else latencies=(1000); fi
    benchmarks/.venv-uqlm/bin/python -m benchmarks.bench_vs_uqlm --prompts 120 --rounds 3 \
        --latencies "${latencies[@]}" ${DEVICE:+--device "$DEVICE"}
    benchmarks/.venv-uqlm/bin/python -m benchmarks.bench_long_vs_uqlm --rounds 3 \
        ${DEVICE:+--device "$DEVICE"}
fi
run eval_wikibio --no-progress
run eval_idf --random-subsets 2000 --seed 0 --no-progress
run eval_long_texts --device "$device" --sets 4
run eval_threshold
run eval_sampling_rounds --grid --bound
run eval_calibration
run eval_sentences
run eval_layers --model fast --device "$device"
if [ -f "${UQLM_BERT_ACCURATE_MODEL_DIR:-}/model.safetensors" ]; then
    run eval_layers --model accurate --device "$device"
fi
