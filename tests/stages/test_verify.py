"""The `verify` stage through the CLI: every row gets a verdict and the batch is written."""

from __future__ import annotations

import json

from vibethinker.cli import main


def test_a_lone_surrogate_gets_its_own_verdict_and_the_rest_is_written(tmp_path, capsys):
    # JSON's "\ud800" decodes to a lone surrogate: no tokenizer produces one. Before, every
    # check ran and then writing the output failed, losing every verdict.
    rows = [
        {"id": "a", "domain": "math", "prompt": "1+1?", "answer": "2", "response": "\\boxed{2}"},
        {
            "id": "b",
            "domain": "math",
            "prompt": "1+1?",
            "answer": "2",
            "response": "\ud800\\boxed{2}",
        },
        {"id": "c", "domain": "math", "prompt": "2+2?", "answer": "4", "response": "\\boxed{5}"},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))  # ASCII: "\ud800" escaped
    out = tmp_path / "out.jsonl"
    main(["verify", str(src), f"out={out}", "workers=1"])
    got = [json.loads(ln) for ln in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["correct"], r["reason"]) for r in got] == [
        ("a", True, "ok"),
        ("b", False, "invalid_text"),
        ("c", False, "wrong_answer"),
    ]
    assert got[1]["response"] == rows[1]["response"]  # kept as written (a \ud800 escape)
    summary = json.loads((tmp_path / "out.summary.json").read_text())
    assert summary["reasons"]["invalid_text"] == 1 and summary["n"] == 3
    assert "invalid_text" in capsys.readouterr().err
