"""Training: the core every trainer shares (`policy`), SFT (`sft`, `packing`), and RL (`rl`,
`rollout`).

`policy` loads a model for training, builds AdamW and the warm-up + cosine schedule, steps with
clipping, starts or resumes a run (refusing a checkpoint written with other options) and
saves/loads resumable checkpoints (HF folder + trainer_state.pt); `sft` is the supervised loop
over packed chat samples with an assistant-only loss; `rollout` samples and scores groups and
computes the trainer's logprobs; `rl` is the on-policy MGPO loop.
"""
