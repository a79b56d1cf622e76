"""Training: the core every trainer shares (`policy`), SFT (`sft`, `packing`), and RL.

`policy` loads a model for training, builds AdamW and the warm-up + cosine schedule, steps with
clipping and saves/loads resumable checkpoints (HF folder + trainer_state.pt); `sft` is the
supervised loop over packed chat samples with an assistant-only loss.
"""
