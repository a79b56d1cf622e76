"""The row shapes other tools write (TRL, OpenAI chat, MATH-style), read as Problem fields.

`normalise_row(row, shape, source, line)` is a pure function: a raw record in, a dict of Problem
fields out (plus any other columns, which `data/io.py` keeps in `meta`). Accepted shapes, beside
our own records (`id`, `domain`, `prompt`, ...):

- prompt + completion (TRL's SFT "prompt-completion"): the completion is a trace. Both may be
  conversational (lists of `{role, content}`), read as `messages` below.
- prompt + solution (TRL's GRPO examples, NuminaMath): the solution is a trace, and when there
  is no gold column the last `\\boxed{}` of the solution is the answer.
- messages (TRL "conversational", OpenAI chat): an optional system message, one user turn and
  an optional final assistant turn (a trace). The system text is kept in `meta["system"]` and
  given to the model through its chat template (prompts/paper.py).
- `problem` or `question` instead of `prompt` (MATH, GSM8K-style).
- the gold answer in `answer`, in a column named by the stage's `answer_key`, or in one of
  `gold`, `expected_answer`, `final_answer`, `ground_truth` (a text or a number).

Defaults a stage's keys can give (`RowShape`): a row without `domain` takes the stage's domain
(rl `domain=math`; sft/eval `domains=math` when it names one), and a row without `id` is named
`<file name>-<line>`. Without those, a missing `id`/`domain` is an error like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vibethinker.verifiers.extract import last_boxed

PROMPT_COLUMNS = ("problem", "question")
GOLD_COLUMNS = ("gold", "expected_answer", "final_answer", "ground_truth")
TRACE_COLUMNS = ("completion", "solution")


class ShapeError(ValueError):
    """A row that matches no accepted shape; `field` names the column at fault."""

    def __init__(self, field: str, msg: str):
        self.field, self.msg = field, msg
        super().__init__(f"field '{field}': {msg}")


@dataclass(frozen=True)
class RowShape:
    """How a stage reads rows that are not our own records (its keys fill these in)."""

    domain: str = ""  # the domain of rows without one ("" = a missing domain is an error)
    answer_key: str = ""  # the column holding the gold answer ("" = `answer` or GOLD_COLUMNS)
    ids: bool = False  # a row without `id` is named <file name>-<line>
    need_gold: bool = True  # False: math/stem rows may lack an answer (SFT trains on traces only)


def from_messages(row: dict) -> dict:
    """A chat row (`messages: [{role, content}, ...]`) -> prompt (+ traces): an optional system
    message, one user turn, and an optional final assistant turn (its text becomes a trace). The
    system text is kept in meta["system"]."""
    msgs = row.get("messages")
    if not isinstance(msgs, list) or not all(
        isinstance(m, dict) and isinstance(m.get("content"), str) for m in msgs
    ):
        raise ShapeError("messages", "expected a list of {role, content: str}")
    roles = [m.get("role") for m in msgs]
    body = roles[1:] if roles[:1] == ["system"] else roles
    if body not in (["user"], ["user", "assistant"]):
        raise ShapeError(
            "messages",
            f"expected [system], user, [assistant] turns, got {roles} "
            "(multi-turn conversations are not supported)",
        )
    if "prompt" in row:
        raise ShapeError("messages", "give either `prompt` or `messages`, not both")
    out = {k: v for k, v in row.items() if k != "messages"}
    out["prompt"] = msgs[roles.index("user")]["content"]
    if roles[-1] == "assistant":
        out["traces"] = [*(row.get("traces") or []), msgs[-1]["content"]]
    if roles[0] == "system":
        out["meta"] = {**(row.get("meta") or {}), "system": msgs[0]["content"]}
    return out


def _conversational(row: dict) -> dict:
    """TRL's conversational prompt-completion: `prompt` (and `completion`) are message lists."""
    msgs = list(row["prompt"]) + list(row.get("completion") or [])
    rest = {k: v for k, v in row.items() if k not in ("prompt", "completion")}
    return from_messages({**rest, "messages": msgs})


def _gold(row: dict, shape: RowShape) -> dict:
    """Move the gold answer into `answer`: the `answer_key` column, else a known gold column."""
    col = shape.answer_key
    if col:
        if col not in row:
            raise ShapeError(
                col,
                f"missing (answer_key={col} names it as the gold column; this "
                f"row has {', '.join(sorted(row))})",
            )
    elif row.get("answer") in (None, ""):
        col = next((c for c in GOLD_COLUMNS if isinstance(row.get(c), (str, int, float))), "")
    if not col or col == "answer":
        return row
    value = row[col]
    return {k: v for k, v in row.items() if k not in (col, "answer")} | {"answer": value}


def normalise_row(row: Any, shape: RowShape, source: str = "", line: int = 0) -> Any:
    """A raw record -> a dict of Problem fields (other columns are left for `meta`). A record
    that is not a dict is returned as is (the caller reports it)."""
    if not isinstance(row, dict):
        return row
    if isinstance(row.get("prompt"), list):
        row = _conversational(row)
    elif "messages" in row:
        row = from_messages(row)
    row = dict(row)
    if row.get("prompt") in (None, ""):
        col = next((c for c in PROMPT_COLUMNS if isinstance(row.get(c), str) and row[c]), None)
        if col is not None:
            row["prompt"] = row.pop(col)
    row = _gold(row, shape)
    for col in TRACE_COLUMNS:
        text = row.get(col)
        if isinstance(text, str) and text:
            del row[col]
            row["traces"] = [*(row.get("traces") or []), text]
            if col == "solution" and row.get("answer") in (None, ""):
                boxed = last_boxed(text)
                if boxed:
                    row["answer"] = boxed
    if row.get("domain") in (None, "") and shape.domain:
        row["domain"] = shape.domain
    if row.get("id") in (None, "") and shape.ids:
        row["id"] = f"{source}-{line}"
    return row
