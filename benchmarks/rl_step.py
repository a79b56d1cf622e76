"""Wall time per RL step: our loop (`vibethinker.train.rl.train`) vs TRL's GRPOTrainer, one run.

Same tiny model (the embedded world's 1m Qwen2, random weights), same prompts (world math), same
G, same response cap, same reward, one optimizer update per rollout batch (strictly on-policy),
no KL term, no reference model, fp32 on CPU. The reward is a planted one ("the response contains
a digit"), because a random model solves no math problem and both trainers would then have zero
advantages everywhere (ours skips zero-advantage rows, which would flatter it): with a reward
that fires about a quarter of the time, both do a real update every step. A random model rarely
emits EOS, so both generate about max_new_tokens tokens per row.

The first step of each is a warm-up and is not counted; the figure is the median of the others.
TRL samples with `model.generate` (its default transformers path); ours with the hf engine.

Run: `python benchmarks/rl_step.py [--prompts 16] [--g 8] [--max-new-tokens 32] [--steps 4]`
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings

import torch

from vibethinker.types import Score


def digit_reward(problems, responses) -> list[Score]:
    return [Score(float(ok), ok, "ok") for ok in (any(c.isdigit() for c in r) for r in responses)]


def _trl_reward(prompts, completions, **kw) -> list[float]:
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [float(any(ch.isdigit() for ch in t)) for t in texts]


def run_ours(
    model_dir: str, problems, prompt_fn, g: int, max_new: int, steps: int, lr: float
) -> dict:
    from vibethinker.train import policy
    from vibethinker.train.rl import PHASES, RLOptions, train

    model, tok = policy.load_policy(model_dir, "cpu")
    opts = RLOptions(steps=steps, prompts_per_step=len(problems), group_size=g, lr=lr,
                     final_lr=lr, max_new_tokens=max_new, top_p=1.0, truncated_reward="verify",
                     micro_batch=len(problems) * g, advantage="grpo", tis_cap=0.0,
                     seed=0)  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        res = train(model, tok, problems, opts, out, prompt_fn=prompt_fn, verify=digit_reward)
    rows = res["history"][1:]
    return {
        "step_s": statistics.median(r["seconds"] for r in rows),
        "phases": {k: statistics.median(r[f"t_{k}"] for r in rows) for k in PHASES},
        "tokens_per_step": statistics.mean(r["gen_tokens"] for r in rows),
        "reward": [round(r["reward"], 3) for r in res["history"]],
    }


def run_trl(
    model_dir: str, prompts: list[str], g: int, max_new: int, steps: int, lr: float
) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from vibethinker.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(model_dir, device="cpu", dtype="float32")
    times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in prompts] * steps)
    with tempfile.TemporaryDirectory() as out:
        cfg = GRPOConfig(
            output_dir=out, per_device_train_batch_size=len(prompts) * g, num_generations=g,
            gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1,
            max_completion_length=max_new, learning_rate=lr, lr_scheduler_type="constant",
            max_steps=steps, beta=0.0, loss_type="grpo", temperature=1.0, top_p=1.0, top_k=0,
            logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
            disable_dropout=True, shuffle_dataset=False, seed=0, dataloader_num_workers=0,
        )  # fmt: skip
        trainer = GRPOTrainer(model=model, reward_funcs=_trl_reward, args=cfg, train_dataset=ds,
                              processing_class=tok, callbacks=[StepTimer()])  # fmt: skip
        trainer.train()
        rewards = [round(x["reward"], 3) for x in trainer.state.log_history if "reward" in x]
    return {"step_s": statistics.median(times[1:]), "reward": rewards}


def main(prompts: int = 16, g: int = 8, max_new_tokens: int = 32, steps: int = 4,
         threads: int = 2, lr: float = 1e-4) -> dict:  # fmt: skip
    from vibethinker.data import world
    from vibethinker.evaluate.prompts import paper_prompt
    from vibethinker.models.tiny import build_tiny_model

    torch.set_num_threads(threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("vibethinker").setLevel(logging.WARNING)
    splits = world.generate(seed=0, n_train=200, n_probe=1, n_eval=prompts, domains=("math",))
    problems = splits["eval"][:prompts]
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(tmp, [p.prompt for p in splits["train"]], "1m", 512, 0)
        ours = run_ours(model_dir, problems, paper_prompt, g, max_new_tokens, steps, lr)
        trl = run_trl(model_dir, [paper_prompt(p) for p in problems], g, max_new_tokens, steps, lr)
    result = {
        "prompts": prompts, "G": g, "max_new_tokens": max_new_tokens, "steps_timed": steps - 1,
        "ours_step_s": round(ours["step_s"], 3), "trl_step_s": round(trl["step_s"], 3),
        "ratio_ours_over_trl": round(ours["step_s"] / trl["step_s"], 3),
        "ours_phases_s": {k: round(v, 3) for k, v in ours["phases"].items()},
        "ours_tokens_per_step": ours["tokens_per_step"],
        "ours_reward": ours["reward"], "trl_reward": trl["reward"],
    }  # fmt: skip
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--g", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    r = main(a.prompts, a.g, a.max_new_tokens, a.steps, a.threads)
    print(f"RL step (P={r['prompts']} x G={r['G']}, {r['max_new_tokens']} new tokens, median of "
          f"{r['steps_timed']} steps): ours {r['ours_step_s']} s, TRL GRPOTrainer "
          f"{r['trl_step_s']} s, ratio {r['ratio_ours_over_trl']} (target <= 1.0)")  # fmt: skip
    print("ours by phase (s): " + ", ".join(f"{k} {v}" for k, v in r["ours_phases_s"].items()))
    print(f"rewards per step: ours {r['ours_reward']}, TRL {r['trl_reward']}")
