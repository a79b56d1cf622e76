"""Editable prompt templates shipped with the package (`*.txt`), and the helpers that fill them.

- `clr_extract.txt`: CLR claim extraction; placeholders `{problem}`, `{response}`, `{m}`.
- `clr_verify.txt`: CLR claim verification; placeholders `{problem}`, `{claim}`.
- `clr_extract_verbose.txt`, `clr_verify_verbose.txt`: longer wordings of the same two tasks for
  a real model (the defaults are short because every word costs the tiny world's tokenizer
  several tokens); same placeholders, same reply formats. The verbose extraction asks for
  exactly {m} claims (the paper's M per trajectory, in step with `short_claims=unverified`);
  the short one for at most {m}.
- `rubric_judge.txt`: the rubric LLM judge of Instruct RL (verifiers/rubric.py): the system
  prompt, a line `=== user ===`, then the user turn with `{prompt}` and `{response}` (str.format:
  literal braces as `{{` `}}`); `rubric_prompt=` points at your own copy.
The `clr` stage and the world's CLR skill examples (data/world/claims.py) both fill them with
`fill`, so the SFT examples are exactly the user turns the stage sends. Placeholders are filled
in one pass, so LaTeX braces in a template or in the inserted text are left alone. Point
`extract_prompt=` / `verify_prompt=` at your own copies. Kept free of heavy imports (no torch).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vibethinker.prompts.paper import CHOICE_SUFFIX, MATH_SUFFIX

PROMPTS_DIR = Path(__file__).resolve().parent


def template_path(path: str, default: str) -> Path:
    """The file of a template key: `path` as given, else (a bare name such as
    `clr_extract_verbose.txt` that is no file here) the packaged prompt of that name; empty:
    the packaged `default`."""
    if not path:
        return PROMPTS_DIR / default
    p = Path(path)
    if not p.exists() and p.name == path and (PROMPTS_DIR / path).is_file():
        return PROMPTS_DIR / path
    return p


def claim_count_rule(template: str) -> str:
    """What an extraction template asks of the claim count: "exactly" ({m} claims, no fewer),
    "at most", or "unstated". CLR's `short_claims=unverified` (missing claims count as 0)
    is in step only with "exactly": a prompt that allows fewer claims scores its short lists
    as failed claims (4 true of 4 -> 0.8^5)."""
    flat = " ".join(template.lower().split())
    if re.search(r"\bat most \{m\}|\bup to \{m\}|\bno more than \{m\}", flat):
        return "at most"
    if re.search(r"\bexactly \{m\}", flat):
        return "exactly"
    return "unstated"


def claims_in_step(template: str, short_claims: str) -> bool:
    """Whether an extraction template and CLR's short-claims rule agree: `unverified` needs a
    prompt asking for exactly {m}; `present` (the mean over the claims given) takes any."""
    return short_claims != "unverified" or claim_count_rule(template) == "exactly"


def load_template(path: str, default: str, required: tuple[str, ...]) -> str:
    """A prompt template (a config path, or the packaged default); refused before any sampling
    when it lacks a placeholder the phase cannot work without."""
    text = template_path(path, default).read_text()
    missing = [r for r in required if r not in text]
    if missing:
        raise ValueError(f"clr: template {path or default} lacks {', '.join(missing)}")
    return text


def fill(template: str, **values: Any) -> str:
    """One pass over `{name}` placeholders (text inserted is never re-read, LaTeX braces stay);
    the template's trailing newline is dropped (a user turn does not end with one)."""
    return re.sub(
        r"\{(\w+)\}",
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
        template.rstrip("\n"),
    )


def problem_text(prompt: str) -> str:
    """The problem as the judge templates show it: the sampling prompt without its closing
    answer-format request (the paper's math / multiple-choice suffix, or a last line asking for
    a `\\boxed{}`), so extraction and verification replies are not steered into boxing an answer."""
    text = prompt.rstrip()
    for suffix in (MATH_SUFFIX, CHOICE_SUFFIX):
        if text.endswith(suffix):
            return text[: -len(suffix)].rstrip()
    head, _, last = text.rpartition("\n")
    return head.rstrip() if head and "\\boxed{}" in last else text
