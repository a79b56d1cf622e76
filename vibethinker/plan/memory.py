"""Peak memory per device, term by term: pure functions of a model shape and a few numbers.

Two ways of computing, as the trainers run (train/policy.py):
- `cuda=True`: fp32 master weights, gradients and AdamW moments; bf16 autocast for the matmuls
  (the residual stream and RMSNorm stay fp32); FSDP2 shards the fp32 state over N devices.
- `cuda=False`: CPU, fp32 everywhere (what scripts/plan_check.py measures against peak RSS).

Activation bytes per token and layer, Qwen2 layer as transformers runs it (sdpa attention):
  fp32 on CPU: 7 h + 2 kv + 4 I elements of 4 bytes: the MLP's gate, up, silu(gate) and product
               (4 I), the keys and values after RoPE (2 kv), and 7 h-wide tensors (layer input,
               RMSNorm outputs, queries, attention output, residual sum). Fitted to measured peaks
               (scripts/plan_check.py: the slope over depth, width and FFN width of peak RSS).
  CUDA:        not measured (no GPU yet): the same tensors with the residual stream and the
               RMSNorms in fp32 (6 h x 4 B) and the rest in bf16, plus the bf16 casts autocast
               makes of each linear's input (2 x (7 h + 2 kv + 4 I) B).
With activation checkpointing a layer keeps only its fp32 input (4 h B per token); backward
recomputes one layer at a time (factor `RECOMPUTE` of one layer's activations, measured on CPU).
A packed row's block-diagonal mask is [len, len] bool; CPU's sdpa then builds one layer's fp32
scores at a time (heads x len^2 x 4 B, measured); CUDA's kernels keep no score matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vibethinker.plan.shapes import ModelShape

GIB = float(1 << 30)
RECOMPUTE = 1.0  # one recomputed layer's activations during backward (measured on CPU)
HEAD_BYTES = 12.0  # bytes per (position, vocab) of an unchunked LM head + cross-entropy
CHUNK_BYTES = 16.0  # the same for one checkpointed chunk (recomputed logits, log-softmax, grads)


@dataclass(frozen=True)
class Term:
    name: str
    bytes: float


@dataclass
class Phase:
    """One phase of a stage (sampling, update, scoring): its terms are alive at once."""

    name: str
    terms: list[Term] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(t.bytes for t in self.terms)

    def add(self, name: str, nbytes: float) -> Phase:
        if nbytes > 0:
            self.terms.append(Term(name, float(nbytes)))
        return self


def layer_act_bytes(s: ModelShape, cuda: bool) -> float:
    """Saved activation bytes per token of one decoder layer (training, no checkpointing)."""
    h, kv, i = s.hidden, s.kv_dim, s.intermediate
    if not cuda:
        return 4.0 * (7 * h + 2 * kv + 4 * i)
    return 4.0 * 6 * h + 2.0 * (7 * h + 2 * kv + 4 * i)


def train_state(s: ModelShape, gpus: int, cuda: bool, lora_r: int = 0) -> list[Term]:
    """Weights, gradients and AdamW moments per device. Full fine-tuning: 16 B/param fp32,
    sharded over `gpus` by FSDP2; LoRA: frozen fp32 weights replicated (DDP), 16 B per adapter
    parameter. On CUDA the bf16 copies of the weights: autocast's cache on one device, FSDP2's
    unsharded layers (two at a time) and root (embedding/head with its fp32 gradient) on N."""
    p = s.params()
    if lora_r:
        out = [Term("weights (fp32, frozen)", 4.0 * p),
               Term("LoRA adapters + grads + AdamW", 16.0 * s.lora_params(lora_r))]  # fmt: skip
        return out + ([Term("bf16 weight copies (autocast)", 2.0 * p)] if cuda else [])
    out = [Term(f"weights+grads+AdamW (fp32{f', /{gpus}' if gpus > 1 else ''})", 16.0 * p / gpus)]
    if cuda and gpus == 1:
        out.append(Term("bf16 weight copies (autocast)", 2.0 * p))
    elif cuda:
        root = 6.0 * s.embed_params() + 2 * 2.0 * s.layer_params()
        out.append(Term("FSDP2 unsharded root + 2 layers", root))
    return out


def activations(s: ModelShape, tokens: int, ckpt: bool, cuda: bool) -> float:
    """Activation bytes of one forward/backward over `tokens` tokens (all rows of a micro-batch)."""
    per_layer = layer_act_bytes(s, cuda) * tokens
    if not ckpt:
        return s.layers * per_layer
    return s.layers * 4.0 * s.hidden * tokens + RECOMPUTE * per_layer


def attention_extra(s: ModelShape, rows: int, row_len: int, masked: bool, cuda: bool) -> float:
    """Square-in-length terms of packed rows: the dense bool block-diagonal mask [len, len]
    (transformers builds it from the restarting position ids) and, on CPU, one layer's fp32
    attention scores at a time (measured: not kept per layer, checkpointing or not)."""
    if not masked:
        return 0.0
    mask = float(rows) * row_len * row_len
    return mask if cuda else mask + 4.0 * s.heads * rows * row_len * row_len


def head_logits(s: ModelShape, positions: int, chunk: int) -> float:
    """LM head + loss over `positions` trained positions: all at once (chunk 0), or `chunk`
    positions at a time, each chunk checkpointed (only one chunk's logits alive)."""
    if chunk and positions > chunk:
        return CHUNK_BYTES * chunk * s.vocab
    return HEAD_BYTES * positions * s.vocab


def kv_cache(s: ModelShape, tokens: int, dtype_bytes: float) -> float:
    """KV cache of `tokens` tokens: K and V, every layer, kv heads x head dim each."""
    return 2.0 * s.layers * s.kv_dim * dtype_bytes * tokens


def sampler_rows(prompt: int, max_new: int, token_budget: int, max_rows: int = 256) -> int:
    """Rows the hf sampler decodes at once (engines/hf.py plan_batches): rows x (prompt +
    max_new_tokens) within the token budget, at least one."""
    return max(1, min(max_rows, token_budget // max(prompt + max_new, 1)))


def hf_sampling(s: ModelShape, prompt: int, max_new: int, token_budget: int,
                dtype_bytes: float) -> list[Term]:  # fmt: skip
    """The hf engine's KV cache at its fullest and one decode step's logits (fp32)."""
    rows = sampler_rows(prompt, max_new, token_budget)
    return [Term(f"KV cache ({rows} rows x {prompt + max_new} tok)",
                 kv_cache(s, rows * (prompt + max_new), dtype_bytes)),
            Term("decode logits", 4.0 * 2 * rows * s.vocab)]  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One training forward/backward (a micro-batch) and the optimizer state around it."""

    rows: int  # sequences (packed rows) in the micro-batch
    row_len: int  # tokens per row
    head_positions: int  # positions through the LM head (trained / response tokens)
    chunk: int = 0  # LM head positions per checkpointed chunk (0: all at once)
    ckpt: bool = False  # activation checkpointing per decoder layer
    masked: bool = False  # a dense [len, len] mask per row (packed SFT rows)
    gather: bool = False  # RL: the response positions' hidden states are gathered (2 copies)
    lora_r: int = 0


def train_phase(s: ModelShape, st: Step, gpus: int, cuda: bool, name: str = "update") -> Phase:
    """Peak of one training micro-step: optimizer state + activations + LM head + masks."""
    tokens = st.rows * st.row_len
    ph = Phase(name, list(train_state(s, gpus, cuda, st.lora_r)))
    ckpt_txt = "checkpointed" if st.ckpt else "no checkpointing"
    ph.add(f"activations ({tokens} tok, {ckpt_txt})", activations(s, tokens, st.ckpt, cuda))
    ph.add("attention mask/scores", attention_extra(s, st.rows, st.row_len, st.masked, cuda))
    what = f"chunks of {st.chunk}" if st.chunk and st.head_positions > st.chunk else "at once"
    ph.add(f"LM head ({st.head_positions} pos, {what})", head_logits(s, st.head_positions,
                                                                     st.chunk))  # fmt: skip
    if st.gather:
        ph.add("gathered response hidden states", 16.0 * s.hidden * st.head_positions)
    return ph
