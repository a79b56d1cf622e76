"""A read-only view for sandboxes that never leaves memory: a copy, on a tmpfs, of what the
sandboxed interpreter needs (its executable, libpython, stdlib, the shared objects they load).

Why: the host's page cache is shared by every process. With /usr bound from disk, a check that
reads a page nobody has read makes it cached and a later check can time its own read of it: an
exact channel between checks (64 bits per pair of checks measured, scripts/sandbox_channels.py),
so a sample that solves a problem could hand its answer to the samples graded after it. Pages of
a tmpfs file are memory, not cache: always "resident", so reading them changes nothing a later
check can observe.

The copy is made once per host (content-keyed folder under `VIBETHINKER_SANDBOX_ROOT`, default
/dev/shm; atomic rename, so concurrent builders agree), ~40-110 MB. What a check sees is this
copy only: a shell and a few coreutils (`PROGRAMS`) but no other program, no site-packages, and no stdlib parts a grader never needs
(`EXCLUDE`). Set `VIBETHINKER_SANDBOX_ROOT=off` to bind the host's /usr instead (the channel is
then open). Without `ldd` or a writable, exec-capable tmpfs the same fallback applies, with a
warning.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from vibethinker.log import get_logger

_log = get_logger("sandbox.rootfs")

VERSION = "3"  # bump when what the copy holds changes
# stdlib folders a check does not need (GUI, the stdlib's own tests, bundled wheels, 2to3)
EXCLUDE = (
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "site-packages",
    "dist-packages",
    "__phello__",
)
# a few programs ordinary scripts start (os.system, subprocess): the shell and basic coreutils
PROGRAMS = (
    "sh",
    "bash",
    "echo",
    "cat",
    "true",
    "false",
    "ls",
    "sleep",
    "env",
    "head",
    "tail",
    "sort",
    "uniq",
    "wc",
    "tr",
    "cut",
    "seq",
    "yes",
)
EXTRA_DIRS = ("/usr/share/zoneinfo", "/usr/lib/locale/C.utf8")  # zoneinfo, the C.UTF-8 locale
_LDD_LINE = re.compile(r"(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)")


def _stdlib_dirs() -> list[str]:
    """The base interpreter's stdlib folders (never a venv's)."""
    base = os.path.realpath(sys.base_prefix)
    pbase = os.path.realpath(sys.base_exec_prefix)
    v = {"base": base, "platbase": pbase, "installed_base": base, "installed_platbase": pbase}
    paths = sysconfig.get_paths("posix_prefix", vars=v)
    dirs = (os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib"))
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _elf_files(exe: str) -> list[str]:
    """The interpreter, libpython, `PROGRAMS` and every extension module of the stdlib."""
    out = [exe]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        name = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
        out.append(os.path.join(str(sysconfig.get_config_var("LIBDIR")), str(name)))
    for name in PROGRAMS:
        p = shutil.which(name, path="/usr/bin:/bin")
        if p:
            out.append(p)
    for d in _stdlib_dirs():
        dyn = os.path.join(d, "lib-dynload")
        if os.path.isdir(dyn):
            out += [os.path.join(dyn, f) for f in sorted(os.listdir(dyn)) if f.endswith(".so")]
    return [p for p in out if os.path.exists(p)]


def shared_objects(files: list[str], ldd: str) -> list[str]:
    """Every shared object `files` load, as the loader names it (`/lib/x86_64-linux-gnu/libc.so.6`,
    `/lib64/ld-linux-x86-64.so.2`), from `ldd`'s output."""
    found: dict[str, None] = {}
    for f in files:
        r = subprocess.run([ldd, f], capture_output=True, text=True, timeout=30, check=False)
        for m in _LDD_LINE.finditer(r.stdout):
            found[m.group(1)] = None
    return list(found)


def _target(root: str, path: str) -> str:
    """Where `path` goes in the copy: its folder resolved (so /lib/x -> /usr/lib/x where /lib is a
    link, as bwrap.py recreates), its own name kept (a library's soname link)."""
    d = os.path.realpath(os.path.dirname(path))
    return root + os.path.join(d, os.path.basename(path))


def _copy_file(root: str, path: str) -> None:
    dst = _target(root, path)
    os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
    shutil.copy2(os.path.realpath(path), dst)


def _ignore(top: str):
    def ignore(d: str, names: list[str]) -> list[str]:
        skip = [n for n in names if n.endswith((".opt-1.pyc", ".opt-2.pyc"))]
        if os.path.realpath(d) == top:
            skip += [n for n in names if n in EXCLUDE]
        return skip

    return ignore


def build(root: str, exe: str, ldd: str) -> None:
    """Fill the empty folder `root` with the copy (module doc)."""
    elves = _elf_files(exe)
    for f in elves + shared_objects(elves, ldd):
        _copy_file(root, f)
    for d in _stdlib_dirs():
        dst = root + d
        shutil.copytree(
            d, dst, ignore=_ignore(d), ignore_dangling_symlinks=True, dirs_exist_ok=True
        )
    for d in EXTRA_DIRS:
        if os.path.isdir(d):
            shutil.copytree(d, _target(root, d), ignore_dangling_symlinks=True, dirs_exist_ok=True)
    for dirpath, _, _ in os.walk(root):  # every level traversable by a check's uid
        os.chmod(dirpath, 0o755)


def _key(exe: str) -> str:
    st = os.stat(exe)
    parts = [VERSION, exe, str(st.st_mtime_ns), *_stdlib_dirs()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


@functools.cache
def resident_root(exe: str) -> str | None:
    """The copy's folder for interpreter `exe`, made on first use; None to bind the host's /usr
    (turned off, or this host cannot hold the copy: the reason is logged once)."""
    base = os.environ.get("VIBETHINKER_SANDBOX_ROOT") or "/dev/shm"
    if base.lower() in ("off", "0", "none"):
        return None
    ldd = shutil.which("ldd")
    if ldd is None or not os.path.isdir(base) or not os.access(base, os.W_OK | os.X_OK):
        _log.warning(
            "sandbox: no ldd or no writable %s: binding the host's /usr (the page "
            "cache is then a channel between checks)",
            base,
        )
        return None
    dest = os.path.join(base, f"vibethinker-ro-{_key(exe)}")
    if os.path.isfile(os.path.join(dest, ".complete")):
        return dest
    tmp = f"{dest}.{os.getpid()}.tmp"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp, mode=0o755)
        build(tmp, exe, ldd)
        open(os.path.join(tmp, ".complete"), "w").close()
        try:
            os.rename(tmp, dest)
        except OSError:  # another process finished first: use its copy
            shutil.rmtree(tmp, ignore_errors=True)
    except (OSError, subprocess.SubprocessError, shutil.Error) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        _log.warning(
            "sandbox: could not build the resident view in %s (%s): binding the host's /usr",
            base,
            e,
        )
        return None
    return dest if os.path.isfile(os.path.join(dest, ".complete")) else None
