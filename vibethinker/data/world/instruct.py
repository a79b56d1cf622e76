"""Instruction-following world: a short writing task plus 1-3 IFEval constraints.

`instructions` use IFEval's instruction ids and kwarg names; only ids whose check we reproduce
exactly (and that need no nltk/langdetect) are used. The teacher plans a response (title, intro,
body as prose / bullets / paragraphs, extra sentences for keywords, highlights, placeholders,
P.S., end phrase, quotes, case) and writes it in different layouts per trace: the extra
sentences lead or close, the body is prose or a list, sentences differ. Wrong traces each break
one constraint on purpose.

The response is the text after `</think>`; the verifier scores only that part. `holds()` is the
teacher's self-check with IFEval semantics (traces must pass it, wrong traces must fail it); the
scoring validators live in vibethinker/verifiers/instruct.py.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from vibethinker.types import Problem

TOPICS = (
    "the sea", "coffee", "a city park", "winter", "trains", "gardens", "music", "bread",
    "the moon", "rain", "cats", "bikes", "books", "tea", "mountains", "markets",
)  # fmt: skip
TASKS = ("Write a short note about {t}.", "Describe {t} briefly.", "Give a short tip about {t}.")
BODY = (
    "{T} is worth a look.", "Many enjoy {t} daily.", "{T} can lift the mood.",
    "Share {t} with a friend.", "Small details matter.", "Learn a bit each day.",
)  # fmt: skip
INTROS = ("Here is a note on {t}.", "Some thoughts on {t}.")
KEYWORDS = ("sun", "river", "smile", "window", "story", "color", "morning", "light")
FORBIDDEN = ("boring", "ugly", "hate", "cheap", "awful", "never")
HIGHLIGHTS = ("calm", "fresh", "simple", "warm")
PLACEHOLDERS = ("[name]", "[place]", "[date]")
END_PHRASES = ("Is there anything else I can help with?", "Any other questions?")
PS_LINES = ("P.S. Thanks for reading.", "P.S. More soon.")

# id -> what the prompt says (kwargs are format fields)
DESCRIBE = {
    "change_case:english_lowercase": "Use only lowercase letters.",
    "change_case:english_capital": "Use only capital letters.",
    "keywords:existence": "Include the words {kw}.",
    "keywords:forbidden_words": "Do not use the words {fw}.",
    "length_constraints:number_words": "Answer with {relation} {num_words} words.",
    "startend:end_checker": 'End with the exact phrase "{end_phrase}"',
    "startend:quotation": "Wrap the whole answer in double quotes.",
    "punctuation:no_comma": "Do not use any commas.",
    "detectable_format:number_bullet_lists": "Use exactly {num_bullets} bullet points like - item.",
    "detectable_content:postscript": "Add a postscript starting with {postscript_marker}",
    "detectable_format:title": "Give it a title in double angular brackets like <<title>>.",
    "detectable_content:number_placeholders": "Include at least {num_placeholders} placeholders "
    "in square brackets like [name].",
    "detectable_format:number_highlighted_sections": "Highlight at least {num_highlights} words "
    "with markdown like *word*.",
    "length_constraints:number_paragraphs": "Write exactly {num_paragraphs} paragraphs separated "
    "by the markdown divider ***.",
}
IDS = tuple(DESCRIBE)
CONFLICTS = {
    frozenset({"change_case:english_lowercase", "change_case:english_capital"}),
    frozenset({"detectable_format:number_bullet_lists", "length_constraints:number_paragraphs"}),
}


# ---------------------------------------------------------------- IFEval semantics (self-check)


def holds(iid: str, kw: dict[str, Any], text: str) -> bool:
    """Does `text` follow instruction `iid`? (IFEval's check_following for the ids above.)"""
    if iid == "change_case:english_lowercase":
        return text.islower()
    if iid == "change_case:english_capital":
        return text.isupper()
    if iid == "keywords:existence":
        return all(re.search(k, text, flags=re.IGNORECASE) for k in kw["keywords"])
    if iid == "keywords:forbidden_words":
        return not any(
            re.search(r"\b" + w + r"\b", text, flags=re.IGNORECASE) for w in kw["forbidden_words"]
        )
    if iid == "length_constraints:number_words":
        n = len(re.findall(r"\w+", text))
        return n < kw["num_words"] if kw["relation"] == "less than" else n >= kw["num_words"]
    if iid == "startend:end_checker":
        return text.strip().strip('"').lower().endswith(kw["end_phrase"].strip().lower())
    if iid == "startend:quotation":
        t = text.strip()
        return len(t) > 1 and t[0] == '"' and t[-1] == '"'
    if iid == "punctuation:no_comma":
        return "," not in text
    if iid == "detectable_format:number_bullet_lists":
        n = len(re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE))
        n += len(re.findall(r"^\s*-.*$", text, flags=re.MULTILINE))
        return n == kw["num_bullets"]
    if iid == "detectable_content:postscript":
        return bool(re.findall(r"\s*p\.\s?s\..*$", text.lower(), flags=re.MULTILINE))
    if iid == "detectable_format:title":
        return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", text))
    if iid == "detectable_content:number_placeholders":
        return len(re.findall(r"\[.*?\]", text)) >= kw["num_placeholders"]
    if iid == "detectable_format:number_highlighted_sections":
        hs = re.findall(r"\*[^\n\*]*\*", text) + re.findall(r"\*\*[^\n\*]*\*\*", text)
        return sum(1 for h in hs if h.strip("*").strip()) >= kw["num_highlights"]
    if iid == "length_constraints:number_paragraphs":
        paras = re.split(r"\s?\*\*\*\s?", text)
        n = len(paras)
        for i, p in enumerate(paras):
            if not p.strip():
                if i in (0, len(paras) - 1):
                    n -= 1
                else:
                    return False
        return n == kw["num_paragraphs"]
    raise KeyError(iid)


# ---------------------------------------------------------------- planning and writing


def _choose_ids(rng: random.Random, n: int) -> list[str]:
    while True:
        ids = rng.sample(IDS, n)
        if not any(c <= set(ids) for c in CONFLICTS):
            return ids


def _kwargs(iid: str, rng: random.Random) -> dict[str, Any]:
    if iid == "keywords:existence":
        return {"keywords": rng.sample(KEYWORDS, rng.randint(1, 2))}
    if iid == "keywords:forbidden_words":
        return {"forbidden_words": rng.sample(FORBIDDEN, 2)}
    if iid == "startend:end_checker":
        return {"end_phrase": rng.choice(END_PHRASES)}
    if iid == "detectable_format:number_bullet_lists":
        return {"num_bullets": rng.randint(2, 4)}
    if iid == "detectable_content:postscript":
        return {"postscript_marker": "P.S."}
    if iid == "detectable_content:number_placeholders":
        return {"num_placeholders": rng.randint(1, 2)}
    if iid == "detectable_format:number_highlighted_sections":
        return {"num_highlights": rng.randint(1, 2)}
    if iid == "length_constraints:number_paragraphs":
        return {"num_paragraphs": rng.randint(2, 3)}
    if iid == "length_constraints:number_words":  # num_words is set once the drafts exist
        return {"relation": rng.choice(("less than", "at least"))}
    return {}


def _write(plan: dict[str, Any]) -> str:
    """Render a plan into the response text."""
    fill = {"t": plan["topic"], "T": plan["topic"][0].upper() + plan["topic"][1:]}
    body = [s.format(**fill) for s in plan["body"]]
    extras = [f"It reminds me of {k}." for k in plan["keywords"]]
    if plan["highlights"]:
        extras.append("It feels " + " and ".join(f"*{w}*" for w in plan["highlights"]) + ".")
    if plan["placeholders"]:
        extras.append("Ask " + " at ".join(plan["placeholders"]) + ".")
    extras += [f"Some say it is {w}." for w in plan["bad_words"]]
    intro = plan["intro"].format(**fill)
    if plan["comma"]:
        intro = "Well, " + intro[0].lower() + intro[1:]
    head = [intro] + extras if plan["extras_first"] else [intro]
    tail = [] if plan["extras_first"] else extras
    lines = [f"<<{plan['title'].format(**fill)}>>"] if plan["title"] else []
    if plan["bullets"]:
        lines += [" ".join(head)] + [f"- {s}" for s in body] + ([" ".join(tail)] if tail else [])
    elif plan["paragraphs"] > 1:
        items, n = head + body + tail, plan["paragraphs"]
        parts = [[x] for x in items[: n - 1]] + [items[n - 1 :]]
        lines.append("\n***\n".join(" ".join(p) for p in parts))
    else:
        lines.append(" ".join(head + body + tail))
    if plan["ps"]:
        lines.append(plan["ps"])
    if plan["end"]:
        lines.append(plan["end"])
    text = "\n".join(lines)
    if plan["case"] == "lower":
        text = text.lower()
    elif plan["case"] == "upper":
        text = text.upper()
    return f'"{text}"' if plan["quote"] else text


def _plan(inst: dict[str, dict], topic: str, rng: random.Random, layout: int) -> dict[str, Any]:
    """A response plan satisfying `inst` (id -> kwargs); `layout` picks one of the solution ways."""
    n_bul = inst.get("detectable_format:number_bullet_lists", {}).get("num_bullets", 0)
    n_par = inst.get("length_constraints:number_paragraphs", {}).get("num_paragraphs", 0)
    n_high = inst.get("detectable_format:number_highlighted_sections", {}).get("num_highlights", 0)
    n_ph = inst.get("detectable_content:number_placeholders", {}).get("num_placeholders", 0)
    free_list = not n_par and layout == 2  # no layout constraint: a list is one more way
    n_body = n_bul or (3 if free_list else rng.randint(1, 2) + (n_par > 1))
    case = {"change_case:english_lowercase": "lower", "change_case:english_capital": "upper"}
    return {
        "topic": topic,
        "intro": INTROS[layout % 2],
        "body": rng.sample(BODY, max(n_body, n_par - 1, 1)),
        "keywords": inst.get("keywords:existence", {}).get("keywords", []),
        "highlights": HIGHLIGHTS[:n_high],
        "placeholders": list(PLACEHOLDERS[:n_ph]),
        "bad_words": [],
        "comma": False,
        "extras_first": layout != 1,
        "title": ("Notes on {t}", "About {t}")[layout % 2]
        if "detectable_format:title" in inst else None,
        "bullets": n_bul > 0 or free_list,
        "paragraphs": n_par,
        "ps": rng.choice(PS_LINES) if "detectable_content:postscript" in inst else None,
        "end": inst.get("startend:end_checker", {}).get("end_phrase"),
        "case": next((v for k, v in case.items() if k in inst), None),
        "quote": "startend:quotation" in inst,
    }  # fmt: skip


def _violate(plan: dict[str, Any], iid: str, kw: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of the plan that breaks instruction `iid` (None if there is no simple way)."""
    p = dict(plan)
    if iid == "change_case:english_lowercase":
        p["case"] = None
    elif iid == "change_case:english_capital":
        p["case"] = "lower"
    elif iid == "keywords:existence":
        p["keywords"] = plan["keywords"][:-1]
    elif iid == "keywords:forbidden_words":
        p["bad_words"] = kw["forbidden_words"][:1]
    elif iid == "length_constraints:number_words":
        if kw["relation"] == "less than":
            p["body"] = list(plan["body"]) + list(BODY) * 3
        else:
            p.update(body=[], keywords=[], highlights=[], placeholders=[], title=None, ps=None)
    elif iid == "startend:end_checker":
        p["end"] = None
    elif iid == "startend:quotation":
        p["quote"] = False
    elif iid == "punctuation:no_comma":
        p["comma"] = True
    elif iid == "detectable_format:number_bullet_lists":
        p["body"] = list(plan["body"]) + [b for b in BODY if b not in plan["body"]][:1]
    elif iid == "detectable_content:postscript":
        p["ps"] = None
    elif iid == "detectable_format:title":
        p["title"] = None
    elif iid == "detectable_content:number_placeholders":
        p["placeholders"] = plan["placeholders"][:-1]
    elif iid == "detectable_format:number_highlighted_sections":
        p["highlights"] = plan["highlights"][:-1]
    elif iid == "length_constraints:number_paragraphs":
        p["paragraphs"] = plan["paragraphs"] - 1
    else:
        return None
    return p


def _think(ids: list[str], layout: int) -> str:
    how = ("extras first", "body first", "body as a list")[layout]
    return f"<think>{len(ids)} rules; {how}</think>\n"


def make_instruct(rng: random.Random, idx: int, subdomain: str | None = None) -> Problem:
    """One instruction-following prompt with 1-3 constraints, 2-3 traces and wrong traces."""
    topic = rng.choice(TOPICS)
    ids = _choose_ids(rng, rng.choice((1, 1, 2, 2, 3)))
    inst = {i: _kwargs(i, rng) for i in ids}
    plans = [_plan(inst, topic, rng, layout) for layout in range(3)]
    texts = [_write(p) for p in plans]
    if "length_constraints:number_words" in inst:
        kw = inst["length_constraints:number_words"]
        counts = [len(re.findall(r"\w+", t)) for t in texts]
        kw["num_words"] = (
            max(counts) + rng.randint(2, 10)
            if kw["relation"] == "less than"
            else max(min(counts) - rng.randint(0, 8), 5)
        )
    instructions = [{"id": i, "kwargs": inst[i]} for i in ids]
    traces, seen = [], set()
    for layout, t in enumerate(texts):
        if all(holds(i, inst[i], t) for i in ids) and t not in seen:
            seen.add(t)
            traces.append(_think(ids, layout) + t)
    if not traces:
        raise AssertionError(f"world teacher bug: no trace follows {instructions}")
    wrong = []
    for i in rng.sample(ids, min(2, len(ids))):
        bad = _violate(plans[0], i, inst[i])
        t = _write(bad) if bad else None
        if t and not all(holds(j, inst[j], t) for j in ids):
            wrong.append(_think(ids, 0) + t)
    task = rng.choice(TASKS).format(t=topic)
    rules = [DESCRIBE[i].format(**_describe_fields(inst[i])) for i in ids]
    return Problem(
        id="",
        domain="instruct",
        subdomain=f"rules{len(ids)}",
        difficulty=len(ids),
        prompt=" ".join([task] + rules),
        instructions=instructions,
        traces=traces,
        wrong_traces=wrong,
    )


def _describe_fields(kw: dict[str, Any]) -> dict[str, Any]:
    out = dict(kw)
    if "keywords" in kw:
        out["kw"] = " and ".join(json.dumps(k) for k in kw["keywords"])
    if "forbidden_words" in kw:
        out["fw"] = " and ".join(json.dumps(k) for k in kw["forbidden_words"])
    return out
