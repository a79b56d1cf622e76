"""Running untrusted code: bubblewrap sandboxes, seccomp, cgroups, reusable zygotes.

- base.py: Limits, the in-sandbox set-up (rlimits, fds, uid switch), errors, the CancelScope;
- bwrap.py: the bubblewrap command line (namespaces, read-only root, /dev, capabilities);
- seccomp.py: the syscall filter; cgroups.py: memory, pids and cpu limits (cgroup v1 and v2);
- zygote.py: reused sandboxes that give each check fresh namespaces and tmpfs;
- runner.py: `run(script, ...)`, the one entry point the verifiers use, and its helpers.

Nothing here imports the verifiers: they depend on the sandbox, not the other way round.
"""

from vibethinker.sandbox.base import (
    Cancelled,
    CancelScope,
    Limits,
    SandboxLost,
    SandboxUnavailable,
    cancel_scope,
    current_scope,
    kill,
    wait,
)
from vibethinker.sandbox.runner import (
    MODES,
    capture_fd,
    check_mode,
    data_fd,
    find_bwrap,
    read_fd,
    run,
    spawn,
)

__all__ = [
    "MODES",
    "CancelScope",
    "Cancelled",
    "Limits",
    "SandboxLost",
    "SandboxUnavailable",
    "cancel_scope",
    "capture_fd",
    "check_mode",
    "current_scope",
    "data_fd",
    "find_bwrap",
    "kill",
    "read_fd",
    "run",
    "spawn",
    "wait",
]
