"""Problem records on disk: JSONL (one record per line), JSON, parquet, and local HF dataset folders.

Validation is strict and specific: an error names the file, the line (or row), the field, what
was expected and what was found. A file with a bad record fails loudly; `skip_invalid=True` skips
bad records and logs how many (nothing is dropped silently).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from vibethinker.log import get_logger
from vibethinker.types import DOMAINS, Problem

log = get_logger("data.io")

_FIELDS = {f.name: f for f in dataclasses.fields(Problem)}
_HINTS = get_type_hints(Problem)
# Extra keys a row may carry beside the Problem fields (e.g. `response` in verify input); they
# are kept in `meta` only when asked, otherwise rejected as unknown (typos must not pass).
_REQUIRED_BY_DOMAIN = {
    "math": ("answer",),
    "stem": ("answer", "choices"),
    "code": (),  # tests or test_code+entry_point, checked below
    "instruct": ("instructions",),
}


class DataError(ValueError):
    """A malformed record; the message names file, line, field and what was expected."""

    def __init__(self, path: str | os.PathLike, line: int, field: str, msg: str):
        self.path, self.line, self.field = str(path), line, field
        super().__init__(f"{path}:{line}: field '{field}': {msg}")


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _check_type(value: Any, hint: Any) -> bool:
    """Shallow structural check of a JSON value against a Problem field's type hint."""
    if value is None:
        return type(None) in get_args(hint) or hint is Any
    origin = get_origin(hint)
    if origin is not None and type(None) in get_args(hint):  # Optional[X] / X | None
        inner = [a for a in get_args(hint) if a is not type(None)]
        return any(_check_type(value, a) for a in inner)
    if hint is Any:
        return True
    if origin is list:
        (item,) = get_args(hint) or (Any,)
        return isinstance(value, list) and all(_check_type(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def problem_from_dict(
    row: Any, path: str | os.PathLike = "<dict>", line: int = 0, extra: tuple[str, ...] = ()
) -> Problem:
    """Validate one raw record and build a Problem. Keys listed in `extra` go into `meta`."""
    if not isinstance(row, dict):
        raise DataError(path, line, "<record>", f"expected a JSON object, got {_type_name(row)}")
    kwargs: dict[str, Any] = {}
    meta = dict(row.get("meta") or {})
    for key, value in row.items():
        if key in extra:
            meta[key] = value
            continue
        if key not in _FIELDS:
            raise DataError(path, line, key, f"unknown field; known fields: {', '.join(_FIELDS)}")
        if not _check_type(value, _HINTS[key]):
            raise DataError(
                path, line, key, f"expected {_HINTS[key]}, got {_type_name(value)} ({value!r:.60})"
            )
        kwargs[key] = value
    for key in ("id", "domain", "prompt"):
        if kwargs.get(key) in (None, ""):
            raise DataError(path, line, key, "required, expected a non-empty string")
    domain = kwargs["domain"]
    if domain not in DOMAINS:
        raise DataError(path, line, "domain", f"expected one of {DOMAINS}, got {domain!r}")
    for key in _REQUIRED_BY_DOMAIN[domain]:
        if kwargs.get(key) in (None, "", []):
            raise DataError(path, line, key, f"required for domain '{domain}'")
    if domain == "code" and not kwargs.get("tests") and not kwargs.get("test_code"):
        raise DataError(
            path, line, "tests", "domain 'code' needs `tests` ([{input, output}]) or `test_code`"
        )
    if domain == "code" and kwargs.get("test_code") and not kwargs.get("entry_point"):
        raise DataError(path, line, "entry_point", "required with `test_code`")
    for i, t in enumerate(kwargs.get("tests") or []):
        if (
            not isinstance(t, dict)
            or not isinstance(t.get("input"), str)
            or not isinstance(t.get("output"), str)
        ):
            raise DataError(path, line, f"tests[{i}]", "expected {input: str, output: str}")
    if domain == "stem":
        letters = "ABCDEFGHIJ"[: len(kwargs["choices"])]
        if kwargs["answer"] not in letters:
            raise DataError(path, line, "answer", f"expected one of {list(letters)}")
    for i, ins in enumerate(kwargs.get("instructions") or []):
        if not isinstance(ins, dict) or not isinstance(ins.get("id"), str):
            raise DataError(path, line, f"instructions[{i}]", "expected {id: str, kwargs: {}}")
    kwargs["meta"] = meta
    return Problem(**kwargs)


def problem_to_dict(p: Problem) -> dict[str, Any]:
    """The JSON form: fields left at None / empty meta are omitted to keep files small."""
    d = dataclasses.asdict(p)
    return {k: v for k, v in d.items() if v is not None and not (k == "meta" and not v)}


def _iter_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line or row number, raw record) from one file; line numbers start at 1."""
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix in (".jsonl", ".jsonl.gz", ".ndjson"):
        opener = __import__("gzip").open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for i, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    yield i, json.loads(text)
                except json.JSONDecodeError as e:
                    yield (
                        i,
                        DataError(path, i, "<json>", f"invalid JSON: {e.msg} at column {e.colno}"),
                    )
    elif suffix == ".json":
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise DataError(path, e.lineno, "<json>", f"invalid JSON: {e.msg}") from None
        if isinstance(data, dict) and "data" in data:  # a common {"data": [...]} wrapper
            data = data["data"]
        if not isinstance(data, list):
            raise DataError(path, 1, "<json>", "expected a list of records")
        yield from enumerate(data, 1)
    elif suffix in (".parquet", ".arrow"):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as e:
            raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow") from e
        if suffix == ".parquet":
            table = pq.read_table(path)
        else:
            with pa.memory_map(str(path)) as src:
                try:
                    table = pa.ipc.open_stream(src).read_all()
                except pa.ArrowInvalid:
                    table = pa.ipc.open_file(src).read_all()
        yield from enumerate(table.to_pylist(), 1)
    else:
        raise ValueError(f"{path}: unsupported file type (use .jsonl, .json, .parquet or .arrow)")


def _files(path: Path) -> list[Path]:
    """A file, or a folder of data files (a local HF dataset: *.jsonl/json/parquet/arrow)."""
    if path.is_dir():
        exts = (".jsonl", ".json", ".parquet", ".arrow", ".ndjson")
        found = sorted(p for p in path.rglob("*") if p.suffix in exts and p.name[0] not in "._")
        found = [p for p in found if p.name not in ("dataset_info.json", "state.json")]
        if not found:
            raise FileNotFoundError(f"{path}: no .jsonl/.json/.parquet/.arrow files inside")
        return found
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    return [path]


def load_problems(
    path: str | os.PathLike, skip_invalid: bool = False, extra: tuple[str, ...] = ()
) -> list[Problem]:
    """Load and validate Problem records from a file or a folder of data files.

    `extra`: keys allowed beside the Problem fields, stored in `problem.meta` (e.g. "response").
    """
    out: list[Problem] = []
    skipped = 0
    for f in _files(Path(path)):
        for line, row in _iter_rows(f):
            try:
                if isinstance(row, DataError):
                    raise row
                out.append(problem_from_dict(row, f, line, extra))
            except DataError as e:
                if not skip_invalid:
                    raise
                skipped += 1
                if skipped <= 5:
                    log.warning("skipping invalid record: %s", e)
    if skipped:
        log.warning("%s: skipped %d invalid record(s), kept %d", path, skipped, len(out))
    return out


def save_problems(path: str | os.PathLike, problems: Iterable[Problem]) -> int:
    """Write Problem records as JSONL, atomically (a crash never leaves a half-written file)."""
    return write_jsonl(path, (problem_to_dict(p) for p in problems))


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict[str, Any]]) -> int:
    """Write plain dict rows as JSONL, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n
