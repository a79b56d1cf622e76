"""Open instruction prompts of the world's instruct domain: no rules, scored by a rubric reward.

Three kinds, each with a procedural teacher answer (docs/PAPER.md stage 5: "rubric-based reward model
for open prompts"): a short explanation of a topic ("Explain coffee in two short sentences."), a
one-sentence summary of a three-sentence passage, and a polite rewrite of a blunt request.
Problems carry `instructions=None`, subdomain "open", 2-3 correct traces (different fact choices
or phrasings) and labelled wrong traces (`wrong_traces`): a wrong answer (about another topic)
and one that ignores the instruction (echoes the prompt, copies the passage, leaves the request
unchanged).

`degrade(answer, kind, rng)` makes the other rejected answers of the reward model's preference
pairs: "truncated" (cut mid-answer) and "rambling" (sentences repeated and padded). `preference_pairs`
builds (prompt, chosen, rejected, kind) rows from any instruct problem with traces: wrong traces
of rule prompts break a constraint ("ignores_instruction"), of open prompts are "wrong" then
"ignores_instruction". Only the answer part (after `</think>`) is compared, as the rubric reward
scores it.

Open prompts go to the train split only (`open_problems`): the held-out evaluation scores every
instruct prompt by its rules, which open prompts do not have; held-out open prompts for the
rubric evidence come from `open_problems(..., salt="heldout")` minus the train prompts.
"""

from __future__ import annotations

import random
from typing import Any

from vibethinker.data.world.instruct import TOPICS
from vibethinker.types import Problem

FACTS: dict[str, tuple[str, ...]] = {
    "the sea": ("The sea is salty.", "The sea covers most of the earth.",
                "Tides move the sea twice a day.", "Many fish live in the sea."),
    "coffee": ("Coffee is made from roasted beans.", "Coffee has caffeine.",
               "Coffee is brewed with hot water.", "Many drink coffee in the morning."),
    "a city park": ("A city park has trees and grass.", "People walk and play in a city park.",
                    "A city park gives shade in summer.", "Birds nest in a city park."),
    "winter": ("Winter is the coldest season.", "Snow can fall in winter.",
               "Days are short in winter.", "Lakes may freeze in winter."),
    "trains": ("Trains run on rails.", "Trains carry people and goods.",
               "Trains stop at stations.", "Some trains are very fast."),
    "gardens": ("Gardens grow flowers and food.", "Gardens need water and sun.",
                "Bees visit gardens.", "Gardens need care each week."),
    "music": ("Music is made of sound and rhythm.", "Music can be played or sung.",
              "Music can change the mood.", "People dance to music."),
    "bread": ("Bread is baked from flour.", "Yeast makes bread rise.",
              "Bread is a common food.", "Fresh bread smells good."),
    "the moon": ("The moon circles the earth.", "The moon reflects sunlight.",
                 "The moon has phases.", "The moon pulls the tides."),
    "rain": ("Rain is water falling from clouds.", "Rain helps plants grow.",
             "Rain fills rivers.", "Rain cools the air."),
    "cats": ("Cats are small pets.", "Cats sleep a lot.", "Cats hunt mice.",
             "Cats clean their fur."),
    "bikes": ("Bikes have two wheels.", "Bikes are moved by pedals.",
              "Bikes need no fuel.", "Riding bikes is good exercise."),
    "books": ("Books hold stories and facts.", "Books are printed on paper.",
              "Books can be read again.", "Libraries lend books."),
    "tea": ("Tea is made from leaves.", "Tea is brewed in hot water.",
            "Some tea has caffeine.", "Tea can be green or black."),
    "mountains": ("Mountains are high land.", "Mountains can have snow on top.",
                  "People climb mountains.", "Rivers start in mountains."),
    "markets": ("Markets sell food and goods.", "Markets have many stalls.",
                "People meet at markets.", "Markets are busy in the morning."),
}  # fmt: skip
GISTS: dict[str, str] = {
    "the sea": "the sea is a vast salty water full of life",
    "coffee": "coffee is a hot drink with caffeine",
    "a city park": "a city park is a green place for people",
    "winter": "winter is a cold season with short days",
    "trains": "trains carry people and goods on rails",
    "gardens": "gardens grow plants with water and care",
    "music": "music is sound that can change the mood",
    "bread": "bread is a common food baked from flour",
    "the moon": "the moon circles the earth and has phases",
    "rain": "rain is water from clouds that helps plants",
    "cats": "cats are small pets that sleep and hunt",
    "bikes": "bikes are pedal vehicles with two wheels",
    "books": "books hold stories and can be read again",
    "tea": "tea is a drink brewed from leaves",
    "mountains": "mountains are high land that people climb",
    "markets": "markets are busy places that sell goods",
}
EXPLAIN = ("Explain {t} in two short sentences.", "Briefly explain what {t} is.",
           "Tell me about {t} in a few words.")  # fmt: skip
REQUESTS = ("Send me the notes on {t}.", "Give me the list about {t}.",
            "Tell me the plan for {t}.", "Fix the page about {t}.")  # fmt: skip
POLITE = ("Could you please {r}? Thank you.", "Would you kindly {r}? Thanks a lot.",
          "Please could you {r}? I would be grateful.")  # fmt: skip
OPEN_KINDS = ("explain", "summary", "rewrite")
THINK = "<think>open {kind}</think>\n"


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _other(topic: str, rng: random.Random) -> str:
    return rng.choice([t for t in TOPICS if t != topic])


def make_open(rng: random.Random, kind: str | None = None) -> Problem:
    """One open prompt with traces (correct) and wrong traces (wrong, ignores the instruction)."""
    kind = kind or rng.choice(OPEN_KINDS)
    topic, other = rng.choice(TOPICS), ""
    other = _other(topic, rng)
    if kind == "explain":
        prompt = rng.choice(EXPLAIN).format(t=topic)
        pairs = [rng.sample(FACTS[topic], 2) for _ in range(3)]
        good = [" ".join(p) for p in pairs]
        wrong = " ".join(rng.sample(FACTS[other], 2))
        ignore = f"You asked about {topic}. That is a good question to ask."
    elif kind == "summary":
        passage = " ".join(rng.sample(FACTS[topic], 3))
        prompt = f"Summarize in one sentence: {passage}"
        good = [f"In short, {GISTS[topic]}.", f"{_cap(GISTS[topic])}.",
                f"The text says that {GISTS[topic]}."]  # fmt: skip
        wrong = f"In short, {GISTS[other]}."
        ignore = passage
    elif kind == "rewrite":
        req = rng.choice(REQUESTS).format(t=topic)
        prompt = f"Rewrite this request politely: {req}"
        core = req[0].lower() + req[1:-1]
        good = [p.format(r=core) for p in POLITE]
        wrong = POLITE[0].format(r=rng.choice(REQUESTS).format(t=other)[:-1].lower())
        ignore = req
    else:
        raise ValueError(f"unknown open prompt kind {kind!r}; known: {OPEN_KINDS}")
    traces = list(dict.fromkeys(THINK.format(kind=kind) + g for g in good))
    return Problem(
        id="",
        domain="instruct",
        prompt=prompt,
        subdomain="open",
        difficulty=1,
        instructions=None,
        traces=traces,
        wrong_traces=[THINK.format(kind=kind) + wrong, THINK.format(kind=kind) + ignore],
        meta={"open_kind": kind, "topic": topic},
    )


def open_problems(seed: int, n: int, salt: str = "train", exclude: set[str] = frozenset()) -> list:
    """`n` distinct open prompts (ids `instruct-open-<salt>-NNNNN`), none whose normalised prompt
    is in `exclude`; a pure function of (seed, salt)."""
    rng = random.Random(f"vibethinker-world-open:{seed}:{salt}")
    seen, out, tries = set(exclude), [], 0
    while len(out) < n:
        p = make_open(rng)
        tries += 1
        key = " ".join(p.prompt.lower().split())
        if key in seen:
            if tries > 50 * n + 1000:
                raise RuntimeError(f"world open prompts: only {len(out)} distinct of {n} wanted")
            continue
        seen.add(key)
        p.id = f"instruct-open-{salt}-{len(out):05d}"
        p.meta.update(source="world", seed=seed, split=salt)
        out.append(p)
    return out


# ---------------------------------------------------------------- preference pairs


def degrade(answer: str, kind: str, rng: random.Random) -> str:
    """A worse copy of `answer`: "truncated" (cut at 30-70% of its words, mid-sentence) or
    "rambling" (a sentence repeated, filler added)."""
    words = answer.split()
    if kind == "truncated":
        k = max(1, int(len(words) * rng.uniform(0.3, 0.7)))
        return " ".join(words[:k]).rstrip(".!?,")
    if kind == "rambling":
        sents = [s.strip() for s in answer.replace("\n", " ").split(". ") if s.strip()]
        first = sents[0].rstrip(".") + "."
        filler = rng.choice(("As I said,", "Again,", "To repeat,", "Basically,"))
        return f"{answer} {filler} {first} {first} {filler} {first.lower()}"
    raise ValueError(f"unknown degradation {kind!r}")


def answer_of(trace: str) -> str:
    """The answer part of a world trace (after `</think>`)."""
    return trace.split("</think>", 1)[-1].strip()


def preference_pairs(problem: Problem, rng: random.Random) -> list[dict[str, Any]]:
    """Rows {prompt, chosen, rejected, kind, problem_id}: the first trace's answer against each
    wrong trace, a truncated and a rambling copy of itself."""
    if not problem.traces:
        return []
    chosen = answer_of(problem.traces[0])
    wrong = [answer_of(w) for w in problem.wrong_traces or []]
    if problem.instructions:
        kinds = ["ignores_instruction"] * len(wrong)
    else:
        kinds = ["wrong", "ignores_instruction"][: len(wrong)]
    rows = list(zip(wrong, kinds))
    rows += [(degrade(chosen, k, rng), k) for k in ("truncated", "rambling")]
    return [{"prompt": problem.prompt, "chosen": chosen, "rejected": r, "kind": k,
             "problem_id": problem.id} for r, k in rows if r and r != chosen]  # fmt: skip
