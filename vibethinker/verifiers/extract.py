"""Pull the final answer out of a response: the answer part, the last `\\boxed{}`, the last code block.

Pure string functions shared by every verifier. They never raise and run in linear time, so a
megabyte response costs milliseconds. Nothing inside the reasoning (`<think>...</think>`) counts as
an answer: the model must commit to one after it stops thinking.
"""

from __future__ import annotations

import re

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PY_LANGS = {"python", "py", "python3", "py3"}


def answer_part(response: str) -> str | None:
    """The text after the last `</think>`; the whole response when it has no think block.

    An unclosed `<think>` (the model was cut off while reasoning) means there is no answer part:
    returns None.
    """
    close = response.rfind(THINK_CLOSE)
    if close >= 0:
        return response[close + len(THINK_CLOSE) :]
    if THINK_OPEN in response:
        return None
    return response


def last_boxed(text: str, max_len: int | None = None) -> str | None:
    """Content of the last `\\boxed{...}` (or `\\fbox{...}`) with balanced braces, else None.

    An unbalanced last box (truncated output) gives None rather than falling back to an earlier
    box: the final commitment is what counts. `max_len` caps the content length (None if longer).
    """
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    while start >= 0:
        i = start + (6 if text.startswith("\\boxed", start) else 5)
        # `\boxed {x}` and `\boxed{x}` are both fine; `\boxed 5` (no brace) is LaTeX for one token.
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            return _balanced(text, i, max_len)
        if i < len(text) and text[i] not in "{}\\" and not text[i].isalpha():
            return text[i]
        # `\boxedfoo`: not a box command; look further left.
        start = max(text.rfind("\\boxed", 0, start), text.rfind("\\fbox", 0, start))
    return None


def _balanced(text: str, open_idx: int, max_len: int | None) -> str | None:
    depth = 0
    i = open_idx
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "{}":
            i += 2  # escaped brace \{ \} is content, not structure
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                content = text[open_idx + 1 : i]
                if max_len is not None and len(content) > max_len:
                    return None
                return content
        i += 1
    return None


def final_boxed(response: str, max_len: int | None = None) -> str | None:
    """The last `\\boxed{}` of the answer part (None if no answer part or no box)."""
    part = answer_part(response)
    return None if part is None else last_boxed(part, max_len)


def last_python_block(response: str) -> str | None:
    """The last fenced code block tagged python (or untagged) in the answer part, else None.

    Blocks tagged with another language (```bash, ```text) are skipped. An unclosed final fence
    (truncated output) is ignored. Searched in the answer part so draft code inside `<think>`
    does not count.
    """
    part = answer_part(response)
    if part is None:
        return None
    found = None
    for m in _FENCE_RE.finditer(part):
        lang = m.group(1).lower()
        if lang in _PY_LANGS or lang == "":
            found = m.group(2)
    return found


def all_boxed(text: str, limit: int = 20, max_len: int | None = None) -> list[str]:
    """Contents of every balanced `\\boxed{...}` in `text`, in order (at most `limit`)."""
    out: list[str] = []
    start = text.find("\\boxed")
    while start >= 0 and len(out) < limit:
        i = start + 6
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            content = _balanced(text, i, max_len)
            if content is not None:
                out.append(content)
        start = text.find("\\boxed", start + 6)
    return out
