"""The CLI's argument for a file that must exist (a package, an inputs file): click.Path(exists=True) whose refusals
quote the path clipped and say what the system said.

Why: click's own check quoted the whole path in its refusal and called any failed ``stat`` "does not exist": a
name of 4 KB (``aotcuda run PACKAGE --inputs a/a/.../x.pt``) made a 4 KB error line, and a name the kernel refuses
as too long, or a folder on the way that cannot be searched, was said to be missing (the file-system breaker,
2026-12-06). This module imports neither torch nor the rest of aotcuda but errors.py and os_errors.py: serve's
command uses it too.
"""

from __future__ import annotations

import errno
import os
import stat

import click

from aotcuda.errors import clipped
from aotcuda.os_errors import os_error_advice

SHOWN_PATH = 200  # characters of a path a refusal quotes, as load's and the package readers' messages do


class ExistingFile(click.Path):
    """A path to an existing file (not a folder), as a str; refused with the path cut to SHOWN_PATH characters."""

    def __init__(self):
        super().__init__(exists=True, dir_okay=False)

    def convert(self, value, param, ctx):
        shown = repr(clipped(os.fsdecode(value), SHOWN_PATH))
        try:
            found = os.stat(value)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                self.fail(f"{shown}: no such file", param, ctx)
            advice = os_error_advice(exc, os.path.dirname(os.fsdecode(value)) or ".") or "check the path"
            self.fail(f"{shown}: cannot be read ({exc.strerror}); {advice}", param, ctx)
        except ValueError:  # a NUL byte (only from a caller in Python: argv cannot hold one)
            self.fail(f"{shown}: a path cannot hold a NUL byte", param, ctx)
        if stat.S_ISDIR(found.st_mode):
            self.fail(f"{shown} is a folder: name a file", param, ctx)
        return self.coerce_path_result(value)
