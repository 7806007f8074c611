"""torch's package writer finished on every path, so that a failed write is an error and never an abort.

Why: ``PT2ArchiveWriter.__exit__`` (torch/export/pt2_archive/_package.py) writes two records and then ``close()``
(``write_end_of_file``); where a write fails (a full disk, a file-size limit) they raise, ``close()`` never runs, and
the C++ ``PyTorchStreamWriter``'s destructor writes the end of the file itself, throws from a destructor and ends the
process: ``terminate called after throwing an instance of 'c10::Error'`` (SIGABRT, exit 134) at the next garbage
collection (the process breaker, 2026-12-06: ``aotcuda lower`` into a 64 KiB tmpfs). One ``write_end_of_file`` call,
even one that fails, marks the writer finished (its ``Finalizer``), so the destructor does nothing: the patched
``__exit__`` makes that call on every failure, and raises ``ArchiveWriteError`` with torch's error as its cause.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class ArchiveWriteError(RuntimeError):
    """torch's archive writer failed while it wrote a package; the cause is its error."""


def _finished(writer) -> None:
    try:
        writer.archive_file.write_end_of_file()
    except Exception:  # noqa: BLE001 - the stream failed already: the call is made to mark the writer finished
        pass


@contextlib.contextmanager
def archive_writer_finished_on_failure() -> Iterator[None]:
    """``PT2ArchiveWriter.__exit__`` finishing the writer on failure, for the block; a no-op where torch has no such
    writer (nothing to patch)."""
    try:
        from torch.export.pt2_archive._package import PT2ArchiveWriter
    except ImportError:
        yield
        return
    original = PT2ArchiveWriter.__dict__.get("__exit__")
    if original is None:
        yield
        return

    def __exit__(self, kind, value, traceback):
        if kind is None:
            try:
                return original(self, kind, value, traceback)
            except Exception as exc:
                _finished(self)
                raise ArchiveWriteError(f"{type(exc).__name__}: {exc}") from exc
        _finished(self)
        if issubclass(kind, Exception):  # an interrupt stays itself
            raise ArchiveWriteError(f"{kind.__name__}: {value}") from value
        return None

    PT2ArchiveWriter.__exit__ = __exit__
    try:
        yield
    finally:
        PT2ArchiveWriter.__exit__ = original
