"""torch, imported by the command line before anything else, its failure said as one ``error:`` line.

Why: torch reads its environment as it imports, and refuses some values there: ``TORCH_LOGS=garbage aotcuda --help``
(or any command) printed a 20-line traceback from ``import torch`` at the top of cli.py, before the command's error
handling existed (the file-system breaker, 2026-12-06). A torch that is not installed, or whose import fails for any
other reason, is said the same way. AOTCUDA_DEBUG=1 keeps the traceback.
"""

from __future__ import annotations

import sys

from aotcuda.errors import SwitchError, clipped
from aotcuda.switches import flag

try:
    import torch  # noqa: F401 - imported for its side effect, here where its failure is named
except Exception as exc:  # noqa: BLE001 - whatever torch's import raises, said once
    try:
        debug, bad_switch = flag("AOTCUDA_DEBUG"), ""
    except SwitchError as bad:  # said beside torch's error, not as a second traceback
        debug, bad_switch = False, f"error: {bad}\n"
    if debug:
        raise
    sys.stderr.write(bad_switch)
    said = " ".join(str(exc).split())  # torch's lines (and its list of valid settings) as one
    sys.stderr.write(f"error: torch cannot be imported: {type(exc).__name__}: {clipped(said, 600)}\n"
                     "hint: torch reads its environment as it imports: fix or unset the variable it names (TORCH_LOGS, "
                     "...), or install torch\n")
    raise SystemExit(1) from None
