"""The algorithm as pure functions, no I/O (DESIGN.md layout; STYLE.md 2).

One module per idea, each taking numbers, lists or tensors rather than config objects: `passk`
(pass@k, avg@n, maj@k), and beside it advantages (GRPO, MGPO weight, Long2Short), losses,
potential (learning-potential selection), clr, merge. Import the module you need, e.g.
`from vibethinker.algo.passk import pass_at_k`.
"""
