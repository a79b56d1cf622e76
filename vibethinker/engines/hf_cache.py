"""The hf engine's KV caches (engines/hf.py has the why): full-attention layers that grow in
place (the plain path), and the static path's preallocated fixed-shape cache and decoder, whose
decode step is captured once as a CUDA graph and replayed.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from vibethinker.log import get_logger

log = get_logger("engines.hf")  # the engine's logger


class GrowingLayer(DynamicLayer):
    """A DynamicLayer whose keys/values live in a buffer with room for `reserve` more tokens:
    a decoding step writes in place instead of copying the whole cache (DynamicLayer's torch.cat
    costs O(T) per step, O(T^2) per sequence)."""

    def __init__(self, reserve: int = 0):
        super().__init__()
        self.reserve, self._len = reserve, 0
        self._kb: torch.Tensor | None = None
        self._vb: torch.Tensor | None = None

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self._len + key_states.shape[-2]
        if self._kb is None or end > self._kb.shape[-2]:
            cap = max(end + self.reserve, 2 * end)
            kb = key_states.new_empty((*key_states.shape[:-2], cap, key_states.shape[-1]))
            vb = value_states.new_empty((*value_states.shape[:-2], cap, value_states.shape[-1]))
            if self._kb is not None and self._len:
                kb[..., : self._len, :] = self._kb[..., : self._len, :]
                vb[..., : self._len, :] = self._vb[..., : self._len, :]
            self._kb, self._vb = kb, vb
        self._kb[..., self._len : end, :] = key_states
        self._vb[..., self._len : end, :] = value_states
        self._len = end
        self.keys, self.values = self._kb[..., :end, :], self._vb[..., :end, :]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._kb is not None:
            self._kb, self._vb = self._kb[indices], self._vb[indices]
            self.keys = self._kb[..., : self._len, :]
            self.values = self._vb[..., : self._len, :]


class StaticLayer(DynamicLayer):
    """Preallocated keys/values [B, H, T, D]. A decode step writes its one token at `write_pos`
    (a one-element device tensor: fixed shapes, no host sync, so the step can be a CUDA graph)
    and attention reads the whole buffer under a mask of the filled positions."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, write_pos: torch.Tensor):
        super().__init__()
        self.keys, self.values, self.write_pos = keys, values, write_pos
        self.device, self.dtype = keys.device, keys.dtype
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        self.keys.index_copy_(2, self.write_pos, key_states.to(self.keys.dtype))
        self.values.index_copy_(2, self.write_pos, value_states.to(self.values.dtype))
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.keys.shape[-2]


class StaticDecoder:
    """Fixed-shape decode state of one batch shape (rows, cache length): KV buffers, input
    buffers, the additive mask and, on CUDA, the captured graph of one decode step."""

    def __init__(self, model: Any, cache_kw: str, rows: int, cap: int, graphs: bool):
        self.model, self.cache_kw, self.rows, self.cap = model, cache_kw, rows, cap
        self.graphs, self.graph, self.logits = graphs, None, None
        self.cache: Any = None
        self.mask: torch.Tensor | None = None
        self.layer_types = sorted(
            set(getattr(model.config, "layer_types", None) or ["full_attention"])
        )

    def load(self, prefill: Any, rep: torch.Tensor, prompt_mask: torch.Tensor) -> None:
        """Copy the prefill's KV (one row per distinct prompt) to the rows (`rep`: row ->
        prompt) and set the mask to the rows' prompt tokens."""
        width = prompt_mask.shape[1]
        src = prefill.layers
        if self.cache is None:
            k0 = src[0].keys
            dev, dt = k0.device, k0.dtype
            self.tok = torch.zeros((self.rows, 1), dtype=torch.long, device=dev)
            self.pos = torch.zeros((self.rows, 1), dtype=torch.long, device=dev)
            self.wpos = torch.zeros((1,), dtype=torch.long, device=dev)
            self.neg = torch.finfo(dt).min
            self.mask = torch.full((self.rows, 1, 1, self.cap), self.neg, dtype=dt, device=dev)
            layers = []
            for layer in src:
                k, v = layer.keys, layer.values
                kb = k.new_zeros((self.rows, k.shape[1], self.cap, k.shape[3]))
                vb = v.new_zeros((self.rows, v.shape[1], self.cap, v.shape[3]))
                layers.append(StaticLayer(kb, vb, self.wpos))
            self.cache = new_cache(self.model, 0)
            self.cache.layers = layers
        for dst, layer in zip(self.cache.layers, src):
            dst.keys[:, :, :width].copy_(layer.keys[rep][:, :, :width])
            dst.values[:, :, :width].copy_(layer.values[rep][:, :, :width])
        self.mask.fill_(self.neg)
        self.mask[:, 0, 0, :width].masked_fill_(prompt_mask.bool(), 0.0)

    def _run(self) -> torch.Tensor:
        masks = {t: self.mask for t in self.layer_types}
        kw = {self.cache_kw: self.cache, "use_cache": True}
        out = self.model(input_ids=self.tok, attention_mask=masks, position_ids=self.pos, **kw)
        return out.logits[:, -1, :]

    def step(self, tok: torch.Tensor, pos: torch.Tensor, at: int) -> torch.Tensor:
        """Logits after feeding `tok` [B] at positions `pos` [B, 1], written to cache slot `at`."""
        self.tok.copy_(tok[:, None])
        self.pos.copy_(pos)
        self.wpos.fill_(at)
        self.mask[:, 0, 0, at] = 0.0
        if not self.graphs:
            return self._run()
        if self.graph is None:
            self._capture()
        else:
            self.graph.replay()
        return self.logits

    def _capture(self) -> None:
        """Warm up on a side stream, capture one step, and run it (warm-up and the captured run
        write the same KV slot with the same values, so the capture is idempotent)."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._run()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.logits = self._run()
        except Exception as e:  # noqa: BLE001 - any capture failure: decode eagerly instead
            log.warning(f"CUDA graph capture failed ({type(e).__name__}: {e}); decoding eagerly")
            self.graphs = False
            self.logits = self._run()
            return
        self.graph = graph
        graph.replay()


def new_cache(model: Any, reserve: int) -> Any:
    """A DynamicCache whose full-attention layers grow in place (sliding-window and other layer
    kinds keep transformers' own classes)."""
    try:
        cache = DynamicCache(config=model.config)
    except TypeError:  # older transformers
        return DynamicCache()
    layers = getattr(cache, "layers", None)
    if layers and all(type(x) is DynamicLayer for x in layers):
        cache.layers = [GrowingLayer(reserve) for _ in layers]
    return cache
