"""The static stage registry: every stage module is listed, and each registers what it says."""

from __future__ import annotations

import pkgutil

from vibethinker import stages


def test_every_stage_module_is_in_the_registry_and_registers_its_name():
    """Every file is a stage module of MODULES or a part of one (`<module>_<part>.py`, which
    registers nothing of its own)."""
    files = {m.name for m in pkgutil.iter_modules(stages.__path__)}
    parts = {f for f in files if f not in stages.MODULES.values()}
    assert set(stages.MODULES.values()) <= files
    assert all(f.rsplit("_", 1)[0] in stages.MODULES.values() for f in parts), parts
    registered = stages.load_all()
    assert set(stages.MODULES) <= set(registered)
    for name, mod in stages.MODULES.items():
        assert registered[name].fn.__module__ == f"vibethinker.stages.{mod}", name
    homes = {s.fn.__module__ for s in registered.values()}
    assert not homes & {f"vibethinker.stages.{p}" for p in parts}, homes


def test_names_do_not_import_stage_modules():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from vibethinker import stages\n"
        "n = stages.names()\n"
        "print(len(n), any(m.startswith('vibethinker.stages.') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(len(stages.MODULES)), "False"]
