"""In-process transformers sampler with its own KV-cache decoding loop.

Why not `model.generate`: it samples with the checkpoint's generation_config (top_k=50 by default
on many models, which the paper's protocol turns off), its per-step machinery costs more than a
tiny model's forward, and it keeps finished rows in the batch until the longest row ends. This
loop (benchmarks/sampling.py measures it against `generate`):
- prefills each distinct prompt once and copies its KV cache to its n samples;
- batches rows by a token budget (rows x (prompt + max_new_tokens) <= token_budget), prompts
  sorted by length so padding is small, longest first so an out-of-memory shows up at once;
- drops finished rows from the batch (KV cache, mask, positions) as they finish, and exits when
  all rows are done;
- stops at EOS (kept as the last token, it is part of what the policy produced): the
  checkpoint's EOS ids AND the chat template's turn end (`<|im_end|>`), which is what an SFT'd
  base model emits (`engines.stop_token_ids`); and at stop strings (the text is cut before the
  stop string; the tokens end with the token completing it);
- keeps prompt + response within the context: `max_new_tokens=0` means "up to the context"
  (each row stops at `context_len - prompt length`); an explicit cap that would run past the
  model's positions is refused (`models.check_context`) rather than silently extrapolated.

Static path (`static_cache=True`, or VIBETHINKER_HF_STATIC=1; off by default): for GPUs, where
a decode step of a 1.5B-3B model is launch- and allocation-bound. After the same prefill, each
batch decodes into a preallocated KV cache of fixed shape [rows, kv heads, prompt + max_new
(rounded up to 64), head dim] with a fixed-size additive attention mask, so every decode step has
the same shapes and no host sync: on CUDA the step is captured once as a CUDA graph and replayed
(`cuda_graphs`); its buffers are kept for the next batch of the same shape (an RL step's
batches). Row bookkeeping stays on the device (finished rows keep their slot until the batch
ends; the loop checks for "all done" every `sync_every` steps). It runs the same code on CPU
(without graphs), where tests check that greedy tokens and logprobs equal the plain path's. Needs
sdpa or eager attention and full-attention layers; otherwise the plain path runs (logged).

Logprobs: `Completion.logprobs[t]` is log pi_theta(y_t | prompt, y_<t) of the RAW policy, i.e. the
fp32 log_softmax of the logits at temperature 1 without top-p/top-k truncation, whatever the
sampling temperature. That is the quantity an RL trainer's importance ratio and KL use, and it
matches a teacher-forced forward over prompt + completion (tested to 1e-4 in fp32; in bf16 on GPU
incremental decoding differs from a full forward by rounding, so trainers should recompute the
old-policy logprobs when they need exactness).
"""

from __future__ import annotations

import inspect
import os
import time
from typing import Any

import torch

from vibethinker import ledger
from vibethinker.engines import (
    Prompt,
    SamplingParams,
    encode_prompt,
    stop_token_ids,
    truncate_at_stop,
)
from vibethinker.engines.hf_cache import StaticDecoder, new_cache
from vibethinker.engines.hf_sampling import left_pad, plan_batches, sample_next
from vibethinker.log import get_logger
from vibethinker.models import ContextLengthError, check_context, load_model_and_tokenizer
from vibethinker.types import Completion

log = get_logger("engines.hf")


def _load(path: str, device: str, dtype: str, **load_kw: Any) -> tuple[Any, Any]:
    """The project's loader (tokenizer fixes; dtype "auto" keeps the saved dtype)."""
    return load_model_and_tokenizer(path, device=device, dtype=dtype, **load_kw)


class HFSampler:
    """Sampler over an in-process transformers causal LM.

    `model` is a path (loaded on `device` in `dtype`) or an already-loaded model, e.g. the live RL
    policy so rollouts are on-policy (then `tokenizer` is required and the model stays where it
    is; its train/eval mode is restored after sampling). `context_len` bounds prompt + response
    (0: the model's max_position_embeddings); `load_kw` go to the loader (e.g.
    rope_yarn_factor, rope_original_len).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        device: str | None = None,
        dtype: str = "auto",
        token_budget: int = 1 << 17,
        max_batch_size: int = 256,
        chat_template: bool = True,
        compact_frac: float = 0.75,
        context_len: int = 0,
        static_cache: bool | None = None,
        cuda_graphs: bool = True,
        sync_every: int = 16,
        **load_kw: Any,
    ):
        if isinstance(model, (str, os.PathLike)):
            device = device or ("cuda" if torch.cuda.is_available() else "cpu")
            model, tok = _load(str(model), device, dtype, **load_kw)
            tokenizer = tokenizer or tok
        if tokenizer is None:
            raise ValueError("HFSampler: pass a tokenizer along with an already-loaded model")
        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        self.token_budget, self.max_batch_size = token_budget, max_batch_size
        self.use_chat_template = chat_template and getattr(tokenizer, "chat_template", None)
        if chat_template and not self.use_chat_template:
            log.warning("tokenizer has no chat template; prompts are fed as raw text")
        self.compact_frac = compact_frac
        self.eos_ids = stop_token_ids(model, tokenizer, bool(self.use_chat_template))
        positions = getattr(model.config, "max_position_embeddings", None) or 0
        if context_len and positions and context_len > positions:
            check_context(model.config, context_len, f"context_len={context_len}")
        self.context_len = int(context_len or positions or 0)  # 0: unknown, no bound
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (min(self.eos_ids) if self.eos_ids else 0)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" in params
        self._pieces: dict[int, str] = {}
        if static_cache is None:
            static_cache = os.environ.get("VIBETHINKER_HF_STATIC", "0") not in ("", "0")
        self.static_cache = bool(static_cache) and self._static_ok()
        self.cuda_graphs = cuda_graphs and self.device.type == "cuda"
        self.sync_every = max(1, sync_every)
        self._decoder: StaticDecoder | None = None

    def _static_ok(self) -> bool:
        """Whether the static path can run this model (else the plain path, with a warning)."""
        cfg = self.model.config
        attn = getattr(cfg, "_attn_implementation", None) or "sdpa"
        kinds = set(getattr(cfg, "layer_types", None) or ["full_attention"])
        if attn not in ("sdpa", "eager") or kinds != {"full_attention"}:
            log.warning(
                f"static KV cache needs sdpa/eager attention and full-attention layers "
                f"(got {attn}, {sorted(kinds)}); using the plain decode loop"
            )
            return False
        return True

    # ---- prompts -------------------------------------------------------------------------
    def encode(self, prompt: Prompt) -> list[int]:
        """Prompt -> token ids, through the chat template (with the generation prompt)."""
        return encode_prompt(self.tokenizer, prompt, bool(self.use_chat_template))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    # ---- sampling ------------------------------------------------------------------------
    def generate(
        self, prompts: list[Prompt], n: int, params: SamplingParams | None = None
    ) -> list[list[Completion]]:
        params = params or SamplingParams()
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        ids = [self.encode(p) for p in prompts]
        out: list[list[Completion]] = [[] for _ in prompts]
        max_new = self.response_budget(max((len(x) for x in ids), default=0), params)
        batches = plan_batches(
            [len(x) for x in ids], n, max_new, self.token_budget, self.max_batch_size
        )
        gen = None
        if params.seed is not None:
            gen = torch.Generator(device=self.device).manual_seed(params.seed)
        was_training = self.model.training
        self.model.eval()
        t0, steps = time.perf_counter(), 0
        try:
            with torch.inference_mode():
                for chunks in batches:
                    rows = self._sample_batch(
                        [ids[i] for i, _ in chunks], [c for _, c in chunks], params, gen
                    )
                    steps += max((len(r.token_ids) for r in rows), default=0)
                    k = 0
                    for i, c in chunks:
                        out[i].extend(rows[k : k + c])
                        k += c
        finally:
            self.model.train(was_training)
        self._count(ids, out, steps, time.perf_counter() - t0)
        return out

    def _count(self, ids: list[list[int]], out: list[list[Completion]], steps: int, dt: float):
        """The cost ledger's record of one call (a no-op when no ledger is open)."""
        if ledger.current() is None:
            return
        comps = [(len(ids[i]), c) for i, cs in enumerate(out) for c in cs]
        ledger.sampled(
            prompts=len(ids),
            prompt_lens=[n for n, _ in comps],
            lengths=[len(c.token_ids) for _, c in comps],
            truncated=sum(c.finish_reason == "length" for _, c in comps),
            decode_steps=steps,
            seconds=dt,
            params=self._n_params(),
        )

    def _n_params(self) -> int:
        if not hasattr(self, "_params"):
            self._params = sum(p.numel() for p in self.model.parameters())
        return self._params

    def response_budget(self, longest_prompt: int, params: SamplingParams) -> int:
        """The most response tokens any row may take: `max_new_tokens`, or with 0 the context
        left after the longest prompt. Refuses a cap that runs past the model's positions."""
        if params.max_new_tokens <= 0:
            if not self.context_len:
                raise ValueError("max_new_tokens=0 (up to the context) needs a known context_len")
            left = self.context_len - longest_prompt
            if left <= 0:
                raise ValueError(
                    f"a prompt of {longest_prompt} tokens fills the context "
                    f"({self.context_len}); nothing left to generate"
                )
            return left
        if self.context_len and longest_prompt + params.max_new_tokens > self.context_len:
            need = longest_prompt + params.max_new_tokens
            check_context(self.model.config, need, f"max_new_tokens={params.max_new_tokens}")
            raise ContextLengthError(
                f"max_new_tokens={params.max_new_tokens} + a {longest_prompt}-token prompt exceeds "
                f"context_len={self.context_len}; lower max_new_tokens or raise context_len"
            )
        return params.max_new_tokens

    def _forward(self, input_ids, mask, pos, cache, last_only: bool) -> torch.Tensor:
        kw = {self._cache_kw: cache, "use_cache": True}
        if last_only and self._keep_kw:
            kw["logits_to_keep"] = 1
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=pos, **kw)
        return out.logits[:, -1, :]

    def _sample_batch(
        self, prompt_ids: list[list[int]], counts: list[int], params: SamplingParams, gen: Any
    ) -> list[Completion]:
        if self.static_cache:
            return self._sample_batch_static(prompt_ids, counts, params, gen)
        dev = self.device
        inp, mask = left_pad(prompt_ids, self.pad_id)
        inp, mask = inp.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        # per-row response cap: max_new_tokens, or (0) the context left after the row's prompt
        caps_p = [params.max_new_tokens or self.context_len - len(p) for p in prompt_ids]
        cache = new_cache(self.model, max(caps_p))
        logits = self._forward(inp, mask, pos, cache, last_only=True)
        # Prefill once per distinct prompt, then copy its cache to its samples.
        rep = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts)).to(dev)
        cache.batch_select_indices(rep)
        logits, mask = logits[rep], mask[rep]
        next_pos = mask.sum(-1, keepdim=True)  # [B, 1] position of the next token
        n_rows = int(rep.shape[0])
        live = list(range(n_rows))  # batch slot -> row
        tokens: list[list[int]] = [[] for _ in range(n_rows)]
        lps: list[list[float]] = [[] for _ in range(n_rows)]
        finish: list[str | None] = [None] * n_rows
        hit_stop = [False] * n_rows
        caps = [caps_p[i] for i in rep.tolist()]
        eos = set(self.eos_ids)
        for _ in range(max(caps)):
            tok, lp = sample_next(logits, params, gen)
            for slot, (t, lpv) in enumerate(zip(tok.tolist(), lp.tolist())):
                r = live[slot]
                if finish[r] is not None:
                    continue  # finished, still in the batch until the next compaction
                tokens[r].append(t)
                lps[r].append(lpv)
                if t in eos:
                    finish[r] = "stop"
                elif params.stop and self._hits_stop(tokens[r], t, params.stop):
                    finish[r], hit_stop[r] = "stop", True
                elif len(tokens[r]) >= caps[r]:
                    finish[r] = "length"
            alive = [s for s, r in enumerate(live) if finish[r] is None]
            if not alive:
                break
            if len(alive) <= self.compact_frac * len(live):
                idx = torch.tensor(alive, device=dev)
                cache.batch_select_indices(idx)
                mask, next_pos, tok = mask[idx], next_pos[idx], tok[idx]
                live = [live[s] for s in alive]
            mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
            logits = self._forward(tok[:, None], mask, next_pos, cache, last_only=False)
            next_pos = next_pos + 1
        return [
            self._completion(tokens[r], lps[r], finish[r], hit_stop[r], params)
            for r in range(n_rows)
        ]

    def _prefill(self, prompt_ids: list[list[int]], reserve: int):
        """Left-padded prefill of the distinct prompts: (last logits [P, V], cache, mask [P, W])."""
        inp, mask = left_pad(prompt_ids, self.pad_id)
        inp, mask = inp.to(self.device), mask.to(self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = new_cache(self.model, reserve)
        return self._forward(inp, mask, pos, cache, last_only=True), cache, mask

    def _sample_batch_static(
        self, prompt_ids: list[list[int]], counts: list[int], params: SamplingParams, gen: Any
    ) -> list[Completion]:
        """The static path: the same prefill, then fixed-shape decode steps (see the module
        docstring). Rows are never compacted; bookkeeping is on the device."""
        dev = self.device
        caps_p = [params.max_new_tokens or self.context_len - len(p) for p in prompt_ids]
        logits, prefill, pmask = self._prefill(prompt_ids, 0)
        rep = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts)).to(dev)
        rows, width, steps = int(rep.shape[0]), pmask.shape[1], max(caps_p)
        cap = -(-(width + steps) // 64) * 64  # rounded up: one graph serves nearby lengths
        d = self._decoder
        if d is None or (d.rows, d.cap) != (rows, cap):
            self._decoder = d = None  # free the old buffers first
            d = StaticDecoder(self.model, self._cache_kw, rows, cap, self.cuda_graphs)
            self._decoder = d
        d.load(prefill, rep, pmask[rep])
        del prefill
        logits, next_pos = logits[rep], pmask[rep].sum(-1, keepdim=True)
        caps = torch.tensor([caps_p[i] for i in rep.tolist()], device=dev)
        eos = torch.tensor(sorted(self.eos_ids) or [-1], device=dev)
        out_tok = torch.zeros((rows, steps), dtype=torch.long, device=dev)
        out_lp = torch.zeros((rows, steps), dtype=torch.float32, device=dev)
        done = torch.zeros(rows, dtype=torch.bool, device=dev)
        length = torch.zeros(rows, dtype=torch.long, device=dev)
        stopped = torch.zeros(rows, dtype=torch.bool, device=dev)  # by EOS or a stop string
        hit_stop = [False] * rows
        text_rows: list[list[int]] = [[] for _ in range(rows)]
        for t in range(steps):
            tok, lp = sample_next(logits, params, gen)
            out_tok[:, t], out_lp[:, t] = tok, lp
            live = ~done
            length = torch.where(live, length + 1, length)
            ends = torch.isin(tok, eos) & live
            if params.stop:  # stop strings need the text: one host sync per step
                for r, (tv, alive) in enumerate(zip(tok.tolist(), live.tolist())):
                    if alive:
                        text_rows[r].append(tv)
                        if tv not in self.eos_ids and self._hits_stop(
                            text_rows[r], tv, params.stop
                        ):
                            hit_stop[r] = True
                            ends[r] = True
            stopped |= ends
            done |= ends | (length >= caps)
            if t + 1 == steps or ((t + 1) % self.sync_every == 0 and bool(done.all())):
                break
            logits = d.step(tok, next_pos, width + t)
            next_pos = next_pos + 1
        toks, lps = out_tok.tolist(), out_lp.tolist()
        fin = ["stop" if s else "length" for s in stopped.tolist()]
        return [
            self._completion(toks[r][:n], lps[r][:n], fin[r], hit_stop[r], params)
            for r, n in enumerate(length.tolist())
        ]

    def _completion(self, toks, lps, finish, hit_stop, params) -> Completion:
        body = toks[:-1] if toks and toks[-1] in self.eos_ids else toks
        text = self.decode(body)
        if hit_stop:
            text, _ = truncate_at_stop(text, params.stop)
        return Completion(text=text, token_ids=toks, logprobs=lps, finish_reason=finish or "length")

    def _piece(self, t: int) -> str:
        if t not in self._pieces:
            self._pieces[t] = self.decode([t])
        return self._pieces[t]

    def _hits_stop(self, toks: list[int], t: int, stop: list[str]) -> bool:
        """Whether the text now contains a stop string; it can only end in the newest token."""
        piece = self._piece(t)
        # Cheap filter: a stop string can only complete here if the new piece holds its last
        # character (or is a partial byte sequence, which decodes to U+FFFD alone).
        if piece and "\ufffd" not in piece and not any(s and s[-1] in piece for s in stop):
            return False
        window = max(len(s) for s in stop) + 4  # a token is at least one character
        text = self.decode(toks[-window:])
        return any(s and s in text for s in stop)
