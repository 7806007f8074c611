"""An istft call the model is making, read from the model's source: whether it passes ``length`` and its hop.

Why: ``torch.istft(..., length=wav.shape[-1])`` over a dynamic number of samples makes torch.export fix the size
(torch's signature takes length as a Python int), and the export error's note said only to keep the dim static; the
recipe that keeps it dynamic (drop length=, a size that is a multiple of the hop: docs/ops.md, "Dynamic dims") is told
where it applies (export_hints). Nothing of the model's source is run: the call is parsed with ast, and a name or
attribute chain is read without running a property or __getattr__.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import linecache
import traceback


def call_position(frame) -> dict:
    """The span of the instruction ``frame`` runs (a call in progress: the whole ``torch.istft(...)`` expression, its
    lines and UTF-8 columns) as FrameSummary's keywords; {} where Python keeps none (before 3.11)."""
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None or frame.f_lasti < 0:
        return {}
    _, end_lineno, colno, end_colno = next(itertools.islice(positions(), frame.f_lasti // 2, None),
                                           (None, None, None, None))
    if None in (end_lineno, colno, end_colno):
        return {}
    return {"end_lineno": end_lineno, "colno": colno, "end_colno": end_colno}


def istft_length_at(summary: traceback.FrameSummary, frame) -> tuple[bool, int | None]:
    """(whether the model's call in progress at ``summary`` is an istft given its ``length``, its hop_length where the
    source says it plainly): ``torch.istft(spec, 512, self.hop, ..., length=wav.shape[-1])`` (or ``spec.istft(...)``).
    torch's signature takes length as a Python int, so a dynamic size passed there becomes the example's constant.
    Read from the model's source (ast; nothing of it is run): the hop is a literal, or a name or attribute chain
    (``self.hop``) read from ``frame`` (the live model frame) without running a property or __getattr__
    (inspect.getattr_static); None otherwise, and (False, None) where the source or the span is not there."""
    end_lineno, colno, end_colno = (getattr(summary, name, None) for name in ("end_lineno", "colno", "end_colno"))
    if None in (summary.lineno, end_lineno, colno, end_colno) or end_lineno - summary.lineno > 50:
        return False, None
    lines = [line.encode() for line in linecache.getlines(summary.filename)[summary.lineno - 1:end_lineno]]
    if len(lines) != end_lineno - summary.lineno + 1:
        return False, None
    lines[-1] = lines[-1][:end_colno]  # the columns are UTF-8 offsets: cut the last line first, then the first
    lines[0] = lines[0][colno:]
    try:
        call = ast.parse(b"(" + b"".join(lines) + b")", mode="eval").body
    except (SyntaxError, ValueError):
        return False, None
    if not isinstance(call, ast.Call):
        return False, None
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    # torch.istft(input, n_fft, hop_length, ..., length) or a tensor's istft(n_fft, hop_length, ..., length)
    as_function = not isinstance(call.func, ast.Attribute) or inspect.ismodule(_plain_value(call.func.value, frame))
    first = 1 if as_function else 0
    keywords = {keyword.arg: keyword.value for keyword in call.keywords}
    if name != "istft" or ("length" not in keywords and len(call.args) < first + 8):
        return False, None
    hop = keywords.get("hop_length", call.args[first + 1] if len(call.args) > first + 1 else None)
    hop = _plain_value(hop, frame) if hop is not None else None
    return True, hop if isinstance(hop, int) and not isinstance(hop, bool) and hop > 0 else None


_UNKNOWN = object()


def _plain_value(node, frame):
    """The value of ``node`` where it is a constant, a name or an attribute chain (``self.hop``, ``torch``) in
    ``frame``, read without running anything (no property, no __getattr__); ``_UNKNOWN`` otherwise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in scope:
                return scope[node.id]
        return _UNKNOWN
    if isinstance(node, ast.Attribute):
        owner = _plain_value(node.value, frame)
        if owner is _UNKNOWN:
            return _UNKNOWN
        try:
            value = inspect.getattr_static(owner, node.attr)
        except AttributeError:
            return _UNKNOWN
        return _UNKNOWN if hasattr(type(value), "__get__") and not inspect.ismodule(value) and \
            not isinstance(value, (int, float, str)) else value
    return _UNKNOWN
