"""The 25 IFEval instruction checkers, with IFEval's ids and kwargs semantics (the 58 IFBench ids
are registered into the same RULES table at the end of this file, from ifbench_rules.py).

Each rule is a pure function `(text, kwargs) -> bool` ("is the instruction followed?") whose
behaviour matches google-research `instruction_following_eval/instructions.py` (strict mode),
rewritten here so that it runs offline (text measures in `ifeval_text`: the reference's own
nltk Punkt sentences, nltk word tokens and langdetect). Departures, on purpose:
- keywords, forbidden words, postscript markers and section splitters are matched literally
  (the reference pastes them into a regex unescaped; a `+` or `.` in a keyword would misfire);
- missing or malformed kwargs are an error (`normalize_kwargs` raises ValueError), where the
  reference would silently draw random values;
- langdetect is seeded (`ifeval_text.detect_language`): the reference leaves it unseeded, so its
  verdict on a borderline text can change from run to run; ours does not.

`RULES` maps each instruction id to its checker and its kwargs schema.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vibethinker.verifiers.ifeval_text import (
    count_capital_words,
    count_sentences,
    count_words,
    detect_language,
)

RELATIONS = ("less than", "at least")
# IFEval's language codes (instructions_util.LANGUAGE_CODES).
LANGUAGES = (
    "en es pt ar hi fr ru de ja it bn uk th ur ta te bg ko pl he fa vi ne sw kn mr gu pa ml fi"
).split()
CONSTRAINED_RESPONSE_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")

Check = Callable[[str, dict[str, Any]], bool]


@dataclass(frozen=True)
class Rule:
    check: Check  # (response text, normalized kwargs) -> followed?
    kwargs: dict[str, str]  # kwarg name -> kind: int | str | relation | strlist | language | letter


def _compare(actual: int, relation: str, threshold: int) -> bool:
    return actual < threshold if relation == "less than" else actual >= threshold


# --- keywords --------------------------------------------------------------------------------
def _existence(text: str, kw: dict[str, Any]) -> bool:
    return all(re.search(re.escape(k), text, re.IGNORECASE) for k in kw["keywords"])


def _frequency(text: str, kw: dict[str, Any]) -> bool:
    n = len(re.findall(re.escape(kw["keyword"].strip()), text, re.IGNORECASE))
    return _compare(n, kw["relation"], kw["frequency"])


def _forbidden_words(text: str, kw: dict[str, Any]) -> bool:
    return not any(
        re.search(r"\b" + re.escape(w) + r"\b", text, re.IGNORECASE) for w in kw["forbidden_words"]
    )


def _letter_frequency(text: str, kw: dict[str, Any]) -> bool:
    n = Counter(text.lower())[kw["letter"].strip().lower()]
    return _compare(n, kw["let_relation"], kw["let_frequency"])


# --- language --------------------------------------------------------------------------------
def _language_is(text: str, code: str) -> bool:
    detected = detect_language(text)
    # IFEval counts "language undetectable" (a langdetect exception) as followed.
    return detected is None or detected == code


def _response_language(text: str, kw: dict[str, Any]) -> bool:
    return _language_is(text, kw["language"])


# --- length constraints ----------------------------------------------------------------------
def _number_sentences(text: str, kw: dict[str, Any]) -> bool:
    return _compare(count_sentences(text), kw["relation"], kw["num_sentences"])


def _number_words(text: str, kw: dict[str, Any]) -> bool:
    return _compare(count_words(text), kw["relation"], kw["num_words"])


def _number_paragraphs(text: str, kw: dict[str, Any]) -> bool:
    # Paragraphs are split on the markdown divider ***; an empty one is allowed only at the ends.
    paragraphs = re.split(r"\s?\*\*\*\s?", text)
    n = len(paragraphs)
    for i, p in enumerate(paragraphs):
        if not p.strip():
            if i in (0, len(paragraphs) - 1):
                n -= 1
            else:
                return False
    return n == kw["num_paragraphs"]


def _nth_paragraph_first_word(text: str, kw: dict[str, Any]) -> bool:
    # Here paragraphs are split on "\n\n" (not ***). As in the reference, the count drops empty
    # pieces but the index `nth` still points into the raw split.
    paragraphs = text.split("\n\n")
    n = sum(1 for p in paragraphs if p.strip())
    nth = kw["nth_paragraph"]
    if nth > n or nth < 1:
        return False
    paragraph = paragraphs[nth - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    first = ""
    for ch in word:
        if ch in ".,?!'\"":
            break
        first += ch.lower()
    return n == kw["num_paragraphs"] and first == kw["first_word"].lower()


# --- detectable content ----------------------------------------------------------------------
def _number_placeholders(text: str, kw: dict[str, Any]) -> bool:
    # Counts what findall(r"\[.*?\]") counts (non-overlapping "[...]" within a line), in linear
    # time: the regex is quadratic on a long line of "[" without "]".
    n = 0
    for line in text.split("\n"):
        i = line.find("[")
        while i >= 0:
            j = line.find("]", i + 1)
            if j < 0:
                break
            n += 1
            i = line.find("[", j + 1)
    return n >= kw["num_placeholders"]


def _postscript(text: str, kw: dict[str, Any]) -> bool:
    # The reference's patterns start with \s* and end with .*$ (MULTILINE), which match the
    # empty string; searching the core alone gives the same verdict without quadratic time.
    marker = kw["postscript_marker"].strip()
    low = text.lower()
    if marker == "P.P.S":
        pattern = r"p\.\s?p\.\s?s"
    elif marker == "P.S.":
        pattern = r"p\.\s?s\."
    else:
        pattern = re.escape(marker.lower())
    return re.search(pattern, low) is not None


# --- detectable format -----------------------------------------------------------------------
def _number_bullet_lists(text: str, kw: dict[str, Any]) -> bool:
    # Counts what the reference's findall(r"^\s*\*[^\*].*$") + findall(r"^\s*-.*$")
    # (MULTILINE) count, line by line, since those regexes are quadratic on long blank runs.
    # Quirk kept: a line that is only "*" lets [^\*] eat the newline, so it counts and swallows
    # the next line.
    lines = text.split("\n")
    n = sum(1 for line in lines if line.lstrip().startswith("-"))
    i = 0
    while i < len(lines):
        s = lines[i].lstrip()
        if s.startswith("*"):
            if len(s) > 1 and s[1] != "*":
                n += 1
            elif len(s) == 1 and i + 1 < len(lines):
                n += 1
                i += 1
        i += 1
    return n == kw["num_bullets"]


def _constrained_response(text: str, kw: dict[str, Any]) -> bool:
    text = text.strip()
    return any(option in text for option in CONSTRAINED_RESPONSE_OPTIONS)


def _number_highlighted_sections(text: str, kw: dict[str, Any]) -> bool:
    n = sum(1 for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip())
    n += sum(1 for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h[2:-2].strip())
    return n >= kw["num_highlights"]


def _multiple_sections(text: str, kw: dict[str, Any]) -> bool:
    splitter = re.escape(kw["section_spliter"].strip())
    sections = re.split(r"\s?" + splitter + r"\s?\d+\s?", text)
    return len(sections) - 1 >= kw["num_sections"]


def _json_format(text: str, kw: dict[str, Any]) -> bool:
    # Chained prefix removals, exactly as the reference does them.
    value = text.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        value = value.removeprefix(fence)
    value = value.removesuffix("```")
    try:
        json.loads(value.strip())
    except (ValueError, RecursionError):  # deep nesting ("[" * 10**5) is a bomb, not JSON
        return False
    return True


def _title(text: str, kw: dict[str, Any]) -> bool:
    # Same verdict as the reference's findall(r"<<[^\n]+>>"): per line, the greedy match runs
    # from the first "<<" to the last ">>". Done by hand because that regex is quadratic on a
    # line of many "<<".
    for line in text.split("\n"):
        i, j = line.find("<<"), line.rfind(">>")
        if i >= 0 and j >= i + 3 and line[i : j + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


# --- combination -----------------------------------------------------------------------------
def _two_responses(text: str, kw: dict[str, Any]) -> bool:
    valid = []
    parts = text.split("******")
    for i, part in enumerate(parts):
        if not part.strip():
            if i not in (0, len(parts) - 1):
                return False
        else:
            valid.append(part)
    return len(valid) == 2 and valid[0].strip() != valid[1].strip()


def _repeat_prompt(text: str, kw: dict[str, Any]) -> bool:
    return text.strip().lower().startswith(kw["prompt_to_repeat"].strip().lower())


# --- start / end -----------------------------------------------------------------------------
def _end_checker(text: str, kw: dict[str, Any]) -> bool:
    return text.strip().strip('"').lower().endswith(kw["end_phrase"].strip().lower())


def _quotation(text: str, kw: dict[str, Any]) -> bool:
    text = text.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


# --- change case / punctuation ---------------------------------------------------------------
def _capital_word_frequency(text: str, kw: dict[str, Any]) -> bool:
    return _compare(count_capital_words(text), kw["capital_relation"], kw["capital_frequency"])


def _english_capital(text: str, kw: dict[str, Any]) -> bool:
    return text.isupper() and _language_is(text, "en")


def _english_lowercase(text: str, kw: dict[str, Any]) -> bool:
    return text.islower() and _language_is(text, "en")


def _no_comma(text: str, kw: dict[str, Any]) -> bool:
    return "," not in text


RULES: dict[str, Rule] = {
    "keywords:existence": Rule(_existence, {"keywords": "strlist"}),
    "keywords:frequency": Rule(
        _frequency, {"keyword": "str", "frequency": "int", "relation": "relation"}
    ),
    "keywords:forbidden_words": Rule(_forbidden_words, {"forbidden_words": "strlist"}),
    "keywords:letter_frequency": Rule(
        _letter_frequency, {"letter": "letter", "let_frequency": "int", "let_relation": "relation"}
    ),
    "language:response_language": Rule(_response_language, {"language": "language"}),
    "length_constraints:number_sentences": Rule(
        _number_sentences, {"num_sentences": "int", "relation": "relation"}
    ),
    "length_constraints:number_paragraphs": Rule(_number_paragraphs, {"num_paragraphs": "int"}),
    "length_constraints:number_words": Rule(
        _number_words, {"num_words": "int", "relation": "relation"}
    ),
    "length_constraints:nth_paragraph_first_word": Rule(
        _nth_paragraph_first_word,
        {"num_paragraphs": "int", "nth_paragraph": "int", "first_word": "str"},
    ),
    "detectable_content:number_placeholders": Rule(
        _number_placeholders, {"num_placeholders": "int"}
    ),
    "detectable_content:postscript": Rule(_postscript, {"postscript_marker": "str"}),
    "detectable_format:number_bullet_lists": Rule(_number_bullet_lists, {"num_bullets": "int"}),
    "detectable_format:constrained_response": Rule(_constrained_response, {}),
    "detectable_format:number_highlighted_sections": Rule(
        _number_highlighted_sections, {"num_highlights": "int"}
    ),
    "detectable_format:multiple_sections": Rule(
        _multiple_sections, {"section_spliter": "str", "num_sections": "int"}
    ),
    "detectable_format:json_format": Rule(_json_format, {}),
    "detectable_format:title": Rule(_title, {}),
    "combination:two_responses": Rule(_two_responses, {}),
    "combination:repeat_prompt": Rule(_repeat_prompt, {"prompt_to_repeat": "str"}),
    "startend:end_checker": Rule(_end_checker, {"end_phrase": "str"}),
    "startend:quotation": Rule(_quotation, {}),
    "change_case:capital_word_frequency": Rule(
        _capital_word_frequency, {"capital_frequency": "int", "capital_relation": "relation"}
    ),
    "change_case:english_capital": Rule(_english_capital, {}),
    "change_case:english_lowercase": Rule(_english_lowercase, {}),
    "punctuation:no_comma": Rule(_no_comma, {}),
}


def _coerce(iid: str, name: str, kind: str, value: Any) -> Any:
    """Check one kwarg against its kind; return the normalized value or raise ValueError."""

    def bad(expected: str) -> ValueError:
        return ValueError(f"{iid}: kwarg {name!r} must be {expected}, got {value!r}")

    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise bad("an integer")
        if value < 0:
            raise bad("a non-negative integer")
        return int(value)
    if kind == "relation":
        if value not in RELATIONS:
            raise bad(f"one of {RELATIONS}")
        return value
    if kind == "strlist":
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
            raise bad("a non-empty list of strings")
        if not all(isinstance(v, str) and v.strip() for v in value):
            raise bad("a list of non-empty strings")
        return list(value)
    if not isinstance(value, str) or not value.strip():
        raise bad("a non-empty string")
    if kind == "letter" and len(value.strip()) != 1:
        raise bad("a single letter")
    if kind == "language" and value not in LANGUAGES:
        raise bad(f"an IFEval language code ({' '.join(LANGUAGES)})")
    return value


def normalize_kwargs(instruction_id: str, kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """Validated kwargs for `instruction_id`; raises ValueError naming the problem.

    Keys whose value is None are dropped first: the public IFEval data lists every kwarg name
    of every instruction with null for the ones that do not apply."""
    if instruction_id not in RULES:
        raise ValueError(f"unknown IFEval instruction id {instruction_id!r}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ValueError(f"{instruction_id}: kwargs must be a mapping, got {kwargs!r}")
    schema = RULES[instruction_id].kwargs
    given = {k: v for k, v in (kwargs or {}).items() if v is not None}
    unknown = sorted(set(given) - set(schema))
    if unknown:
        raise ValueError(f"{instruction_id}: unexpected kwargs {unknown} (expects {list(schema)})")
    missing = [k for k in schema if k not in given]
    if missing:
        raise ValueError(f"{instruction_id}: missing kwargs {missing}")
    return {k: _coerce(instruction_id, k, kind, given[k]) for k, kind in schema.items()}


def check_following(instruction_id: str, kwargs: dict[str, Any], text: str) -> bool:
    """Strict IFEval check of one instruction (kwargs already normalized).

    An empty (whitespace-only) response follows nothing, as in IFEval's evaluation."""
    return bool(text.strip()) and RULES[instruction_id].check(text, kwargs)


# IFBench's 58 instruction ids (ifbench_rules.py, ifbench_format.py) share this registry.
from vibethinker.verifiers.ifbench_rules import IFBENCH_RULES  # noqa: E402

RULES.update({iid: Rule(check, kw) for iid, (check, kw) in IFBENCH_RULES.items()})
