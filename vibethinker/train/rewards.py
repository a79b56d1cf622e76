"""Instruct RL rewards (docs/PAPER.md stage 5): rule validators for explicit constraints, a rubric
reward for open prompts, mixed per prompt.

For a prompt WITH instructions (IFEval ids) the rule reward is `rule_reward`: "strict" (1 when
every constraint holds, else 0; IFEval's prompt-level strict accuracy) or "partial" (the fraction
held); with `rubric_weight` w > 0 the reward is (1 - w) * rule + w * rubric. A prompt WITHOUT
instructions (subdomain "open") gets the rubric reward alone (verifiers/rubric.py, in [0, 1]).
Only the answer part (after `</think>`) is judged; an unclosed think block scores 0 ("no_answer")
without a judge call; with no rubric configured an open prompt scores 0 ("no_rubric": the
stage-start filter then drops it, as rules alone always did).

MGPO's p(q) needs a binary verdict per response (`Score.correct`): a rule prompt's verdict is
"every constraint holds" (whatever the reward form and weight); an open prompt's is
rubric value >= `rubric_threshold`. The paper is silent on both; these are config values.

Task completion (`rule_completion`): the report's rule validators check completion too, so an
answer that meets every IFEval constraint while ignoring the task must not earn the reward. With
the key on, each answered rule prompt is also judged by a completion back-end (the rubric
back-end with prompts/completion_judge.txt: does the answer carry out the task, formatting
aside?); below `completion_threshold` its rule reward is 0 and it counts as wrong ("incomplete"),
counted per step as `rule_incomplete`.

A rubric call that fails (endpoint down or slow past its retries, an unparseable reply, a reward
model error) scores `rubric_fail_value` for that response, is counted (`rubric_fail` per step,
`rubric_fail_total`) and logged; the step goes on. Per-step metrics (`InstructReward.metrics`)
are split by source: rule prompts vs open (rubric) prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vibethinker.log import get_logger
from vibethinker.train.rl_config import RLConfig
from vibethinker.types import Problem, Score
from vibethinker.verifiers.extract import answer_part
from vibethinker.verifiers.instruct import validate_instructions
from vibethinker.verifiers.rubric import PROMPTS, make_rubric

log = get_logger("train.rewards")
RULE_FORMS = ("strict", "partial")
BAD_RULE_INPUT = ("unknown_instruction:", "bad_kwargs:")
COMPLETION_PROMPT = PROMPTS / "completion_judge.txt"
# Per-call lists behind `metrics` (rewards and verdicts by source; incomplete rule answers).
STAT_KEYS = ("rule_r", "rule_ok", "open_r", "open_ok", "rubric_on_rule", "open_words", "incomplete")


def rule_value(score: Score, form: str) -> float:
    """The rule reward of one verdict: strict 1/0 on all-held, partial the fraction held."""
    if form == "strict":
        return 1.0 if score.correct else 0.0
    if form == "partial":
        return float(score.value)
    raise ValueError(f"rule_reward must be one of {RULE_FORMS}, got {form!r}")


def mix(rule: float, rubric: float | None, weight: float) -> float:
    """Reward of a rule prompt: (1 - w) * rule + w * rubric (rule alone when w = 0 or no rubric)."""
    if rubric is None or weight <= 0:
        return rule
    return (1.0 - weight) * rule + weight * rubric


def is_open(problem: Problem) -> bool:
    """An instruct prompt without rules: rewarded by the rubric."""
    return problem.domain == "instruct" and not problem.instructions


def check_instruct_problems(problems: Sequence[Problem], source: str = "") -> tuple[int, int]:
    """Refuse, at stage start, rule prompts whose instructions are malformed (unknown id, bad
    kwargs), naming the problem; returns (rule prompts, open prompts)."""
    n_rule = n_open = 0
    for p in problems:
        if p.domain != "instruct":
            continue
        if is_open(p):
            n_open += 1
            continue
        n_rule += 1
        try:
            validate_instructions(p.instructions)
        except ValueError as e:
            where = f"{source}: " if source else ""
            raise ValueError(f"{where}problem {p.id!r}: {e}") from None
    return n_rule, n_open


def _answer(response: object) -> str | None:
    """The judged text: the answer part (after `</think>`), stripped; None when unanswered."""
    a = answer_part(response) if isinstance(response, str) else None
    return a.strip() if a is not None else None


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _warn(fails: list[str], n_judged: int, fail_value: float, bad_rule: int) -> None:
    """Warn about failed rubric judgements and rule prompts with malformed instructions."""
    if fails:
        log.warning(
            "rubric: %d of %d judgements failed (%s), each scored %.2f",
            len(fails),
            n_judged,
            ", ".join(sorted(set(fails))[:3]),
            fail_value,
        )
    if bad_rule:
        log.warning(
            "instruct rules: %d responses scored 0 for malformed instructions "
            "(unknown id or bad kwargs)",
            bad_rule,
        )


class InstructReward:
    """verify(problems, responses, **kw) -> [Score]: rules and rubric mixed (module docstring);
    non-instruct problems go to `base` unchanged. `metrics()` describes the last call."""

    def __init__(
        self,
        base: Callable[..., list[Score]],
        rubric: Any = None,
        rule_reward: str = "strict",
        rubric_weight: float = 0.0,
        rubric_threshold: float = 0.5,
        fail_value: float = 0.0,
        completion: Any = None,
        completion_threshold: float = 0.5,
    ) -> None:
        if rule_reward not in RULE_FORMS:
            raise ValueError(f"rule_reward must be one of {RULE_FORMS}, got {rule_reward!r}")
        if not 0.0 <= rubric_weight <= 1.0:
            raise ValueError(f"rubric_weight must be in [0, 1], got {rubric_weight}")
        if not 0.0 <= fail_value <= 1.0:
            raise ValueError(f"rubric_fail_value must be in [0, 1], got {fail_value}")
        self.base, self.rubric = base, rubric
        self.form, self.weight = rule_reward, rubric_weight
        self.threshold, self.fail_value = rubric_threshold, fail_value
        self.completion, self.completion_threshold = completion, completion_threshold
        self.fail_total = 0
        self._last: dict[str, Any] = {}

    def _rubric(
        self, items: list[tuple[int, str, str]], backend: Any = None
    ) -> dict[int, tuple[float, str, bool]]:
        """index -> (value, reason, failed) for (index, prompt, answer) items, scored by
        `backend` (default: the rubric)."""
        backend = backend if backend is not None else self.rubric
        if not items or backend is None:
            return {}
        res = backend.score([(p, a) for _, p, a in items])
        out = {}
        for (i, _, _), r in zip(items, res):
            failed = r.value is None
            out[i] = (self.fail_value if failed else min(max(r.value, 0.0), 1.0), r.reason, failed)
        return out

    def __call__(self, problems: Sequence[Problem], responses: Sequence[str], **kw: Any) -> list:
        n = len(problems)
        scores: list[Score | None] = [None] * n
        rule_idx = [i for i, p in enumerate(problems) if p.domain != "instruct" or p.instructions]
        base = self.base([problems[i] for i in rule_idx], [responses[i] for i in rule_idx], **kw)
        answers = [_answer(r) for r in responses]
        want = [
            (i, problems[i].prompt, answers[i])
            for i in range(n)
            if answers[i] is not None
            and problems[i].domain == "instruct"
            and (is_open(problems[i]) or self.weight > 0)
        ]
        judged = self._rubric(want)
        done = self._completion(problems, answers, rule_idx)
        stats: dict[str, list] = {k: [] for k in STAT_KEYS}
        bad_rule = 0
        for i, s in zip(rule_idx, base):
            p = problems[i]
            if p.domain != "instruct":
                scores[i] = s
                continue
            bad_rule += s.reason.startswith(BAD_RULE_INPUT)
            rub = judged.get(i)
            rule, ok, why = rule_value(s, self.form), s.correct, s.reason
            if i in done and done[i][0] < self.completion_threshold:  # constraints met, task not
                rule, ok, why = 0.0, False, f"incomplete:{done[i][1]}"
                stats["incomplete"].append(i)
            value = mix(rule, rub[0] if rub else None, self.weight)
            scores[i] = Score(value, ok, why, s.detail)
            stats["rule_r"].append(value)
            stats["rule_ok"].append(float(s.correct))
            if rub:
                stats["rubric_on_rule"].append(rub[0])
        for i, p in enumerate(problems):
            if not is_open(p):
                continue
            if answers[i] is None:
                scores[i] = Score(0.0, False, "no_answer")
            elif self.rubric is None:
                scores[i] = Score(0.0, False, "no_rubric")
            else:
                v, why, failed = judged[i]
                ok = not failed and v >= self.threshold
                scores[i] = Score(v, ok, "rubric:ok" if not failed else f"rubric_fail:{why}")
                stats["open_words"].append(len(answers[i].split()))
            stats["open_r"].append(scores[i].value)
            stats["open_ok"].append(float(scores[i].correct))
        fails = [why for _, why, failed in [*judged.values(), *done.values()] if failed]
        self.fail_total += len(fails)
        _warn(fails, len(judged), self.fail_value, bad_rule)
        self._last = self._metrics_of(stats, len(judged), len(fails), bad_rule)
        self._last.update(completion_calls=len(done), rule_incomplete=len(stats["incomplete"]))
        return scores  # type: ignore[return-value]

    def _completion(
        self, problems: Sequence[Problem], answers: list[str | None], rule_idx: list[int]
    ) -> dict[int, tuple[float, str, bool]]:
        """index -> (value, reason, failed) of the completion check on answered instruct rule
        prompts (none when `completion` is off); an unanswered one already scores 0."""
        if self.completion is None:
            return {}
        items = [
            (i, problems[i].prompt, answers[i])
            for i in rule_idx
            if problems[i].domain == "instruct" and answers[i] is not None
        ]
        return self._rubric(items, self.completion)

    def _metrics_of(
        self, stats: dict[str, list], n_judged: int, n_fails: int, bad_rule: int
    ) -> dict[str, Any]:
        """One call's metrics by reward source (what `metrics` returns)."""
        return {
            "n_rule": len(stats["rule_r"]),
            "n_open": len(stats["open_r"]),
            "reward_rule": _mean(stats["rule_r"]),
            "accuracy_rule": _mean(stats["rule_ok"]),
            "reward_open": _mean(stats["open_r"]),
            "accuracy_open": _mean(stats["open_ok"]),
            "rubric_on_rule": _mean(stats["rubric_on_rule"]),
            "open_answer_words": _mean(stats["open_words"]),
            "rubric_calls": n_judged,
            "rubric_fail": n_fails,
            "rubric_fail_total": self.fail_total,
            "rule_bad_input": bad_rule,
        }

    def metrics(self) -> dict[str, Any]:
        """The last call's metrics, split by reward source (one call per RL step)."""
        return dict(self._last)


def instruct_reward(
    cfg: RLConfig,
    base: Callable[..., list[Score]],
    problems: Sequence[Problem],
    device: str = "cpu",
) -> InstructReward:
    """The `rl` stage's instruct reward from its config: checks the prompts (malformed rules
    refused), builds the rubric back-end (a bad reward model folder or an endpoint that is down
    fails here, before any rollout) and warns when open prompts have no rubric."""
    n_rule, n_open = check_instruct_problems(problems, cfg.data)
    rubric = None
    if cfg.rubric_model:
        cache = str(Path(cfg.out) / "rubric_cache.json")
        rubric = make_rubric(
            cfg.rubric_model,
            device=str(device),
            cache_path=cache,
            prompt_path=cfg.rubric_prompt,
            timeout_s=cfg.judge_timeout_s,
            retries=cfg.judge_retries,
            batch_size=cfg.rubric_batch,
        )
        rubric.check()
    elif n_open:
        log.warning(
            "rl instruct: %d open prompts but no rubric_model: they score 0 "
            "('no_rubric') and the stage-start filter drops them",
            n_open,
        )
    log.info(
        "rl instruct rewards: %d rule prompts (%s), %d open prompts (rubric %s, weight on "
        "rule prompts %.2f, p threshold %.2f)",
        n_rule,
        cfg.rule_reward,
        n_open,
        cfg.rubric_model or "none",
        cfg.rubric_weight,
        cfg.rubric_threshold,
    )
    return InstructReward(
        base,
        rubric,
        cfg.rule_reward,
        cfg.rubric_weight,
        cfg.rubric_threshold,
        cfg.rubric_fail_value,
        completion_backend(cfg, rubric, device) if n_rule else None,
        cfg.completion_threshold,
    )


def completion_backend(cfg: RLConfig, rubric: Any, device: str = "cpu") -> Any:
    """The completion check of rule prompts (`rule_completion`): the rubric's reward model
    itself (`hf:`), or the same LLM judge asked with the completion prompt (`openai:`, its own
    cache); None when the key is off."""
    if not cfg.rule_completion:
        return None
    if rubric is None:
        raise ValueError("rl instruct: rule_completion needs rubric_model")
    if cfg.rubric_model.startswith("hf:"):
        return rubric  # one reward model: "complete and not repetitive" is what it learned
    return make_rubric(
        cfg.rubric_model,
        device=str(device),
        cache_path=str(Path(cfg.out) / "completion_cache.json"),
        prompt_path=cfg.completion_prompt or str(COMPLETION_PROMPT),
        timeout_s=cfg.judge_timeout_s,
        retries=cfg.judge_retries,
        batch_size=cfg.rubric_batch,
    )
