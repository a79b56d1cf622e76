"""Rubric reward for open prompts (docs/PAPER.md stage 5): one interface, two back-ends.

`make_rubric(spec)` returns a `RubricReward` whose `score(pairs)` maps (prompt, answer) pairs to
`RubricResult(value, reason)`: value in [0, 1], or None when the back-end failed (the caller
scores a failure by a documented value and counts it; see train/rewards.py). Specs:

- `hf:PATH`: a local Hugging Face AutoModelForSequenceClassification with one logit z (e.g. the
  `reward_model` stage's final/), run in batches on the trainer's device. Normalised value =
  sigmoid((z - offset) / scale), with offset and scale from PATH/reward_norm.json when present
  (the `reward_model` stage writes offset = the midpoint of the mean held-out chosen and
  rejected logits, scale = a quarter of their gap: an average good answer maps to
  sigmoid(2) = 0.88, an average bad one to 0.12), else offset 0, scale 1 (plain sigmoid, the
  Bradley-Terry convention). A folder without a trained classification head is refused when
  loaded, naming the missing weights.
- `openai:MODEL@BASE_URL`: an OpenAI-compatible LLM judge (verifiers/judge.py EndpointJudge:
  retries with backoff, a request timeout, a content-hash cache on disk) with the rubric prompt
  of `prompts/rubric_judge.txt` (or your copy); value = the mean of the four 0-10 criteria
  (helpfulness, coherence, instruction adherence, redundancy) / 10. A reply that cannot be
  parsed, or a request that fails after its retries, is a failure (value None).

Responses are formatted for the reward model as a chat (the tokenizer's template when it has
one), by `rm_text`, which the `reward_model` stage also trains with.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vibethinker.log import get_logger
from vibethinker.verifiers.judge import EndpointJudge

log = get_logger("verifiers.rubric")
PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
DEFAULT_PROMPT = PROMPTS / "rubric_judge.txt"
USER_MARK = "=== user ==="
NORM_FILE = "reward_norm.json"


@dataclass(frozen=True)
class RubricResult:
    value: float | None  # in [0, 1]; None = the back-end failed (see reason)
    reason: str  # "ok", "judge_unparsed", "judge_error:<why>", "rm_error:<Type>"


def load_rubric_prompt(path: str | Path = "") -> tuple[str, str]:
    """(system prompt, user template) from a prompt file: system text, a line `=== user ===`,
    then the user turn with `{prompt}` and `{response}`. Raises ValueError naming the file."""
    p = Path(path) if path else DEFAULT_PROMPT
    if not p.is_file():
        raise FileNotFoundError(f"rubric prompt {p} not found")
    text = p.read_text(encoding="utf-8")
    if USER_MARK not in text:
        raise ValueError(f"{p}: no line '{USER_MARK}' separating system prompt and user turn")
    system, user = (s.strip("\n") for s in text.split(USER_MARK, 1))
    try:
        user.format(prompt="", response="")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"{p}: user template must only use {{prompt}} and {{response}} "
            f"(literal braces as {{{{ }}}}): {type(e).__name__}: {e}"
        ) from None
    for ph in ("{prompt}", "{response}"):
        if ph not in user:
            raise ValueError(f"{p}: the user template has no {ph} placeholder")
    return system, user


def rm_text(tokenizer: Any, prompt: str, response: str) -> str:
    """The text a sequence-classification reward model reads for (prompt, response)."""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
        return tokenizer.apply_chat_template(messages, tokenize=False)
    return f"{prompt}\n\n{response}"


def _sigmoid(z: float) -> float:
    if math.isnan(z):
        return 0.0
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def load_reward_model(path: str | Path, device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) of a sequence-classification reward model folder; refuses a folder that
    is not one (no config.json, a causal-LM architecture, head weights missing, labels != 1)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    p = Path(path)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"reward model {p}: no config.json (not a Hugging Face folder)")
    conf = AutoConfig.from_pretrained(p)
    archs = list(conf.architectures or [])
    hint = (
        "train one with `vibethinker reward_model model=<sft model> data=<data dir>` or "
        "point rubric_model at a sequence-classification checkpoint"
    )
    if not any(a.endswith("ForSequenceClassification") for a in archs):
        raise ValueError(
            f"reward model {p}: no sequence-classification head (architectures {archs}); {hint}"
        )
    model, info = AutoModelForSequenceClassification.from_pretrained(p, output_loading_info=True)
    if info.get("missing_keys"):
        raise ValueError(
            f"reward model {p}: weights missing from the checkpoint (they would be "
            f"random): {sorted(info['missing_keys'])[:5]}; {hint}"
        )
    if model.config.num_labels != 1:
        raise ValueError(
            f"reward model {p}: num_labels={model.config.num_labels}, expected 1 (one reward logit)"
        )
    tok = AutoTokenizer.from_pretrained(p)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if model.config.pad_token_id is None:  # the head reads the last non-pad token of each row
        model.config.pad_token_id = tok.pad_token_id
    tok.truncation_side = "left"  # keep the response (the end) of over-long inputs
    tok.padding_side = "right"
    return model.to(device).eval(), tok


def read_norm(path: str | Path) -> tuple[float, float]:
    """(offset, scale) from a reward model folder's reward_norm.json; (0, 1) without one."""
    f = Path(path) / NORM_FILE
    if not f.is_file():
        return 0.0, 1.0
    d = json.loads(f.read_text())
    offset, scale = float(d["offset"]), float(d["scale"])
    if not (math.isfinite(offset) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"{f}: offset must be finite and scale > 0, got {d}")
    return offset, scale


class RewardModelRubric:
    """Back-end (a): a local sequence-classification reward model, batched."""

    def __init__(
        self, path: str, device: str = "cpu", batch_size: int = 16, max_length: int = 1024
    ) -> None:
        self.path = path
        self.model, self.tokenizer = load_reward_model(path, device)
        self.offset, self.scale = read_norm(path)
        self.device, self.batch_size, self.max_length = device, batch_size, max_length

    def logits(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Raw reward logits, `batch_size` pairs per forward."""
        import torch

        out: list[float] = []
        for s in range(0, len(pairs), self.batch_size):
            texts = [rm_text(self.tokenizer, p, r) for p, r in pairs[s : s + self.batch_size]]
            enc = self.tokenizer(
                texts,
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_length,
            )
            with torch.no_grad():
                z = self.model(
                    input_ids=enc["input_ids"].to(self.device),
                    attention_mask=enc["attention_mask"].to(self.device),
                ).logits
            out += z[:, 0].float().cpu().tolist()
        return out

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[RubricResult]:
        try:
            zs = self.logits(pairs)
        except Exception as e:  # e.g. out of memory: every pair of the call fails, counted
            log.exception("reward model %s failed on %d pairs", self.path, len(pairs))
            return [RubricResult(None, f"rm_error:{type(e).__name__}") for _ in pairs]
        return [RubricResult(_sigmoid((z - self.offset) / self.scale), "ok") for z in zs]

    def check(self) -> None:
        """Loaded in __init__ (which raises for a bad folder): nothing more to check."""


class JudgeRubric:
    """Back-end (b): an OpenAI-compatible LLM judge with the rubric prompt."""

    def __init__(
        self,
        spec: str,
        cache_path: str | None = None,
        prompt_path: str = "",
        timeout_s: float = 60.0,
        retries: int = 4,
        workers: int = 8,
    ) -> None:
        model, sep, base_url = spec.rpartition("@")
        if not sep or not model or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"rubric judge must be openai:MODEL@BASE_URL (http...), got {spec!r}")
        system, user = load_rubric_prompt(prompt_path)
        self.spec = spec
        self.judge = EndpointJudge(
            base_url=base_url,
            model=model,
            timeout_s=timeout_s,
            max_retries=retries,
            cache_path=cache_path,
            workers=workers,
            system_prompt=system,
            user_template=user,
            pass_threshold=0.5,
        )

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[RubricResult]:
        scores = self.judge.score_batch(list(pairs))  # never raises: failures come back as reasons
        return [RubricResult(s.value if s.reason == "ok" else None, s.reason) for s in scores]

    def check(self) -> None:
        """One request before training: an endpoint that is down fails the stage start."""
        r = self.judge._score_uncached("Say hello.", "Hello.")  # not cached, not counted
        if r.reason.startswith("judge_error"):
            raise RuntimeError(
                f"rubric judge {self.spec}: the endpoint did not answer a test "
                f"request ({r.reason}); start it or fix rubric_model"
            )


RubricReward = RewardModelRubric | JudgeRubric


def make_rubric(
    spec: str,
    device: str = "cpu",
    cache_path: str | None = None,
    prompt_path: str = "",
    timeout_s: float = 60.0,
    retries: int = 4,
    batch_size: int = 16,
) -> RubricReward:
    """A rubric back-end from `hf:PATH` or `openai:MODEL@BASE_URL` (module docstring)."""
    kind, sep, rest = spec.partition(":")
    if kind == "hf" and sep and rest:
        return RewardModelRubric(rest, device=device, batch_size=batch_size)
    if kind == "openai" and sep and rest:
        return JudgeRubric(
            rest,
            cache_path=cache_path,
            prompt_path=prompt_path,
            timeout_s=timeout_s,
            retries=retries,
        )
    raise ValueError(f"rubric_model must be hf:PATH or openai:MODEL@BASE_URL, got {spec!r}")
