"""probe_merge's merge plan: edges that mutation testing (docs/MUTATION.md) found untested."""

import pytest

from vibethinker.stages.probe_merge import merge_plan


def test_one_group_or_small_weights_still_make_a_plan():
    """A total weight of 1 or less is fine: the weights are normalised, whatever they sum to."""
    assert merge_plan({"math": "s1/step-10"}) == [("s1/step-10", 1.0)]
    plan = dict(merge_plan({"a": "c1", "b": "c2"}, {"a": 0.1, "b": 0.3}))
    assert plan == pytest.approx({"c1": 0.25, "c2": 0.75})


def test_zero_total_weight_is_refused_with_its_sum():
    with pytest.raises(ValueError, match=r"merge weights sum to 0\.0"):
        merge_plan({"a": "c1", "b": "c2"}, {"a": 0.0, "b": 0.0})
