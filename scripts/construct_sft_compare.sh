#!/bin/bash
# Issue 14: does SFT on data built by the construct stage (simulated world teacher) match SFT on
# the world's own traces? Same model init, same optimizer steps, same held-out eval, per seed;
# then a per-domain table with 95% bootstrap CIs over eval problems
# (scripts/construct_sft_compare.py).
#   scripts/construct_sft_compare.sh RUN_DIR [STEPS] [SEEDS]
# RUN_DIR holds a finished tiny run's data/ and model/ (e.g. runs/tiny after `make demo`); its
# construct/train.jsonl is used when present, otherwise construct runs into $OUT/construct.
# SEEDS: space-separated SFT seeds (data order and eval sampling), default "0 1".
# Both arms train on math, code, stem and instruct only: construct passes the world's `clr`
# examples over, so the world arm would otherwise spend steps on a domain the eval lacks.
# Finished arms are skipped on a rerun (sft resumes from its last checkpoint).
set -euo pipefail
RUN=${1:?usage: $0 RUN_DIR [STEPS] [SEEDS]}
STEPS=${2:-150}
SEEDS=${3:-0 1}
V=${VIBETHINKER:-.venv/bin/vibethinker}
PY=${PYTHON:-.venv/bin/python}
OUT=${OUT:-/tmp/construct_sft_compare}
EVAL_N=${EVAL_N:-4}
# EPOCHS: the arms' epoch cap (default 4, the recipe's). With EPOCHS above 4 and STEPS equal to the
# world arm's step count, the smaller construct arm trains as many steps (and about as many tokens).
EPOCHS=${EPOCHS:-4}
# ARMS: which arms to train (default "world construct").
ARMS=${ARMS:-world construct}
mkdir -p "$OUT"
# CONS: construct's train.jsonl to compare (default: RUN_DIR's, else built into $OUT/construct)
CONS=${CONS:-$RUN/construct/train.jsonl}
if [ ! -f "$CONS" ]; then
  CONS="$OUT/construct/train.jsonl"
  $V construct seeds="$RUN/data/train.jsonl" out="$OUT/construct" \
    'eval_sets=["math:pkg:mmath/mmath/en.json", humaneval, ifbench]' expand_fraction=0.1 \
    n_samples=6 on_bad_seed=drop
fi
for seed in $SEEDS; do
  for name in $ARMS; do
    D="$RUN/data/train.jsonl"; [ "$name" = construct ] && D="$CONS"
    R="$OUT/s${seed}_$name"
    [ -f "$R/sft/stats.json" ] || $V sft model="$RUN/model" data="$D" out="$R/sft" epochs="$EPOCHS" \
      global_batch=64 micro_batch=8 max_len=256 lr=2e-3 final_lr=2e-5 max_steps="$STEPS" \
      save_every=0 seed="$seed" 'domains=[math,code,stem,instruct]'
    [ -f "$R/eval/summary.json" ] || $V eval model="$R/sft/final" data="$RUN/data/eval.jsonl" \
      out="$R/eval" n="$EVAL_N" 'k=[1]' max_new_tokens=256 seed="$seed"
  done
done
$PY scripts/construct_sft_compare.py "$OUT" | tee "$OUT/compare.md"
