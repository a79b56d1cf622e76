from dataclasses import dataclass, field

import pytest

from vibethinker.config import ConfigError, config_help, field_docs, make_config, parse_overrides


@dataclass
class Cfg:
    lr: float = 1e-4
    """peak learning rate (paper: 5e-5)"""
    steps: int = 10
    """optimizer steps"""
    on: bool = False
    """a switch"""
    ks: list[int] = field(default_factory=lambda: [1])
    """k values"""
    model: str | None = None
    """optional path"""


@pytest.mark.parametrize(
    "values, expect",
    [
        ({"lr": "2e-3"}, {"lr": 0.002}),  # YAML 1.1 would keep "2e-3" a string
        ({"steps": "1e3"}, {"steps": 1000}),
        ({"on": "yes"}, {"on": True}),
        ({"ks": "1,4,8"}, {"ks": [1, 4, 8]}),
        ({"ks": "[2, 3]"}, {"ks": [2, 3]}),
        ({"model": "null"}, {"model": None}),
        ({"model": 5}, {"model": "5"}),
    ],
)
def test_coercion(values, expect):
    cfg = make_config(Cfg, values)
    assert {k: getattr(cfg, k) for k in expect} == expect


@pytest.mark.parametrize(
    "values, match",
    [
        ({"steps": "1.5"}, "steps: expected an integer"),
        ({"lr": "fast"}, "lr: expected float"),
        ({"on": "maybe"}, "on: expected true/false"),
        ({"lrr": 1}, "unknown key.*lrr.*valid keys: lr, steps"),
    ],
)
def test_errors(values, match):
    with pytest.raises(ConfigError, match=match):
        make_config(Cfg, values)


def test_docs_and_help():
    assert field_docs(Cfg)["lr"] == "peak learning rate (paper: 5e-5)"
    assert "steps=10" in config_help(Cfg) and "optimizer steps" in config_help(Cfg)


def test_parse_overrides():
    assert parse_overrides(["a=1", "s.k=x=y"]) == {"a": "1", "s.k": "x=y"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])
