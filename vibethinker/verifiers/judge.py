"""Rubric reward for open prompts: one `Judge` interface, two backends.

Instruct RL (docs/PAPER.md) rewards open-ended answers with a judge besides the IFEval rules. A judge
maps (prompt, response) to a `Score` with value in [0, 1]:

- `EndpointJudge` ("openai"): an OpenAI-compatible chat endpoint grades the response against a
  rubric (helpfulness, coherence, instruction adherence, redundancy; integers 0-10 each in a
  small JSON object, or a final "Score: x/10" line as fallback); value = mean / 10. Standard
  library HTTP only (urllib), a request timeout, retries with exponential backoff on network
  errors, timeouts, 429 and 5xx, and a cache keyed by a content hash (in memory, optionally on
  disk as JSON). The API key is read from the environment variable named by `api_key_env`.
- `RewardModelJudge` ("hf_rm"): a local Hugging Face sequence-classification reward model
  (one logit); value = sigmoid(logit), the text formatted with the tokenizer's chat template
  when it has one.

The paper names the rubric criteria but not the prompt wording, the scale, nor how a verdict
becomes binary; those are ours. `correct` is `value >= pass_threshold` (a config value).
A judge never raises on a response: failures come back as Score(0, False, "judge_error:<why>").
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from vibethinker.log import get_logger
from vibethinker.types import Score

log = get_logger("verifiers.judge")

CRITERIA = ("helpfulness", "coherence", "instruction_adherence", "redundancy")

RUBRIC_SYSTEM = """You are a strict grader of assistant responses. Rate the RESPONSE to the \
PROMPT on four criteria, each an integer from 0 (worst) to 10 (best):
- helpfulness: does it solve the user's actual problem, correctly and completely?
- coherence: is it logically consistent, well organised and easy to follow?
- instruction_adherence: does it follow every explicit instruction and constraint of the prompt?
- redundancy: is it free of needless repetition, padding and filler? (10 = no redundancy)
Reply with only a JSON object, for example:
{"helpfulness": 7, "coherence": 8, "instruction_adherence": 6, "redundancy": 9}"""

RUBRIC_USER = "PROMPT:\n{prompt}\n\nRESPONSE:\n{response}"


class Judge(Protocol):
    """Grades a response to an open prompt; value in [0, 1]."""

    def score(self, prompt: str, response: str) -> Score: ...

    def score_batch(self, pairs: Sequence[tuple[str, str]]) -> list[Score]: ...


# ---------------------------------------------------------------------------------------------
# Parsing a judge's reply (pure)
# ---------------------------------------------------------------------------------------------
_SCORE_LINE_RE = re.compile(r"score\s*[:=]\s*(\d+(?:\.\d+)?)\s*/\s*10", re.IGNORECASE)
_KEY_ALIASES = {
    "instruction_following": "instruction_adherence",
    "adherence": "instruction_adherence",
    "instructions": "instruction_adherence",
    "non_redundancy": "redundancy",
    "conciseness": "redundancy",
}


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in `text` (fences and prose around them ignored)."""
    found, decoder, i = [], json.JSONDecoder(), text.find("{")
    while i >= 0:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = text.find("{", end)
    return found


def _as_0_10(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and 0 <= x <= 10 else None


def parse_rubric_reply(text: str) -> float | None:
    """Score in [0, 1] from a judge reply, or None when it cannot be read.

    Accepted, in order: the last JSON object carrying all four criteria (mean / 10); the last
    JSON object with an "overall" or "score" field; the last "Score: x/10" line."""
    for obj in reversed(_json_objects(text)):
        norm = {_KEY_ALIASES.get(k.lower().strip(), k.lower().strip()): v for k, v in obj.items()}
        vals = [_as_0_10(norm.get(c)) for c in CRITERIA]
        if all(v is not None for v in vals):
            return sum(vals) / (10 * len(vals))  # type: ignore[arg-type]
        for key in ("overall", "score"):
            v = _as_0_10(norm.get(key))
            if v is not None:
                return v / 10
    lines = _SCORE_LINE_RE.findall(text)
    if lines:
        v = _as_0_10(lines[-1])
        return None if v is None else v / 10
    return None


def content_key(*parts: str) -> str:
    """A stable hash of the strings that determine a verdict (the cache key)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------
class ScoreCache:
    """Thread-safe map content-hash -> Score, optionally persisted to a JSON file."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._data: dict[str, Score] = {}
        self._dirty = False
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
            self._data = {k: Score(float(v[0]), bool(v[1]), str(v[2])) for k, v in raw.items()}

    def get(self, key: str) -> Score | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, score: Score) -> None:
        with self._lock:
            self._data[key] = score
            self._dirty = True

    def __len__(self) -> int:
        return len(self._data)

    def flush(self) -> None:
        """Write the file atomically (temp file + rename) if anything changed."""
        if not self.path:
            return
        with self._lock:
            if not self._dirty:
                return
            raw = {k: [s.value, s.correct, s.reason] for k, s in self._data.items()}
            self._dirty = False
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(raw, f)
        os.replace(tmp, self.path)


# ---------------------------------------------------------------------------------------------
# Backend 1: OpenAI-compatible chat endpoint
# ---------------------------------------------------------------------------------------------
class _Retryable(Exception):
    pass


class EndpointJudge:
    """Rubric grading by an OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        temperature: float = 0.0,
        max_tokens: int = 256,
        pass_threshold: float = 0.7,
        cache_path: str | None = None,
        workers: int = 8,
        system_prompt: str = RUBRIC_SYSTEM,
        user_template: str = RUBRIC_USER,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        # No key is fine for local servers (vLLM, llama.cpp) that do not check one.
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.pass_threshold = pass_threshold
        self.workers = workers
        self.system_prompt = system_prompt
        self.user_template = user_template
        self.cache = ScoreCache(cache_path)
        self.sleep: Callable[[float], None] = time.sleep  # swappable in tests

    def _key(self, prompt: str, response: str) -> str:
        # Everything that changes the verdict is in the key; the URL and the key are not.
        return content_key(
            self.model,
            str(self.temperature),
            self.system_prompt,
            self.user_template,
            prompt,
            response,
        )

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(
            self.url, data=json.dumps(payload).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            if e.code == 429 or e.code >= 500:
                raise _Retryable(f"http_{e.code}") from e
            raise RuntimeError(f"http_{e.code}") from e
        except TimeoutError as e:
            raise _Retryable("timeout") from e
        except urllib.error.URLError as e:
            why = "timeout" if isinstance(e.reason, TimeoutError) else "network"
            raise _Retryable(why) from e
        except (ConnectionError, OSError) as e:  # reset / dropped connection mid-read
            raise _Retryable("network") from e
        try:
            return json.loads(raw)
        except ValueError as e:
            raise _Retryable("bad_json") from e

    def _request(self, prompt: str, response: str) -> str:
        payload = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": self.system_prompt},
                {
                    "role": "user",
                    "content": self.user_template.format(prompt=prompt, response=response),
                },
            ],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        last = "unknown"
        for attempt in range(self.max_retries + 1):
            try:
                data = self._post(payload)
                return str(data["choices"][0]["message"]["content"] or "")
            except _Retryable as e:
                last = str(e)
            except (KeyError, IndexError, TypeError):
                last = "bad_response"
            if attempt < self.max_retries:
                # Exponential backoff with jitter, so parallel workers do not retry in lockstep.
                delay = min(self.backoff_max_s, self.backoff_s * 2**attempt)
                self.sleep(delay * (0.5 + random.random() / 2))
        raise RuntimeError(last)

    def _score_uncached(self, prompt: str, response: str) -> Score:
        try:
            reply = self._request(prompt, response)
        except Exception as e:  # a judge outage must not crash training; report it per row
            log.warning("judge request failed: %s", e)
            return Score(0.0, False, f"judge_error:{e}")
        value = parse_rubric_reply(reply)
        if value is None:
            return Score(0.0, False, "judge_unparsed")
        return Score(value, value >= self.pass_threshold, "ok")

    def _score_one(self, prompt: str, response: str) -> Score:
        key = self._key(prompt, response)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        score = self._score_uncached(prompt, response)
        if score.reason == "ok":  # errors are not cached: a later call may succeed
            self.cache.put(key, score)
        return score

    def score(self, prompt: str, response: str) -> Score:
        score = self._score_one(prompt, response)
        self.cache.flush()
        return score

    def score_batch(self, pairs: Sequence[tuple[str, str]]) -> list[Score]:
        """Scores in input order; duplicates are requested once; `workers` requests in flight."""
        unique = list(dict.fromkeys(pairs))
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(unique) or 1))) as ex:
            results = dict(zip(unique, ex.map(lambda p: self._score_one(*p), unique)))
        self.cache.flush()
        return [results[p] for p in pairs]


# ---------------------------------------------------------------------------------------------
# Backend 2: local sequence-classification reward model
# ---------------------------------------------------------------------------------------------
def _sigmoid(z: float) -> float:
    if math.isnan(z):
        return 0.0
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)  # no overflow for very negative z
    return e / (1.0 + e)


class RewardModelJudge:
    """A local HF reward model: AutoModelForSequenceClassification with one output logit."""

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        model_path: str | None = None,
        device: str = "cpu",
        max_length: int = 2048,
        batch_size: int = 8,
        pass_threshold: float = 0.5,
    ) -> None:
        if model is None:
            if not model_path:
                raise ValueError("RewardModelJudge needs `model` or `model_path`")
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=1)
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model_path)
        if tokenizer is None:
            raise ValueError("RewardModelJudge needs a tokenizer with its model")
        if getattr(model.config, "num_labels", 1) != 1:
            raise ValueError(f"reward model must have num_labels=1, has {model.config.num_labels}")
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        # Keep the end of over-long inputs: the response is what is being graded.
        self.tokenizer.truncation_side = "left"
        self.device = device
        self.max_length = max_length
        self.pass_threshold = pass_threshold
        # Without a pad id the model cannot find the last token of a padded row: go one by one.
        self.batch_size = batch_size if model.config.pad_token_id is not None else 1
        if self.tokenizer.pad_token_id is None and model.config.pad_token_id is not None:
            self.tokenizer.pad_token_id = model.config.pad_token_id

    def format(self, prompt: str, response: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            messages = [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": response},
            ]
            return self.tokenizer.apply_chat_template(messages, tokenize=False)
        return f"{prompt}\n\n{response}"

    def _logits(self, texts: list[str]) -> list[float]:
        import torch

        enc = self.tokenizer(
            texts,
            return_tensors="pt",
            padding=len(texts) > 1,
            truncation=True,
            max_length=self.max_length,
        )
        enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        with torch.no_grad():
            logits = self.model(**enc).logits  # [B, 1]
        return logits[:, 0].float().tolist()

    def score_batch(self, pairs: Sequence[tuple[str, str]]) -> list[Score]:
        out: list[Score] = []
        for i in range(0, len(pairs), self.batch_size):
            chunk = pairs[i : i + self.batch_size]
            try:
                logits = self._logits([self.format(p, r) for p, r in chunk])
            except Exception as e:  # e.g. out of memory: report per row, do not crash the loop
                log.exception("reward model failed on a batch")
                out.extend(Score(0.0, False, f"judge_error:{type(e).__name__}") for _ in chunk)
                continue
            for z in logits:
                value = _sigmoid(z)
                out.append(Score(value, value >= self.pass_threshold, "ok"))
        return out

    def score(self, prompt: str, response: str) -> Score:
        return self.score_batch([(prompt, response)])[0]


JUDGES: dict[str, Callable[..., Judge]] = {
    "openai": EndpointJudge,
    "hf_rm": RewardModelJudge,
}


def make_judge(kind: str, **kwargs: Any) -> Judge:
    """Build a judge by registry name ("openai" | "hf_rm") with that backend's arguments."""
    if kind not in JUDGES:
        raise ValueError(f"unknown judge kind {kind!r}; choose one of {sorted(JUDGES)}")
    return JUDGES[kind](**kwargs)
