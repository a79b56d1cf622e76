"""A SIMULATED teacher for the construct stage: no language model, the embedded world's
procedural generators answering the construction prompts (engine name `world`).

The paper's stage 0 needs a strong teacher LLM. The demo has none, so this Sampler stands in for
one: it reads the prompts that the construct stage sends (prompts/construct_*.txt) and answers
them from the world's generators (vibethinker/data/world/), imperfectly on purpose, so that every
filter has real work:
- an expansion prompt (`<axis>..</axis>` + `<problem>..</problem>`) gets a new world problem of
  the seed's domain, chosen by axis: concept_composition -> another subdomain; solving_skeleton ->
  the same subdomain, fresh instance; constraints -> one more reasoning step; evaluation_objective
  -> the same subdomain, any difficulty. A share `ill_posed_rate` is cut in half (incomplete),
  and up to `n_planted` are copies of held-out eval items (`eval` file), for decontamination to
  catch: their prompts are in `self.planted`, so the stage can report precision and recall.
- a judge prompt (`VERDICT`) gets "incomplete" for the teacher's own cut problems (missed with
  probability `judge_miss`) and "valid" otherwise (a false alarm with `judge_false_alarm`).
- any other prompt is a problem to solve: a known problem (from `data` files or an expansion it
  wrote) gets one of the world teacher's correct traces, or with `error_rate` one of its wrong
  traces, with `degenerate_rate` a correct trace whose reasoning repeats itself, with
  `unparsable_rate` an empty reply; an ill-posed problem gets scattered answers; an unknown
  problem gets a reply without a final answer.
Everything is a pure function of (seed, prompt, params.seed, sample index): reruns are identical.
It never claims to be a model; its replies exist to exercise the pipeline (docs/CONSTRUCT.md).
"""

from __future__ import annotations

import json
import random
import re
import string
from typing import Any

from vibethinker.construct.evalsets import load_eval
from vibethinker.data.io import load_problems
from vibethinker.data.world import MAKERS, SUBDOMAINS
from vibethinker.engines import Prompt, SamplingParams
from vibethinker.types import Completion, Problem

_AXIS = re.compile(r"<axis>\s*(.*?)\s*</axis>", re.DOTALL)
_PROBLEM = re.compile(r"<problem>\n?(.*?)\n?</problem>", re.DOTALL)
_DOMAIN = re.compile(r"^Domain:\s*(\w+)", re.MULTILINE)
MAX_DIFFICULTY = {"math": 4, "code": 1, "stem": 1, "instruct": 3}


def _paths(spec: str | list[str] | None) -> list[str]:
    if not spec:
        return []
    return [s for s in (spec.split(",") if isinstance(spec, str) else spec) if s]


def _text(prompt: Prompt) -> str:
    return prompt if isinstance(prompt, str) else (prompt[-1]["content"] if prompt else "")


class WorldTeacherSampler:
    """The simulated teacher (see the module doc). `data`: Problem JSONL files with world traces
    (a list or comma-separated): the problems it can solve. `eval`: eval-set entries in the
    construct stage's `eval_sets` syntax (construct/evalsets.py): the items it may plant."""

    def __init__(
        self,
        data: str | list[str] | None = None,
        eval: str | list[str] | None = None,
        seed: int = 0,
        error_rate: float = 0.15,
        ill_posed_rate: float = 0.1,
        judge_miss: float = 0.1,
        judge_false_alarm: float = 0.02,
        unparsable_rate: float = 0.02,
        degenerate_rate: float = 0.02,
        n_planted: int = 5,
        plant_rate: float = 0.05,
    ):
        self.seed, self.error_rate, self.ill_posed_rate = seed, error_rate, ill_posed_rate
        self.judge_miss, self.judge_false_alarm = judge_miss, judge_false_alarm
        self.unparsable_rate, self.degenerate_rate = unparsable_rate, degenerate_rate
        self.n_planted, self.plant_rate = n_planted, plant_rate
        self.known: dict[str, Problem] = {}
        self.ill_posed: set[str] = set()
        self.planted: set[str] = set()
        for path in _paths(data):
            for p in load_problems(path):
                self.known[p.prompt.strip()] = p
        self.eval_items: dict[str, list[Problem]] = {}
        for spec in _paths(eval):
            for p in load_eval(spec):
                self.eval_items.setdefault(p.domain, []).append(p)

    def _rng(self, *key: Any) -> random.Random:
        return random.Random(":".join(map(str, ("world-teacher", self.seed, *key))))

    def generate(
        self, prompts: list[Prompt], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        out = []
        for prompt in prompts:
            text = _text(prompt)
            if _AXIS.search(text) and _PROBLEM.search(text):
                fn = self._expand
            elif "VERDICT" in text and _PROBLEM.search(text):
                fn = self._judge
            else:
                fn = self._solve
            out.append(
                [Completion(text=fn(text, self._rng(text, params.seed, j))) for j in range(n)]
            )
        return out

    # ------------------------------------------------------------------ expansion
    def _expand(self, text: str, rng: random.Random) -> str:
        axis = _AXIS.search(text).group(1)  # type: ignore[union-attr]
        seed_prompt = _PROBLEM.search(text).group(1).strip()  # type: ignore[union-attr]
        seed = self.known.get(seed_prompt)
        m = _DOMAIN.search(text)
        domain = seed.domain if seed else (m.group(1) if m else "")
        if domain not in MAKERS:
            return "I cannot tell what kind of problem this is."
        if rng.random() < self.unparsable_rate:
            return "Sure! Here is a new problem: (the teacher forgot the JSON)"
        pool = self.eval_items.get(domain, [])
        if pool and len(self.planted) < self.n_planted and rng.random() < self.plant_rate:
            p = rng.choice(pool)
            self.planted.add(p.prompt.strip())
        else:
            p = self._new_problem(domain, axis, seed, rng)
        prompt = p.prompt
        if rng.random() < self.ill_posed_rate and p.prompt.strip() not in self.planted:
            words = prompt.split(" ")
            prompt = " ".join(words[: max(1, len(words) // 2)])
            self.ill_posed.add(prompt.strip())
        self.known[prompt.strip()] = p
        obj: dict[str, Any] = {"problem": prompt}
        if domain == "stem":
            obj["choices"] = p.choices
        elif domain == "code":
            obj["test_inputs"] = [t["input"] for t in p.tests or []]
        elif domain == "instruct":
            obj["instructions"] = p.instructions
        return f"Here is the new problem ({axis}).\n```json\n{json.dumps(obj)}\n```"

    def _new_problem(self, domain: str, axis: str, seed: Problem | None, rng: random.Random):
        subs = SUBDOMAINS[domain] if domain != "code" else ("stdio",)
        sub = seed.subdomain if seed and seed.subdomain in subs else rng.choice(subs)
        base = (seed.difficulty if seed else None) or 1
        want: int | None = None
        if axis == "concept_composition" and len(subs) > 1:
            sub = rng.choice([s for s in subs if s != sub])
        elif axis == "constraints":
            want = min(base + 1, MAX_DIFFICULTY[domain])
        elif axis == "solving_skeleton":
            want = base
        p = MAKERS[domain](rng, rng.randrange(1 << 30), sub)
        for _ in range(30):  # rejection: the generators draw their own difficulty
            if want is None or p.difficulty in (None, want):
                break
            p = MAKERS[domain](rng, rng.randrange(1 << 30), sub)
        return p

    # ------------------------------------------------------------------ judge
    def _judge(self, text: str, rng: random.Random) -> str:
        prompt = _PROBLEM.search(text).group(1).strip()  # type: ignore[union-attr]
        if rng.random() < self.unparsable_rate:
            return "Looks mostly fine to me."
        if prompt in self.ill_posed:
            verdict = "valid" if rng.random() < self.judge_miss else "incomplete"
        else:
            verdict = "ill-posed" if rng.random() < self.judge_false_alarm else "valid"
        return f"The problem states what is given and what is asked.\nVERDICT: {verdict}"

    # ------------------------------------------------------------------ solving
    def _solve(self, text: str, rng: random.Random) -> str:
        p = self.known.get(text.strip())
        if p is None or not p.traces:
            return "I am not able to solve this problem."
        r = rng.random()
        if r < self.unparsable_rate:
            return ""
        if text.strip() in self.ill_posed:
            return self._scattered(p, rng)
        r -= self.unparsable_rate
        if r < self.error_rate:
            return self._wrong(p, rng)
        r -= self.error_rate
        t = rng.choice(p.traces)
        if r < self.degenerate_rate and "</think>" in t:
            think, rest = t.split("</think>", 1)
            return think + (" " + think.removeprefix("<think>")) * 12 + "</think>" + rest
        return t

    def _wrong(self, p: Problem, rng: random.Random) -> str:
        if p.wrong_traces:
            return rng.choice(p.wrong_traces)
        return self._scattered(p, rng)

    def _scattered(self, p: Problem, rng: random.Random) -> str:
        t = rng.choice(p.traces or [""])
        if p.domain == "math":
            return f"<think>guess</think>\\boxed{{{rng.randint(0, 99)}}}"
        if p.domain == "stem":
            return f"<think>guess</think>\\boxed{{{rng.choice(string.ascii_uppercase[:4])}}}"
        return rng.choice((p.wrong_traces or []) + [t])
