"""The fix, stated, for torch.export failures a library model's first lowering hits.

torch.export's own message for a model that returns a type it cannot flatten says what is wrong in
torch's terms ("Found <class 'transformers.cache_utils.DynamicCache'> in output, which is not a known
type ... register a pytree for it"); the fix a user of a transformers model needs is one keyword. This
module adds that fix as a note on torch's error (the error itself, its type and traceback stay as they are).

A dim the model specializes (``int(max_txt_seq_len)``, ``if x.shape[1] == 5``) gets torch's "You marked seq as
dynamic but your code specialized it to be a constant" with no line of the model in non-strict export (torch
keeps a user stack for it only under dynamo). So while export runs, ``export_hints`` watches torch's
ShapeEnv make a dim's symbol a constant and records the model's frame that asked for it (the first frame
outside torch, sympy, the standard library and aotcuda); the note names that line.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import logging
import os
import re
import sys
import sysconfig
import traceback
from collections.abc import Iterator

from aotcuda.lowering.istft_calls import call_position, istft_length_at

_UNKNOWN_OUTPUT = re.compile(r"Found <class '([\w.]+)'> in output, which is not a known type")


_EXAMPLE_OUT_OF_RANGE = re.compile(r"^(?:\w+: )?(\d+) not in range \[(\d+), (\d+|inf|int_oo)\]", re.MULTILINE)
# the dim as torch names it: a Dim's name, or a derived Dim's expression ("64*frames")
# torch's check of an example against a derived Dim: "Expected shape[1] = 16 of input Tensor to be of the form 3*seq,
# where seq is an integer" (which input, and the fix, unsaid)
_NOT_OF_DERIVED_FORM = re.compile(r"Expected shape\[(\d+)\] = (\d+) of input Tensor to be of the form (.+?), where (\w+) "
                                  r"is an integer")
_DERIVED_DIM = re.compile(r"(\d+)\*([A-Za-z_]\w*)")  # torch's name of N * Dim("root"): "16*seq"
_SPECIALIZED = re.compile(r"You marked (\S+?) as dynamic but your code specialized it to be a constant \((\d+)\)")


_DATA_DEPENDENT = re.compile(r"Could not guard on data-dependent expression")
# torch's data-dependent error names the model's frame as a traceback entry after this line
_RAISED_AT = re.compile(r'The following call raised this error:\n\s*File "([^"]+)", line (\d+), in (\w+)\n\s*(.*)')


# torch's refusal of a FakeTensor's conversion to NumPy (x.numpy(), np.asarray(x)): the values do not exist while
# torch.export traces, yet torch's words speak of "tensor subclasses", and the model runs in eager
_TO_NUMPY = re.compile(r"\.numpy\(\) is not supported for tensor subclasses")
# torch.cond with one branch returning a lazy conjugate (or negative) view and the other not (torch 2.11-2.13)
_COND_VIEW_BITS = re.compile(r"When merging two branches' output in torch\.cond,\s*expected same (is_conj|is_neg)")
# torch.cond / while_loop / scan / map with a branch that writes a tensor it did not make (torch 2.11-2.13)
_CONTROL_FLOW_MUTATION = re.compile(r"Encountered (?:input )?mutation during higher order op tracing"
                                    r"(?:\s*Higher Order Operator: (torch\.\w+))?")


def fix_for(message: str, specialized_at: dict[str, traceback.FrameSummary] | None = None,
            raised_at: traceback.FrameSummary | None = None) -> str | None:
    """The change that avoids the export failure whose message is `message`, or None where none is known.
    specialized_at: {dim name: the model's frame that made it a constant} (``recorded_specializations``;
    its ``fixed_by``, where present: {dim name: (parameter or buffer, its shape) whose fixed size did it}).
    raised_at: the model's frame the error was raised in (``_model_frame_raising``), where known."""
    at = (f" at {raised_at.filename}:{raised_at.lineno} in {raised_at.name}"
          f"{f': `{raised_at.line.strip()}`' if raised_at.line else ''}") if raised_at is not None else ""
    if _TO_NUMPY.search(message):
        return (f"aotcuda: forward converts a traced tensor to NumPy{at}. torch.export runs forward on FakeTensors, "
                "which stand for the inputs and hold no values, so a tensor cannot become a NumPy array (or Python "
                "values used outside torch ops) while it traces; in eager it can, which is why the model runs there. "
                "Compute that step with torch ops on the tensor (x.sum() for np.sum(x.numpy()); torch has most of "
                "NumPy's functions), or do it outside the model and pass the result in as an input.")
    view_bits = _COND_VIEW_BITS.search(message)
    if view_bits is not None:
        conj = view_bits.group(1) == "is_conj"
        view, resolve = ("a conjugate view (z.conj())", "z.conj().resolve_conj(), or torch.conj_physical(z)") if conj \
            else ("a negative view (the imaginary part of a conjugate, z.conj().imag)", "t.resolve_neg()")
        return (f"aotcuda: one branch of torch.cond{at} returns {view} and the other a plain tensor, which torch.cond "
                "cannot merge (eager takes it: torch.export runs both branches). Return a plain tensor from that "
                f"branch: {resolve}.")
    mutation = _CONTROL_FLOW_MUTATION.search(message)
    if mutation is not None:
        operator = mutation.group(1) or "the control-flow operator"
        return (f"aotcuda: a function given to {operator}{at} writes in place to a tensor from outside it (a "
                "buffer or parameter of the model, such as self.count.add_(1), or one of its operands), which "
                "torch.export cannot trace inside a control-flow operator, though the model runs in eager. Give that "
                "tensor to the function as an operand, return its new value (from every branch; unchanged: "
                "c.clone()) and write it after the call: y, c = torch.cond(pred, true_fn, false_fn, (x, self.count)); "
                "self.count.copy_(c) (a while_loop or scan: carry it in the loop's state).")
    if _DATA_DEPENDENT.search(message):
        raised = _RAISED_AT.search(message)
        where = (f" at {raised.group(1)}:{raised.group(2)} in {raised.group(3)}: `{raised.group(4).strip()}`"
                 if raised else at)
        return (f"aotcuda: the model decides something from the values of a tensor{where}. torch.export records "
                "one path through the program, so Python control flow on values computed from the inputs (an if "
                "or while on a tensor, bool(t), t.item() used as a Python number) cannot be exported. Compute both "
                "sides and pick with torch.where, write the branch with torch.cond (both branches are kept), or "
                "take the decision out of the model (an argument it is given).")
    out_of_range = _EXAMPLE_OUT_OF_RANGE.search(message)
    if out_of_range is not None:
        size, low, high = out_of_range.groups()
        return (f"aotcuda: an example input has size {size} in a dim whose torch.export.Dim range is [{low}, {high}]: "
                "torch.export traces with the example inputs, so give an example whose size lies in the range, or "
                "widen the Dim (on the command line, --dynamic NAME:DIM:MIN:MAX must contain the example's size).")
    not_of_form = _NOT_OF_DERIVED_FORM.search(message)
    if not_of_form is not None:
        dim, size, form, root = not_of_form.groups()
        return (f"aotcuda: an example input has size {size} in dim {dim}, where its derived Dim asks for {form} with "
                f"{root} an integer: torch.export traces with the example inputs, so give an example of that form there "
                f"(for N*{root}: a multiple of N), or a derived Dim the example's size fits (on the command line, "
                f"--dynamic NAME:DIM:MIN:MAX:{root}*N with an N that divides {size}).")
    specialized = _SPECIALIZED.search(message)
    if specialized is not None:
        dim, size = specialized.groups()
        frame = (specialized_at or {}).get(dim)
        fixed_by = getattr(specialized_at, "fixed_by", {}).get(dim)
        recurrent = getattr(specialized_at, "by_recurrent", {}).get(dim)
        if frame is not None and recurrent is not None:
            line = f": `{frame.line.strip()}`" if frame.line else ""
            return (f"aotcuda: the model made the dynamic dim {dim} the constant {size} at {frame.filename}:"
                    f"{frame.lineno} in {frame.name}{line}. There {dim} is the time steps of an nn.{recurrent}, and "
                    f"torch.export runs an nn.{recurrent}'s loop over the steps in Python, once per step of the "
                    f"example, so the program takes {size} steps only. Keep {dim} static (None in dynamic_shapes; on "
                    "the command line, no --dynamic for that dim) and pad or cut the sequences to that length (the "
                    "batch dim may stay dynamic), or lower one program per length.")
        if frame is not None and fixed_by is not None:
            line = f": `{frame.line.strip()}`" if frame.line else ""
            parameter, shape = fixed_by
            return (f"aotcuda: the model made the dynamic dim {dim} the constant {size} at {frame.filename}:"
                    f"{frame.lineno} in {frame.name}{line}. There an op meets {dim} with {parameter}, of fixed shape "
                    f"{shape}, and needs the two sizes equal: {size} is the model's size (its {parameter}), not a "
                    f"size the input may choose. Keep {dim} "
                    "static (None in dynamic_shapes; on the command line, no --dynamic for that dim), or make "
                    "another dim dynamic.")
        if frame is not None and dim in getattr(specialized_at, "by_complex_mean", ()):
            line = f": `{frame.line.strip()}`" if frame.line else ""
            return (f"aotcuda: the model made the dynamic dim {dim} the constant {size} at {frame.filename}:"
                    f"{frame.lineno} in {frame.name}{line}. There the model takes a mean of a complex tensor over the "
                    f"dynamic dim {dim}, and torch's mean of a complex tensor divides by its count of elements "
                    f"converted to a Python complex number, which fixes {dim} to the example's size. Write that mean "
                    "as a sum divided by the size, z.sum(dim) / z.shape[dim] (over every dim: z.sum() / z.numel()), "
                    f"or take the mean of the real pairs before they become complex, torch.view_as_complex("
                    f"x.mean(dim)): either keeps {dim} dynamic.")
        if frame is not None and dim in getattr(specialized_at, "by_tensor_op", ()):
            line = f": `{frame.line.strip()}`" if frame.line else ""
            return (f"aotcuda: the model made the dynamic dim {dim} the constant {size} at {frame.filename}:"
                    f"{frame.lineno} in {frame.name}{line}. There a tensor op needs {dim} equal to a size {size} "
                    "that is not dynamic, most often another input's dim left static (k beside q, a mask beside its "
                    "sequence): give that input's dim the same torch.export.Dim (on the command line, the same "
                    "SYMBOL: --dynamic q:1:2:256:seq --dynamic k:1:2:256:seq). If the size is the model's own, "
                    f"keep {dim} static (None in dynamic_shapes).")
        if frame is not None and dim in getattr(specialized_at, "by_istft_length", {}):
            line = f": `{frame.line.strip()}`" if frame.line else ""
            hop = specialized_at.by_istft_length[dim]
            hop_text, hop_value = (f"its hop_length, {hop}", str(hop)) if hop else ("its hop_length (HOP)", "HOP")
            return (f"aotcuda: the model made the dynamic dim {dim} the constant {size} at {frame.filename}:"
                    f"{frame.lineno} in {frame.name}{line}. There istft is given the size as its length=, which "
                    f"torch's signature takes as a Python int, so the program would take {size} samples only. To keep "
                    f"{dim} dynamic, drop length= and make the samples a multiple of {hop_text}: istft (center=True, "
                    "an even n_fft) then returns as many samples as it was given. In Python, give that dim "
                    f"{hop_value} * Dim(\"frames\", min=..., max=...) in dynamic_shapes; on the command line, "
                    f"--dynamic NAME:DIM:MIN:MAX:frames*{hop_value} (docs/ops.md, \"Dynamic dims\"). Else keep {dim} "
                    "static (None in dynamic_shapes; on the command line, no --dynamic for that dim).")
        if frame is not None:
            line = f": `{frame.line.strip()}`" if frame.line else ""
            return (f"aotcuda: the model made the dynamic dim {dim} the constant {size} at {frame.filename}:"
                    f"{frame.lineno} in {frame.name}{line}. That line needs a Python value of the size (int(), a "
                    f"comparison, a Python-level shape): keep {dim} static (None in dynamic_shapes), "
                    "or change that line to keep the size a tensor size. If instead another input must have the "
                    "same size there, give that input's dim the same torch.export.Dim.")
        derived = _DERIVED_DIM.fullmatch(dim)
        if frame is None and derived is not None and size in ("0", derived.group(1)):
            factor, root = derived.groups()
            root_value = "0" if size == "0" else "1"
            return (f"aotcuda: the dynamic dim {dim} became the constant {size}: the example input's size {size} "
                    f"there gives {root} = {root_value}, and torch.export makes a Dim whose example value is 0 or 1 a "
                    f"constant (its 0/1 specialization), whatever the Dim's range. Give an example of size "
                    f"{2 * int(factor)} or more there ({dim} with {root} >= 2; the Dim may keep its min); if the model "
                    f"itself needs size {size}, keep that dim static.")
        if size in ("0", "1"):
            return (f"aotcuda: the dynamic dim {dim} became the constant {size}: torch.export makes a dim whose "
                    f"example input has size 0 or 1 a constant (its 0/1 specialization), whatever the Dim's range. "
                    f"Give an example of size 2 or more there (the Dim may keep min={size}); if the model itself "
                    f"needs size {size}, keep that dim static.")
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


def _outside_libraries() -> tuple[str, ...]:
    import sympy
    import torch

    import aotcuda

    return tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, sympy, aotcuda)) + (
        sysconfig.get_paths()["stdlib"] + os.sep,)


def _model_frame(istft=None) -> traceback.FrameSummary | None:
    """The innermost caller outside torch, sympy, the standard library and aotcuda: the model's line. None where
    torch specialized the dim outside the model's code (the walk reaches aotcuda's export_program first): a derived
    Dim's root whose example value is 1 is made a constant as torch reads the inputs, and the frame past
    export_program was the caller of lower() (or ``<frozen runpy>`` under the CLI), blamed as the model's line.
    ``istft``: a list that gets ``istft_length_at``'s answer for that frame (read while the frame is live)."""
    from aotcuda.lowering.exporting import export_program

    skipped = _outside_libraries()
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code is export_program.__code__:
                return None
            if not frame.f_code.co_filename.startswith(skipped):
                summary = traceback.FrameSummary(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name,
                                                 **call_position(frame))
                if istft is not None:
                    istft.append(istft_length_at(summary, frame))
                return summary
            frame = frame.f_back
        return None
    finally:
        del frame


def _raised_in_model(exc: BaseException) -> str | None:
    """Where the model's code raised ``exc`` as torch.export ran forward (the innermost frame outside the libraries
    below aotcuda's export_program), as a note; None where no frame of the model's is there. torch's own message
    names no line (``RuntimeError: shape '[1, 200, 1, 8]' is invalid for input of size 1024``: a new user could not
    tell which view of the model it was)."""
    found = _model_frame_raising(exc)
    if found is None:
        return None
    line = f": `{found.line.strip()}`" if found.line else ""
    return (f"aotcuda: raised at {found.filename}:{found.lineno} in {found.name}{line}, as torch.export ran forward "
            "on the example inputs (as FakeTensors, which stand for them in torch's message): check that the model "
            "runs on those inputs in eager, model(*args, **kwargs)")


def _packed_sequence_fix(exc: BaseException) -> str | None:
    """The note for an nn.GRU/LSTM/RNN that raised on a PackedSequence (``pack_padded_sequence``) under torch.export,
    which cannot trace one: its ``batch_sizes`` is a tensor the layer reads as Python sizes (torch's words: "zeros():
    argument 'size' failed to unpack ... got FakeTensor"), though the model runs in eager. None for another error."""
    import torch
    from torch.nn.utils.rnn import PackedSequence

    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        owner = frame.f_locals.get("self") if frame.f_code.co_name == "forward" else None
        if isinstance(owner, torch.nn.RNNBase) and any(isinstance(frame.f_locals.get(name), PackedSequence)
                                                       for name in ("orig_input", "input")):
            found = _model_frame_raising(exc)
            where = (f" at {found.filename}:{found.lineno} in {found.name}"
                     f"{f': `{found.line.strip()}`' if found.line else ''}") if found is not None else ""
            kind = type(owner).__name__
            return (f"aotcuda: forward runs an nn.{kind} on a PackedSequence (pack_padded_sequence){where}, which "
                    f"torch.export cannot trace: a PackedSequence's batch_sizes is a tensor that nn.{kind} reads as "
                    "Python sizes, though the model runs in eager. Run the layer on the padded batch and keep the "
                    "steps within each length (h * mask[..., None] with mask = torch.arange(T) < lengths[:, None]): "
                    "a layer that reads forward only gives the same outputs there; a bidirectional one's backward "
                    "direction would read the padding first, so run the reversed sequences (each flipped within its "
                    "length) through a second, forward-only layer instead.")
        tb = tb.tb_next
    return None


def _model_frame_raising(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the model's code in ``exc``'s traceback below aotcuda's export_program (outside the
    libraries), or None."""
    from aotcuda.lowering.exporting import export_program

    skipped, inside, found = _outside_libraries(), False, None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is export_program.__code__:
            inside = True
        elif inside and not code.co_filename.startswith(skipped) and not code.co_filename.startswith("<"):
            found = traceback.FrameSummary(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


class Specializations(dict):
    """{dim name: the model's frame that made it a constant}, and in ``fixed_by`` {dim name: (the parameter or
    buffer, its shape)} where an op met the dim with that tensor's fixed size (``_fixed_size_tensor``); in
    ``by_complex_mean`` the dims torch's mean of a complex tensor counted (``_in_torch_mean``), in ``by_tensor_op``
    those another tensor op met with a size that is not dynamic, in ``by_istft_length`` those passed as an istft's
    ``length`` (``istft_calls.istft_length_at``)."""

    def __init__(self):
        super().__init__()
        self.fixed_by: dict[str, tuple[str, tuple[int, ...]]] = {}
        self.by_tensor_op: set[str] = set()  # made a constant inside a tensor op, by no parameter or buffer
        self.by_complex_mean: set[str] = set()  # made a constant by torch's mean of a complex tensor (_refs.mean)
        self.by_recurrent: dict[str, str] = {}  # made a constant as the time steps of an nn.GRU/LSTM/RNN: its class
        self.by_istft_length: dict[str, int | None] = {}  # made a constant as istft's length=: its hop, where known


_FAKE_TENSOR_DISPATCH = os.path.join("torch", "_subclasses", "fake_tensor.py")


def _fixed_size_tensor(size: int, model, modules: list) -> tuple[str, tuple[int, ...]] | None:
    """Where a tensor op made a dim the constant ``size`` (``_tensor_op_and_modules`` found torch's fake-tensor
    dispatch on the stack: not int() or a comparison in the model's code), the parameter or buffer of a module of
    ``modules`` (those running there, innermost first; ``wq.weight`` of an nn.Linear) with a dim of that size,
    named as in ``model``, and its shape."""
    names = {id(t): n for n, t in (*model.named_parameters(), *model.named_buffers())} if model is not None else {}
    for module in modules:
        for name, tensor in (*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)):
            if size in tuple(tensor.shape):
                return names.get(id(tensor), name), tuple(tensor.shape)
    return None


_REFS = os.path.join("torch", "_refs", "__init__.py")


def _in_torch_mean() -> bool:
    """Whether torch's reference mean is on the stack: for a complex tensor it converts its count of elements to a
    Python complex (type promotion of ``true_divide(sum, nelem)``), which makes each dynamic dim it counts a
    constant (a real tensor's count stays a SymFloat, and never comes here)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "mean" and frame.f_code.co_filename.endswith(_REFS):
                return True
            frame = frame.f_back
    finally:
        del frame
    return False


def _tensor_op_and_modules() -> tuple[bool, list]:
    """Whether the stack holds torch's fake-tensor dispatch (a tensor op is running), and the modules whose
    forward is running (innermost first)."""
    import torch

    frame, modules, dispatched = inspect.currentframe(), [], False
    try:
        while frame is not None:
            dispatched = dispatched or frame.f_code.co_filename.endswith(_FAKE_TENSOR_DISPATCH)
            owner = frame.f_locals.get("self") if frame.f_code.co_name == "forward" else None
            if isinstance(owner, torch.nn.Module) and owner not in modules:
                modules.append(owner)
            frame = frame.f_back
    finally:
        del frame
    return dispatched, modules


def _recurrent_steps(symbol) -> str | None:
    """The class name of the nn.GRU, nn.LSTM or nn.RNN whose forward is running with ``symbol`` as its input's
    time steps (torch.export runs their loop over the steps in Python, so the sequence length is fixed), or None."""
    import torch

    frame = inspect.currentframe()
    try:
        while frame is not None:
            owner = frame.f_locals.get("self") if frame.f_code.co_name == "forward" else None
            steps = frame.f_locals.get("input") if isinstance(owner, torch.nn.RNNBase) else None
            if isinstance(steps, torch.Tensor) and steps.dim() in (2, 3):
                size = steps.shape[1 if owner.batch_first and steps.dim() == 3 else 0]
                node = getattr(size, "node", None)
                if node is not None and getattr(node, "_expr", None) == symbol:
                    return type(owner).__name__
            frame = frame.f_back
    finally:
        del frame
    return None


@contextlib.contextmanager
def recorded_specializations(model=None) -> Iterator[Specializations]:
    """While active, {dim name: the model frame where torch's ShapeEnv first made that dim's symbol a
    constant}, and its ``fixed_by`` (``Specializations``; names as in ``model``). Wraps
    ShapeEnv._set_replacement (torch 2.11-2.15), where every specialization is recorded; records nothing on a
    torch without it."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    sites = Specializations()
    original = ShapeEnv.__dict__.get("_set_replacement")
    if original is None:
        yield sites
        return

    def _set_replacement(self, a, tgt, *args, **kwargs):
        constant = getattr(tgt, "is_number", False) and getattr(a, "is_Symbol", False)
        recurrent = _recurrent_steps(a) if constant else None  # before the replacement rewrites the input's size
        result = original(self, a, tgt, *args, **kwargs)
        if constant:
            names = [self._debug_name(source) for source in self.var_to_sources.get(a, [])]
            if names and not all(name in sites for name in names):
                istft = []
                frame = _model_frame(istft)
                dispatched, modules = _tensor_op_and_modules() if frame is not None else (False, [])
                fixed_by = _fixed_size_tensor(int(tgt), model, modules) if dispatched else None
                by_mean = dispatched and fixed_by is None and _in_torch_mean()
                by_tensor_op = dispatched and fixed_by is None and not by_mean
                if frame is not None:
                    for name in names:
                        if name not in sites and fixed_by is not None:
                            sites.fixed_by[name] = fixed_by
                        if name not in sites and by_mean:
                            sites.by_complex_mean.add(name)
                        if name not in sites and by_tensor_op:
                            sites.by_tensor_op.add(name)
                        if name not in sites and recurrent is not None:
                            sites.by_recurrent[name] = recurrent
                        if name not in sites and istft and istft[0][0]:
                            sites.by_istft_length[name] = istft[0][1]
                        sites.setdefault(name, frame)
        return result

    ShapeEnv._set_replacement = _set_replacement
    try:
        yield sites
    finally:
        ShapeEnv._set_replacement = original


def _without_unfound_user_code(record) -> bool:
    """torch's symbolic-shapes warning "Unable to find user code corresponding to {u0}" comes with the whole
    traced graph (20 lines) just before a data-dependent error that names the user's line itself."""
    return not str(record.msg).startswith("Unable to find user code corresponding to")


@contextlib.contextmanager
def _without_partial_graph_prints() -> Iterator[None]:
    """torch.export prints a failed trace's partial graph to stderr (``print(e.partial_fx_graph,
    file=sys.stderr)`` in torch/export/_trace.py, once per nested export wrapper: 20 lines twice for a one-line
    model) before it raises an error that names the model's line itself. For the step, that module's
    ``print`` drops exactly those calls (a module global shadows the builtin; other prints pass)."""
    try:
        from torch.export import _trace
    except ImportError:
        yield
        return

    def print_without_partial_graphs(*values, **kwargs):
        partial = (len(values) == 1 and kwargs.get("file") is sys.stderr and isinstance(values[0], str)
                   and values[0].lstrip().startswith("def forward("))
        if not partial:
            builtins.print(*values, **kwargs)

    had = "print" in vars(_trace)
    previous = vars(_trace).get("print")
    _trace.print = print_without_partial_graphs
    try:
        yield
    finally:
        if had:
            _trace.print = previous
        else:
            del _trace.print


@contextlib.contextmanager
def export_hints(model=None):
    """Around torch.export.export of ``model``: an error with a known fix gets the fix as a note (``exc.__notes__``);
    torch's noise before such an error (its partial-graph prints, the "Unable to find user code" warning with
    the graph) is dropped: the error names the model's line."""
    symbolic_shapes_log = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    symbolic_shapes_log.addFilter(_without_unfound_user_code)
    try:
        with recorded_specializations(model) as specialized_at, _without_partial_graph_prints():
            yield
    except Exception as exc:
        fix = (fix_for(str(exc), specialized_at, _model_frame_raising(exc)) or _packed_sequence_fix(exc)
               or _raised_in_model(exc))
        if fix is not None:
            exc.add_note(fix)
        raise
    finally:
        symbolic_shapes_log.removeFilter(_without_unfound_user_code)
