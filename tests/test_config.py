from dataclasses import dataclass, field, fields

import pytest

from vibethinker.config import (
    Block,
    ConfigError,
    config_help,
    field_docs,
    is_runtime,
    make_config,
    parse_overrides,
    runtime,
)


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


@dataclass
class Knobs(Block):
    temp: float = 1.0
    """sampling temperature"""
    budget: int = 64
    """rows per batch"""


@dataclass
class Stage(Knobs.with_defaults(temp=0.5, budget=runtime(8), notes={"temp": "stage: ours."})):
    name: str = "x"
    """the stage's own key"""


def test_a_block_gives_flat_keys_with_its_docs_and_a_stage_its_defaults_and_notes():
    s = make_config(Stage, {"temp": "0.7"})
    assert (s.temp, s.budget, s.name) == (0.7, 8, "x")
    assert (Knobs().temp, Knobs().budget) == (1.0, 64)  # the block's own defaults are untouched
    docs = field_docs(Stage)
    assert docs == {
        "temp": "sampling temperature stage: ours.",
        "budget": "rows per batch",
        "name": "the stage's own key",
    }
    runtime_keys = {f.name for f in fields(Stage) if is_runtime(f)}
    assert runtime_keys == {"budget"} and not any(is_runtime(f) for f in fields(Knobs))
    text = config_help(Stage)
    assert text.index("name=") < text.index("temp=0.5")  # the stage's own keys first
    with pytest.raises(TypeError, match="Knobs has no field.*tmp"):
        Knobs.with_defaults(tmp=0.5)


def test_parse_overrides():
    assert parse_overrides(["a=1", "s.k=x=y"]) == {"a": "1", "s.k": "x=y"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


def test_yaml_syntax_error_names_the_file_line_and_column(tmp_path):
    from vibethinker.config import read_yaml

    path = tmp_path / "r.yaml"
    path.write_text("run_dir: x\nstages:\n  - stage: data\n    seed: [1\n  - stage: eval\n")
    with pytest.raises(ConfigError) as e:
        read_yaml(str(path), "recipe")
    msg = str(e.value)
    assert f"recipe {path}:5:10: invalid YAML: expected ',' or ']'" in msg, msg
    assert "starts at line 4, column 11" in msg and "<unicode string>" not in msg


def test_bad_reference_suggests_the_close_match_not_every_key(tmp_path):
    from pathlib import Path

    from vibethinker.recipe import load_recipe

    text = Path("recipes/tiny.yaml").read_text().replace("data: ${data.out}", "data: ${data.uot}")
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_recipe(str(path))
    msg = str(e.value)
    assert "unknown reference ${data.uot} (did you mean ${data.out}?)" in msg
    assert len(msg) < 300, msg
    path.write_text(text.replace("${data.uot}", "${zzz}"))
    with pytest.raises(ConfigError, match=r"available: \$\{run_dir\}, \$\{model\}, or") as e:
        load_recipe(str(path))
    assert len(str(e.value)) < 400
