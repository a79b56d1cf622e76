"""Integration: every teacher trace of the embedded world verifies correct with the domain
verifier, and every labelled wrong trace fails (the data filters and RL rewards rely on both)."""

from collections import Counter

import pytest

from vibethinker.data.world import generate
from vibethinker.sandbox import find_bwrap
from vibethinker.verifiers import verify_batch


@pytest.fixture(scope="module")
def world():
    return generate(seed=11, n_train=120, n_probe=2, n_eval=24)


def _pairs(splits, domains, attr):
    probs, resps = [], []
    for split in splits.values():
        for p in split:
            if p.domain in domains:
                for t in getattr(p, attr) or []:
                    probs.append(p)
                    resps.append(t)
    return probs, resps


@pytest.mark.parametrize("domains", [("math", "stem", "instruct"), ("code",)])
def test_world_traces_verify(world, domains):
    if "code" in domains and find_bwrap() is None:
        pytest.skip("no working bubblewrap sandbox")
    probs, resps = _pairs(world, domains, "traces")
    assert len(probs) > 50
    scores = verify_batch(probs, resps, workers=2)
    bad = [(p.id, r, s.reason) for p, r, s in zip(probs, resps, scores) if not s.correct]
    assert not bad, f"{len(bad)} correct traces scored wrong, e.g. {bad[:3]}"
    wprobs, wresps = _pairs(world, domains, "wrong_traces")
    assert len(wprobs) > 20
    wscores = verify_batch(wprobs, wresps, workers=2)
    passed = [(p.id, r) for p, r, s in zip(wprobs, wresps, wscores) if s.correct]
    assert not passed, f"{len(passed)} wrong traces scored correct, e.g. {passed[:3]}"
    assert Counter(p.domain for p in probs).keys() == set(domains)
