#!/usr/bin/env bash
# The prepared device check: at most ~8 minutes on one H100/H200, random weights, no network.
#   scripts/gpu_check.sh [OUT_DIR]        (default: $OUT, else runs/gpu_check)
# 1. our SFT step on a Qwen2.5-1.5B-shaped model at 8K and 16K tokens: peak GPU memory against
#    `vibethinker plan`'s arithmetic, tokens/s, MFU;
# 2. the same 16K step through TRL's SFTTrainer (the tokens/s ratio);
# 3. one RL step, hf engine, 4 prompts x G=8 samples of up to 2048 tokens: rollout and update
#    seconds, peak memory against the plan. vLLM is not tried unless importable (no network).
# Each measurement is its own process (its own peak) with its own timeout; lines go to
# OUT_DIR/gpu_check.jsonl, the table to OUT_DIR/gpu_check.md. CPU smoke test (seconds):
#   SIZE=tiny DEVICE=cpu SFT_SEQS=256 RL_ARGS="--prompt 16 --max-new 32" scripts/gpu_check.sh /tmp/gc
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-runs/gpu_check}}
PY=${PYTHON:-python}
SIZE=${SIZE:-1.5b}
DEVICE=${DEVICE:-cuda}
SFT_SEQS=${SFT_SEQS:-"8192 16384"}
RL_ARGS=${RL_ARGS:-"--prompts 4 --group 8 --prompt 512 --max-new 2048"}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT_DIR"
: > "$OUT_DIR/gpu_check.jsonl"
LOG=$OUT_DIR/gpu_check.log
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null; } > "$LOG"

run() {  # run SECONDS ARGS...: one measurement; a failure is logged, the next one still runs
  local limit=$1
  shift
  timeout "$limit" "$PY" scripts/gpu_check.py "$@" --size "$SIZE" --device "$DEVICE" \
    >> "$OUT_DIR/gpu_check.jsonl" 2>> "$LOG" || echo "FAILED (rc $?): $*" | tee -a "$LOG"
}

for seq in $SFT_SEQS; do run 90 sft --seq "$seq"; done
last=${SFT_SEQS##* }
run 120 trl --seq "$last"
# shellcheck disable=SC2086
run 150 rl $RL_ARGS
if "$PY" -c "import vllm" 2>/dev/null; then
  echo "vllm importable: an RL step with engine=vllm is not scripted yet" | tee -a "$LOG"
fi
"$PY" scripts/gpu_check.py table "$OUT_DIR/gpu_check.jsonl" | tee "$OUT_DIR/gpu_check.md"
