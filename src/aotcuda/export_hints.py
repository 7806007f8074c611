"""The fix, stated, for torch.export failures a library model's first lowering hits.

torch.export's own message for a model that returns a type it cannot flatten says what is wrong in
torch's terms ("Found <class 'transformers.cache_utils.DynamicCache'> in output, which is not a known
type ... register a pytree for it"); the fix a user of a transformers model needs is one keyword. This
module adds that fix as a note on torch's error (the error itself, its type and traceback stay as they are).
"""

from __future__ import annotations

import contextlib
import re

_UNKNOWN_OUTPUT = re.compile(r"Found <class '([\w.]+)'> in output, which is not a known type")


def fix_for(message: str) -> str | None:
    """The change that avoids the export failure whose message is `message`, or None where none is known."""
    match = _UNKNOWN_OUTPUT.search(message)
    if match is None:
        return None
    type_name = match.group(1)
    if type_name.startswith("transformers.cache_utils."):
        return (f"aotcuda: the model returns a key/value cache ({type_name}), which an exported program cannot "
                "return. Lower it without the cache: aotcuda.lower(model, args, {\"use_cache\": False}, ...) "
                "(on the command line, let the factory bind use_cache=False).")
    return (f"aotcuda: the model returns a {type_name}, which torch.export cannot flatten: return its tensors "
            "(a tuple or dict), or register the type with torch.utils._pytree.register_pytree_node.")


@contextlib.contextmanager
def export_hints():
    """Around torch.export.export: an error with a known fix gets the fix as a note (``exc.__notes__``)."""
    try:
        yield
    except Exception as exc:
        fix = fix_for(str(exc))
        if fix is not None:
            exc.add_note(fix)
        raise
