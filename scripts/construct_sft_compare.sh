#!/bin/bash
# Issue 14: does SFT on data built by the construct stage (simulated world teacher) match SFT on
# the world's own traces? Same model, same steps, same held-out eval; prints both pass@1 tables.
#   scripts/construct_sft_compare.sh RUN_DIR [STEPS]
# RUN_DIR holds a finished tiny run's data/ and model/ (e.g. runs/tiny after `make demo`).
set -euo pipefail
RUN=${1:?usage: $0 RUN_DIR [STEPS]}
STEPS=${2:-150}
V=${VIBETHINKER:-.venv/bin/vibethinker}
OUT=${OUT:-/tmp/construct_sft_compare}
mkdir -p "$OUT"
$V construct seeds="$RUN/data/train.jsonl" out="$OUT/construct" \
  'eval_sets=["math:pkg:mmath/mmath/en.json", humaneval, ifbench]' expand_fraction=0.1 n_samples=6 on_bad_seed=drop
for name in world construct; do
  D="$RUN/data/train.jsonl"; [ "$name" = construct ] && D="$OUT/construct/train.jsonl"
  $V sft model="$RUN/model" data="$D" out="$OUT/sft_$name" epochs=4 global_batch=64 micro_batch=8 \
    max_len=256 lr=2e-3 final_lr=2e-5 max_steps="$STEPS" save_every=0 \
    eval_data="$RUN/data/eval.jsonl" eval_n=4 eval_limit=400
done
for name in world construct; do echo "== $name"; cat "$OUT/sft_$name/summary.md"; done
