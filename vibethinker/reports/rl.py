"""The `rl` stage's summary.md, curves.png and the warnings it shows (stages/rl.py)."""

from __future__ import annotations

from pathlib import Path

from vibethinker.reports import fmt, pyplot
from vibethinker.train.rl_config import RLConfig


def plot_curves(history: list[dict], evals: list[dict], png: str | Path, title: str) -> str:
    """Four panels: train reward/accuracy per step, held-out avg@n, response lengths, and the
    sampler-vs-trainer mismatch per step (log scale; the hf engine in the trainer's dtype sits at
    rounding level or 0, which the panel says instead of plotting nothing)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.3), dpi=110)
    steps = [r["step"] for r in history]
    ax = axes[0]
    ax.plot(steps, [r["reward"] for r in history], lw=0.8, alpha=0.5, label="reward")
    ax.plot(steps, _smooth([r["accuracy"] for r in history]), lw=1.5, label="accuracy (smoothed)")
    ax.plot(steps, [r["mgpo_weight"] for r in history], lw=0.8, label="mean MGPO weight")
    ax.set(
        xlabel="step", ylabel="share / weight (0 to 1)", title="training batches", ylim=(0, 1.05)
    )
    ax.legend(fontsize=7)
    ax = axes[1]
    if evals:  # error bars: one standard error over held-out problems
        err = [e.get("stderr") or 0.0 for e in evals]
        ax.errorbar(
            [e["step"] for e in evals],
            [e["accuracy"] for e in evals],
            yerr=err,
            fmt="o-",
            color="C3",
            capsize=3,
        )
    ax.set(xlabel="step", ylabel="avg@n (+-1 s.e.)", title="held-out accuracy")
    ax = axes[2]
    for key, lab in (("len_correct", "correct"), ("len_incorrect", "incorrect")):
        pts = [(r["step"], r[key]) for r in history if r.get(key) is not None]
        if pts:
            ax.plot(*zip(*pts), lw=0.8, alpha=0.8, label=f"train {lab}")
    pts = [(e["step"], e["len_correct"]) for e in evals if e.get("len_correct") is not None]
    if pts:
        ax.plot(*zip(*pts), "o-", color="C3", label="held-out correct")
    ax.set(xlabel="step", ylabel="tokens", title="response length")
    ax.legend(fontsize=7)
    _plot_mismatch(axes[3], history)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return str(png)


# (metrics.jsonl key, label, transform): every figure is 0 when the sampler is the trainer.
_MISMATCH_SERIES = (
    ("engine_kl", "k3 KL", lambda v: v),
    ("engine_logp_absdiff", "mean |dlogp|", lambda v: v),
    ("token_mult_prob_error", "mult. prob. error - 1", lambda v: v - 1.0),
    ("tis_capped_frac", "share past the cap", lambda v: v),
)


def _plot_mismatch(ax, history: list[dict]) -> None:
    """Per step: the engine's sampled-token logprobs against the trainer's (algo/correction.py)."""
    drawn = 0
    for key, lab, tf in _MISMATCH_SERIES:
        pts = [(r["step"], tf(r[key])) for r in history if r.get(key) is not None]
        pos = [(s, v) for s, v in pts if v > 0]
        if pos:
            ax.plot(*zip(*pos), lw=0.8, alpha=0.9, label=lab)
            drawn += 1
    if drawn:
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    else:
        ax.text(
            0.5,
            0.5,
            "sampler = trainer\n(no mismatch to plot)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=8,
        )
    ax.set(xlabel="step", ylabel="per step (log)", title="sampler vs trainer")


def _smooth(xs: list[float], k: int = 10) -> list[float]:
    return [
        sum(xs[max(0, i - k + 1) : i + 1]) / len(xs[max(0, i - k + 1) : i + 1])
        for i in range(len(xs))
    ]


def learning_warnings(cfg: RLConfig, counts: dict, history: list[dict]) -> list[str]:
    """Why this stage may have learned nothing, each with what to try; [] when it trained.

    Two ways RL finishes `done` with no signal: the stage-start filter leaves a handful of
    prompts (the same few repeat every step), or the groups are all-correct or all-wrong
    (p in {0, 1}: every advantage is 0, so nothing is trained)."""
    out = []
    n_in, n_out = counts.get("prompts_in"), counts.get("prompts_out")
    if n_in and n_out is not None and (n_out < cfg.prompts_per_step or n_out < 0.1 * n_in):
        p0, p1 = counts.get("dropped_p0", 0), counts.get("dropped_p1", 0)
        tip = "a stronger starting model (more SFT on this domain) or a larger max_new_tokens"
        out.append(
            f"the stage-start filter kept only {n_out} of {n_in} prompts ({p0} never solved, "
            f"{p1} always solved in {counts.get('rollouts')} rollouts); every step reuses these "
            "few, so expect memorising rather than learning. Try: more prompts (max_prompts, "
            "data), more filter_rollouts (partly solved prompts then show up), "
            f"{tip if p0 >= p1 else 'harder prompts'}."
        )
    if history:
        dead = sum(1 for r in history if r.get("trained_rows", 1) == 0)
        p01 = sum(r.get("frac_p01", 0.0) for r in history) / len(history)
        if dead >= 0.5 * len(history) or p01 >= 0.9:
            p0 = sum(r.get("frac_p0", 0.0) for r in history) / len(history)
            hard = p0 >= p01 / 2
            trunc = sum(r.get("trunc_rate", 0.0) for r in history) / len(history)
            tips = "harder prompts, or the stage-start filter (filter_rollouts > 0)"
            if hard:
                tips = "a stronger starting model (more SFT), a larger group_size"
                if trunc > 0.1:
                    tips += f", a larger max_new_tokens (truncation rate {trunc:.2f})"
            out.append(
                f"{dead} of {len(history)} steps trained nothing and {p01:.0%} of groups had p in "
                f"{{0, 1}} (all {'wrong' if hard else 'correct'} mostly): their advantages are 0, "
                f"so the policy barely moved. Try: {tips}."
            )
    return out


def held_out_note(cfg: RLConfig) -> str:
    """Why this stage's held-out figures and the report's headline can disagree."""
    return (
        f"The held-out figures above are this stage's own check: the first {cfg.eval_limit} "
        f"{cfg.domain} problems x {cfg.eval_n} samples, its own seed. The report's headline "
        "samples other problems and seeds for every stage's model alike and compares them "
        "paired over the same problems; where the two disagree within their intervals it is "
        "sampling noise, and the headline is the comparison to read."
    )


def cap_warning(cfg: RLConfig, done: int) -> str:
    return (
        f"the wall-clock cap (max_seconds={cfg.max_seconds:g}) stopped training after "
        f"{done}/{cfg.steps} steps: this run trained less than the recipe asks, so its numbers "
        "are not comparable with a full run (a slower or busier machine); raise max_seconds "
        "or set it to 0."
    )


def _se(e: dict) -> str:
    return f" +- {e['stderr']:.3f}" if e.get("stderr") is not None else ""


def rubric_line(spec: str) -> str:
    """Which rubric back-end rewarded the open prompts, in words (the summary says it)."""
    if spec.startswith("openai:"):
        return (
            f"Rubric for open prompts: LLM judge `{spec[7:]}` scoring the paper's four "
            "criteria (helpfulness, coherence, instruction adherence, redundancy)."
        )
    if spec.startswith("hf:"):
        return (
            f"Rubric for open prompts: reward model `{spec[3:]}` (a learned preference, e.g. "
            "the reward_model stage's Bradley-Terry fallback; not the paper's four "
            "criteria scored one by one)."
        )
    return "Rubric for open prompts: none (open prompts score 0 and the filter drops them)."


def mismatch_line(cfg: RLConfig, hist: list[dict]) -> str:
    """The engine-vs-trainer mismatch of the last 10 steps, and the steps over the limit."""
    tail = hist[-10:]

    def mean(key: str) -> float | None:
        vals = [r[key] for r in tail if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    return (
        f"Engine-vs-trainer mismatch (last 10 steps): token_mult_prob_error "
        f"{fmt(mean('token_mult_prob_error'), 4)} (limit {cfg.mismatch_limit or 'off'}), "
        f"mean |delta logp| {fmt(mean('engine_logp_absdiff'), 6)}, largest ratio "
        f"{fmt(max((r.get('engine_ratio_max', 0.0) for r in tail), default=None), 3)}, share "
        f"past the correction's bounds {fmt(mean('tis_capped_frac'), 4)}; steps over the limit "
        f"{sum(r.get('mismatch_over', 0) for r in hist)} of {len(hist)}."
    )


def mismatch_warning(cfg: RLConfig, hist: list[dict]) -> list[str]:
    """[the mismatch line] when some step passed `mismatch_limit` (on_mismatch=warn), else []."""
    if not any(r.get("mismatch_over") for r in hist):
        return []
    return [
        mismatch_line(cfg, hist) + " The rollouts were not the trainer's policy on those steps: "
        "check the engine's dtype and kernels, or use a correction (is_correction, tis_cap)."
    ]


def write_summary(path: Path, cfg: RLConfig, res: dict, counts: dict, wall: float) -> str:
    """Headline numbers: held-out accuracy and correct length at start vs end, train curve
    ends, time per step by phase, filter counts."""
    hist, evals = res["history"], res["evals"]
    e0, e1 = (evals[0], evals[-1]) if evals else ({}, {})
    tail = hist[-10:]

    def mean(key: str) -> float | None:
        vals = [r[key] for r in tail if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    sess = [r for r in hist if r["step"] > res["resumed_at"]]
    per = {
        k: sum(r[f"t_{k}"] for r in sess) / max(len(sess), 1)
        for k in ("generate", "verify", "logprobs", "update")
    }
    step_s = sum(r["seconds"] for r in sess) / max(len(sess), 1)
    lines = [
        f"# RL ({cfg.domain}{', Long2Short' if cfg.long2short else ''}) from `{cfg.model}`",
        "",
        f"{res['steps_done']}/{cfg.steps} steps x {cfg.prompts_per_step} prompts x G="
        f"{cfg.group_size}, advantage {cfg.advantage} (lambda {cfg.lambda_mgpo}), lr {cfg.lr:g}"
        f" -> {cfg.final_lr:g}, clip {cfg.clip_eps}, max_new_tokens {cfg.max_new_tokens}, "
        f"seed {cfg.seed}; wall {wall:.0f} s.",
        "",
        f"| held-out ({cfg.domain}, avg@{cfg.eval_n}) | start (step {e0.get('step', '-')}) | "
        f"end (step {e1.get('step', '-')}) |",
        "|---|---:|---:|",
        f"| accuracy | {fmt(e0.get('accuracy'))}{_se(e0)} | **{fmt(e1.get('accuracy'))}**"
        f"{_se(e1)} |",
        f"| mean tokens, correct answers | {fmt(e0.get('len_correct'), 1)} | "
        f"{fmt(e1.get('len_correct'), 1)} |",
        f"| truncation rate | {fmt(e0.get('trunc_rate'))} | {fmt(e1.get('trunc_rate'))} |",
        "",
        f"Training batches (last 10 steps): accuracy {fmt(mean('accuracy'))}, mean MGPO weight "
        f"{fmt(mean('mgpo_weight'))}, groups with p in {{0,1}} {fmt(mean('frac_p01'))} "
        f"(zero-signal share of the first draw {fmt(mean('frac_zero_signal'))}), "
        f"entropy {fmt(mean('entropy'))}, clip fraction {fmt(mean('clip_frac'))}, "
        f"engine-vs-trainer KL {fmt(mean('engine_kl'), 6)}.",
        "",
        mismatch_line(cfg, hist),
        "",
        f"Time per step {step_s:.3f} s: "
        + ", ".join(f"{k} {v:.3f} s" for k, v in per.items())
        + ".",
        "",
        "Stage-start filter: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".",
    ]
    if res["resumed_at"]:
        lines.append(f"Resumed at step {res['resumed_at']} (times are this session's).")
    if cfg.domain == "instruct":
        lines += ["", rubric_line(cfg.rubric_model)]
    if evals:
        lines += ["", held_out_note(cfg)]
    if res["steps_done"] < cfg.steps:
        lines += ["", f"**Warning:** {cap_warning(cfg, res['steps_done'])}"]
    for w in learning_warnings(cfg, counts, hist):
        lines += ["", f"**Warning: RL may have learned nothing.** {w}"]
    Path(path).write_text("\n".join(lines) + "\n")
    return str(path)


def skipped_md(cfg: RLConfig, warning: str) -> str:
    """summary.md of a stage that trained nothing (the filter left no prompt)."""
    return f"# RL ({cfg.domain}) from `{cfg.model}`: skipped\n\n**Warning:** {warning}\n"
