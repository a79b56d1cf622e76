"""Pull the final answer out of a response: the answer part, the last `\\boxed{}`, the last code block.

Pure string functions shared by every verifier. They never raise and run in linear time, so a
megabyte response costs milliseconds. Nothing inside the reasoning (`<think>...</think>`) counts as
an answer: the model must commit to one after it stops thinking.
"""

from __future__ import annotations

import re

from vibethinker.verifiers.retraction import arithmetic, retraction

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# anchored at one position, two disjoint greedy classes: linear, no backtracking
_FENCE_LANG_RE = re.compile(r"[ \t]*([A-Za-z0-9_+.-]*)")
_PY_LANGS = {"python", "py", "python3", "py3"}
_BRACE_RE = re.compile(r"\\[{}]|[{}]")  # escaped braces are content, not structure


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


def _box_at(text: str, start: int) -> tuple[bool, str | None]:
    """The box command at `start` (`\\boxed` or `\\fbox`): (is a box, its content or None).

    `\\boxed {x}` and `\\boxed{x}` are the same; `\\boxed 5` (no brace) is LaTeX for one token;
    `\\boxedfoo` is not a box. An unbalanced brace group gives (True, None)."""
    i = start + (6 if text.startswith("\\boxed", start) else 5)
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == "{":
        return True, _balanced(text, i, None)
    if i < len(text) and text[i] not in "{}\\" and not text[i].isalpha() and not text[i].isspace():
        return True, text[i]
    return False, None


def _box_starts(text: str) -> list[int]:
    """Positions of every `\\boxed` / `\\fbox` command, in order (one linear pass per name)."""
    out: list[int] = []
    for name in ("\\boxed", "\\fbox"):
        i = text.find(name)
        while i >= 0:
            out.append(i)
            i = text.find(name, i + len(name))
    return sorted(out)


def last_boxed(text: str, max_len: int | None = None) -> str | None:
    """Content of the last box (`\\boxed{...}`, `\\fbox{...}`, `\\boxed 5`), else None.

    This is the one notion of "a boxed answer" (`all_boxed` lists the same boxes). An unbalanced
    last box (truncated output) gives None rather than falling back to an earlier box: the final
    commitment is what counts. `max_len` caps the content length (None if longer).
    """
    span = _last_box(text)
    if span is None:
        return None
    content, _ = span
    if content is not None and max_len is not None and len(content) > max_len:
        return None
    return content


def after_last_box(text: str) -> str:
    """The text after the last box's closing brace (`last_boxed`'s box); "" when there is no
    balanced last box."""
    span = _last_box(text)
    return "" if span is None or span[0] is None else text[span[1] :]


# "the final answer is $41$", "Answer: 41", "**Final answer:** \\(41\\)": bounded quantifiers,
# applied to a bounded window, so the scan stays linear
STATED_WINDOW = 2000  # characters after the last box searched for a restated final answer
_STATED_RE = re.compile(
    r"\banswer\s*(?:\*\*)?\s*(?:is|:|=|would be|should be|becomes)\s*:?\s*(?:\*\*)?\s*"
    r"(?:\$\$?([^$]{1,300})\$\$?|\\\((.{1,300}?)\\\)|\\\[(.{1,300}?)\\\]|\*\*([^*]{1,300})\*\*"
    r"|([-+]?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?![\w^{\\]|\.\d)|(\([A-E]\))(?!\w))",
    re.IGNORECASE | re.DOTALL,
)

_SENTENCE_END_RE = re.compile(r"\n|\.(?:\s|$)")
_INLINE_MATH_RE = re.compile(r"\$|\\[()]|\*\*")
_MORE_RE = re.compile(r"\s*(?:,\s*\$?[-+\d\\]|and\b|or\b|\\pm|\$?\s*\\text\{\s*(?:and|or)\b)")


def stated_answer(text: str) -> str | None:
    """The last final answer stated in prose in `text` (`the final answer is $41$`, `Answer: 41`,
    `the answer is (D)`): the math of an inline formula, bold text, a bare number or a choice
    label, or a whole listing to the end of its sentence (`4 or 5`, `$-2$ and $1$`); or, when a
    retraction (`retraction`) comes after the last such statement, the retraction's value. None
    when there is none. Only the first STATED_WINDOW characters are read."""
    found, at = None, -1
    window = text[:STATED_WINDOW]
    for m in _STATED_RE.finditer(window):
        k = next(i for i, g in enumerate(m.groups(), 1) if g is not None)
        if arithmetic(m.group(k), window[m.end() : m.end() + 8] if k == 5 else ""):
            continue  # "Let me verify the answer: 4 + 3 = 7": a check, not an answer
        found, at = m.group(k), m.start()
        if _MORE_RE.match(window, m.end()):  # `2 and 3`, `4 or 5`, `$2$, $3$`: the whole listing
            rest = _SENTENCE_END_RE.split(window[m.start(k) : m.start(k) + 300], maxsplit=1)[0]
            found = _INLINE_MATH_RE.sub("", rest)
        found = found.strip().rstrip(".,;:")
    back = retraction(window, STATED_WINDOW)
    if back is not None and back[1] is not None and back[0] > at:
        found = back[1]
    return found or None


def retracted(text: str) -> bool:
    """Whether `text` (what follows the answer) takes the answer back without giving another:
    a negation ("That's wrong.", "I made a mistake") and no value or stated answer after it."""
    back = retraction(text)
    return back is not None and back[1] is None and stated_answer(text) is None


def _last_box(text: str) -> tuple[str | None, int] | None:
    """(content or None if unbalanced, index just past the box) of the last box command."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    while start >= 0:
        is_box, content = _box_at(text, start)
        if is_box:
            if content is None:
                return None, len(text)
            i = start + (6 if text.startswith("\\boxed", start) else 5)
            while text[i] == " ":
                i += 1
            return content, i + len(content) + (2 if text[i] == "{" else 0)
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
    for lang, body in fenced_blocks(part):
        if lang.lower() in _PY_LANGS or lang == "":
            found = body
    return found


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every closed fenced block as (language tag, body), in order.

    A block opens at three backticks, takes the word right after them (spaces/tabs allowed
    before it) as its language, skips the rest of that line, and runs to the next three
    backticks. A scanner rather than a regex: each character is looked at a bounded number of
    times (no position is rescanned after a failed start), so a megabyte of backticks costs
    milliseconds. When an opening fence has no newline or no closing fence after it, no later one
    can have either, so the scan stops there.
    """
    out: list[tuple[str, str]] = []
    pos = 0
    while True:
        i = text.find("```", pos)
        if i < 0:
            return out
        m = _FENCE_LANG_RE.match(text, i + 3)
        j, k = m.start(1), m.end(1)
        nl = text.find("\n", k)
        if nl < 0:
            return out
        close = text.find("```", nl + 1)
        if close < 0:
            return out
        out.append((text[j:k], text[nl + 1 : close]))
        pos = close + 3


def all_boxed(text: str, limit: int = 20, max_len: int | None = None) -> list[str]:
    """Contents of every balanced box in `text`, in order (at most `limit`); the boxes are the
    ones `last_boxed` reads (`\\boxed{}`, `\\fbox{}`, `\\boxed 5`), nested ones included.

    One pass over the braces with a stack (nested or unclosed boxes would make a scan per box
    quadratic)."""
    found: list[tuple[int, int, int]] = []  # (command start, content start, content end)
    brace_box: dict[int, int] = {}  # index of a box's "{" -> the command's start
    for start in _box_starts(text):
        i = start + (6 if text.startswith("\\boxed", start) else 5)
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            brace_box[i] = start
        else:
            is_box, content = _box_at(text, start)
            if is_box and content is not None:
                found.append((start, i, i + 1))
    if brace_box:
        stack: list[int] = []
        for m in _BRACE_RE.finditer(text, min(brace_box)):
            tok = m.group(0)
            if tok == "{":
                stack.append(m.start())
            elif tok == "}" and stack:
                o = stack.pop()
                if o in brace_box:
                    found.append((brace_box[o], o + 1, m.start()))
    found.sort()
    out = []
    for _, a, b in found:
        if max_len is None or b - a <= max_len:
            out.append(text[a:b])
            if len(out) >= limit:
                break
    return out


# ---- answer-location rules: where a math response states its final answer ----

# One rule per source style; `boxed` is the paper's (the RL default). `auto` tries AUTO_ORDER and
# takes the first rule that finds an answer; `last_line` is never tried by `auto` (any prose
# line would be read as an answer). docs/VERIFY_MATH.md states what each accepts.
ANSWER_FORMATS = ("boxed", "answer_line", "final_answer", "answer_colon", "last_line", "auto")
AUTO_ORDER = ("boxed", "answer_line", "final_answer", "answer_colon")
# PRM800K / GPT-4: a `# Answer` heading line, the answer on the next non-empty line
_ANSWER_LINE_RE = re.compile(
    r"^[ \t]*#{1,6}[ \t]*(?:final[ \t]+)?answer[ \t]*:?[ \t]*$", re.I | re.M
)
# Minerva / lm-eval: "Final Answer: The final answer is $X$. I hope it is correct."
_FINAL_ANSWER_RE = re.compile(
    r"the final answer is[ \t]*(\$\$?[^$\n]{1,500}\$\$?|[^\n]{1,500}?)"
    r"[ \t]*(?:\.?[ \t]*I hope it is correct\.?|\.?[ \t]*$)",
    re.I | re.M,
)
# "Answer: X" opening a line (bold markers allowed): the rest of the line
_ANSWER_COLON_RE = re.compile(
    r"^[ \t]*(?:\*\*)?[ \t]*(?:final[ \t]+)?answer[ \t]*:[ \t]*(?:\*\*)?[ \t]*(\S[^\n]{0,500})$",
    re.I | re.M,
)
_MATH_SPAN_RE = re.compile(
    r"\$\$?([^$]{1,500}?)\$\$?|\\\((.{1,500}?)\\\)|\\\[(.{1,500}?)\\\]", re.S
)


def answer_format(problem) -> str:
    """The answer-location rule of a math row: its `meta["answer_format"]` (set by the eval and
    verify stages' `answer_format` key, or by the data), else `boxed`, the paper's format."""
    meta = getattr(problem, "meta", None) or {}
    return str(meta.get("answer_format") or "boxed")


def clean_answer(text: str) -> str:
    """A located answer without its wrapping: the last box in it when it has one; else its only
    math span (`$5$`, `\\(5\\)`, `\\[5\\]`, `The answer is $5$.`) when it has exactly one; else
    the text with bold markers and end punctuation stripped (`5.`, `**5**`)."""
    text = text.strip()
    box = last_boxed(text)
    if box is not None:
        return box.strip()
    guarded = text.replace("\\$", "\0")  # an escaped dollar (`\\$32`) is content, not a delimiter
    spans = _MATH_SPAN_RE.findall(guarded)
    if len(spans) == 1:
        return next(g for g in spans[0] if g).strip().replace("\0", "\\$")
    return text.replace("**", "").strip().rstrip(".;,").strip()


def locate_answer(part: str, rule: str = "boxed") -> tuple[str, int] | None:
    """(the final answer, the index just past it in `part`) under one answer-location rule, or
    None when the rule finds none. `part` is the answer part (after `</think>`).
    - boxed: the last box (`last_boxed`);
    - answer_line: the first non-empty line after the last `# Answer` heading line;
    - final_answer: what follows the last "The final answer is" up to ". I hope it is correct"
      or the end of its line;
    - answer_colon: the rest of the last line that opens with `Answer:` (or `**Answer:**`);
    - last_line: the last non-empty line;
    - auto: AUTO_ORDER, the first rule that finds an answer.
    Every rule but `boxed` passes its text through `clean_answer`. Raises ValueError on an
    unknown rule."""
    if rule == "auto":
        for r in AUTO_ORDER:
            found = locate_answer(part, r)
            if found is not None:
                return found
        return None
    if rule == "boxed":
        span = _last_box(part)
        return None if span is None or span[0] is None else (span[0], span[1])
    if rule == "answer_line":
        heads = list(_ANSWER_LINE_RE.finditer(part))
        if not heads:
            return None
        rest = part[heads[-1].end() :]
        m = re.search(r"\S[^\n]*", rest)
        return None if m is None else _cleaned(m.group(0), heads[-1].end() + m.end())
    if rule in ("final_answer", "answer_colon"):
        pattern = _FINAL_ANSWER_RE if rule == "final_answer" else _ANSWER_COLON_RE
        matches = list(pattern.finditer(part))
        return _cleaned(matches[-1].group(1), matches[-1].end()) if matches else None
    if rule == "last_line":
        lines = [ln for ln in part.rstrip().splitlines() if ln.strip()]
        return _cleaned(lines[-1], len(part)) if lines else None
    raise ValueError(f"unknown answer format {rule!r}; known: {', '.join(ANSWER_FORMATS)}")


def _cleaned(text: str, end: int) -> tuple[str, int] | None:
    answer = clean_answer(text)
    return (answer, end) if answer else None


def final_answer(response: str, rule: str = "boxed", max_len: int | None = None) -> str | None:
    """The final answer of a response under `rule` (`final_boxed` for `boxed`): None when there
    is no answer part (cut off inside `<think>`), no answer, or a longer one than `max_len`."""
    part = answer_part(response)
    if part is None or rule not in ANSWER_FORMATS:
        return None
    found = locate_answer(part, rule)
    if found is None or (max_len is not None and len(found[0]) > max_len):
        return None
    return found[0]
