"""Wall time per RL step: our loop (`vibethinker.train.rl.train`) vs TRL's GRPOTrainer.

    .venv/bin/python benchmarks/rl_step.py [--prompts 16] [--g 8] [--max-new-tokens 32]
        [--steps 6] [--size 1m] [--threads 2] [--grad-ckpt] [--repeats 3]

Same random-weight Qwen2 (the embedded world's tokenizer; `--size` for a larger one), same
prompts (world math), same G, same response cap, same reward, one optimizer update per rollout
batch (strictly on-policy: TRL `steps_per_generation=1, num_iterations=1`), no KL term and no
reference model (`beta=0`), fp32 on CPU, gradient checkpointing the same on both sides (off
unless --grad-ckpt; TRL's own default is on), the whole rollout batch in one micro-batch on both
sides. The reward is a planted one ("the response contains a digit"): a random model solves no
math problem and both trainers would then have zero advantages everywhere (ours skips
zero-advantage rows, which would flatter it); this one fires often, so both do a real update.
A random model rarely emits EOS, so both generate about max_new_tokens tokens per row.

Each side runs in its own process, repeats in rotating order (benchmarks/harness.py). Within a
run the first step is a warm-up; the figure is the median of the other `steps - 1`. TRL samples
with `model.generate` (its default transformers path, no vLLM); ours with the hf engine.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402


def add_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--g", type=int, default=8, help="group size G (samples per prompt)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6, help="steps per run; the first is warm-up")
    ap.add_argument("--size", default="1m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--grad-ckpt", action="store_true", help="gradient checkpointing, both sides")


def prepare(args: argparse.Namespace, work: Path) -> dict:
    from vibethinker.data import world
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.prompts.paper import paper_prompt

    splits = world.generate(seed=0, n_train=200, n_probe=1, n_eval=args.prompts, domains=("math",))
    problems = splits["eval"][: args.prompts]
    model = build_tiny_model(
        work / "model",
        [p.prompt for p in splits["train"]],
        args.size,
        512,
        0,
        max_position_embeddings=8192,
    )
    from vibethinker.data.io import save_problems

    save_problems(work / "problems.jsonl", problems)
    return {
        "model": str(model),
        "problems": str(work / "problems.jsonl"),
        "size": args.size,
        "prompts": [paper_prompt(p) for p in problems],
    }


def digit_reward(problems, responses):
    from vibethinker.types import Score

    return [Score(float(ok), ok, "ok") for ok in (any(c.isdigit() for c in r) for r in responses)]


def _trl_reward(prompts, completions, **kw) -> list[float]:
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [float(any(ch.isdigit() for ch in t)) for t in texts]


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    logging.getLogger("vibethinker").setLevel(logging.WARNING)


def side_ours(args: argparse.Namespace, shared: dict) -> dict:
    from vibethinker.data.io import load_problems
    from vibethinker.train import policy
    from vibethinker.train.rl import PHASES, train
    from vibethinker.train.rl_config import RLConfig

    _quiet()
    harness.set_threads(args.threads)
    problems = load_problems(shared["problems"])
    model, tok = policy.load_policy(shared["model"], "cpu", args.grad_ckpt)
    n = len(problems)
    kw = dict(
        steps=args.steps,
        prompts_per_step=n,
        group_size=args.g,
        lr=args.lr,
        final_lr=args.lr,
        max_new_tokens=args.max_new_tokens,
        top_p=1.0,
        truncated_reward="verify",
        micro_batch=n * args.g,
        advantage="grpo",
        tis_cap=0.0,
        gradient_checkpointing=args.grad_ckpt,
        seed=0,
    )
    opts = RLConfig(**kw)
    from vibethinker.prompts.paper import paper_prompt

    with tempfile.TemporaryDirectory(prefix="bench_rl_ours_") as out:
        res = train(model, tok, problems, opts, out, prompt_fn=paper_prompt, verify=digit_reward)
    rows = res["history"][1:]
    m = {
        "step_s": statistics.median(r["seconds"] for r in rows),
        "gen_tokens_per_step": statistics.mean(r["gen_tokens"] for r in rows),
        "mean_reward": statistics.mean(r["reward"] for r in res["history"]),
    }
    m.update({f"phase_{k}_s": statistics.median(r[f"t_{k}"] for r in rows) for k in PHASES})
    cfg = {
        "loop": "vibethinker.train.rl.train",
        "sampler": "hf engine",
        **kw,
        "threads": args.threads,
        "dtype": "float32",
        "size": shared["size"],
    }
    return {"config": cfg, "metrics": m}


def side_trl(args: argparse.Namespace, shared: dict) -> dict:
    import trl
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from vibethinker.train import policy

    _quiet()
    harness.set_threads(args.threads)
    model, tok = policy.load_policy(shared["model"], "cpu", args.grad_ckpt)
    prompts = shared["prompts"]
    g = args.g
    times: list[float] = []
    ntok: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    ds = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": p}]} for p in prompts] * args.steps
    )
    with tempfile.TemporaryDirectory(prefix="bench_rl_trl_") as out:
        kw = dict(
            per_device_train_batch_size=len(prompts) * g,
            num_generations=g,
            gradient_accumulation_steps=1,
            steps_per_generation=1,
            num_iterations=1,
            max_completion_length=args.max_new_tokens,
            learning_rate=args.lr,
            lr_scheduler_type="constant",
            max_steps=args.steps,
            beta=0.0,
            loss_type="grpo",
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            gradient_checkpointing=args.grad_ckpt,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            bf16=False,
            disable_dropout=True,
            shuffle_dataset=False,
            seed=0,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=_trl_reward,
            args=GRPOConfig(output_dir=out, **kw),
            train_dataset=ds,
            processing_class=tok,
            callbacks=[StepTimer()],
        )
        trainer.train()
        logs = trainer.state.log_history
        rewards = [x["reward"] for x in logs if "reward" in x]
        ntok = [
            x["completions/mean_length"] * len(prompts) * g
            for x in logs
            if "completions/mean_length" in x
        ]
    cfg = {
        "trainer": f"trl {trl.__version__} GRPOTrainer",
        "sampler": "model.generate",
        **kw,
        "threads": args.threads,
        "dtype": "float32",
        "size": shared["size"],
    }
    m = {
        "step_s": statistics.median(times[1:]),
        "gen_tokens_per_step": statistics.mean(ntok[1:]) if len(ntok) > 1 else 0.0,
        "mean_reward": statistics.mean(rewards) if rewards else 0.0,
    }
    return {"config": cfg, "metrics": m}


SIDES = {"ours": side_ours, "trl": side_trl}

if __name__ == "__main__":
    harness.main(__doc__, add_args, prepare, SIDES, headline=("step_s", "lower"))
