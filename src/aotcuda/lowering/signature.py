"""The package signature of an ExportedProgram: what the lowering writes into the package contract.

``signature_from_exported_program`` builds the ``aotcuda/signature.json`` record (format in
``aotcuda.package_format``) from the program that is compiled: its user inputs and outputs in the AOTI
container's order, their dtypes, symbolic shapes and strides with their ranges, which inputs it writes
in place, the Dim names, forward's argument names, and the complex dtype of each input and output that
ReplaceComplexWithRealPass turned into a real pair. This is the lowering's side of the contract; the
runtime reads the result and never imports this module.
"""

from __future__ import annotations

import inspect
import math
import re

import sympy
import torch
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import bound_sympy

from aotcuda.errors import DynamicShapesError
from aotcuda.lowering.float_sizes import integer_form
from aotcuda.lowering.index_ranges import index_ranges, is_integer_node, merge_ranges, unchecked_inputs
from aotcuda.package_format import (MAX_DIM_NAME_CHARS, SCALAR_OUTPUT_DTYPES, SIGNATURE_FORMAT, SIGNATURE_VERSION,
                                     bounded_name, plain_value)
from aotcuda.passes.complex_to_real.boundary import complex_boundary, user_input_names
from aotcuda.runtime.keywords import leaf_names, output_leaf_names
from aotcuda.runtime.returned_inputs import differing_fields, view_of_input
from aotcuda.runtime.pytree_types import recorded_types


class _FloatSize(Exception):
    """A size torch computes in floating point that no integer expression writes (``float_sizes``)."""

    def __init__(self, expr, where: str = ""):
        super().__init__(str(expr))
        self.expr, self.where = expr, where


def _float_size_error(error: _FloatSize, ep) -> DynamicShapesError:
    names = dim_names(ep)
    text = str(error.expr.xreplace({s: sympy.Symbol(names.get(str(s), str(s))) for s in error.expr.free_symbols}))
    return DynamicShapesError(
        f"the size {text} of {error.where} is computed in floating point from dynamic input sizes (as "
        "F.interpolate(scale_factor=...) computes its output size), with a factor that is not a binary fraction, so "
        "no integer expression gives eager's size for every input size, and the package's signature holds integer "
        "expressions only. Give that op integer sizes (F.interpolate(x, size=(h // 2, w // 2)) from x.shape), a "
        "scale factor that is a binary fraction (0.5, 0.25, 1.5, 2.0), or keep the dims it reads static")


def _dim_spec(size, range_constraints) -> int | dict:
    if isinstance(size, int):
        return size
    expr = integer_form(size.node.expr)  # F.interpolate(scale_factor=0.5): TruncToInt(0.5*ToFloat(s)) is s // 2
    if expr.is_number:
        return int(expr)
    if not _readable(str(expr)):
        raise _FloatSize(expr)
    bounds = bound_sympy(expr, range_constraints)
    lower = _finite_bound(bounds.lower)
    return {"expr": str(expr), "min": 0 if lower is None else max(lower, 0), "max": _finite_bound(bounds.upper)}


def _finite_bound(value) -> int | None:
    """A range bound as an int, or None when it is infinite or not a number.

    torch.export marks a Dim without max= with torch's own ``int_oo`` (and -int_oo below), whose sympy
    ``is_finite`` is True on torch 2.13 but which int() cannot convert; older ranges may hold sympy.oo.
    """
    if value in (int_oo, -int_oo) or value.is_infinite or not value.is_number:
        return None
    return int(value)


def _readable(text: str) -> bool:
    """Whether the package's expression grammar reads ``text`` (what the runtime and serving read back)."""
    from aotcuda.runtime.shape_expressions import shape_expression

    try:
        shape_expression(text)
    except ValueError:
        return False
    return True


def data_dependent_sizes(ep) -> list[dict]:
    """Every data-dependent (unbacked) size of a tensor anywhere in ``ep`` (a value the program reads from a
    tensor, ``n = lengths.max().item()``, that sizes an output or an intermediate: ``torch.arange(n)``), as
    {"expr": "u0", "min": int, "max": int | None}, its range as the ExportedProgram records it (the model's
    torch._check; None: unbounded). The signature's "data_dependent_sizes": what one request's values can make
    the program allocate, which serving refuses unbounded (an output's dims alone miss an intermediate)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    found = set()
    for node in ep.graph.nodes:
        values = node.meta.get("val")
        for value in values if isinstance(values, (list, tuple)) else (values,):
            if isinstance(value, torch.Tensor):
                found |= free_unbacked_symbols((*value.shape, *value.stride()))
    sizes = []
    for symbol in sorted(found, key=str):
        bounds = ep.range_constraints.get(symbol)
        low = None if bounds is None else _finite_bound(bounds.lower)
        sizes.append({"expr": str(symbol), "min": 0 if low is None else max(low, 0),
                      "max": None if bounds is None else _finite_bound(bounds.upper)})
    return sizes


# The most tensor sizes "tensor_sizes" keeps: the largest at a probe size of every symbol (PROBE_SIZE).
MAX_TENSOR_SIZES, PROBE_SIZE = 16, 4096


def tensor_sizes(ep) -> list[str]:
    """The bytes of the tensors ``ep`` makes (its nodes' values, outputs and intermediates; not its inputs, nor its
    views, which hold none) whose size depends on the input shapes, as distinct expressions of the shape symbols
    (``4*s27**2``), the largest at
    PROBE_SIZE first, at most MAX_TENSOR_SIZES. The signature's "tensor_sizes": serving evaluates them for each
    request's shapes before the program runs, since an intermediate may grow faster than every output (``(x @
    x.T).softmax(-1) @ x``: a 1 MiB request of x (32768, 8) made a 4 GiB tensor, the process peaked at 8.4 GiB).
    Sizes with a data-dependent symbol are data_dependent_sizes' business and left out, and so is one the runtime's
    expression grammar refuses (more than its bounds: an exponent past 8, a value past 1024 bits), which serving
    could not read back."""
    import sympy
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    found = {}
    for node in ep.graph.nodes:
        if node.op == "placeholder" or (isinstance(node.target, torch._ops.OpOverload) and node.target.is_view):
            continue  # a view holds no memory of its own: x[:, None].expand(n, n, d) is n·d elements, not n·n·d
        values = node.meta.get("val")
        for value in values if isinstance(values, (list, tuple)) else (values,):
            if not isinstance(value, torch.Tensor):
                continue
            size = sympy.Integer(value.dtype.itemsize)
            for dim in value.shape:
                size = size * (dim.node.expr if isinstance(dim, torch.SymInt) else sympy.Integer(int(dim)))
            if size.free_symbols and not free_unbacked_symbols(size) and str(size) not in found and _readable(str(size)):
                found[str(size)] = size

    def at_probe(expr) -> int:
        try:
            return int(expr.xreplace({symbol: sympy.Integer(PROBE_SIZE) for symbol in expr.free_symbols}))
        except (TypeError, ValueError, ZeroDivisionError):
            return 0

    return sorted(found, key=lambda text: (-at_probe(found[text]), text))[:MAX_TENSOR_SIZES]


def _tensor_spec(name: str, value, range_constraints, complex_dtype=None) -> dict:
    try:
        return _tensor_spec_of(name, value, range_constraints, complex_dtype)
    except _FloatSize as error:
        error.where = error.where or repr(name)
        raise


def _tensor_spec_of(name: str, value, range_constraints, complex_dtype=None) -> dict:
    return {
        "name": name,
        "dtype": str(value.dtype).removeprefix("torch."),
        "device": value.device.type,
        "shape": [_dim_spec(size, range_constraints) for size in value.shape],
        "contiguous": _is_contiguous(value),
        "strides": [_dim_spec(stride, range_constraints) for stride in value.stride()],
        "complex": None if complex_dtype is None else str(complex_dtype).removeprefix("torch."),
    }


def _is_contiguous(value: torch.Tensor) -> bool:
    """Whether ``value`` is row-major contiguous, read without a guard on a data-dependent size.

    ``Tensor.is_contiguous()`` asks whether a size is 1 or 0, which torch cannot answer for an unbacked size
    (``nonzero()``'s row count u0: "Could not guard on data-dependent expression Eq(u0, 1) | Eq(2*u0, 0)") and
    raises. Here such a question answers False unless the shape environment proves it (statically_known_true, in
    torch 2.11 through 2.15, which adds no guard to the finished program's shape environment either): a size u0 is
    taken as not 1 (its stride is then checked), and a stride that only some values of u0 make right reads not
    contiguous (the runtime acts on "contiguous" of inputs only, and an input has no data-dependent size).
    """
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, statically_known_true as known

    if not free_unbacked_symbols((*value.shape, *value.stride())):
        return bool(value.is_contiguous())
    expected = padded = 1  # torch's contiguous strides count an empty dim as 1 (x[:, keep]: Max(1, u0), 1)
    for size, stride in reversed(list(zip(value.shape, value.stride()))):
        if known(size == 1):
            continue
        if not (known(stride == expected) or known(stride == padded)):
            return False  # both agree unless some size is 0, and then the tensor is empty: contiguous either way
        expected, padded = expected * size, padded * torch.sym_max(size, 1)
    return True


_SCALAR_TYPES = {"bool": bool, "int": int, "float": float}


def _scalar_spec(name: str, value) -> dict:
    """The signature entry of an output that eager returns as a Python number (x.shape[0], n = t.item(), a constant,
    a SymBool or SymFloat): the 0-d CPU tensor spec the container returns for it (package_format.SCALAR_OUTPUT_DTYPES;
    Program gives it back as the number), with "scalar" (its Python type) and "value" (an int, float or bool where it
    is known at lowering; {"expr": ...} where it is an expression of the input size symbols the grammar reads, such
    as "s77" or "2*s77 + 1"; null otherwise, as for an unbacked u0 or a comparison)."""
    kind = "bool" if isinstance(value, (bool, torch.SymBool)) else "int" if isinstance(value, (int, torch.SymInt)) \
        else "float"
    shown = None
    if isinstance(value, (bool, int, float)):
        shown = value
    elif value.node.expr.is_number:
        shown = _SCALAR_TYPES[kind](value.node.expr)
    elif kind == "int" and _readable(str(value.node.expr)):
        shown = {"expr": str(value.node.expr)}
    if isinstance(shown, float) and not math.isfinite(shown):
        shown = None  # JSON holds no inf or nan
    return {"name": name, "dtype": SCALAR_OUTPUT_DTYPES[kind], "device": "cpu", "shape": [], "contiguous": True,
            "strides": [], "complex": None, "scalar": kind, "value": shown}


def _mark_narrowed(inputs: list[dict], narrowed: dict[str, str]) -> None:
    for dim in (d for spec in inputs for d in spec["shape"] if isinstance(d, dict)):
        why = [text for symbol, text in narrowed.items() if re.search(rf"\b{re.escape(symbol)}\b", dim["expr"])]
        if why:
            dim["narrowed"] = "; ".join(why)
            if all(getattr(text, "bounds", ()) for text in why):  # which ends: the refusal says why only there
                dim["narrowed_bounds"] = sorted({bound for text in why for bound in text.bounds})


def mutated_user_inputs(ep) -> set[str]:
    """Names of the user inputs the program writes in place: the graph signature's USER_INPUT_MUTATION
    targets (a functionalized program, as lower() compiles), and placeholders passed as a written
    argument (``Tensor(a!)``) of an op (an ExportedProgram not yet through run_decompositions)."""
    user = {name for name in user_input_names(ep.graph_signature) if name is not None}  # constants have none
    written = set(ep.graph_signature.user_inputs_to_mutate.values()) & user
    for node in ep.graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        given = [*zip(schema.arguments, node.args),
                 *((a, node.kwargs[a.name]) for a in schema.arguments if a.name in node.kwargs)]
        written.update(value.name for argument, value in given
                       if argument.alias_info is not None and argument.alias_info.is_write
                       and isinstance(value, torch.fx.Node) and value.op == "placeholder" and value.name in user)
    return written


def signature_from_exported_program(ep, device: str | None = None, more_index_ranges: dict | None = None,
                                    more_unchecked: dict | None = None, narrowed: dict[str, str] | None = None,
                                    module: torch.nn.Module | None = None,
                                    returned_inputs: dict[int, int] | None = None) -> dict:
    """The signature of an ExportedProgram's user inputs and tensor outputs (the AOTI container's order).

    Inputs and outputs that ReplaceComplexWithRealPass turned into real pairs get their complex dtype in
    the "complex" field (read from ``aotcuda.passes.complex_to_real.complex_boundary(ep)``). Integer inputs
    that reach an index get the ranges eager accepts in "index_ranges" (``aotcuda.lowering.index_ranges``).

    Args:
        ep: the ExportedProgram that was (or will be) compiled into the package.
        device: the device type the package runs on ("cpu" / "cuda"); default: the example inputs'.
        more_index_ranges: ranges found in another program of the same model, by input name (lower()
            passes the exported program's, before decompositions turn ``one_hot`` into comparisons).
        more_unchecked: the ``index_unchecked`` lines of that program (``index_ranges(..., unchecked=)``).
            Each input's unchecked lines (inputs that reach an index the lowering cannot bound exactly)
            go to its "index_unchecked", with a UserWarning each.
        narrowed: {symbol: why its range is narrower than the caller asked} (``BeforeCompile.narrowed``):
            each input dim of that symbol gets it as "narrowed", which a refusal at run time says.
        module: the module that was exported: its forward's parameters and their defaults go to
            "forward_parameters" (``forward_parameters``), which the runtime compares a call's left-out and
            extra arguments with. None: not recorded (the runtime then treats the package as an older one).
        returned_inputs: {place among forward's outputs: place among its user inputs} for the outputs that are
            inputs, written in place or not (``returned_writes.returned_user_inputs`` of the exported program, where
            the writes are still in place): each gets "returns_input". Without it only an output that is an input
            the program does not write is marked (this functional program shows no other).
    """
    try:
        return _signature(ep, device, more_index_ranges, more_unchecked, narrowed, module, returned_inputs)
    except _FloatSize as error:
        raise _float_size_error(error, ep) from None


def _signature(ep, device, more_index_ranges, more_unchecked, narrowed, module, returned_inputs) -> dict:
    sig, boundary = ep.graph_signature, complex_boundary(ep)
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    mutated = mutated_user_inputs(ep)
    # Constant inputs (None for them here) are baked into the package; like SymInt and custom-object
    # inputs, they are not tensors the container takes.
    inputs = [{**_tensor_spec(name, placeholders[name].meta["val"], ep.range_constraints, complex_dtype),
               "mutated": name in mutated}
              for name, complex_dtype in zip(user_input_names(sig), boundary.inputs)
              if name is not None and isinstance(placeholders[name].meta.get("val"), torch.Tensor)]
    outputs = []
    # an output that is a user input (`return y, x`, `x.add_(1); return x`): the runtime hands the caller's own
    # tensor back there
    input_index = {spec["name"]: index for index, spec in enumerate(inputs)}
    user_inputs = set(user_input_names(sig)) - mutated
    returned = {place: user_input_names(sig)[input_place] for place, input_place in (returned_inputs or {}).items()
                if input_place < len(user_input_names(sig))}
    first_slot: dict[torch.fx.Node, int] = {}  # `return out, out`: one result in two slots (runtime/shared_results.py)
    for place, (name, node, complex_dtype) in enumerate(zip(output_names(ep), user_output_args(ep), boundary.outputs)):
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else node  # a constant output: itself
        if isinstance(value, torch.Tensor):
            outputs.append(_tensor_spec(name, value, ep.range_constraints, complex_dtype))
            if first_slot.setdefault(node, len(outputs) - 1) != len(outputs) - 1:
                outputs[-1]["same_result_as"] = first_slot[node]
            returns = node.name if node.op == "placeholder" and node.name in user_inputs else returned.get(place)
            if returns in input_index and not differing_fields(inputs[input_index[returns]], outputs[-1]):
                outputs[-1]["returns_input"] = input_index[returns]
            elif returns in input_index and view_of_input(inputs[input_index[returns]], outputs[-1]):
                # view_as_complex(x) / view_as_real(z): the input's pair as it is, of the other complex kind
                outputs[-1]["returns_view_of_input"] = input_index[returns]
        elif isinstance(value, (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat)):
            outputs.append(_scalar_spec(name, value))
        elif value is None:  # the container's slot holds no handle: the call returns None there, as eager does
            outputs.append({**_scalar_spec(name, False), "scalar": "none", "value": None})
    _mark_narrowed(inputs, narrowed or {})
    if device is not None:
        for spec in inputs + outputs:
            spec["device"] = torch.device(device).type
    # more_index_ranges first: those of the user's own ops, when lower() passes the exported program's
    found_unchecked: dict = {}
    found = index_ranges(ep, [spec["name"] for spec in inputs], found_unchecked)
    unchecked = unchecked_inputs(found_unchecked, found, more_unchecked,
                                 None if more_index_ranges is None else more_index_ranges)
    ranges = merge_ranges(more_index_ranges or {}, found)
    for spec in inputs:
        if ranges.get(spec["name"]):
            spec["index_ranges"] = ranges[spec["name"]]
        if unchecked.get(spec["name"]):
            spec["index_unchecked"] = unchecked[spec["name"]]
    signature = {"format": SIGNATURE_FORMAT, "version": SIGNATURE_VERSION, "inputs": inputs, "outputs": outputs}
    found_divisors = size_divisors(ep)
    if found_divisors:
        signature["divisors"] = found_divisors
    names = dim_names(ep)
    if names:
        signature["dim_names"] = names
    constants = constant_inputs(sig)
    if constants:
        in_spec = ep.module_call_graph[0].signature.in_spec if ep.module_call_graph else None
        if in_spec is not None and in_spec.num_leaves == len([s for s in sig.input_specs
                                                              if s.kind.name == "USER_INPUT"]):
            names = leaf_names(in_spec)
            for entry in constants:
                entry["name"] = bounded_name(names[entry["leaf"]])
        signature["constant_inputs"] = constants
    parameters = forward_parameters(module) if module is not None else None
    if parameters is not None and all(len(entry["name"]) <= MAX_DIM_NAME_CHARS for entry in parameters):
        signature["forward_parameters"] = parameters  # else load refuses it: left out, as an older package's
    call_signature = ep.module_call_graph[0].signature if ep.module_call_graph else None
    arg_names = getattr(call_signature, "forward_arg_names", None)
    if arg_names and all(len(str(name)) <= MAX_DIM_NAME_CHARS for name in arg_names):  # else load refuses them
        signature["forward_arg_names"] = [str(name) for name in arg_names]
    if call_signature is not None:
        types = {t["type"]: t for spec in (call_signature.in_spec, call_signature.out_spec) for t in recorded_types(spec)}
        if types:  # a name load would refuse is written so that it loads, and then names no type of the library
            signature["pytree_types"] = [{key: bounded_name(text) for key, text in t.items()} for t in types.values()]
    for spec in inputs + outputs:  # last: the steps above match inputs by their graph names
        spec["name"] = bounded_name(spec["name"])
    return signature


# The shape functions that divide (torch.utils._sympy.functions, and sympy's Mod), and which of their arguments divide.
_DIVIDING = {"FloorDiv": (1,), "CleanDiv": (1,), "CeilDiv": (1,), "Mod": (1,), "PythonMod": (1,),
             "ModularIndexing": (1, 2), "IntTrueDiv": (1,), "FloatTrueDiv": (1,)}
MAX_DIVISORS = 64
_aten = torch.ops.aten
# Tensor ops that divide an integer tensor by their second argument (eager: ZeroDivisionError for 0; the generated
# code's C++ division may trap). True division (div without a rounding mode) makes floats, and divides by 0 as eager.
_TENSOR_DIVISIONS = frozenset([_aten.div.Tensor_mode, _aten.div.Scalar_mode, _aten.floor_divide.default,
                               _aten.floor_divide.Scalar, _aten.remainder.Tensor, _aten.remainder.Scalar,
                               _aten.fmod.Tensor, _aten.fmod.Scalar])


def size_divisors(ep) -> list[str]:
    """Every expression of the input size symbols that the program divides by (``y.shape[0] // x.shape[0]``, a
    ``Mod`` of sizes, a view whose size is a quotient), read from the sizes, strides and SymInt values of its graph,
    in the grammar's terms; at most MAX_DIVISORS. Why: the generated code computes them in C++, where an integer
    division by zero ends the process (SIGFPE) where eager raises ZeroDivisionError, and a size range that holds 0
    lets a call reach one (runtime/divisors.py checks them once per input shape). Divisors over a data-dependent
    size (u0) are left out: no call's shapes give them."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    found: dict[str, None] = {}
    for node in ep.graph.nodes:
        for divisor in (*_tensor_divisor(node), *_divisors_of_sizes(node.meta.get("val"))):
            text = str(divisor)
            if not free_unbacked_symbols(divisor) and _readable(text):
                found[text] = None
            if len(found) >= MAX_DIVISORS:
                return list(found)
    return list(found)


def _tensor_divisor(node) -> tuple:
    """(the size expression,) where node divides an integer tensor by a size (``x // x.shape[0]``), else ()."""
    if node.op != "call_function" or node.target not in _TENSOR_DIVISIONS or not is_integer_node(node.args[0]):
        return ()  # a float tensor divided by 0 is inf or nan, in eager too: only integers raise (and trap)
    if node.target in (_aten.div.Tensor_mode, _aten.div.Scalar_mode) and not node.kwargs.get("rounding_mode"):
        return ()  # true division: floats
    divisor = node.args[1].meta.get("val") if isinstance(node.args[1], torch.fx.Node) else node.args[1]
    return (divisor.node.expr,) if isinstance(divisor, torch.SymInt) else ()


def _divisors_of_sizes(values) -> list:
    """The divisors (not constants) of the dividing shape functions (_DIVIDING) in the symbolic values of a node's
    value: a SymInt, SymFloat or SymBool, or a tensor's sizes, strides and storage offset."""
    import sympy

    exprs = []
    for value in values if isinstance(values, (list, tuple)) else (values,):
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            exprs.append(value.node.expr)
        elif isinstance(value, torch.Tensor):
            exprs += [size.node.expr for size in (*value.shape, *value.stride(), value.storage_offset())
                      if isinstance(size, torch.SymInt)]
    return [function.args[place] for expr in exprs for function in expr.atoms(sympy.Function)
            for place in _DIVIDING.get(type(function).__name__, ())
            if place < len(function.args) and not function.args[place].is_number]


def user_output_args(ep) -> list:
    """forward's outputs as the graph's output node holds them, one per ``graph_signature.user_outputs``: a node, or
    the constant itself (``return y, 3``, a None); the buffers and inputs the program writes come before them."""
    held = list(next(n for n in reversed(ep.graph.nodes) if n.op == "output").args[0])
    return held[len(held) - len(ep.graph_signature.user_outputs):]


def output_names(ep) -> list[str]:
    """Each user output named as the caller reaches it in forward's result: ``out`` (one tensor),
    ``out[0]``, ``out['logits']``, ``out.hidden`` (a named tuple), read from the output pytree spec.

    The graph signature names outputs after FX nodes (``add_252``, ``view_as_real_3``), which mean nothing
    to a caller; those names are kept only where the spec does not give one name per user output (no
    module call signature, or a container type registered with torch's pytree without key paths).
    """
    graph_names = [str(name) for name in ep.graph_signature.user_outputs]
    call_signature = ep.module_call_graph[0].signature if ep.module_call_graph else None
    out_spec = getattr(call_signature, "out_spec", None)
    if out_spec is None or out_spec.num_leaves != len(graph_names):
        return graph_names
    try:
        return output_leaf_names(out_spec)
    except ValueError:  # pytree.tree_flatten_with_path: a type without flatten_with_keys_fn
        return graph_names


def constant_inputs(graph_signature) -> list[dict]:
    """The non-tensor inputs torch.export specialized into the program (``use_cache=False``, a float
    scale), as ``{"leaf": i, "value": v}``: i is the input's place among the flat leaves of the
    ``(args, kwargs)`` input spec (every user input is one leaf, constants included). The runtime checks a
    call against them: the package computes with these values whatever the caller passes."""
    from torch.export.graph_signature import ConstantArgument, InputKind

    user = [spec for spec in graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]
    return [{"leaf": leaf, "value": spec.arg.value} for leaf, spec in enumerate(user)
            if isinstance(spec.arg, ConstantArgument) and plain_value(spec.arg.value)]


def forward_parameters(module: torch.nn.Module) -> list[dict] | None:
    """forward's named parameters as ``{"name", "positional", "default"?, "has_default"}``, in order.

    torch.export keeps only the arguments the example call passed (``forward_arg_names``): a default the
    call left out, or one that a passed constant replaced, is not in the ExportedProgram. The runtime needs
    it to tell a left-out argument that eager would compute with its default (``scale=1.0``) from one the
    package computes with another value (exported with ``scale=2.0``). "positional": it may be passed by
    position (before any ``*args``); "default": a default that JSON holds (None, bool, int, float, str),
    absent when forward has none or another kind ("has_default" says which). None when forward's
    signature cannot be read (a builtin).
    """
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    recorded, positional = [], True
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            positional = positional and parameter.kind is parameter.VAR_KEYWORD  # after *args: keyword-only
            continue
        entry = {"name": parameter.name, "positional": positional and parameter.kind in (
                 parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD),
                 "has_default": parameter.default is not parameter.empty}
        if entry["has_default"] and plain_value(parameter.default):
            entry["default"] = parameter.default
        recorded.append(entry)
    return recorded


def dim_names(ep) -> dict[str, str]:
    """{symbol: the Dim name the caller gave it} for the symbols of the input sizes ("s27": "seq").

    torch.export keeps the names in the shape environment of the program's fake tensors
    (``source_name_to_debug_name``, keyed by source, "L['x'].size()[1]"; the same on torch 2.11 and 2.13);
    a symbol torch named itself (Dim.AUTO, the CLI's x_1 is a name too) maps to that name. A derived dim
    (``2 * Dim("n")``: the size is 2*s69) has no size of its own symbol: its root's symbol comes from a
    ConstantSource whose name is the root Dim's ("n"), so the size reads 2*n.
    """
    try:  # torch's own class for a derived dim's root (torch 2.11 through 2.15 have it here)
        from torch._dynamo.source import ConstantSource
    except ImportError:  # elsewhere: derived dims keep torch's symbol, the rest are named as before
        ConstantSource = ()

    names = {}
    for node in ep.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        shape_env = getattr(getattr(value, "fake_mode", None), "shape_env", None)
        if not isinstance(value, torch.Tensor) or shape_env is None:
            continue
        debug_names = getattr(shape_env, "source_name_to_debug_name", {})
        for size in value.shape:
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            for symbol in getattr(expr, "free_symbols", ()):
                if str(symbol) in names:
                    continue
                for source in getattr(shape_env, "var_to_sources", {}).get(symbol, []):
                    key = source.name() if callable(source.name) else source.name  # a property on torch 2.13
                    name = key if isinstance(source, ConstantSource) else debug_names.get(key)
                    # a name past the package format's bound (a load would refuse it) keeps torch's symbol
                    if isinstance(name, str) and name.isidentifier() and len(name) <= MAX_DIM_NAME_CHARS:
                        names[str(symbol)] = name
                        break
    return names
