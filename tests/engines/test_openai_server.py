"""`vibethinker eval engine=openai` against a REAL OpenAI-compatible server started by the test:
`transformers serve` (the `transformers[serving]` extra) serving a tiny model on 127.0.0.1.

That server ignores `n` (one choice per request), honours `seed`, returns `usage` but no token
ids or logprobs: the behaviours that once collapsed n samples into duplicates and reported
`mean_tokens 0`. The stub (tests/helpers/stub_openai.py) imitates them; this checks the real thing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from vibethinker.data.io import save_problems  # noqa: E402
from vibethinker.engines import SamplingParams, make_sampler  # noqa: E402
from vibethinker.types import Problem  # noqa: E402

pytestmark = pytest.mark.slow  # ~20 s of server start-up on one core


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_command() -> list[str]:
    exe = Path(sys.executable).with_name("transformers")
    if exe.exists():
        return [str(exe), "serve"]
    found = shutil.which("transformers")
    if not found:
        pytest.skip("the `transformers` CLI is not installed")
    return [found, "serve"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from vibethinker.models.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("serve")
    texts = [
        f"what is {a}+{b}? <think>{a}+{b}={a + b}</think>\\boxed{{{a + b}}}"
        for a in range(10)
        for b in range(10)
    ]
    model = build_tiny_model(root / "model", texts, "1m", 300, 0)
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    log = open(root / "serve.log", "w")
    proc = subprocess.Popen(
        [
            *_serve_command(),
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
            "--dtype",
            "float32",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"transformers serve exited: {(root / 'serve.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                pytest.fail("transformers serve did not start within 180 s")
            time.sleep(0.5)
        yield {"base_url": base + "/v1", "model": model}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_real_server_n_seeds_and_usage(server):
    s = make_sampler(
        "openai",
        base_url=server["base_url"],
        model=server["model"],
        tokenizer=server["model"],
        concurrency=1,
    )
    # (one request at a time: the server seeds a global RNG, so concurrent requests interleave)
    params = SamplingParams(max_new_tokens=8, seed=11)
    out = s.generate(["what is 1+2?", "what is 3+4?"], 4, params)
    assert s.ignores_n  # the real server answered n=4 with one choice
    for group in out:
        assert len(group) == 4
        assert len({c.text for c in group}) == 4  # distinct seeds: no duplicated samples
        for c in group:
            assert c.token_ids == [] and c.n_tokens is not None and 0 < c.n_tokens <= 8
    # seed-honouring: the same call gives the same samples
    again = s.generate(["what is 1+2?", "what is 3+4?"], 4, params)
    assert [[c.text for c in g] for g in again] == [[c.text for c in g] for g in out]


def test_eval_stage_against_the_real_server(server, tmp_path):
    from vibethinker.cli import main

    problems = [
        Problem(id=f"p{i}", domain="math", prompt=f"what is {i}+{i}?", answer=str(2 * i))
        for i in range(3)
    ]
    save_problems(tmp_path / "eval.jsonl", problems)
    rc = main(
        [
            "eval",
            server["model"],
            str(tmp_path / "eval.jsonl"),
            "engine=openai",
            f"base_url={server['base_url']}",
            "n=4",
            "k=1,4",
            "max_new_tokens=8",
            f"out={tmp_path / 'out'}",
            "workers=1",
            "concurrency=2",
        ]
    )
    assert rc in (0, None)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    m = summary["metrics"]["all"]
    assert m["samples"] == 12 and m["mean_tokens"] is not None and 0 < m["mean_tokens"] <= 8
    rows = [json.loads(x) for x in open(tmp_path / "out" / "samples.jsonl")]
    for pid in ("p0", "p1", "p2"):
        texts = [r["response"] for r in rows if r["id"] == pid]
        assert len(texts) == 4 and len(set(texts)) == 4
