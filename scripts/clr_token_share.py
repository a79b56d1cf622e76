"""The CLR examples' share of sft1's tokens in a run's train.jsonl (docs/CLR.md).

Counts every trace as sft1 sees it: the chat-wrapped prompt (the paper's prompt style) plus the
reply, with the run's own tokenizer; per domain, and for the CLR examples per task.

    .venv/bin/python scripts/clr_token_share.py /tmp/demo4
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from transformers import AutoTokenizer

    from vibethinker.data.io import load_problems
    from vibethinker.evaluate import PROMPT_STYLES
    from vibethinker.train.packing import encode_chat

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a run folder with model/ (the tokenizer) and data/train.jsonl")
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(f"{args.run}/model")
    traces, tokens = Counter(), Counter()
    for p in load_problems(f"{args.run}/data/train.jsonl"):
        for t in p.traces or []:
            n = len(encode_chat(tok, PROMPT_STYLES["paper"](p), t)[0])
            key = f"clr/{p.subdomain}" if p.domain == "clr" else p.domain
            traces[key] += 1
            tokens[key] += n
    total = sum(tokens.values())
    clr = sum(v for k, v in tokens.items() if k.startswith("clr/"))
    print(
        json.dumps(
            {
                "traces": traces,
                "tokens": tokens,
                "total_tokens": total,
                "clr_tokens": clr,
                "clr_share": round(clr / total, 4),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
