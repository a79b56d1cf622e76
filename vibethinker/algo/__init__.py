"""The algorithm as pure functions, no I/O (STYLE.md 2).

One module per idea, each taking numbers, lists or tensors rather than config objects:
`advantages` (p(q), MGPO weight, group advantages, Long2Short), `losses` (clipped surrogate, TIS,
k3 KL, entropy), `passk` (pass@k, avg@n, maj@k) and `merge` (streamed weighted average of
checkpoints). Import the module you need, e.g. `from vibethinker.algo.passk import pass_at_k`.
"""
