"""The weight stream of server mode's `vllm_sync=group` (engines/vllm.py): one tensor at a time
over a gloo process group between the trainer (rank 0) and the vLLM server's workers, and a
thread helper for the server call that runs while the stream is sent."""

from __future__ import annotations

import datetime
from typing import Any

from vibethinker.engines import SamplerError

# The group's wire format, one tensor at a time: an int64 header [more, name bytes, dtype index,
# ndim, dims...], the name as uint8, then the tensor; a header with more=0 ends the sync.
WIRE_DTYPES = ("float32", "bfloat16", "float16", "float64", "int64", "int32", "uint8", "bool")
HEADER = 16
GROUP_TIMEOUT = datetime.timedelta(seconds=600)  # a stalled peer fails the step


def send_tensor(group: Any, name: str, t: Any) -> None:
    import torch

    t = t.detach().cpu().contiguous()
    if t.dim() > HEADER - 4:
        raise SamplerError(f"weight sync: {name} has {t.dim()} dims (at most {HEADER - 4})")
    raw = torch.tensor(list(name.encode()), dtype=torch.uint8)
    head = [1, raw.numel(), WIRE_DTYPES.index(str(t.dtype).removeprefix("torch.")), t.dim()]
    header = torch.zeros(HEADER, dtype=torch.int64)
    header[: 4 + t.dim()] = torch.tensor(head + list(t.shape))
    for x in (header, raw, t):
        group.broadcast(x, 0).wait()


def receive_tensor(group: Any) -> tuple[str, Any] | None:
    import torch

    header = torch.zeros(HEADER, dtype=torch.int64)
    group.broadcast(header, 0).wait()
    more, n, dtype, ndim = (int(x) for x in header[:4])
    if not more:
        return None
    raw = torch.empty(n, dtype=torch.uint8)
    group.broadcast(raw, 0).wait()
    t = torch.empty(
        [int(x) for x in header[4 : 4 + ndim]], dtype=getattr(torch, WIRE_DTYPES[dtype])
    )
    group.broadcast(t, 0).wait()
    return bytes(raw.tolist()).decode(), t


class ThreadCall:
    """fn(*args) in a thread; `result()` joins it and raises what it raised."""

    def __init__(self, fn: Any, *args: Any):
        import threading

        self.error: BaseException | None = None
        self.value: Any = None
        self.thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self.thread.start()

    def _run(self, fn: Any, args: tuple) -> None:
        try:
            self.value = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in result()
            self.error = e

    def result(self) -> Any:
        self.thread.join()
        if self.error is not None:
            raise SamplerError(f"vllm server weight sync: {self.error}") from self.error
        return self.value
