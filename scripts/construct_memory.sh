#!/bin/bash
# Issue 14: does the whole construct stage stream? Peak RSS of `vibethinker construct` at 10K and
# 100K seeds, the recipe's settings (tiny.yaml: 10% expanded, 6 samples, the packaged eval sets).
#   scripts/construct_memory.sh WORLD_TRAIN_JSONL [OUT]
# WORLD_TRAIN_JSONL: a tiny world's train.jsonl (e.g. runs/tiny/data/train.jsonl). The world has
# too few distinct problems for 100K seeds, so its math/code/stem/instruct seeds are repeated
# with new ids; the SIMULATED teacher indexes the original file only (teacher_options.data), so
# its own memory does not grow with the seed file (it holds what it answers from in memory).
set -euo pipefail
SRC=${1:?usage: $0 WORLD_TRAIN_JSONL [OUT]}
OUT=${2:-/tmp/construct_memory}
V=${VIBETHINKER:-.venv/bin/vibethinker}
PY=${PYTHON:-.venv/bin/python}
mkdir -p "$OUT"
$PY - "$SRC" "$OUT/seeds100k.jsonl" <<'PY'
import json, sys
rows = [json.loads(x) for x in open(sys.argv[1])]
rows = [r for r in rows if r["domain"] != "clr"]
with open(sys.argv[2], "w") as f:
    for n in range(100_000):
        r = dict(rows[n % len(rows)], id=f"{rows[n % len(rows)]['id']}-x{n // len(rows)}")
        f.write(json.dumps(r) + "\n")
PY
for n in 10000 100000; do
  rm -rf "$OUT/c$n"
  /usr/bin/time -f "seeds=$n peak_rss_kb=%M wall_s=%e" $V construct seeds="$OUT/seeds100k.jsonl" \
    out="$OUT/c$n" max_seeds=$n 'eval_sets=["math:pkg:mmath/mmath/en.json", humaneval, ifbench]' \
    expand_fraction=0.1 n_samples=6 on_bad_seed=pass "teacher_options={data: $SRC}" --quiet 2>&1 \
    | tail -1
  echo "problems out: $(wc -l < "$OUT/c$n/train.jsonl")"
done
