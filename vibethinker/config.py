"""Flat dataclass configs: build them from YAML values and `key=value` overrides, with clear errors.

Every stage config is a flat dataclass whose fields carry a docstring (a string literal right under
the field). `field_docs` reads those for `vibethinker <stage> --help`.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Iterable
from typing import Any

import yaml

from vibethinker.log import TRACKERS
from vibethinker.types import DOMAINS, TRAIN_ONLY_DOMAINS


class ConfigError(ValueError):
    """A bad config key or value; the message says where and what was expected."""


class ConfigProblems(ConfigError):
    """A config's bad values found by `Checks` (every one of them); `body` lists them, and
    `make_config` prefixes it with where the config came from (a recipe stage, a CLI stage)."""

    def __init__(self, owner: str, problems: list[str]):
        self.problems = problems
        if len(problems) == 1:
            self.body = problems[0]
        else:
            self.body = f"{len(problems)} problems:\n  " + "\n  ".join(problems)
        super().__init__(f"{owner}: {self.body}")


def read_yaml(path: str, what: str) -> Any:
    """A YAML file's content; a missing file or bad YAML raises an error naming `what path`,
    the line and the column."""
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path}: no such file") from None
    except yaml.YAMLError as e:
        mark, ctx = getattr(e, "problem_mark", None), getattr(e, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        why = getattr(e, "problem", None) or str(e)
        if getattr(e, "context", None) and ctx:
            why += f" ({e.context} that starts at line {ctx.line + 1}, column {ctx.column + 1})"
        raise ConfigError(f"{what} {where}: invalid YAML: {why}") from None


class Block:
    """A block of config fields that several stage configs share by inheritance, so that each
    field is declared once and stays a flat key (engines/settings.py has the sampling and engine
    blocks). `with_defaults` gives a stage its own defaults for some of the block's fields;
    `field_docs` reads a field's docstring from the block's body plus the stage's note."""

    @classmethod
    def with_defaults(cls, notes: dict[str, str] | None = None, **defaults: Any) -> type:
        """This block with other defaults for some of its fields (each must be one of the block's
        fields; a `runtime(v)` value also marks the field runtime), and `notes` appended to
        fields' docstrings: a subclass that re-declares only those defaults, named
        `<Block>(defaults)`, marked `__stage_defaults__`."""
        known = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted((set(defaults) | set(notes or {})) - set(known))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
        hints = {
            n: a
            for k in reversed(cls.__mro__)
            for n, a in vars(k).get("__annotations__", {}).items()
        }
        ns: dict[str, Any] = {
            "__module__": cls.__module__,
            "__annotations__": {n: hints[n] for n in defaults},
            "__field_notes__": dict(notes or {}),
            "__stage_defaults__": True,
        }
        for name, value in defaults.items():
            if not isinstance(value, dataclasses.Field):
                value = dataclasses.field(default=value, metadata=known[name].metadata)
            ns[name] = value
        return dataclasses.dataclass(type(f"{cls.__name__}(defaults)", (cls,), ns))


def runtime(default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """Declare a field that cannot change a stage's results (device, worker counts, request
    concurrency): a recipe does not re-run a finished stage when only such fields changed.

        device: str = runtime("auto")  # then its docstring line, as for any field
    """
    return dataclasses.field(default=default, metadata={"runtime": True}, **kw)


def is_runtime(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("runtime"))


def result_values(cfg: Any) -> dict[str, Any]:
    """The config's fields that can change its results (everything not declared `runtime`)."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if not is_runtime(f)}


def close_matches(name: str, known: Any) -> str:
    """' (did you mean x?)' for a likely typo of a known name, else ''."""
    m = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {m[0]}?)" if m else ""


def _own_field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring literal written under it in this class's own body."""
    try:
        src = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(src).body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def field_docs(cls: type) -> dict[str, str]:
    """Map field name -> its docstring: the literal under it in the class body that declares it
    (the class itself or a settings block it inherits, engines/settings.py), then any stage note
    a block's `with_defaults` adds (`__field_notes__`)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        docs.update(_own_field_docs(klass))
        for name, note in vars(klass).get("__field_notes__", {}).items():
            docs[name] = f"{docs.get(name, '')} {' '.join(note.split())}".strip()
    return docs


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Convert a YAML/CLI value to the field type; strings from the CLI are parsed as YAML."""
    hint, optional = _strip_optional(hint)
    if value is None or (optional and value in ("null", "None", "none", "~")):
        if optional or hint is Any:
            return None
        raise ConfigError(f"{where}: expected {getattr(hint, '__name__', hint)}, got null")
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        if isinstance(value, str):
            parsed = yaml.safe_load(value) if value.strip().startswith("[") else None
            value = parsed if isinstance(parsed, list) else [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)):
            value = [value]
        return [coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if isinstance(value, str):
            value = yaml.safe_load(value)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if hint is str:
        return value if isinstance(value, str) else str(value)
    if hint is bool:
        if isinstance(value, str):
            low = value.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    if hint in (int, float):
        if isinstance(value, str):
            # YAML 1.1 reads "2e-3" (no dot) as a string: parse numbers with Python's rules.
            try:
                value = (
                    int(value)
                    if hint is int and value.strip().lstrip("-+").isdigit()
                    else float(value)
                )
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
        if hint is int and isinstance(value, float):
            if not value.is_integer():
                raise ConfigError(f"{where}: expected an integer, got {value!r}")
            value = int(value)
        return hint(value)
    if isinstance(value, str) and hint is Any:
        return yaml.safe_load(value)
    return value


def make_config(cls: type, values: dict[str, Any], where: str = "") -> Any:
    """Build `cls` from `values`; unknown keys and ill-typed values raise ConfigError."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        hint = close_matches(unknown[0], fields) if len(unknown) == 1 else ""
        raise ConfigError(
            f"{where or cls.__name__}: unknown key(s) {', '.join(unknown)}{hint}; "
            f"valid keys: {', '.join(fields)}"
        )
    kwargs = {k: coerce(v, hints[k], f"{where or cls.__name__}.{k}") for k, v in values.items()}
    missing = [
        n
        for n, f in fields.items()
        if n not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
    ]
    if missing:
        raise ConfigError(f"{where or cls.__name__}: missing required key(s) {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except ConfigProblems as e:  # the config's own checks (Checks): say where it came from
        raise ConfigProblems(where or cls.__name__, e.problems) from None


def parse_overrides(args: list[str]) -> dict[str, str]:
    """`["a=1", "sft.lr=2e-5"]` -> {"a": "1", "sft.lr": "2e-5"} (values stay strings)."""
    out: dict[str, str] = {}
    for a in args:
        if "=" not in a:
            raise ConfigError(f"override {a!r}: expected key=value")
        k, v = a.split("=", 1)
        if not k:
            raise ConfigError(f"override {a!r}: empty key")
        out[k.strip()] = v
    return out


def config_help(cls: type) -> str:
    """One line per field: name, type, default, docstring; the class's own fields first, then
    those of the settings blocks it inherits."""
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    own = vars(cls).get("__annotations__", {})
    lines = []
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name not in own):
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else "REQUIRED"
            )  # type: ignore[misc]
        )
        t = getattr(hints[f.name], "__name__", str(hints[f.name]).replace("typing.", ""))
        tag = "; runtime: changing it does not re-run the stage" if is_runtime(f) else ""
        lines.append(f"  {f.name}={default!r}  ({t}{tag})\n      {docs.get(f.name, '')}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- value checks

# The user-turn styles of prompts/paper.py PROMPT_STYLES (kept here so that configs need not
# import the evaluation package; tests/test_validation.py checks that the two agree).
PROMPT_STYLE_NAMES = ("paper", "raw")
_DEVICE = re.compile(r"(auto|cpu|mps|meta|(cuda|xpu|npu)(:\d+)?)")


class Checks:
    """Collects every bad value of a config, then raises one error naming each key, its value
    and the allowed range. A config's `__post_init__` runs its checks, so a config is checked
    when it is built (a recipe, the CLI, or code), before any output folder or model exists:

        c = Checks(self)
        c.at_least(1, "steps", "micro_batch")
        c.one_of("advantage", ("mgpo", "grpo"))
        c.done()
    """

    def __init__(self, cfg: Any):
        self.cfg, self.problems = cfg, []

    def bad(self, key: str, why: str) -> None:
        self.problems.append(f"{key}={getattr(self.cfg, key)!r}: {why}")

    def at_least(self, lo: float, *keys: str) -> None:
        for k in keys:
            v = getattr(self.cfg, k)
            if v is not None and v < lo:
                self.bad(k, f"must be >= {lo}")

    def positive(self, *keys: str) -> None:
        for k in keys:
            if getattr(self.cfg, k) <= 0:
                self.bad(k, "must be > 0")

    def fraction(self, *keys: str, upper_open: bool = False) -> None:
        """Each value in [0, 1] (or [0, 1) with `upper_open`)."""
        for k in keys:
            v = getattr(self.cfg, k)
            if not (0 <= v < 1 if upper_open else 0 <= v <= 1):
                self.bad(k, f"must be in [0, 1{')' if upper_open else ']'}")

    def in_range(self, key: str, lo: float, hi: float) -> None:
        """The value in (lo, hi]."""
        if not lo < getattr(self.cfg, key) <= hi:
            self.bad(key, f"must be in ({lo}, {hi}]")

    def one_of(self, key: str, options: Iterable[str], value: str | None = None) -> None:
        options = list(options)
        v = getattr(self.cfg, key) if value is None else value
        if v not in options:
            self.bad(key, f"{v!r} is not one of {', '.join(options)}{close_matches(v, options)}")

    def domains(self, key: str, train_only: bool = False) -> None:
        """A comma-separated string or a list of domain names, each a known domain."""
        v = getattr(self.cfg, key)
        names = [d.strip() for d in v.split(",")] if isinstance(v, str) else list(v)
        known = [*DOMAINS, *TRAIN_ONLY_DOMAINS] if train_only else list(DOMAINS)
        for d in names:
            if d not in known:
                self.bad(
                    key, f"unknown domain {d!r}{close_matches(d, known)}; known: {', '.join(known)}"
                )

    def device(self, key: str = "device", empty_ok: bool = False) -> None:
        v = getattr(self.cfg, key)
        if not (_DEVICE.fullmatch(v) or (empty_ok and v == "")):
            self.bad(key, "expected auto, cpu, cuda or cuda:N (cuda is the GPU), mps")

    def report_to(self, key: str = "report_to") -> None:
        names = [n.strip() for n in getattr(self.cfg, key).split(",") if n.strip()]
        for n in names:
            if n != "none" and n not in TRACKERS:
                self.one_of(key, ["none", *TRACKERS], n)

    def data_probs(self, data_key: str = "data", probs_key: str = "data_probs") -> None:
        """Weights of a comma-separated data list: one per dataset, non-negative, sum > 0."""
        probs = list(getattr(self.cfg, probs_key))
        paths = [x for x in str(getattr(self.cfg, data_key)).split(",") if x.strip()]
        if not probs:
            return
        if paths and len(probs) != len(paths):
            self.bad(probs_key, f"{len(probs)} weight(s) for {len(paths)} dataset(s) in {data_key}")
        elif any(w < 0 for w in probs) or sum(probs) <= 0:
            self.bad(probs_key, "weights must be >= 0 with a positive sum")

    def done(self) -> None:
        if self.problems:
            raise ConfigProblems(type(self.cfg).__name__, self.problems)
