import json

import pytest

from vibethinker.data.io import DataError, load_problems, save_problems
from vibethinker.types import Problem

GOOD = [
    {"id": "m1", "domain": "math", "prompt": "1+1?", "answer": "2", "traces": ["a", "b"]},
    {"id": "s1", "domain": "stem", "prompt": "q", "answer": "B", "choices": ["w", "x", "y", "z"]},
    {"id": "c1", "domain": "code", "prompt": "p", "tests": [{"input": "1\n", "output": "1\n"}]},
    {"id": "i1", "domain": "instruct", "prompt": "p", "instructions": [{"id": "x", "kwargs": {}}]},
]


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_roundtrip(tmp_path):
    probs = load_problems(_write(tmp_path / "a.jsonl", GOOD))
    assert [p.id for p in probs] == ["m1", "s1", "c1", "i1"]
    assert probs[0].traces == ["a", "b"] and probs[1].choices[1] == "x"
    out = tmp_path / "b.jsonl"
    assert save_problems(out, probs) == 4
    again = load_problems(out)
    assert again == probs
    # None fields are not written
    assert "choices" not in json.loads(out.read_text().splitlines()[0])


@pytest.mark.parametrize(
    "row, field",
    [
        ({"id": "m", "domain": "math", "prompt": "p"}, "answer"),
        ({"id": "m", "domain": "math", "prompt": "p", "answer": 5}, "answer"),
        ({"id": "m", "domain": "bio", "prompt": "p"}, "domain"),
        ({"domain": "math", "prompt": "p", "answer": "1"}, "id"),
        ({"id": "m", "domain": "math", "prompt": "p", "answer": "1", "trace": []}, "trace"),
        (
            {"id": "s", "domain": "stem", "prompt": "p", "answer": "E", "choices": ["a", "b"]},
            "answer",
        ),
        ({"id": "c", "domain": "code", "prompt": "p"}, "tests"),
        ({"id": "c", "domain": "code", "prompt": "p", "tests": [{"input": 1}]}, "tests[0]"),
        ({"id": "c", "domain": "code", "prompt": "p", "test_code": "x"}, "entry_point"),
        ({"id": "m", "domain": "math", "prompt": "p", "answer": "1", "traces": [1]}, "traces"),
    ],
)
def test_bad_record_names_file_line_field(tmp_path, row, field):
    path = _write(tmp_path / "bad.jsonl", [GOOD[0], GOOD[1], row])
    with pytest.raises(DataError) as e:
        load_problems(path)
    assert e.value.line == 3 and e.value.field == field
    assert str(path) in str(e.value) and ":3:" in str(e.value) and f"'{field}'" in str(e.value)


def test_invalid_json_line(tmp_path):
    path = _write(tmp_path / "bad.jsonl", [GOOD[0], "{not json", GOOD[1]])
    with pytest.raises(DataError, match=r"bad.jsonl:2: field '<json>': invalid JSON"):
        load_problems(path)


def test_skip_invalid_counts(tmp_path, caplog):
    path = _write(tmp_path / "bad.jsonl", [GOOD[0], "{", {"id": "x"}, GOOD[2]])
    probs = load_problems(path, skip_invalid=True)
    assert [p.id for p in probs] == ["m1", "c1"]
    assert any("skipped 2 invalid" in r.getMessage() for r in caplog.records)


def test_extra_keys_go_to_meta(tmp_path):
    path = _write(tmp_path / "v.jsonl", [{**GOOD[0], "response": "\\boxed{2}"}])
    with pytest.raises(DataError, match="response"):
        load_problems(path)
    (p,) = load_problems(path, extra=("response",))
    assert p.meta["response"] == "\\boxed{2}"


def test_hf_style_folder_json_and_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    d = tmp_path / "ds" / "data"
    d.mkdir(parents=True)
    (d / "part0.json").write_text(json.dumps(GOOD[:2]))
    rows = [{"id": "m9", "domain": "math", "prompt": "2+2", "answer": "4"}]
    pq.write_table(pa.Table.from_pylist(rows), d / "part1.parquet")
    (tmp_path / "ds" / "dataset_info.json").write_text("{}")
    probs = load_problems(tmp_path / "ds")
    assert sorted(p.id for p in probs) == ["m1", "m9", "s1"]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_problems(tmp_path / "nope.jsonl")


def test_problem_dataclass_defaults():
    p = Problem(id="a", domain="math", prompt="x")
    assert p.meta == {} and p.traces is None
