"""Sampler over any OpenAI-compatible HTTP server (vLLM, SGLang, llama.cpp's server, ...).

Standard library only (urllib + a thread pool): no `openai` package. One request per prompt asks
for its n samples (`n`); if a server returns fewer choices (some cap n, `transformers serve`
ignores it) the rest are requested again, each follow-up with its OWN seed (the same seed on a
seed-honouring server would return the same sample again, collapsing n samples into duplicates
and inflating nothing but corrupting pass@k and maj@k). A server seen returning one choice for
n > 1 is marked as ignoring n (one warning): later prompts are then split into n one-sample
requests up front, run concurrently. Requests run `concurrency` at a time, each with a socket `timeout`; connection errors,
timeouts, HTTP 429 and 5xx are retried `max_retries` times with exponential backoff, other HTTP
errors fail at once. Failure raises `SamplerError` naming the URL and the last error, never hangs.

Endpoints: `chat` (/chat/completions, the server applies the model's chat template) and
`completions` (/completions, the prompt is sent verbatim; chat prompts are refused there).
Logprobs are parsed when the server returns them (requested by default); token ids only when the
server reports them (vLLM with `return_tokens_as_token_ids`), else `token_ids` is empty.
Response lengths: the ids, else the logprobs, else the response's `usage.completion_tokens` (exact
for a one-choice response), else a count with `tokenizer` when given, else None (unknown, never
0). With a `tokenizer` (its folder, e.g. the served checkpoint), the chat template's turn end
(`<|im_end|>`) is also sent as a stop string, so a server whose checkpoint only stops on its base
EOS still ends each answer at the turn end.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from vibethinker import ledger
from vibethinker.engines import (
    Prompt,
    SamplerError,
    SamplingParams,
    as_messages,
    chat_end_token,
    truncate_at_stop,
)
from vibethinker.log import get_logger
from vibethinker.types import Completion

log = get_logger("engines.openai")
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
_SEED_STRIDE = 1_000_003  # seed of sample j of prompt i: seed + i + j * stride (distinct streams)


def request_seed(seed: int | None, prompt_index: int, first_sample: int) -> int | None:
    """Seed of a request for prompt `prompt_index` whose first sample is `first_sample`: the
    first request keeps seed + i; each follow-up gets its own stream."""
    if seed is None:
        return None
    return seed + prompt_index + first_sample * _SEED_STRIDE


class OpenAISampler:
    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key: str | None = None,
        endpoint: str = "chat",
        concurrency: int = 8,
        timeout: float = 600.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        logprobs: bool = True,
        extra_body: dict[str, Any] | None = None,
        tokenizer: Any = None,
    ):
        if endpoint not in ("chat", "completions"):
            raise ValueError(f"endpoint must be 'chat' or 'completions', got {endpoint!r}")
        self.base_url = base_url.rstrip("/")
        self.model, self.endpoint = model, endpoint
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.concurrency, self.timeout = max(1, concurrency), timeout
        self.max_retries, self.backoff = max_retries, backoff
        self.logprobs, self.extra_body = logprobs, dict(extra_body or {})
        if isinstance(tokenizer, (str, os.PathLike)):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        self.tokenizer = tokenizer
        end = chat_end_token(tokenizer) if tokenizer is not None else None
        self.turn_end = tokenizer.convert_ids_to_tokens(end) if end is not None else None
        self.ignores_n = False  # set when the server answers n > 1 with one choice
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"{self.base_url}/{'chat/completions' if self.endpoint == 'chat' else 'completions'}"

    def generate(
        self, prompts: list[Prompt], n: int, params: SamplingParams | None = None
    ) -> list[list[Completion]]:
        params = params or SamplingParams()
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        cancel = threading.Event()
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            split = self.ignores_n and n > 1
            if split:  # known to ignore n: one request per sample, all in flight
                jobs = [(i, j) for i in range(len(prompts)) for j in range(n)]
                futures = [
                    pool.submit(self._one_prompt, prompts[i], 1, params, i, cancel, j)
                    for i, j in jobs
                ]
            else:
                futures = [
                    pool.submit(self._one_prompt, p, n, params, i, cancel)
                    for i, p in enumerate(prompts)
                ]
            try:
                got = [f.result() for f in futures]
                if not split:
                    return got
                return [sum(got[i * n : (i + 1) * n], []) for i in range(len(prompts))]
            except BaseException:
                cancel.set()  # queued and retrying requests give up instead of running
                for f in futures:
                    f.cancel()
                raise

    def _one_prompt(
        self, prompt: Prompt, n: int, params: SamplingParams, i: int, cancel=None, first: int = 0
    ) -> list[Completion]:
        """n samples of prompt i (sample indices first, first+1, ...)."""
        out: list[Completion] = []
        while len(out) < n:
            ask = 1 if self.ignores_n else n - len(out)
            body = self._body(prompt, ask, params, i, first + len(out))
            got = self._parse(self._request(body, cancel or threading.Event()))
            if not got:
                raise SamplerError(f"{self.url}: server returned no choices")
            if ask > 1 and len(got) == 1:
                self._mark_ignores_n(ask)
            out.extend(got[: n - len(out)])
        return out

    def _mark_ignores_n(self, asked: int) -> None:
        with self._lock:
            if self.ignores_n:
                return
            self.ignores_n = True
        log.warning(
            "%s answered n=%d with one choice: the server ignores `n`; asking one sample "
            "per request from now on, each with its own seed",
            self.url,
            asked,
        )

    def _body(
        self, prompt: Prompt, n: int, params: SamplingParams, i: int, first: int = 0
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.max_new_tokens > 0:  # 0: up to the server's context (max_tokens absent)
            body["max_tokens"] = params.max_new_tokens
        if params.top_k > 0:  # not in the OpenAI API; vLLM/SGLang accept it (0 = off = absent)
            body["top_k"] = params.top_k
        stop = list(params.stop) + ([self.turn_end] if self.turn_end else [])
        if stop:
            body["stop"] = list(dict.fromkeys(stop))
        if params.seed is not None:  # a distinct, reproducible stream per prompt and follow-up
            body["seed"] = request_seed(params.seed, i, first)
        if self.endpoint == "chat":
            body["messages"] = as_messages(prompt)
            if self.logprobs:
                body["logprobs"] = True
        else:
            if not isinstance(prompt, str):
                raise SamplerError("the completions endpoint takes string prompts, not chats")
            body["prompt"] = prompt
            if self.logprobs:
                body["logprobs"] = 1
        body.update(self.extra_body)
        return body

    def _request(self, body: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            if cancel.is_set():
                raise SamplerError(f"{self.url}: cancelled after another request failed")
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")[:500]
                last = f"HTTP {e.code}: {detail}"
                if e.code not in _RETRY_STATUS:
                    raise SamplerError(f"{self.url}: {last}") from None
            except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError) as e:
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
            if attempt < self.max_retries:
                delay = self.backoff * 2**attempt
                log.warning("%s: %s; retry %d in %.1fs", self.url, last, attempt + 1, delay)
                cancel.wait(delay)
        raise SamplerError(f"{self.url}: failed after {self.max_retries + 1} attempts: {last}")

    def _parse(self, resp: dict[str, Any]) -> list[Completion]:
        out = []
        choices = sorted(resp.get("choices") or [], key=lambda c: c.get("index", 0))
        usage = (resp.get("usage") or {}).get("completion_tokens")
        used = resp.get("usage") or {}  # the cost ledger: one remote request and its tokens
        ledger.teacher(
            1, int(used.get("prompt_tokens") or 0), int(used.get("completion_tokens") or 0)
        )
        for ch in choices:
            if self.endpoint == "chat":
                msg = ch.get("message") or {}
                text = msg.get("content") or ""
                # Servers with a reasoning parser split the thinking off; put it back in the
                # `<think>` form the verifiers and the paper's outputs use.
                reasoning = msg.get("reasoning_content") or msg.get("reasoning")
                if reasoning:
                    text = f"<think>{reasoning}</think>{text}"
                lp = ch.get("logprobs") or {}
                content = lp.get("content") or []
                logprobs = [float(t["logprob"]) for t in content] or None
                tokens = [t.get("token", "") for t in content]
            else:
                text = ch.get("text") or ""
                lp = ch.get("logprobs") or {}
                logprobs = [float(x) for x in (lp.get("token_logprobs") or [])] or None
                tokens = list(lp.get("tokens") or [])
            token_ids = ch.get("token_ids") or _token_ids(tokens)
            finish = "length" if ch.get("finish_reason") == "length" else "stop"
            if self.turn_end:  # a server that returns special tokens in the text
                text, hit = truncate_at_stop(text, [self.turn_end])
                finish = "stop" if hit else finish
            count = None
            if not token_ids and not logprobs:
                if isinstance(usage, int) and len(choices) == 1:
                    count = usage  # exact: the usage of a one-choice response is its length
                elif self.tokenizer is not None:
                    count = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            out.append(Completion(text, list(token_ids), logprobs, finish, count))
        return out


def _token_ids(tokens: list[str]) -> list[int]:
    """vLLM's `return_tokens_as_token_ids` renders each token as "token_id:<id>"."""
    if tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        try:
            return [int(t[9:]) for t in tokens]
        except ValueError:
            return []
    return []
