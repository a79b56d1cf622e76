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
scores at a time (heads x len^2 x 4 B, measured); CUDA's kernels keep no score matrix. The LM
head's logits and a recomputed layer are never alive together: the larger counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vibethinker.plan.shapes import ModelShape

GIB = float(1 << 30)
RECOMPUTE = 1.0  # one recomputed layer's activations during backward (measured on CPU)
HEAD_BYTES = 12.0  # bytes per (position, vocab) of an unchunked LM head + cross-entropy
# One chunk of train/chunked.py's head (a custom autograd Function: the chunk's fp32 logits and
# their softmax / gradient formed in place, nothing kept between forward and backward); measured
# on CPU (scripts/plan_check.py). A LoRA-wrapped head goes chunk by chunk through
# torch.utils.checkpoint instead (recomputed logits, log-softmax and their grads alive at once).
CHUNK_BYTES = 8.0
CKPT_CHUNK_BYTES = 16.0


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


def train_state(
    s: ModelShape, gpus: int, cuda: bool, lora_r: int = 0, grads: str = "all", ckpt: bool = True
) -> list[Term]:
    """Weights, AdamW moments and gradients per device. Full fine-tuning: fp32, 12 B/param
    plus 4 B/param of gradients, sharded over `gpus` by FSDP2; LoRA: frozen fp32 weights
    replicated (DDP), 16 B per adapter parameter. `grads`: "all" (after backward), "head" (when
    backward has reached only the LM head/embedding) or "none" (between steps). On CUDA the bf16
    weight copies: on one device those the backward holds (every layer's without checkpointing,
    only the head's with it); under FSDP2 the unsharded root (embedding/head with its fp32
    gradient) and two unsharded layers."""
    p, n = s.params(), gpus
    shard = f", /{n}" if n > 1 else ""
    if lora_r:
        out = [
            Term("weights (fp32, frozen)", 4.0 * p),
            Term("LoRA adapters + grads + AdamW", 16.0 * s.lora_params(lora_r)),
        ]
    else:
        out = [Term(f"weights + AdamW moments (fp32{shard})", 12.0 * p / n)]
        if grads == "all":
            out.append(Term(f"gradients (fp32{shard})", 4.0 * p / n))
        elif grads == "head":
            out.append(Term("gradients so far (LM head)", 4.0 * s.embed_params() / n))
    if cuda and (n == 1 or lora_r):
        out.append(Term("bf16 weight copies (autocast)", 2.0 * (s.embed_params() if ckpt else p)))
    elif cuda:
        root = 6.0 * s.embed_params() + 2 * 2.0 * s.layer_params()
        out.append(Term("FSDP2 unsharded root + 2 layers", root))
    return out


def saved_activations(s: ModelShape, tokens: int, ckpt: bool, cuda: bool) -> float:
    """Activations kept from the forward until backward reaches them: every layer's (no
    checkpointing) or only each layer's fp32 input (checkpointing)."""
    if not ckpt:
        return s.layers * layer_act_bytes(s, cuda) * tokens
    return s.layers * 4.0 * s.hidden * tokens


def activations(s: ModelShape, tokens: int, ckpt: bool, cuda: bool) -> float:
    """All activation bytes of one forward/backward over `tokens` tokens: the saved ones plus,
    with checkpointing, the one layer backward recomputes at a time."""
    extra = RECOMPUTE * layer_act_bytes(s, cuda) * tokens if ckpt else 0.0
    return saved_activations(s, tokens, ckpt, cuda) + extra


def mask_bytes(rows: int, row_len: int, masked: bool) -> float:
    """A packed row's dense bool block-diagonal mask [len, len] (transformers builds it from the
    restarting position ids), one per row."""
    return float(rows) * row_len * row_len if masked else 0.0


def cpu_scores(s: ModelShape, rows: int, row_len: int, masked: bool, cuda: bool) -> float:
    """CPU sdpa with a mask builds one layer's fp32 scores at a time (measured: not kept per
    layer); CUDA's kernels keep no score matrix."""
    return 4.0 * s.heads * rows * row_len * row_len if masked and not cuda else 0.0


def head_logits(s: ModelShape, positions: int, chunk: int, lora: bool = False) -> float:
    """LM head + loss over `positions` trained positions: all at once (chunk 0), or at most
    `chunk` positions at a time (train/chunked.py; only one chunk's logits alive)."""
    if chunk:
        return (CKPT_CHUNK_BYTES if lora else CHUNK_BYTES) * min(positions, chunk) * s.vocab
    return HEAD_BYTES * positions * s.vocab


def kv_cache(s: ModelShape, tokens: int, dtype_bytes: float) -> float:
    """KV cache of `tokens` tokens: K and V, every layer, kv heads x head dim each."""
    return 2.0 * s.layers * s.kv_dim * dtype_bytes * tokens


def sampler_rows(prompt: int, max_new: int, token_budget: int, max_rows: int = 256) -> int:
    """Rows the hf sampler decodes at once (engines/hf.py plan_batches): rows x (prompt +
    max_new_tokens) within the token budget, at least one."""
    return max(1, min(max_rows, token_budget // max(prompt + max_new, 1)))


def hf_sampling(
    s: ModelShape, prompt: int, max_new: int, token_budget: int, dtype_bytes: float
) -> list[Term]:
    """The hf engine's KV cache at its fullest and one decode step's logits (fp32)."""
    rows = sampler_rows(prompt, max_new, token_budget)
    return [
        Term(
            f"KV cache ({rows} rows x {prompt + max_new} tok)",
            kv_cache(s, rows * (prompt + max_new), dtype_bytes),
        ),
        Term("decode logits", 4.0 * 2 * rows * s.vocab),
    ]


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
    """Peak of one training micro-step: the larger of (a) backward at the LM head (saved
    activations, masks, gradients of the head only) and (b) the optimizer step (all gradients).
    In (a) the head's logits and a recomputed layer (with CPU's attention scores) are never
    alive together (the head's backward ends before the layers' begins; measured on CPU), so
    the larger of the two counts."""
    tokens = st.rows * st.row_len
    ph = Phase(name, train_state(s, gpus, cuda, st.lora_r, "head", st.ckpt))
    kept = "layer inputs, checkpointed" if st.ckpt else "every layer"
    ph.add(f"saved activations ({tokens} tok, {kept})", saved_activations(s, tokens, st.ckpt, cuda))
    ph.add("attention masks", mask_bytes(st.rows, st.row_len, st.masked))
    what = f"chunks of {st.chunk}" if st.chunk and st.head_positions > st.chunk else "at once"
    head = head_logits(s, st.head_positions, st.chunk, lora=bool(st.lora_r))
    layer = activations(s, tokens, st.ckpt, cuda) - saved_activations(s, tokens, st.ckpt, cuda)
    layer += cpu_scores(s, st.rows, st.row_len, st.masked, cuda)
    if head >= layer:
        ph.add(f"LM head ({st.head_positions} pos, {what})", head)
    else:
        ph.add("one recomputed layer (+ CPU attention scores)", layer)
    if st.gather:
        ph.add("gathered response hidden states", 16.0 * s.hidden * st.head_positions)
    step = Phase(f"{name} (optimizer step)", train_state(s, gpus, cuda, st.lora_r, "all", True))
    return ph if ph.total >= step.total else step
