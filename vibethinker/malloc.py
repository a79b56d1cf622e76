"""Keep freed memory in the process (glibc malloc), so that PyTorch on CPU does not page-fault.

PyTorch's CPU tensors come from the C allocator. With glibc's defaults, a freed block of a few
MiB (an activation, an attention mask) goes back to the OS, by `munmap` or by trimming the heap,
and the next tensor of that size page-faults again. A forward over wide rows allocates and frees
such blocks every layer: the S_LP scorer took 0.9M minor page faults and ~25% of its time for
them on the 2-core development machine (BENCHMARKS.md, "Learning-potential scoring"). PyTorch's
CPU performance guide answers this with jemalloc or tcmalloc; without a preloaded allocator we get
the same effect from glibc itself: blocks below 32 MiB come from the heap (`M_MMAP_THRESHOLD`)
and up to 1 GiB of free heap is kept (`M_TRIM_THRESHOLD`) instead of being returned. Numbers
are unchanged; the process holds on to memory it has used once (its peak, as a GPU caching
allocator does).

`keep_freed_memory()` runs at the start of the CLI. It does nothing off Linux/glibc, when
GLIBC_TUNABLES already sets malloc options, or when VIBETHINKER_MALLOC=default.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest dynamic threshold (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 1 << 30

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (once per process); True if they are set."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if (
        sys.platform != "linux"
        or os.environ.get("VIBETHINKER_MALLOC", "") == "default"
        or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")
    ):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    return _done
