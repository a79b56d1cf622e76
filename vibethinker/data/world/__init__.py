"""The embedded world: procedural tasks in four domains with exact verification data, and a
procedural teacher that writes several distinct correct traces per problem (plus labelled wrong
ones). Everything is a pure function of the seed: same seed -> byte-identical files.

Splits: `eval` (held-out), `probe` (Pass@K probing of checkpoints, per subdomain: `n_probe` per
math subdomain and `n_probe` per other domain, its subdomains cycling), `train`. No prompt is
shared across splits; for multiple choice the question without its (shuffled) options is the key.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from vibethinker.data.world import code, stem
from vibethinker.data.world import math as math_world
from vibethinker.data.world.claims import add_clr
from vibethinker.data.world.code import make_code
from vibethinker.data.world.instruct import make_instruct
from vibethinker.data.world.math import make_math
from vibethinker.data.world.stem import make_stem
from vibethinker.types import DOMAINS, Problem

MAKERS: dict[str, Callable[..., Problem]] = {
    "math": make_math,
    "code": make_code,
    "stem": make_stem,
    "instruct": make_instruct,
}
SUBDOMAINS: dict[str, tuple[str, ...]] = {
    "math": math_world.SUBDOMAINS,
    "code": code.SUBDOMAINS,
    "stem": stem.SUBDOMAINS,
    "instruct": ("rules1", "rules2", "rules3"),
}
SPLITS = ("train", "probe", "eval")
__all__ = ["generate", "stats", "prompt_key", "domain_counts", "MAKERS", "SUBDOMAINS", "SPLITS"]
__all__ += ["make_math", "make_code", "make_stem", "make_instruct"]


def prompt_key(p: Problem) -> str:
    """Normalised identity of a problem: lowercase, whitespace collapsed; stem: question only."""
    text = p.prompt.split("\n", 1)[0] if p.domain == "stem" else p.prompt
    return " ".join(text.lower().split())


def domain_counts(n: int, domains: Sequence[str], math_share: float) -> dict[str, int]:
    """Split `n` problems over domains: math gets `math_share`, the others share the rest."""
    others = [d for d in domains if d != "math"]
    if "math" not in domains:
        n_math = 0
    elif not others:
        n_math = n
    else:
        n_math = round(n * math_share)
    out = {"math": n_math} if "math" in domains else {}
    for i, d in enumerate(others):
        out[d] = (n - n_math) // len(others) + (i < (n - n_math) % len(others))
    return out


def _even(n: int, subs: Sequence[str | None]) -> list[tuple[int, str | None]]:
    return [(n // len(subs) + (i < n % len(subs)), s) for i, s in enumerate(subs)]


def _fill(
    domain: str,
    split: str,
    count: int,
    subdomain: str | None,
    rng: random.Random,
    seen: set[str],
    out: list[Problem],
    seed: int,
) -> None:
    """Draw `count` new problems (unseen prompts) of one domain into `out`."""
    tries, start = 0, len(out)
    while len(out) - start < count:
        p = MAKERS[domain](rng, tries, subdomain)
        tries += 1
        key = prompt_key(p)
        if key in seen:
            if tries > 50 * count + 1000:
                raise RuntimeError(
                    f"world {domain}/{subdomain or '*'}: only {len(out) - start} distinct problems "
                    f"after {tries} draws; ask for fewer (split {split}, wanted {count})"
                )
            continue
        seen.add(key)
        p.id = f"{domain}-{split}-{len(out):05d}"
        p.meta = {"source": "world", "seed": seed, "split": split}
        out.append(p)


def generate(
    seed: int,
    n_train: int = 3000,
    n_probe: int = 40,
    n_eval: int = 400,
    domains: Sequence[str] = DOMAINS,
    math_share: float = 0.55,
) -> dict[str, list[Problem]]:
    """The world's splits {"train", "probe", "eval"} -> problems.

    n_train / n_eval are totals over domains (math gets `math_share`, the rest split evenly);
    n_probe is per math subdomain and per other domain. Held-out splits are drawn first.
    `clr` in `domains` adds the training-only CLR skill examples to train (world/claims.py).
    """
    with_clr, domains = "clr" in domains, [d for d in domains if d != "clr"]
    unknown = [d for d in domains if d not in MAKERS]
    if unknown:
        raise ValueError(f"unknown domain(s) {unknown}; known: {list(MAKERS)}")
    out: dict[str, list[Problem]] = {s: [] for s in SPLITS}
    for domain in domains:
        rng = random.Random(f"vibethinker-world:{seed}:{domain}")  # str seeds are stable
        seen: set[str] = set()
        subs = SUBDOMAINS[domain] if domain == "math" else (None,)  # math: exact balance
        per_split = {
            "eval": _even(domain_counts(n_eval, domains, math_share)[domain], subs),
            "probe": [(n_probe, s) for s in subs],
            "train": _even(domain_counts(n_train, domains, math_share)[domain], subs),
        }
        for split in ("eval", "probe", "train"):
            got: list[Problem] = []
            for count, sub in per_split[split]:
                _fill(domain, split, count, sub, rng, seen, got, seed)
            out[split] += got
    if with_clr:
        add_clr(out, seed)
    return out


def stats(splits: dict[str, list[Problem]]) -> dict[str, Any]:
    """Counts per split/domain/subdomain, distinct correct traces per problem, wrong traces."""
    res: dict[str, Any] = {}
    for split, probs in splits.items():
        by_dom: dict[str, list[Problem]] = defaultdict(list)
        for p in probs:
            by_dom[p.domain].append(p)
        res[split] = {
            d: {
                "problems": len(ps),
                "subdomains": dict(sorted(Counter(p.subdomain or "" for p in ps).items())),
                "difficulty": dict(sorted(Counter(p.difficulty or 0 for p in ps).items())),
                "mean_distinct_traces": round(
                    sum(len(set(p.traces or [])) for p in ps) / max(len(ps), 1), 3
                ),
                "mean_trace_chars": round(
                    sum(len(t) for p in ps for t in p.traces or [])
                    / max(sum(len(p.traces or []) for p in ps), 1),
                    1,
                ),
                "wrong_traces": sum(len(p.wrong_traces or []) for p in ps),
            }
            for d, ps in sorted(by_dom.items())
        }
    return res
