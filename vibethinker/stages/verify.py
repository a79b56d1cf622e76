"""Stage `verify`: score responses with the domain verifiers, in parallel, under hard timeouts.

`vibethinker verify IN.jsonl out=OUT.jsonl workers=2`: each input row is a Problem record plus a
`response` (the assistant's text); each output row is the same with `score`, `correct` and
`reason` added. A response that is not valid Unicode text (a lone surrogate such as JSON's
"\\ud800": no tokenizer decodes to one) is not scored: its row gets score 0 and reason
`invalid_text`, with a warning naming it, and every other row is verified and written. A
summary (per domain: count and accuracy; per reason: count) goes to stderr and, next to the
output, to `<out>.summary.json`.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vibethinker import verifiers
from vibethinker.config import runtime
from vibethinker.data.io import load_problems, problem_to_dict, write_jsonl
from vibethinker.log import get_logger, is_quiet
from vibethinker.stages import register
from vibethinker.types import Score
from vibethinker.verifiers.math import with_answer_format

log = get_logger("stages.verify")


@dataclass
class VerifyConfig:
    input: str = ""
    """JSONL of Problem records, each with a `response` field (the text to score)."""
    out: str = "runs/verify"
    """Output: a `.jsonl` file, or a folder (then `<out>/verified.jsonl`)."""
    workers: int = runtime(2)
    """Worker processes (math) / threads (code, stem, instruct). Paper: silent; 2 = this CPU."""
    timeout: float = 0.0
    """Hard wall-clock limit per item in seconds; 0 uses the per-domain defaults (math 10 s,
    code 120 s as a backstop to the sandbox's own limits). Paper: silent."""
    skip_invalid: bool = False
    """Skip malformed input rows (counted in the log) instead of failing on the first one."""
    answer_format: str = "boxed"
    """Where a math response states its final answer (docs/VERIFY_MATH.md): `boxed` (the
    paper's), `answer_line` (PRM800K's `# Answer` line), `final_answer` ("The final answer is
    X"), `answer_colon` ("Answer: X"), `last_line`, or `auto` (boxed, answer_line, final_answer,
    answer_colon in turn). Paper: boxed; the others read outputs in other sources' formats."""


INVALID_TEXT = Score(0.0, False, "invalid_text", "the response holds a lone surrogate")


def _valid_text(s: str) -> bool:
    """Whether `s` is valid Unicode (encodes as UTF-8: no lone surrogates)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def output_path(out: str) -> Path:
    p = Path(out)
    return p if p.suffix == ".jsonl" else p / "verified.jsonl"


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per domain (n, correct, accuracy, mean score) and per reason."""
    by_domain: dict[str, dict[str, float]] = defaultdict(lambda: {"n": 0, "correct": 0, "sum": 0})
    reasons: Counter[str] = Counter()
    for r in rows:
        d = by_domain[r["domain"]]
        d["n"] += 1
        d["correct"] += int(r["correct"])
        d["sum"] += r["score"]
        reasons[r["reason"]] += 1
    domains = {
        k: {
            "n": int(v["n"]),
            "correct": int(v["correct"]),
            "accuracy": v["correct"] / v["n"],
            "mean_score": v["sum"] / v["n"],
        }
        for k, v in sorted(by_domain.items())
    }
    n = len(rows)
    correct = sum(int(r["correct"]) for r in rows)
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else 0.0,
        "domains": domains,
        "reasons": dict(reasons.most_common()),
    }


def format_summary(s: dict[str, Any]) -> str:
    lines = [f"verified {s['n']} responses: {s['correct']} correct ({s['accuracy']:.1%})"]
    for name, d in s["domains"].items():
        lines.append(
            f"  {name:9s} n={d['n']:<6d} correct={d['correct']:<6d} "
            f"acc={d['accuracy']:.3f} mean_score={d['mean_score']:.3f}"
        )
    lines.append("  reasons: " + ", ".join(f"{k}={v}" for k, v in s["reasons"].items()))
    return "\n".join(lines)


@register("verify", VerifyConfig, positional=("input",))
def run(cfg: VerifyConfig) -> dict[str, str]:
    """Score responses (Problem rows + `response`) with the domain verifiers."""
    from tqdm.auto import tqdm

    if not cfg.input:
        raise ValueError("verify: `input` is required (a JSONL of Problem rows with `response`)")
    problems = load_problems(cfg.input, skip_invalid=cfg.skip_invalid, extra=("response",))
    if not problems:  # an empty input is a mistake, not an empty success
        skipped = " (every row was malformed and skipped)" if cfg.skip_invalid else ""
        raise ValueError(f"verify: {cfg.input} holds no rows to verify{skipped}; nothing written")
    problems = with_answer_format(problems, cfg.answer_format)  # ValueError names the rules
    responses: list[str] = []
    for p in problems:
        r = p.meta.pop("response", None)
        if r is None:
            log.warning("%s: row %s has no `response`; it scores 0", cfg.input, p.id)
        responses.append(r if isinstance(r, str) else "")
    bad = [i for i, r in enumerate(responses) if not _valid_text(r)]
    if bad:
        ids = ", ".join(str(problems[i].id) for i in bad[:10])
        log.warning(
            "%s: %d response(s) not valid Unicode (lone surrogates), scored 0 as invalid_text "
            "without running a verifier: %s%s",
            cfg.input,
            len(bad),
            ids,
            " ..." if len(bad) > 10 else "",
        )
    skip = set(bad)
    good = [i for i in range(len(problems)) if i not in skip]
    bar = tqdm(total=len(good), desc="verify", disable=is_quiet(), leave=False)
    scored = verifiers.verify_batch(
        [problems[i] for i in good],
        [responses[i] for i in good],
        workers=cfg.workers,
        timeout=cfg.timeout or None,
        on_done=lambda _: bar.update(1),
    )
    bar.close()
    scores = [INVALID_TEXT] * len(problems)
    for i, s in zip(good, scored):
        scores[i] = s
    rows = []
    for p, resp, s in zip(problems, responses, scores):
        row = problem_to_dict(p)
        row.update(response=resp, score=s.value, correct=s.correct, reason=s.reason)
        rows.append(row)
    path = output_path(cfg.out)
    write_jsonl(path, rows)
    summary = summarize(rows)
    summary_path = path.with_name(path.stem + ".summary.json")
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    print(format_summary(summary), file=sys.stderr)
    return {"verified": str(path), "summary": str(summary_path)}
