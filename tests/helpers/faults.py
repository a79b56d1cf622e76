"""Injected faults the reliability tests share: a disk that fills up mid-write."""

from __future__ import annotations

import errno

import pytest


class _FullDisk:
    """A file whose writes fail with ENOSPC once `room` bytes are written (what a full disk
    does to a plain write: the first 4 KB land, then the error)."""

    def __init__(self, f, room: int = 4096):  # bytes that still fit
        self.f, self.room = f, room

    def write(self, text):
        if len(text) > self.room:
            self.f.write(text[: self.room])
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(text)
        return self.f.write(text)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


@pytest.fixture
def disk_full(monkeypatch):
    """Every file opened for writing fills up after 4 KB (both `open` and `Path.open`)."""
    import builtins
    import io

    real = io.open

    def full_open(file, mode="r", *a, **k):
        f = real(file, mode, *a, **k)
        return _FullDisk(f) if any(c in mode for c in "wa") else f

    monkeypatch.setattr(io, "open", full_open)
    monkeypatch.setattr(builtins, "open", full_open)
