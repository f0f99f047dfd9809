#!/usr/bin/env bash
# Run every benchmark and collect their Markdown reports in benchmarks/out/.
#   bash benchmarks/run_all.sh            (CPU; add DEVICE=cuda to run the GPU variants)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
device=${DEVICE:-cpu}
mkdir -p benchmarks/out
"$py" benchmarks/bench_bertscore.py --device "$device" --rounds 5 | tee benchmarks/out/bertscore.md
"$py" benchmarks/bench_end_to_end.py --rounds 3 | tee benchmarks/out/end_to_end.md
"$py" benchmarks/bench_memory.py --sizes 2000 20000 | tee benchmarks/out/memory.md
"$py" benchmarks/bench_ray.py | tee benchmarks/out/ray.md
"$py" benchmarks/bench_long_texts.py --device "$device"  # writes out/long_texts_speed.md
"$py" benchmarks/bench_import.py  # writes out/import.md
"$py" benchmarks/bench_async_app.py --latencies 1000 --rounds 3 --device "$device"  # out/async_app.md
"$py" benchmarks/bench_pipeline.py  # writes out/pipeline.md
# the presets: the accurate model where a copy is given, else its architecture with random weights
if [ -n "${UQLM_BERT_ACCURATE_MODEL_DIR:-}" ]; then
    random=$([ -f "$UQLM_BERT_ACCURATE_MODEL_DIR/model.safetensors" ] || echo --random-weights)
    "$py" benchmarks/bench_presets.py --device "$device" $random  # writes out/presets.md
fi
if "$py" -c "import xllamacpp, langchain_openai" 2>/dev/null; then  # the local LLM (extra "local")
    "$py" benchmarks/eval_real_llm.py --quiet  # writes out/real_llm_scores.md
fi
# against uqlm 0.6.7, in its own environment (bash benchmarks/setup-uqlm-env.sh creates it)
if [ -x benchmarks/.venv-uqlm/bin/python ]; then
    benchmarks/.venv-uqlm/bin/python benchmarks/bench_vs_uqlm.py  # writes out/vs_uqlm.{md,json}
fi
if [ -f ../shared/data/wikibio_gpt3_dev.jsonl ]; then
    "$py" benchmarks/eval_wikibio.py | tee benchmarks/out/eval_wikibio.md
    "$py" benchmarks/eval_combinations.py | tee benchmarks/out/eval_combinations.md
    "$py" benchmarks/eval_idf.py --no-progress  # writes benchmarks/out/idf_eval.md
    "$py" benchmarks/eval_long_texts.py --device "$device" --sets 4  # writes out/long_texts.md
    "$py" benchmarks/eval_threshold.py  # writes out/threshold.md
    "$py" benchmarks/eval_calibration.py  # writes out/calibration.md
    "$py" benchmarks/eval_layers.py --model fast --device "$device"  # writes out/layers_*.md
    if [ -f "${UQLM_BERT_ACCURATE_MODEL_DIR:-}/model.safetensors" ]; then
        "$py" benchmarks/eval_layers.py --model accurate --device "$device"
    fi
fi
