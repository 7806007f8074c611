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


_EXAMPLE_OUT_OF_RANGE = re.compile(r"^(?:\w+: )?(\d+) not in range \[(\d+), (\d+|inf|int_oo)\]", re.MULTILINE)
_SPECIALIZED = re.compile(r"You marked (\w+) as dynamic but your code specialized it to be a constant \((\d+)\)")


def fix_for(message: str) -> str | None:
    """The change that avoids the export failure whose message is `message`, or None where none is known."""
    out_of_range = _EXAMPLE_OUT_OF_RANGE.search(message)
    if out_of_range is not None:
        size, low, high = out_of_range.groups()
        return (f"aotcuda: an example input has size {size} in a dim whose torch.export.Dim range is [{low}, {high}]: "
                "torch.export traces with the example inputs, so give an example whose size lies in the range, or "
                "widen the Dim (on the command line, --dynamic NAME:DIM:MIN:MAX must contain the example's size).")
    specialized = _SPECIALIZED.search(message)
    if specialized is not None:
        dim, size = specialized.groups()
        return (f"aotcuda: the model made the dynamic dim {dim} the constant {size}. If another input must "
                "have the same size there (k beside q, a mask beside its sequence), give that input's dim the same "
                "torch.export.Dim (on the command line, the same SYMBOL: --dynamic q:1:2:256:seq --dynamic k:1:2:256:seq); "
                f"if the model itself needs size {size}, keep that dim static.")
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
