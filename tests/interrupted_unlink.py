"""An ``os.unlink`` that a second Ctrl-C interrupts: for cleanup code that must finish removing its files past one."""

import os


def interrupt_after_an_unlink(monkeypatch) -> tuple[list, object]:
    """Patch ``os.unlink`` so that, while the returned list is armed (holds True), the next unlink removes its file and
    then raises KeyboardInterrupt, once (the list is emptied as it fires: ``not armed`` after the code under test says
    the interrupt came). Returns (armed, the real os.unlink, to put back before the checks)."""
    unlink, armed = os.unlink, []

    def interrupted_unlink(*args, **kwargs):  # the file goes, then the interrupt comes
        unlink(*args, **kwargs)
        if armed:
            armed.clear()
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "unlink", interrupted_unlink)
    return armed, unlink
