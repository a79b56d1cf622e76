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
        ({"id": "m", "domain": "math", "prompt": "p", "answer": [5]}, "answer"),
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


def test_extra_keys_go_to_meta(tmp_path, caplog):
    path = _write(tmp_path / "v.jsonl", [{**GOOD[0], "response": "\\boxed{2}"}])
    (p,) = load_problems(path, extra=("response",))
    assert p.meta["response"] == "\\boxed{2}"
    assert not any("not Problem fields" in r.getMessage() for r in caplog.records)


def test_hf_style_folder_json_and_parquet(tmp_path):
    import pyarrow as pa
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


def test_dataset_columns_go_to_meta_with_one_warning(tmp_path, caplog):
    """Public datasets carry extra columns; keep them, warn once."""
    rows = [{**GOOD[0], "id": f"m{i}", "source": "aops", "level": i, "url": "u"} for i in range(3)]
    probs = load_problems(_write(tmp_path / "d.jsonl", rows))
    assert [p.meta for p in probs][2] == {"source": "aops", "level": 2, "url": "u"}
    warns = [r.getMessage() for r in caplog.records if "not Problem fields" in r.getMessage()]
    assert len(warns) == 1 and "level, source, url" in warns[0]


@pytest.mark.parametrize(
    "typo, field",
    [("anwser", "answer"), ("test", "tests"), ("choice", "choices"), ("subdomian", "subdomain")],
)
def test_typo_of_a_field_is_still_an_error(tmp_path, typo, field):
    row = {"id": "m", "domain": "math", "prompt": "p", "answer": "1", typo: "x"}
    with pytest.raises(DataError, match=f"did you mean '{field}'"):
        load_problems(_write(tmp_path / "t.jsonl", [row]))


def test_numeric_answer_and_id_are_text(tmp_path):
    rows = [
        {"id": 7, "domain": "math", "prompt": "2+2", "answer": 4},
        {"id": "b", "domain": "math", "prompt": "1/2", "answer": 0.5},
        {"id": "c", "domain": "math", "prompt": "2*2", "answer": 4.0},
    ]
    probs = load_problems(_write(tmp_path / "n.jsonl", rows))
    assert [(p.id, p.answer) for p in probs] == [("7", "4"), ("b", "0.5"), ("c", "4")]


def test_duplicate_ids_warn(tmp_path, caplog):
    probs = load_problems(_write(tmp_path / "d.jsonl", [GOOD[0], GOOD[0], GOOD[1]]))
    assert len(probs) == 3
    assert any("1 id(s) appear more than once ('m1' x2)" in r.getMessage() for r in caplog.records)


def test_chat_messages_format(tmp_path):
    rows = [
        {
            "id": "a",
            "domain": "math",
            "answer": "2",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "1+1?"},
                {"role": "assistant", "content": "<think>1+1=2</think>\\boxed{2}"},
            ],
        },
        {
            "id": "b",
            "domain": "math",
            "answer": "3",
            "messages": [{"role": "user", "content": "1+2?"}],
        },
    ]
    a, b = load_problems(_write(tmp_path / "c.jsonl", rows))
    assert a.prompt == "1+1?" and a.traces == ["<think>1+1=2</think>\\boxed{2}"]
    assert a.meta == {"system": "Be brief."} and b.prompt == "1+2?" and b.traces is None
    multi = {**rows[1], "messages": rows[0]["messages"] * 2}
    with pytest.raises(DataError, match="multi-turn"):
        load_problems(_write(tmp_path / "m.jsonl", [multi]))


def test_mixture_weights_and_balanced_limit(tmp_path):
    from vibethinker.data.io import load_mixture, select

    a = _write(tmp_path / "a.jsonl", [{**GOOD[0], "id": f"a{i}"} for i in range(30)])
    b = _write(tmp_path / "b.jsonl", [{**GOOD[0], "id": f"b{i}"} for i in range(10)])
    both = load_mixture(f"{a},{b}")
    assert len(both) == 40
    mixed = load_mixture(f"{a}, {b}", [0.5, 0.5], seed=1)
    assert len(mixed) == 40 and sum(p.id.startswith("b") for p in mixed) == 20  # oversampled
    assert len({p.id for p in mixed if p.id.startswith("a")}) == 20  # no repeats while enough
    assert load_mixture(f"{a},{b}", [0.5, 0.5], seed=1) == mixed  # seeded
    with pytest.raises(ValueError, match="2 weights for 1"):
        load_mixture(str(a), [0.5, 0.5])
    probs = load_problems(_write(tmp_path / "mixed.jsonl", [*[GOOD[0]] * 10, *GOOD[1:]]))
    assert [p.domain for p in select(probs, 4)] == ["math", "stem", "code", "instruct"]
    assert [p.domain for p in select(probs, 0, ["stem", "code"])] == ["stem", "code"]
    assert len(select(probs, 6)) == 6


def test_rl_and_sft_take_a_weighted_mixture(tmp_path):
    from vibethinker.stages.rl import load_domain
    from vibethinker.stages.sft import SFTConfig, load_training_set

    a = _write(tmp_path / "a.jsonl", [{**GOOD[0], "id": f"a{i}"} for i in range(12)] + GOOD[1:])
    b = _write(tmp_path / "b.jsonl", [{**GOOD[0], "id": f"b{i}"} for i in range(4)])
    got = load_domain(f"{a},{b}", "math", weights=[1, 3], seed=0)
    assert len(got) == 16 and sum(p.id.startswith("b") for p in got) == 12
    cfg = SFTConfig(data=f"{a},{b}", data_probs=[1, 1], domains=["math"], out=str(tmp_path / "s"))
    problems, _ = load_training_set(cfg, tokenizer=None)
    assert sum(p.id.startswith("b") for p in problems) == 8  # 16 math records, half from b


@pytest.mark.parametrize(
    "name, text, line, column",
    [
        ("a.json", '[\n {"id": "a"},\n {"id": "b", "answer": }\n]\n', 3, 24),
        ("a.jsonl", json.dumps(GOOD[0]) + '\n{"id": "b", "answer": }\n', 2, 23),
        ("bom.jsonl", "\ufeff" + json.dumps(GOOD[0]) + '\n{"id": "b",, }\n', 2, 12),
    ],
)
def test_invalid_json_names_file_line_and_column(tmp_path, name, text, line, column):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_problems(path)
    assert f"{path}:{line}:" in str(e.value) and f"at column {column}" in str(e.value), e.value


# ---- rows in other tools' shapes (TRL, chat), read with a stage's defaults ----------------
def _shape(**kw):
    from vibethinker.data.shapes import RowShape

    return RowShape(**kw)


def test_trl_prompt_solution_and_prompt_completion(tmp_path):
    rows = [
        {"prompt": "1+1?", "solution": "One plus one is \\boxed{2}."},
        {"prompt": "2+2?", "completion": "<think>4</think> \\boxed{4}", "answer": 4},
        {"problem": "3+3?", "expected_answer": "6", "source": "x"},
    ]
    path = _write(tmp_path / "trl.jsonl", rows)
    a, b, c = load_problems(path, shape=_shape(domain="math", ids=True))
    assert (a.id, a.domain, a.answer, a.traces) == (
        "trl.jsonl-1",
        "math",
        "2",
        ["One plus one is \\boxed{2}."],
    )
    assert "solution" not in a.meta
    assert (b.id, b.answer, b.traces) == ("trl.jsonl-2", "4", ["<think>4</think> \\boxed{4}"])
    assert (c.prompt, c.answer, c.meta) == ("3+3?", "6", {"source": "x"})


def test_trl_conversational_prompt_completion_keeps_the_system_message(tmp_path):
    row = {
        "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}],
        "completion": [{"role": "assistant", "content": "\\boxed{2}"}],
        "gold": "2",
    }
    (p,) = load_problems(_write(tmp_path / "c.jsonl", [row]), shape=_shape(domain="math", ids=True))
    assert (p.prompt, p.traces, p.answer) == ("1+1?", ["\\boxed{2}"], "2")
    assert p.meta == {"system": "Be brief."}


def test_answer_key_names_the_gold_column(tmp_path):
    rows = [{"id": "a", "prompt": "1+1?", "label": "2", "answer": "the whole solution"}]
    (p,) = load_problems(
        _write(tmp_path / "a.jsonl", rows), shape=_shape(domain="math", answer_key="label")
    )
    assert p.answer == "2"
    with pytest.raises(DataError, match="answer_key=target"):
        load_problems(tmp_path / "a.jsonl", shape=_shape(domain="math", answer_key="target"))


def test_every_missing_field_in_one_message(tmp_path):
    path = _write(tmp_path / "t.jsonl", [{"prompt": "1+1?", "solution": "It is two."}])
    with pytest.raises(DataError) as e:
        load_problems(path)
    assert e.value.field == "id, domain" and "t.jsonl:1:" in str(e.value)
    assert "domains=math" in str(e.value) and "prompt, solution" in str(e.value)
    with pytest.raises(DataError) as e:  # a domain from the stage: the answer is still missing
        load_problems(path, shape=_shape(domain="math", ids=True))
    assert e.value.field == "answer" and "answer_key=COLUMN" in str(e.value)
    (p,) = load_problems(path, shape=_shape(domain="math", ids=True, need_gold=False))
    assert p.answer is None and p.traces == ["It is two."]  # SFT: traces only


def test_a_chat_rows_system_message_reaches_the_template_and_is_recorded(tmp_path):
    from vibethinker.models.tiny import train_tokenizer
    from vibethinker.prompts.paper import (
        MATH_SUFFIX,
        PROMPT_STYLES,
        prompt_examples,
        write_prompt_examples,
    )
    from vibethinker.stages.sft import train_render

    rows = [
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "1+1?"},
                {"role": "assistant", "content": "\\boxed{2}"},
            ]
        },
        {"prompt": "2+2?", "completion": "\\boxed{4}"},
    ]
    a, b = load_problems(
        _write(tmp_path / "c.jsonl", rows), shape=_shape(domain="math", ids=True, need_gold=False)
    )
    prompt = PROMPT_STYLES["paper"](a)
    assert prompt == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": f"1+1? {MATH_SUFFIX}"},
    ]
    assert PROMPT_STYLES["raw"](b) == "2+2?"  # no system message: the plain user turn
    tok = train_tokenizer(["Be brief. 1+1? 2+2? " + MATH_SUFFIX] * 20, vocab_size=300)
    rows = prompt_examples([a, b], PROMPT_STYLES["paper"], train_render(tok))
    path = write_prompt_examples(tmp_path / "out", rows)
    got = [json.loads(line) for line in path.read_text().splitlines()]
    seen = got[0]["rendered_prompt"].replace(" ", "")
    assert seen.startswith("<|im_start|>system\nBebrief.<|im_end|>\n<|im_start|>user\n1+1?"), seen
    assert seen.endswith("<|im_start|>assistant\n") and MATH_SUFFIX.replace(" ", "") in seen
    assert got[1]["stored_prompt"] == "2+2?" and "system" not in got[1]["rendered_prompt"]
