"""The records that flow through every stage.

One typed record per concept, no string-keyed bags: a `Problem` is what the data stages write and
every other stage reads; a `Completion` is what a Sampler returns; a `Score` is what a verifier
returns; a `Group` is one prompt's G completions with their scores (the unit of RL advantages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

# A chat turn and a prompt: a user string, or a chat (list of {"role", "content"} turns).
Message = dict[str, str]
Prompt = Union[str, list[Message]]  # noqa: UP007 (a runtime alias; `|` on a str and a list fails on 3.10)


def as_messages(prompt: Prompt) -> list[Message]:
    """A user string becomes a one-turn chat; a chat is returned as is."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return list(prompt)


DOMAINS = ("math", "code", "stem", "instruct")
# SFT-only data, never a problem to verify: `clr` = the CLR judge tasks (claim extraction and
# verification, data/world/claims.py); `chat` = general dialogue (a prompt and its reply, no
# verifier: the reports' SFT stage 1 includes it). SFT trains on them; RL, eval and probing skip
# them; construct passes them through its decontamination (`pass_domains`).
TRAIN_ONLY_DOMAINS = ("clr", "chat")
# The domain an SFT row without one takes (a TRL conversational `{"messages": [...]}` row).
CHAT_DOMAIN = "chat"


@dataclass
class Problem:
    """One task with exact verification data (one JSONL line)."""

    id: str
    domain: str  # one of DOMAINS
    prompt: str  # the user turn, without the chat template
    subdomain: str | None = None  # e.g. "arithmetic", "algebra"; probing is per subdomain
    difficulty: int | None = None  # world generators: number of reasoning steps
    answer: str | None = None  # math: final answer (LaTeX ok); stem: gold letter "A".."D"
    choices: list[str] | None = None  # stem: option texts in display order (A, B, C, D)
    tests: list[dict[str, str]] | None = None  # code, stdin/stdout: [{"input", "output"}]
    test_code: str | None = None  # code, function-style: defines check(candidate)
    entry_point: str | None = None  # code, function-style: name of the function under test
    instructions: list[dict[str, Any]] | None = None  # instruct: [{"id", "kwargs"}] (IFEval ids)
    traces: list[str] | None = None  # SFT data: full correct assistant responses
    wrong_traces: list[str] | None = None  # labelled incorrect responses (for filter tests)
    # math (world teacher): per trace, its intermediate claims [{"text", "true"}]; corrupted
    # claims carry true=False (CLR training data).
    claims: list[list[dict[str, Any]]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # free-form provenance (source, seed, ...)


@dataclass
class Completion:
    """One sampled response."""

    text: str  # decoded response (assistant turn only, no prompt)
    token_ids: list[int] = field(default_factory=list)  # [T] sampled token ids
    logprobs: list[float] | None = None  # [T] log pi(y_t | ...) of the sampled tokens, if known
    finish_reason: str = "stop"  # "stop" (EOS / stop string) or "length" (hit max tokens)
    # response length when the engine knows it without the ids (an HTTP server's `usage`);
    # None = unknown (never 0 for unknown). `n_tokens` below is the one length to read.
    num_tokens: int | None = None

    @property
    def n_tokens(self) -> int | None:
        """Response tokens: the ids, else the logprobs, else `num_tokens`; None if unknown."""
        if self.token_ids:
            return len(self.token_ids)
        if self.logprobs:
            return len(self.logprobs)
        return self.num_tokens

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass
class Score:
    """A verifier's verdict on one response."""

    value: float  # reward in [0, 1] (instruct: fraction of instructions satisfied)
    correct: bool  # the binary verdict (value == 1 for binary verifiers)
    reason: str  # short machine-readable reason, e.g. "ok", "no_boxed_answer", "timeout"
    # Eval-only, human-readable: what went wrong (code: the failing test's input, expected and
    # actual output, truncated). It may reveal hidden tests, so it is written to evaluation
    # samples only; the RL loop reads value/correct and never shows it to the policy.
    detail: str = ""


def case_detail(stdin: str, expected: str, got: str, limit: int = 200) -> str:
    """The eval-only `Score.detail` of a failed stdin/stdout test: input, expected, got, each cut
    to `limit` characters ("...[+N chars]" says how much was cut)."""

    def cut(s: str) -> str:
        return repr(s[:limit]) + (f"...[+{len(s) - limit} chars]" if len(s) > limit else "")

    return f"input {cut(stdin)}; expected {cut(expected)}; got {cut(got)}"


@dataclass
class Group:
    """One prompt and its G sampled completions with their scores (the unit of GRPO/MGPO)."""

    problem: Problem
    completions: list[Completion]  # [G]
    scores: list[Score] = field(default_factory=list)  # [G], filled by verification

    @property
    def rewards(self) -> list[float]:
        return [s.value for s in self.scores]


@dataclass
class Candidate:
    """One verified, deduplicated teacher trace of the distill stage (a row of candidates.jsonl):
    S_LP is filled by scoring under the student, `bucket` by the selection."""

    problem: Problem
    text: str  # the teacher's response
    teacher: str  # the teacher model that wrote it
    s_lp: float | None = None  # mean student log-prob per response token; None: over max_len
    tokens: int = 0  # response tokens |y|
    length: int = 0  # prompt + response tokens
    bucket: int | None = None  # length bucket of the selection (kept traces only)
