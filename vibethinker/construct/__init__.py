"""Stage 0 data construction, as small pure steps (docs/PAPER.md, stage 0; docs/CONSTRUCT.md).

expand (prompt templates, parse the teacher's new problems) -> quality (the teacher's verdict on
each query) -> vote (majority answer as pseudo-label, vote margin) -> codetests (expanded code
problems: teacher test inputs, outputs agreed by independent teacher solutions in the sandbox)
-> multipath (distinct correct traces) -> ngram (repetition filter) -> decontam (10-gram
benchmark overlap) -> funnel (counts in and out of every step, per domain). The stage that wires
them to a teacher Sampler and the verifiers is vibethinker/stages/construct.py.
"""
