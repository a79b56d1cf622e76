"""Problem records on disk: JSONL (one record per line), JSON, parquet, and local HF dataset folders.

Validation is strict and specific: an error names the file, the line (or row), the field, what
was expected and what was found. A file with a bad record fails loudly; `skip_invalid=True` skips
bad records and logs how many (nothing is dropped silently). Real datasets' own columns (source,
level, url) are carried into `meta` with one warning naming them, but a near-miss of a field name
(`anwser`) is an error; numeric ids and answers are read as text; duplicate ids warn. Rows in
other tools' shapes (TRL prompt/completion and prompt/solution, chat `messages`, a gold column)
are read through `data/shapes.py`, with the stage's defaults (`RowShape`). `load_mixture` mixes several datasets with
weights; `select` takes a domain filter and a limit balanced over domains.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import random
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from vibethinker.data.shapes import RowShape, ShapeError, normalise_row
from vibethinker.log import get_logger
from vibethinker.types import DOMAINS, TRAIN_ONLY_DOMAINS, Problem

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
    "clr": ("traces",),  # training-only (types.TRAIN_ONLY_DOMAINS): a prompt and its reply
    "chat": ("traces",),  # training-only: general dialogue, a prompt and its reply
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


def _close_field(key: str) -> str | None:
    """The known field `key` is probably a typo of (difflib), if any."""
    m = difflib.get_close_matches(key, list(_FIELDS), n=1, cutoff=0.8)
    return m[0] if m else None


def problem_from_dict(
    row: Any,
    path: str | os.PathLike = "<dict>",
    line: int = 0,
    extra: tuple[str, ...] = (),
    unknown: set[str] | None = None,
    shape: RowShape = RowShape(),
) -> Problem:
    """Validate one raw record and build a Problem.

    The record may have any shape `data/shapes.py` accepts (TRL prompt/completion or
    prompt/solution, chat `messages`, a gold column); `shape` holds the stage's defaults (domain,
    ids, answer column). Keys listed in `extra` go into `meta`. Other unknown keys (a dataset's
    own columns: source, level, url) go into `meta` too and are added to the `unknown` set when
    one is given (the loader warns once); a key that looks like a typo of a field (`anwser`) is
    an error. A numeric `id` or `answer` is read as text. Every missing field is named in one
    error."""
    if not isinstance(row, dict):
        raise DataError(path, line, "<record>", f"expected a JSON object, got {_type_name(row)}")
    keys = sorted(row)  # as written, for the error message
    try:
        row = normalise_row(row, shape, Path(str(path)).name, line)
    except ShapeError as e:
        raise DataError(path, line, e.field, e.msg) from None
    kwargs: dict[str, Any] = {}
    meta = dict(row.get("meta") or {})
    for key, value in row.items():
        if key in extra:
            meta[key] = value
            continue
        if key not in _FIELDS:
            close = _close_field(key)
            if close:
                raise DataError(path, line, key, f"unknown field; did you mean '{close}'?")
            meta[key] = value
            if unknown is not None:
                unknown.add(key)
            continue
        if key in ("id", "answer") and _is_number(value):
            value = _num_text(value)
        if not _check_type(value, _HINTS[key]):
            raise DataError(
                path, line, key, f"expected {_HINTS[key]}, got {_type_name(value)} ({value!r:.60})"
            )
        kwargs[key] = value
    _check_missing(kwargs, keys, shape, path, line)
    _check_domain_fields(kwargs, shape, path, line)
    kwargs["meta"] = meta
    return Problem(**kwargs)


def _check_domain_fields(
    kwargs: dict[str, Any], shape: RowShape, path: str | os.PathLike, line: int
) -> None:
    """The fields a domain needs and their shapes: code's tests (or test_code with its
    entry_point), stem's answer letter among its choices, instruct's instruction ids."""
    domain = kwargs["domain"]
    gold = shape.need_gold
    if gold and domain == "code" and not kwargs.get("tests") and not kwargs.get("test_code"):
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
    if domain == "stem" and kwargs.get("choices") and kwargs.get("answer") is not None:
        letters = "ABCDEFGHIJ"[: len(kwargs["choices"])]
        if kwargs["answer"] not in letters:
            raise DataError(path, line, "answer", f"expected one of {list(letters)}")
    for i, ins in enumerate(kwargs.get("instructions") or []):
        if not isinstance(ins, dict) or not isinstance(ins.get("id"), str):
            raise DataError(path, line, f"instructions[{i}]", "expected {id: str, kwargs: {}}")


_MISSING_HINT = {
    "id": "a unique `id` column (the stages number rows without one)",
    "domain": "a `domain` column, or the stage's domain key (rl: domain=math; sft, eval: "
    "domains=math)",
    "prompt": "`prompt`, `problem`, `question` or chat `messages`",
    "answer": "`answer`, a gold column named by answer_key=COLUMN, or a `solution` with a "
    "\\boxed{} answer",
    "choices": "`choices` (the options, in display order)",
    "traces": "`traces`, `completion` or a final assistant message",
}


def _check_missing(kwargs: dict, keys: list, shape: RowShape, path: Any, line: int) -> None:
    """Every required field the record lacks, named in one DataError (the record's own keys and
    the accepted shapes in the message); also an unknown domain."""
    missing = [k for k in ("id", "domain", "prompt") if kwargs.get(k) in (None, "")]
    domain = kwargs.get("domain")
    if domain and domain not in DOMAINS + TRAIN_ONLY_DOMAINS:
        known = DOMAINS + TRAIN_ONLY_DOMAINS
        raise DataError(path, line, "domain", f"expected one of {known}, got {domain!r}")
    open_prompt = domain == "instruct" and kwargs.get("subdomain") == "open"  # rubric-scored
    for key in _REQUIRED_BY_DOMAIN.get(domain or "", ()):
        gold = key in ("answer", "choices", "instructions")
        if kwargs.get(key) in (None, "", []) and not open_prompt and (shape.need_gold or not gold):
            missing.append(key)
    if not missing:
        return
    if len(missing) == 1:
        key = missing[0]
        why = "required, expected a non-empty string"
        if key in _REQUIRED_BY_DOMAIN.get(domain or "", ()):
            why = f"required for domain '{domain}'"
            if domain == "instruct":
                why += " (an instruct prompt without rules needs subdomain 'open')"
        raise DataError(path, line, key, f"{why}; give {_MISSING_HINT.get(key, key)}")
    hints = "; ".join(f"{k}: {_MISSING_HINT.get(k, 'required')}" for k in missing)
    raise DataError(
        path,
        line,
        ", ".join(missing),
        f"missing (the record has "
        f"{', '.join(keys) or 'no keys'}). Give {hints} (docs/REAL_WORLD.md, "
        "Bringing your own data)",
    )


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _num_text(v: int | float) -> str:
    """4 -> "4", 4.0 -> "4", 0.5 -> "0.5" (datasets store integer answers as numbers)."""
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def problem_to_dict(p: Problem) -> dict[str, Any]:
    """The JSON form: fields left at None / empty meta are omitted to keep files small."""
    d = dataclasses.asdict(p)
    return {k: v for k, v in d.items() if v is not None and not (k == "meta" and not v)}


def _not_utf8(raw: bytes, e: UnicodeDecodeError) -> str:
    return (
        f"not valid UTF-8 (byte {raw[e.start : e.start + 1]!r} at offset {e.start} of the "
        "line); save the file as UTF-8 (or delete that row)"
    )


def _iter_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line or row number, raw record) from one file; line numbers start at 1."""
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix in (".jsonl", ".jsonl.gz", ".ndjson"):
        opener = __import__("gzip").open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:  # bytes: a line that is not UTF-8 is named, not fatal
            for i, raw in enumerate(f, 1):
                try:
                    text = raw.decode("utf-8-sig")  # -sig: a leading BOM is no error
                except UnicodeDecodeError as e:
                    yield i, DataError(path, i, "<text>", _not_utf8(raw, e))
                    continue
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
        raw = path.read_bytes()
        try:
            data = json.loads(raw.decode("utf-8-sig"))
        except UnicodeDecodeError as e:
            line = raw[: e.start].count(b"\n") + 1
            raise DataError(path, line, "<text>", _not_utf8(raw, e)) from None
        except json.JSONDecodeError as e:
            msg = f"invalid JSON: {e.msg} at column {e.colno}"
            raise DataError(path, e.lineno, "<json>", msg) from None
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
    path: str | os.PathLike,
    skip_invalid: bool = False,
    extra: tuple[str, ...] = (),
    shape: RowShape = RowShape(),
) -> list[Problem]:
    """Load and validate Problem records from a file or a folder of data files.

    `extra`: keys expected beside the Problem fields, stored in `problem.meta` (e.g. "response").
    Other columns are carried into `meta` with one warning naming them; duplicate ids warn.
    `shape`: the stage's defaults for rows in other tools' shapes (data/shapes.py).
    """
    out: list[Problem] = []
    skipped = 0
    unknown: set[str] = set()
    for f in _files(Path(path)):
        for line, row in _iter_rows(f):
            try:
                if isinstance(row, DataError):
                    raise row
                out.append(problem_from_dict(row, f, line, extra, unknown, shape))
            except DataError as e:
                if not skip_invalid:
                    raise
                skipped += 1
                if skipped <= 5:
                    log.warning("skipping invalid record: %s", e)
    if skipped:
        log.warning("%s: skipped %d invalid record(s), kept %d", path, skipped, len(out))
    if unknown:
        log.warning(
            "%s: column(s) %s are not Problem fields; kept in each record's `meta`",
            path,
            ", ".join(sorted(unknown)),
        )
    dup = {k: n for k, n in Counter(p.id for p in out).items() if n > 1}
    if dup:
        example = ", ".join(f"{k!r} x{n}" for k, n in list(dup.items())[:3])
        log.warning(
            "%s: %d id(s) appear more than once (%s); ids should be unique: per-problem results "
            "and samples are keyed by id",
            path,
            len(dup),
            example,
        )
    return out


def split_file(path: str | os.PathLike, split: str) -> Path:
    """A data folder made by the `data` stage means its `split` file; anything else is as is."""
    p = Path(path)
    return p / split if p.is_dir() and (p / split).exists() else p


def load_mixture(
    data: str,
    probs: list[float] | None = None,
    seed: int = 0,
    split: str = "train.jsonl",
    domains: list[str] | None = None,
    shape: RowShape = RowShape(),
) -> list[Problem]:
    """Several datasets in one stage, OpenRLHF-style: `data` is one path or a comma-separated
    list (a data folder means its `split` file); `probs` are their sampling weights.

    Without weights the datasets are concatenated. With weights the result has as many records
    as all datasets together, dataset i contributing round(w_i * total) of them: drawn without
    replacement while it has enough, then cycled again (oversampling a small dataset), seeded.
    `domains` keeps only those domains (applied before weighting)."""
    paths = [x.strip() for x in str(data).split(",") if x.strip()]
    if probs and len(probs) != len(paths):
        raise ValueError(f"data_probs has {len(probs)} weights for {len(paths)} dataset(s)")
    if probs and (any(w < 0 for w in probs) or sum(probs) <= 0):
        raise ValueError(f"data_probs must be non-negative with a positive sum, got {probs}")
    sets = []
    for p in paths:
        rows = load_problems(split_file(p, split), shape=shape)
        sets.append([r for r in rows if not domains or r.domain in domains])
    if not probs or len(sets) == 1:
        return [r for rows in sets for r in rows]
    total, wsum = sum(len(rows) for rows in sets), sum(probs)
    rng, out = random.Random(seed), []
    for path, rows, w in zip(paths, sets, probs):
        want = round(total * w / wsum)
        if want and not rows:
            raise ValueError(f"{path}: no records to sample (weight {w})")
        picked: list[Problem] = []
        while len(picked) < want:
            order = rng.sample(rows, len(rows))
            picked += order[: want - len(picked)]
        out += picked
        log.info("mixture: %s weight %.3g -> %d of %d records", path, w, want, len(rows))
    rng.shuffle(out)
    return out


def select(
    problems: list[Problem], limit: int = 0, domains: list[str] | None = None
) -> list[Problem]:
    """`domains` keeps those domains (none given: every domain but the training-only ones);
    `limit` keeps at most that many problems, balanced over the domains present (round-robin in
    file order), so a mixed file is not cut to its first domain. Per-domain order is kept."""
    if domains:
        problems = [p for p in problems if p.domain in domains]
    else:
        problems = [p for p in problems if p.domain not in TRAIN_ONLY_DOMAINS]
    if not limit or len(problems) <= limit:
        return problems
    by_domain: dict[str, list[Problem]] = {}
    for p in problems:
        by_domain.setdefault(p.domain, []).append(p)
    queues = [iter(v) for v in by_domain.values()]
    keep: set[int] = set()
    while len(keep) < limit:  # one per domain in turn; a domain that runs out drops away
        for q in list(queues):
            p = next(q, None)
            if p is None:
                queues.remove(q)
            elif len(keep) < limit:
                keep.add(id(p))
    return [p for p in problems if id(p) in keep]


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
            try:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
            except UnicodeEncodeError:  # a lone surrogate: as a \udXXX escape (json reads it)
                f.write(json.dumps(r) + "\n")
            n += 1
    os.replace(tmp, path)
    return n
