"""engines/settings.py: the sampling and endpoint keys are declared once (in a block the stage
configs inherit), stay flat keys with their docs and defaults, and build SamplingParams and the
engine in one place."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from vibethinker.config import config_help, field_docs, is_runtime, make_config
from vibethinker.engines import SamplingParams
from vibethinker.engines import settings as blocks
from vibethinker.engines.openai import OpenAISampler
from vibethinker.engines.settings import EngineFields, NucleusFields, SamplingFields
from vibethinker.stages import load_all
from vibethinker.train.rl_config import RLConfig
from vibethinker.train.sft_config import SFTConfig

# The keys that must not be declared twice. `timeout` is left out: VerifyConfig's is the code
# verifier's, not an endpoint's.
SHARED = (
    "temperature",
    "top_p",
    "top_k",
    "max_new_tokens",
    "base_url",
    "endpoint",
    "concurrency",
    "tokenizer",
    "device",
    "engine",
    "dtype",
    "token_budget",
    "context_len",
    "rope_yarn_factor",
    "rope_original_len",
)


def config_classes() -> list[type]:
    return sorted({s.config_cls for s in load_all().values()} | {RLConfig, SFTConfig}, key=str)


def declarations(configs: list[type], names=SHARED) -> dict[str, set[str]]:
    """key -> every class body (its qualified name) that declares it, over the configs and the
    classes they inherit; a block's `with_defaults` subclass re-declares defaults only and is
    not counted (test_with_defaults_changes_defaults_only)."""
    out: dict[str, set[str]] = {n: set() for n in names}
    for cfg in configs:
        for k in cfg.__mro__:
            if vars(k).get("__stage_defaults__"):
                continue
            for n in vars(k).get("__annotations__", {}):
                if n in out:
                    out[n].add(f"{k.__module__}.{k.__qualname__}")
    return out


def test_each_shared_key_is_declared_in_one_class_body_a_settings_block():
    got = declarations(config_classes())
    twice = {n: sorted(v) for n, v in got.items() if len(v) > 1}
    assert twice == {}, f"declared in more than one class body: {twice}"
    for n, where in got.items():
        assert where and all(w.startswith("vibethinker.engines.settings.") for w in where), (
            n,
            where,
        )


def test_the_check_catches_a_config_that_declares_a_shared_key_again():
    """The control: a config that inherits the block AND declares temperature in its own body
    (another default, the duplication this replaces) is reported, as is a second block."""

    @dataclass
    class Redeclares(NucleusFields):
        temperature: float = 0.7
        """Sampling temperature (again)."""

    @dataclass
    class Plain:
        max_new_tokens: int = 64

    got = declarations([Redeclares, Plain, RLConfig])
    assert len(got["temperature"]) == 2 and len(got["max_new_tokens"]) == 2, got


def test_with_defaults_changes_defaults_only():
    """A stage's defaults subclass re-declares only fields the block has: same type, metadata
    (runtime) and doc; an unknown name is refused."""
    made = {k for c in config_classes() for k in c.__mro__ if vars(k).get("__stage_defaults__")}
    assert made, "no config uses with_defaults"
    for k in made:
        block = next(b for b in k.__mro__[1:] if not vars(b).get("__stage_defaults__"))
        theirs = {f.name: f for f in dataclasses.fields(block)}
        for name in vars(k).get("__annotations__", {}):
            assert name in theirs, (k, name)
        assert [f.name for f in dataclasses.fields(k)] == list(theirs)
    # a runtime(v) default keeps the key and marks it runtime for that stage only
    runtime_keys = {
        n: {f.name for f in dataclasses.fields(s.config_cls) if is_runtime(f)}
        for n, s in load_all().items()
    }
    assert "token_budget" in runtime_keys["headline"] and "token_budget" not in runtime_keys["eval"]
    with pytest.raises(TypeError, match="no field"):
        NucleusFields.with_defaults(temprature=0.5)
    with pytest.raises(TypeError, match="no field"):
        SamplingFields.with_defaults(notes={"top_p": "not a SamplingFields key"})


def test_the_stage_defaults_the_recipes_rely_on():
    """The per-stage defaults that were each config's own before the blocks (recipes and
    single-stage CLI runs rely on them)."""
    stages = {n: s.config_cls() for n, s in load_all().items()}
    want = {
        "rl": (1.0, 1.0, 65536),
        "eval": (1.0, 0.95, 0),
        "clr": (1.0, 0.95, 0),
        "headline": (1.0, 0.95, 160),
        "distill": (1.0, 0.95, 4096),
        "construct": (1.0, 0.95, 4096),
    }
    for name, (t, p, m) in want.items():
        c = stages[name]
        assert (c.temperature, c.top_p, c.max_new_tokens) == (t, p, m), name
    assert (stages["probe_merge"].temperature, stages["probe_merge"].max_new_tokens) == (1.0, 256)
    assert not hasattr(stages["probe_merge"], "top_p")  # no new key: SamplingParams' 0.95 applies
    assert stages["eval"].base_url.endswith(":8000/v1")
    # one device key, default auto everywhere: eval, clr and headline had "" (the same: cuda
    # when available), and still accept it
    assert {c.device for c in stages.values() if hasattr(c, "device")} == {"auto"}
    assert load_all()["eval"].config_cls(device="").make_engine  # "" still passes the checks


def test_inherited_keys_keep_their_docs_and_stage_notes_in_help():
    for cfg in config_classes():
        docs = field_docs(cfg)
        undocumented = [f.name for f in dataclasses.fields(cfg) if not docs.get(f.name)]
        assert undocumented == [], (cfg.__name__, undocumented)
    rl = field_docs(RLConfig)
    assert rl["top_p"].startswith("Nucleus (top-p) sampling") and "RL: we choose 1.0" in rl["top_p"]
    assert "RL: we choose" not in field_docs(load_all()["eval"].config_cls)["top_p"]
    text = config_help(RLConfig)
    assert "max_new_tokens=65536" in text and "Paper: 64K from the first step" in text
    assert text.index("  model=") < text.index("  temperature=")  # the stage's own keys first


def test_flat_keys_still_set_and_checked_from_a_recipe():
    cfg = make_config(RLConfig, {"temperature": "0.8", "top_p": "0.9", "max_new_tokens": "32"})
    assert (cfg.temperature, cfg.top_p, cfg.max_new_tokens) == (0.8, 0.9, 32)
    with pytest.raises(Exception, match="top_p"):
        make_config(RLConfig, {"top_p": "1.5"})


def test_sampling_params_come_from_the_block():
    rl = RLConfig(temperature=0.7, max_new_tokens=12)
    assert rl.sampling_params(5) == SamplingParams(0.7, 1.0, 0, 12, [], 5)
    ev = load_all()["eval"].config_cls(top_k=3, stop=["END"])
    assert ev.sampling_params(seed=1, stop=list(ev.stop)) == SamplingParams(
        1.0, 0.95, 3, 0, ["END"], 1
    )
    probe = load_all()["probe_merge"].config_cls(max_new_tokens=9)
    assert probe.sampling_params(2) == SamplingParams(1.0, 0.95, 0, 9, [], 2)
    assert load_all()["construct"].config_cls().sampling_params().seed is None


def test_engine_fields_build_the_openai_sampler():
    sampler = EngineFields(
        engine="openai", base_url="http://h:9/v1/", endpoint="completions", concurrency=3
    ).make_engine("served-name")
    assert isinstance(sampler, OpenAISampler)
    assert (sampler.base_url, sampler.endpoint, sampler.model) == (
        "http://h:9/v1",
        "completions",
        "served-name",
    )
    assert sampler.concurrency == 3


def test_the_blocks_module_lists_every_block_in_its_docstring():
    for name, obj in vars(blocks).items():
        if (
            isinstance(obj, type)
            and dataclasses.is_dataclass(obj)
            and obj.__module__ == blocks.__name__
        ):
            assert name in (blocks.__doc__ or ""), name
