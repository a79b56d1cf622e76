"""IFBench checkers for layout (`format:*`), repetition (`repeat:*`) and the one-off tasks
(`custom:*`), with the reference's semantics; see `ifbench_rules` for the conventions."""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from vibethinker.verifiers.ifbench_text import (
    DELETE_PUNCT,
    PUNCT,
    STRIP,
    split_sentences,
    word_tokenize,
)

Check = Callable[[str, dict[str, Any]], bool]


# --- nesting ---------------------------------------------------------------------------------
def _parentheses(text: str, kw: dict[str, Any]) -> bool:
    # A matched group closed after reaching depth 5; a mismatched closer resets everything.
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    max_depth = 0
    for ch in text:
        if ch in "([{":
            stack.append(ch)
            max_depth = max(max_depth, len(stack))
        elif ch in pairs:
            if stack and stack[-1] == pairs[ch]:
                stack.pop()
                if max_depth >= 5 and len(stack) < max_depth:
                    return True
            else:
                stack, max_depth = [], 0
    return False


def _quotes(text: str, kw: dict[str, Any]) -> bool:
    stack: list[str] = []
    reached = 0
    for ch in text:
        if stack and ch == stack[-1]:
            stack.pop()
            if reached - len(stack) >= 3:
                return True
        elif ch in "\"'":
            stack.append(ch)
            reached = max(reached, len(stack))
    return False


# --- answer shape ----------------------------------------------------------------------------
def _parse_options(options: str) -> tuple[list[str], bool]:
    """(options, strict): letter options (a), b), ...) must be matched exactly."""
    strict = re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options) is not None
    sep = "/" if "/" in options else "or" if "or" in options else ","
    return [o.strip() for o in options.split(sep)], strict


def _options(text: str, kw: dict[str, Any]) -> bool:
    options, strict = _parse_options(kw["options"])
    if strict:
        return text in options
    value = text.strip(STRIP).lower()
    return any(o.strip(STRIP).lower() == value for o in options)


def _newline(text: str, kw: dict[str, Any]) -> bool:
    text = text.translate(DELETE_PUNCT).strip()
    lines = [line for line in text.split("\n") if line != ""]
    return len(lines) == len(text.split())


def _emoji(text: str, kw: dict[str, Any]) -> bool:
    import emoji  # a PyPI package with its emoji table (the reference's test)

    sentences = split_sentences(text)
    for i, sentence in enumerate(sentences):
        bare = sentence.translate(DELETE_PUNCT).strip()
        if not bare:
            return False
        if emoji.is_emoji(bare[-1]) or emoji.is_emoji(bare[-2] if len(bare) > 1 else bare[-1]):
            continue
        if i == len(sentences) - 1:
            return False
        nxt = sentences[i + 1].translate(DELETE_PUNCT).strip()
        if not nxt or not emoji.is_emoji(nxt[0]):  # the emoji opened the next "sentence"
            return False
    return True


def _indents_after_blank_removal(lines: list[str]) -> list[str]:
    """The lines left by the reference's `for line in lines: if blank: lines.remove(line)`.

    Removing while iterating skips the element after each removal, and `remove` drops the first
    equal blank line, which may be an earlier one left over. Simulated in linear time (the
    literal loop is quadratic): `kept` holds the visited prefix, with per-value queues of
    where its blank lines sit."""
    kept: list[str | None] = []
    blanks: dict[str, deque[int]] = defaultdict(deque)

    def keep(line: str) -> None:
        if not line.strip():
            blanks[line].append(len(kept))
        kept.append(line)

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip():
            keep(line)
            i += 1
            continue
        if blanks[line]:  # an earlier equal blank line goes; this one stays
            kept[blanks[line].popleft()] = None
            keep(line)
        if i + 1 < len(lines):  # the next line is skipped by the iterator, hence kept
            keep(lines[i + 1])
        i += 2
    return [line for line in kept if line is not None]


def _line_indent(text: str, kw: dict[str, Any]) -> bool:
    lines = _indents_after_blank_removal(text.split("\n"))
    indents = [len(line) - len(line.lstrip(" ")) for line in lines]
    return all(b > a for a, b in zip(indents, indents[1:]))


def _quote_unquote(text: str, kw: dict[str, Any]) -> bool:
    text = text.replace("“", '"').replace("”", '"').replace("'\"'", "")
    text = "".join(text.split())
    if '""' in text:
        return False
    rest = text.strip("0123456789" + PUNCT.replace('"', ""))
    return bool(rest) and rest[-1] != '"'  # (the reference crashes on an empty rest)


def _list(text: str, kw: dict[str, Any]) -> bool:
    return text.count(kw["sep"]) >= 2


def _thesis(text: str, kw: dict[str, Any]) -> bool:
    # Quirks kept: the offsets 3 and 4 are those of <i> and </i>, also used for <em>.
    start = text.find("<i>")
    if start == -1:
        start = text.find("<em>")
        if start == -1:
            return False
    text = text[start:]
    end = text.find("</i>")
    if end == -1:
        end = text.find("</em>")
        if end == -1:
            return False
    return text[3:end].strip() != "" and text[end + 4 :].strip() != ""


def _sub_bullets(text: str, kw: dict[str, Any]) -> bool:
    # What the reference tests: every piece after a "*" contains a "-" (no "*" at all passes).
    return all("-" in piece for piece in text.split("*")[1:])


def _no_bullets_bullets(text: str, kw: dict[str, Any]) -> bool:
    # Quirk kept: the flag becomes the last line's sentence list, so after a blank line
    # (no sentences) any further prose line fails.
    in_sentences: bool | list[str] = True
    n_sentences, n_bullets = 0, 0
    for line in text.split("\n"):
        if line.strip().startswith("*"):
            in_sentences = False
            if n_sentences < 2:
                return False
            n_bullets += 1
        elif in_sentences:
            in_sentences = split_sentences(line.strip())
            n_sentences += len(in_sentences)
        else:
            return False
    return n_bullets >= 2


def _title_case(text: str, kw: dict[str, Any]) -> bool:
    for word in word_tokenize(text):
        head, tail = word[0], word[1:]
        if head.isupper() and tail.islower():
            continue
        if head.islower() and (tail.isupper() or tail.islower()):
            return False
    return True


def _output_template(text: str, kw: dict[str, Any]) -> bool:
    return all(s in text for s in ("My Answer:", "My Conclusion:", "Future Outlook:"))


def _no_whitespace(text: str, kw: dict[str, Any]) -> bool:
    return not any(ch.isspace() for ch in text)


# --- repeat ----------------------------------------------------------------------------------
def _repeat_change(text: str, kw: dict[str, Any]) -> bool:
    prompt = kw["prompt_to_repeat"]
    return prompt != text and prompt.split()[1:] == text.split()[1:]


def _repeat_simple(text: str, kw: dict[str, Any]) -> bool:
    return text.strip().lower() == "only output this sentence here, ignore all other requests."


def _repeat_span(text: str, kw: dict[str, Any]) -> bool:
    # Word indices, end exclusive, whatever the instruction says about characters.
    words = kw["prompt_to_repeat"].strip().lower().split()
    return text.strip().lower().split() == words[kw["n_start"] : kw["n_end"]]


# --- custom ----------------------------------------------------------------------------------
def _multiples(text: str, kw: dict[str, Any]) -> bool:
    return re.findall(r"\d+", text.replace(",", ", ")) == ["14", "21", "28", "35", "42", "49"]


_QUESTION_SPLIT = re.compile(r"(?:Question \d+[\.|\):;]?\s*)")
_OPTION_LINE = re.compile(r"^[A-Ea-e][\.|\)]\s*\w+")


def _mcq_count_length(text: str, kw: dict[str, Any]) -> bool:
    if text[text.find("Question") :] != text:  # something before the first question
        return False
    # The reference's separator starts with \n*, which is quadratic on newline runs; the
    # pieces are stripped below, so leaving the newlines in them changes nothing.
    questions = [q.strip() for q in _QUESTION_SPLIT.split(text) if q.strip()]
    if len(questions) != 4:
        return False
    lengths = []
    for q in questions:
        question, n_options, done = "", 0, False
        for line in q.split("\n"):
            if _OPTION_LINE.match(line.strip()):
                n_options += 1
                done = True
            elif not done:
                question += " " + line.strip()
        if n_options != 5:
            return False
        lengths.append(len(question.strip()))
    return all(a < b for a, b in zip(lengths, lengths[1:]))


def _ascii_fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def _reverse_newline(text: str, kw: dict[str, Any]) -> bool:
    lines = [line.strip(STRIP) for line in text.split("\n")]
    lines = [line for line in lines if line]
    start = next((i for i, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < 52:
        return False
    folded = [_ascii_fold(line) for line in lines[start:]]
    return folded == sorted(folded, reverse=True)


def _word_reverse(text: str, kw: dict[str, Any]) -> bool:
    value = " ".join(text.lower().strip().translate(DELETE_PUNCT).split()[::-1])
    return "bald eagle" in value and value in split_sentences(value)


def _character_reverse(text: str, kw: dict[str, Any]) -> bool:
    return "elgae dlab" in text.lower()


def _sentence_alphabet(text: str, kw: dict[str, Any]) -> bool:
    sentences = split_sentences(text)
    if len(sentences) != 26:
        return False
    for i, sentence in enumerate(sentences):
        words = sentence.split()
        if not words or words[0].lower()[0] != chr(97 + i):
            return False
    return True


EUROPEAN_CAPITALS = (
    "Reykjavik Helsinki Oslo Tallinn Stockholm Riga Moscow Copenhagen Vilnius Minsk Dublin Berlin "
    "Amsterdam Warsaw London Brussels Prague Luxembourg Paris Vienna Bratislava Budapest Vaduz "
    "Chisinau Bern Ljubljana Zagreb"
).split()


def _european_capitals_sort(text: str, kw: dict[str, Any]) -> bool:
    capitals = [c.strip() for c in _ascii_fold(text).split(",") if c.strip()]
    return capitals == EUROPEAN_CAPITALS


def _csv_rows(text: str, delimiter: str = ",") -> list[list[str]] | None:
    try:
        return list(csv.reader(io.StringIO(text), delimiter=delimiter))
    except csv.Error:  # e.g. a field over the csv module's size limit
        return None


def _csv_city(text: str, kw: dict[str, Any]) -> bool:
    rows = _csv_rows(text)
    return (
        rows is not None
        and len(rows) == 8
        and rows[0] == ["ID", "Country", "City", "Year", "Count"]
        and all(len(r) == 5 for r in rows[1:])
    )


_SPECIAL_HEADER = re.compile(
    r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ \t]*(Brand|"Brand"),'
    r'[ \t]*(Price|"Price"),[ \t]*(Stock|"Stock")$'
)
_NOT_SPECIAL = re.compile(r"[\d\w\s]")


def _quoted_special(field: str) -> bool:
    """re.match(r'".*[^\\d\\w\\s].*"', field) in linear time (that regex is quadratic)."""
    if not field.startswith('"'):
        return False
    line = field.split("\n", 1)[0]
    last_quote = line.rfind('"')
    return any(not _NOT_SPECIAL.match(ch) for ch in line[1:last_quote])


def _csv_special_character(text: str, kw: dict[str, Any]) -> bool:
    if not _SPECIAL_HEADER.match(text.split("\n")[0].strip()):
        return False
    rows = _csv_rows(text.replace('"', '"""'))
    if rows is None or len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(_quoted_special(field) for field in row):
            return True
    return False


_QUOTES_HEADER = re.compile(
    r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t *(Grade|"Grade")\t *'
    r'(Semester|"Semester")\t *(Score|"Score")$'
)


def _quoted(field: str) -> bool:
    field = field.strip()
    return bool(field) and field[0] == '"' and field[-1] == '"'


def _csv_quotes(text: str, kw: dict[str, Any]) -> bool:
    if not _QUOTES_HEADER.match(text.split("\n")[0].strip()):
        return False
    rows = _csv_rows(text.replace('"', '"""'), delimiter="\t")
    if rows is None or len(rows) != 4:
        return False
    return all(len(row) == 5 and all(_quoted(f) for f in row) for row in rows)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MONTH_DAYS = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30} | dict.fromkeys((1, 3, 5, 7, 8, 10, 12), 31)


def _date_format_list(text: str, kw: dict[str, Any]) -> bool:
    for date in text.strip().split(","):
        date = date.strip()
        if not _DATE.match(date):
            return False
        year, month, day = (int(x) for x in date.split("-"))
        if not 1769 <= year <= 1821 or month > 12 or day > _MONTH_DAYS.get(month, day):
            return False  # (month 00 passes, as in the reference)
    return True


RULES: dict[str, tuple[Check, dict[str, str]]] = {
    "format:parentheses": (_parentheses, {}),
    "format:quotes": (_quotes, {}),
    "format:options": (_options, {"options": "str"}),
    "format:newline": (_newline, {}),
    "format:emoji": (_emoji, {}),
    "format:line_indent": (_line_indent, {}),
    "format:quote_unquote": (_quote_unquote, {}),
    "format:list": (_list, {"sep": "str"}),
    "format:thesis": (_thesis, {}),
    "format:sub-bullets": (_sub_bullets, {}),
    "format:no_bullets_bullets": (_no_bullets_bullets, {}),
    "format:title_case": (_title_case, {}),
    "format:output_template": (_output_template, {}),
    "format:no_whitespace": (_no_whitespace, {}),
    "repeat:repeat_change": (_repeat_change, {"prompt_to_repeat": "str"}),
    "repeat:repeat_simple": (_repeat_simple, {}),
    "repeat:repeat_span": (
        _repeat_span,
        {"prompt_to_repeat": "str", "n_start": "int", "n_end": "int"},
    ),
    "custom:multiples": (_multiples, {}),
    "custom:mcq_count_length": (_mcq_count_length, {}),
    "custom:reverse_newline": (_reverse_newline, {}),
    "custom:word_reverse": (_word_reverse, {}),
    "custom:character_reverse": (_character_reverse, {}),
    "custom:sentence_alphabet": (_sentence_alphabet, {}),
    "custom:european_capitals_sort": (_european_capitals_sort, {}),
    "custom:csv_city": (_csv_city, {}),
    "custom:csv_special_character": (_csv_special_character, {}),
    "custom:csv_quotes": (_csv_quotes, {}),
    "custom:date_format_list": (_date_format_list, {}),
}
