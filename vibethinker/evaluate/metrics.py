"""Evaluation metrics over groups (one problem, its n scored samples), per domain and subdomain.

One notion of correct: a sample is correct when its verifier says `Score.correct` (math and
stem: the right final answer; code: every test passes; instruct: EVERY instruction of the prompt
is followed, IFEval's prompt-level strict accuracy). `avg@n`, `pass@k` and `maj@k` all count that
same verdict, so avg@n = pass@1 exactly. Partial credit (instruct: the fraction of instructions
followed) is reported apart as `mean_score`, never mixed into avg@n.

Per slice (all, each domain, each domain/subdomain), averaged over its problems:
- `avg@n`: fraction of correct samples among the n (the paper's Pass@1 "averaged over n");
- `mean_score`: mean verifier value (equal to avg@n for binary verifiers);
- `pass@k`: the unbiased estimator (algo/passk.py), for each requested k <= n;
- `maj@k`: expected majority-vote accuracy over k-subsets (math and stem only; a program or an
  instruction-following reply has no "final answer" to vote on);
Per slice, over its samples:
- `mean_tokens`: mean response length in tokens; `mean_correct_tokens`: over correct responses
  (None when the engine reported no length: never 0 for unknown);
- `tokens_per_correct`: all tokens spent / correct answers obtained (the cost-normalised view
  reviewers ask for; inf when nothing is correct);
- `truncation_rate`: fraction of samples that hit the token cap (finish_reason "length").

Majority vote needs answers grouped by equivalence. `answer_key` extracts a normalised final
answer; the samples the verifier judged correct are equivalent to the gold answer, hence to each
other, so they form one cluster whatever their spelling. Wrong answers cluster by normalised
string (and exact numeric value); pass `equivalent` for a finer (e.g. math-verify) merge of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction
from typing import Any

from vibethinker.algo.passk import avg_at_n, maj_at_k, pass_at_k
from vibethinker.types import Group
from vibethinker.verifiers.choice import committed_letters
from vibethinker.verifiers.extract import answer_format, answer_part, final_answer

VOTING_DOMAINS = ("math", "stem")
_CORRECT = ("<correct>",)  # the cluster of verified-correct answers (a tuple: no string clash)
_NOISE = re.compile(r"\s+|\$|\\[,!;: ]|\\left|\\right|\\displaystyle|\^\{?\\circ\}?")
_FRAC = re.compile(r"^([+-]?)\\[dt]?frac\{([+-]?\d+)\}\{([+-]?\d+)\}$|^([+-]?\d+)/(\d+)$")
_NUM = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)$")


def normalize_answer(s: str) -> str:
    """Spelling-insensitive form of a final answer: no spaces, `$`, `\\left`, thin spaces,
    degree signs, `\\dfrac`; `\\text{x}` -> `x`; numbers by exact value (025 = 25, 0.5 = 1/2)."""
    s = _NOISE.sub("", s).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = re.sub(r"\\(?:text|mathrm|textbf)\{([^{}]*)\}", r"\1", s).rstrip(".")
    value = _as_number(s)
    return str(value) if value is not None else s


def _as_number(s: str) -> Fraction | None:
    s = s.replace(",", "") if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+", s) else s
    if _NUM.match(s):
        return Fraction(s)
    m = _FRAC.match(s)
    if m:
        sign, a, b = (
            (m.group(1), m.group(2), m.group(3)) if m.group(2) else ("", m.group(4), m.group(5))
        )
        if int(b) != 0:
            return Fraction(int(a), int(b)) * (-1 if sign == "-" else 1)
    return None


def answer_key(problem: Any, response: str) -> str | None:
    """The normalised final answer of a response, None when it gives none (or for domains that
    have no votable answer)."""
    if problem.domain == "math":
        found = final_answer(response, answer_format(problem))
        return normalize_answer(found) if found is not None else None
    if problem.domain == "stem":
        part = answer_part(response)
        if part is None:
            return None
        letters = set(committed_letters(part, getattr(problem, "choices", None)))
        return letters.pop() if len(letters) == 1 else None
    return None


def cluster_keys(
    keys: Sequence[str | None],
    correct: Sequence[bool],
    equivalent: Callable[[str, str], bool] | None = None,
) -> list[Hashable | None]:
    """Cluster ids for majority vote: verified-correct samples (and any sample with the same
    answer) share one cluster; the rest group by key, merged further by `equivalent` if given."""
    good = {k for k, ok in zip(keys, correct) if ok and k is not None}
    reps: list[str] = []
    out: list[Hashable | None] = []
    for k, ok in zip(keys, correct):
        if ok or (k is not None and k in good):
            out.append(_CORRECT)
        elif k is None:
            out.append(None)
        else:
            if k not in reps and equivalent is not None:
                k = next((r for r in reps if equivalent(r, k)), k)
            if k not in reps:
                reps.append(k)
            out.append(k)
    return out


def group_stats(
    group: Group, ks: Sequence[int], equivalent: Callable[[str, str], bool] | None = None
) -> dict[str, Any]:
    """Per-problem numbers: n, correct count, avg@n, pass@k, maj@k, token counts."""
    n = len(group.scores)
    correct = [s.correct for s in group.scores]
    c = sum(correct)
    tokens = [n_tokens(comp) for comp in group.completions]
    stats: dict[str, Any] = {
        "n": n,
        "correct": c,
        "avg": avg_at_n([float(x) for x in correct]),  # the one notion of correct (module doc)
        "score": avg_at_n([s.value for s in group.scores]),
        "pass": {k: pass_at_k(n, c, k) for k in ks if k <= n},
        "tokens": sum(t for t in tokens if t is not None),
        "counted": sum(t is not None for t in tokens),  # samples whose length is known
        "correct_tokens": sum(t for t, ok in zip(tokens, correct) if ok and t is not None),
        "correct_counted": sum(t is not None for t, ok in zip(tokens, correct) if ok),
        "truncated": sum(comp.truncated for comp in group.completions),
    }
    if group.problem.domain in VOTING_DOMAINS:
        keys = [answer_key(group.problem, comp.text) for comp in group.completions]
        ids = cluster_keys(keys, correct, equivalent)
        stats["maj"] = {k: maj_at_k(ids, [float(x) for x in correct], k) for k in ks if k <= n}
    return stats


def n_tokens(comp: Any) -> int | None:
    """Response length in tokens: the ids, else the logprobs, else the engine's count (an HTTP
    server's `usage`); None when unknown."""
    if comp.token_ids:
        return len(comp.token_ids)
    if comp.logprobs:
        return len(comp.logprobs)
    return getattr(comp, "num_tokens", None)


def truncation_verdicts(correct: Sequence[bool], truncated: Sequence[bool]) -> dict[str, list]:
    """The verdicts of samples under each rule for a sample cut at the token cap (the rl stage's
    `truncated_reward`): "zero" (a cut sample is wrong) and "verify" (its verifier verdict).
    Filters compare the two to count the decisions truncation decided."""
    return {
        "zero": [bool(c) and not t for c, t in zip(correct, truncated)],
        "verify": [bool(c) for c in correct],
    }


def slice_names(problem: Any) -> list[str]:
    names = ["all", problem.domain]
    if problem.subdomain:
        names.append(f"{problem.domain}/{problem.subdomain}")
    return names


def aggregate(
    groups: Sequence[Group], stats: Sequence[dict[str, Any]], ks: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Slice name -> metrics (see module doc); slices in order all, domains, subdomains."""
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        for name in slice_names(g.problem):
            members.setdefault(name, []).append(i)
    order = sorted(members, key=lambda s: (s != "all", "/" in s, s))
    return {name: _slice(members[name], stats, ks) for name in order}


def _slice(idx: list[int], stats: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    st = [stats[i] for i in idx]
    samples = sum(s["n"] for s in st)
    correct = sum(s["correct"] for s in st)
    tokens = sum(s["tokens"] for s in st)
    out: dict[str, Any] = {
        "problems": len(st),
        "samples": samples,
        "avg@n": _mean([s["avg"] for s in st]),
        "mean_score": _mean([s.get("score", s["avg"]) for s in st]),
    }
    for k in ks:
        vals = [s["pass"][k] for s in st if k in s["pass"]]
        if vals:
            out[f"pass@{k}"] = _mean(vals)
    for k in ks:
        vals = [s["maj"][k] for s in st if k in s.get("maj", {})]
        if vals:
            out[f"maj@{k}"] = _mean(vals)
    counted = sum(s.get("counted", s["n"]) for s in st)
    c_counted = sum(s.get("correct_counted", s["correct"]) for s in st)
    out["mean_tokens"] = tokens / counted if counted else None  # None: lengths unknown
    out["mean_correct_tokens"] = (
        sum(s["correct_tokens"] for s in st) / c_counted if c_counted else None
    )
    if counted < samples:  # some lengths unknown: scale the known mean to all samples
        out["tokens_per_correct"] = (
            None if not counted else (tokens / counted * samples / correct if correct else math.inf)
        )
    else:
        out["tokens_per_correct"] = tokens / correct if correct else math.inf
    out["truncation_rate"] = sum(s["truncated"] for s in st) / samples if samples else 0.0
    return out


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def passk_curve(groups: Sequence[Group], slice_name: str = "all") -> dict[int, float]:
    """pass@k at k = 1, 2, 4, ... up to the smallest n in the slice (and n itself)."""
    sel = [g for g in groups if slice_name in slice_names(g.problem)]
    if not sel:
        return {}
    n = min(len(g.scores) for g in sel)
    ks = sorted({2**i for i in range(int(math.log2(n)) + 1)} | {n}) if n else []
    return {
        k: _mean([pass_at_k(len(g.scores), sum(s.correct for s in g.scores), k) for g in sel])
        for k in ks
    }
