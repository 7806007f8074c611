"""Every torch-version fix aotcuda makes, in one table, with one idiom.

torch moves and fixes its internals every release. Each workaround of a torch bug and each backport of a
later torch's fix that aotcuda carries is a row of ``FIXES`` below: what it fixes, which torch versions need
it, the upstream issue or PR, how it is detected (by the fixed code's own marker, never by a version
number, where a marker exists), when to remove it, and the module that holds its code.

The idiom. A fix that patches torch is a context-manager factory (``apply``) entered around the one
lowering step that needs it (``applied(step)``), a no-op where detection says the installed torch does not
need it, and undone when the step ends: nothing is patched at import or outside lower(). A fix that is
a program transform or a check of aotcuda's own (a pass's workaround, a retry, a decomposition torch
lacks) lives in its module, named in ``where``; its row has no ``apply``. tests/lowering/test_torch_fixes.py
checks the table: every ``where`` module exists and every ``apply`` is a no-op or a reversible patch.

The torch internals the complex pass uses are listed, with what breaks without each, in
aotcuda.passes.complex_to_real.torch_internals (the pass's door), which points here for version fixes.

flex_attention's captured buffers (``flex_attention_captures_realized``)
    A score_mod/mask_mod that reads a tensor computed in the program (AnyFlow-FAR's mask_mod indexes a
    per-token frame table built with ``torch.cat``) gets that tensor as a "captured buffer". Inductor's
    flex_attention lowering (torch/_inductor/kernel/flex/flex_attention.py) inlines the mask/score subgraph
    with ``build_subgraph_buffer`` *before* it realizes the captured buffers (``maybe_realize`` comes later),
    so an unrealized pointwise producer is inlined into the Triton template. ``cat`` and ``constant_pad_nd``
    lower to ``ops.masked(mask, body, other)`` with a Python function as body, and Triton's ``masked`` reads
    ``body.graph``: ``LoweringException: AttributeError: 'function' object has no attribute 'graph'``
    (target: flex_attention). The C++ backend calls the body directly and is not affected.

    Two steps, both needed. (1) The wrapper realizes every captured TensorBox, in place, before Inductor's
    own lowering runs: the fix PyTorch made upstream (pytorch/pytorch#182737: materialize the captures
    before building the modification subgraphs), and what the lowering does to these buffers anyway a few
    lines later. (2) Realizing is not enough for a buffer that reads no other buffer (a table built from
    ``zeros``/``ones``/``full``/``arange`` and ``cat``, as tests/lowering/test_flex_attention.py's is; AnyFlow-FAR
    still failed on the H200 with step 1 alone):
    ``ComputedBuffer.make_loader`` inlines such a buffer's computation into every reader instead of
    loading it (torch/_inductor/ir.py, ``num_reads() == 0``), so the template still sees ``ops.masked``.
    Inductor's own switch against that inlining, ``ComputedBuffer.force_realize()``, is held for the
    lowering call, so every loader the modification subgraphs take is an ``ops.load`` of the stored
    buffer. The generated code differs only in that the template loads these small tables instead of
    recomputing them.

Unbacked bools in runtime asserts (``piecewise_in_runtime_asserts``)
    torch 2.11 writes the int of a data-dependent bool as a sympy Piecewise; re-tracing a program re-inserts
    its deferred runtime asserts (torch/fx/passes/runtime_assert.py) by interpreting each expression with
    PythonReferenceAnalysis, which has no ``expr_cond_pair``/``piecewise`` handler in 2.11 (AttributeError).
    The handlers are torch 2.13's, added to the class for the step and removed after it.

Multi-operand einsum over a dynamic dim (``einsum_contraction_order_unspecialized``)
    ``torch.einsum`` with three or more operands asks opt_einsum for a contraction order whenever that
    package is installed (``torch.backends.opt_einsum``, torch/functional.py), and opt_einsum reads every
    size as a Python int (``int(sh[cnum])``, opt_einsum/contract.py): a SymInt size becomes a constant, and
    export fails with "Constraints violated (seq) ... specialized it to be a constant" (an FNet-style DFT
    einsum over a dynamic sequence; torch 2.11 and 2.13 alike, on any device, with opt_einsum 3.4). The export
    step runs with ``torch.backends.opt_einsum.flags(enabled=False)``: einsum contracts left to right, as it
    does anywhere opt_einsum is not installed (CI's environment), so the lowered program no longer depends on
    that optional package; a static multi-operand einsum may lose opt_einsum's cheaper order (write the
    order with two-operand einsums where it matters).

repeat_interleave by a SymInt with output_size (``repeat_interleave_by_expand``)
    torch 2.11's C++ kernel of ``Tensor.repeat_interleave(int repeats, dim, output_size=...)``
    (CompositeImplicitAutograd) checks ``output_size`` against the product it computes as a Python int
    (``guard_int``: "Invalid output_size, expected 9 but got 4*s27" when they differ), so a SymInt repeats
    becomes a constant, in export and again in run_decompositions; without ``output_size`` it stays symbolic.
    diffusers' UNet3DConditionModel repeats its time embedding by the frame count
    (``emb.repeat_interleave(num_frames, dim=0, output_size=emb.shape[0] * num_frames)``,
    unet_3d_condition.py), so a dynamic frame count failed with "Constraints violated (frames) ... specialized
    it to be a constant", and a program exported without it got the guard ``frames == 3`` from
    run_decompositions. torch 2.13's kernel writes the op as unsqueeze, expand, clone, view; that formula
    (with ``output_size`` checked by ``torch._check``) is registered for the op's CompositeImplicitAutograd key
    (``py_impl``, which torch's Python dispatcher prefers to the C++ kernel) for the export and decompose
    steps, and removed after each. It is entered only where a one-op export shows the kernel specializing.

Min/Max of two multiples of one term (``min_max_of_multiples_collapsed``)
    torch 2.11's sympy ``Min``/``Max`` (torch/utils/_sympy/functions.py, MinMaxBase) leave ``Min(16*s, 32*s)``
    as it is; torch 2.13 writes it ``16*s`` when s is nonnegative (``_collapse_known_multiplicative_terms``).
    The view of a collapsed expand takes the smaller stride with ``min`` (torch/_prims ``_collapse_view_helper``),
    which non-strict export makes a ``sym_min``: Llama's ``repeat_kv`` (expand, reshape) gets the stride
    ``Min(16*seq, 32*seq)``, its contiguity check guards ``Eq(Min(16*seq, 32*seq), 16*seq)``, which 2.11
    cannot prove, and export fails with "Constraints violated (seq)" (lowering/exporting.py's retry, which
    turns such guards into runtime asserts checked over the range, came from this case). 2.13's collapse is
    added to ``_find_localzeros`` for every step (Min/Max are built in each), and removed after it.

Identity arithmetic at another layout (``identity_arithmetic_keeps_layout``, in lowering/identity_arithmetic.py)
    torch 2.14's Inductor removes ``x * 1.0`` (and ``+ 0``, ``- 0``, ``/ 1``) with a scalar operand even where x is
    a view at another stride or storage offset, and gives x the removed node's metadata (pytorch/pytorch#166552
    extended joint_graph's ``remove_no_ops`` to scalars without a layout check). A ``torch.cond`` branch that
    returns ``(z * z).imag * 1.0`` then fails to compile: "When merging two branches' output in torch.cond,
    expected same storage_offset but got 0 and 1". For the compile step the pass is wrapped so that such nodes
    are put back (torch 2.13 kept them); entered only where a one-node probe shows the pass dropping one.

istft's overlap-add of a broadcast grad (``broadcast_grads_expanded_for_tracing``, in lowering/overlap_add.py)
    torch 2.13's unfold_backward decomposition loops over the window's offsets for a grad whose batch is 1 where the
    input's is not (istft's window envelope): fake tensors run that loop in export and in run_decompositions (the
    op's shape comes from the decomposition), so for those steps torch's decomposition entry and the op's Meta Python
    kernel expand such a grad first, which gives the vectorized path (lower()'s decomposition table does the same for
    the graph it writes). Entered only where a probe shows torch's decomposition tracing index_add for a broadcast grad.

while_loop's mutated carries (``while_loop_mutated_carries``)
    pytorch#183657: AOTInductor's C++ wrapper (CPU and CUDA) carries a loop's mutated buffers. Without it,
    torch 2.11 fails to compile every program with a scan that stacks outputs, a map, or a while_loop whose
    body writes a carried tensor in place (InductorError: AssertionError in codegen_while_loop).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from aotcuda.lowering.affine_grid import affine_grid_over_symbolic_sizes
from aotcuda.lowering.archive_writer import archive_writer_finished_on_failure
from aotcuda.lowering.covariance import covariance_without_value_checks
from aotcuda.lowering.dependent_launch import host_launches_for_pdl
from aotcuda.lowering.fft_frequencies import fft_frequencies_over_symbolic_lengths
from aotcuda.lowering.identity_arithmetic import identity_arithmetic_keeps_layout
from aotcuda.lowering.overlap_add import broadcast_grads_expanded_for_tracing

_CAPTURED_BUFFER_ARGS = (7, 8)


def _realize_captured_buffers(args: tuple) -> None:
    from torch._inductor import ir

    for position in _CAPTURED_BUFFER_ARGS:
        for buffer in args[position] if len(args) > position else ():
            if isinstance(buffer, ir.TensorBox):
                buffer.realize()


def _loaded_not_inlined() -> contextlib.AbstractContextManager:
    """Inductor's ComputedBuffer.force_realize() (torch 2.11–2.13): realized buffers that read no other
    buffer are loaded by their readers, not inlined into them; a no-op on a torch without it."""
    from torch._inductor import ir

    force_realize = getattr(ir.ComputedBuffer, "force_realize", None)
    return force_realize() if force_realize is not None else contextlib.nullcontext()


@contextlib.contextmanager
def flex_attention_captures_realized() -> Iterator[None]:
    """While active, Inductor's flex_attention lowering sees realized captured buffers (see module doc)."""
    try:
        from torch._inductor.lowering import lowerings
    except ImportError:  # a torch without Inductor's lowering table: nothing to fix
        yield
        return
    op = getattr(torch.ops.higher_order, "flex_attention", None)
    original = lowerings.get(op) if op is not None else None
    if original is None:
        yield
        return

    def lowering(*args, **kwargs):
        _realize_captured_buffers(args)
        with _loaded_not_inlined():
            return original(*args, **kwargs)

    lowerings[op] = lowering
    try:
        yield
    finally:
        lowerings[op] = original


def _mutated_carry_names(while_loop) -> dict[str, str]:
    """{name of a buffer the loop body writes in place: the name of the MutationOutput that stands for it}."""
    return {mutated: output.get_name()
            for output in getattr(while_loop, "mutation_outputs", ())
            for mutated in output.get_mutation_names()}


def carried_outputs(while_loop) -> list:
    """One output buffer per carried input of an Inductor WhileLoop, in carried-input order.

    A carried input the body writes in place (the buffer Inductor's scan/map → while_loop decomposition
    preallocates for the stacked outputs) is carried by its MutationOutput; every other one by the next
    of ``while_loop.outputs``. torch 2.11's C++ wrapper paired carried inputs with ``outputs`` alone, so a
    loop with a mutated carry lost its last carried inputs (the subgraph then has more inputs than the
    wrapper passes: the AssertionError).
    """
    mutation_outputs = {output.get_name(): output for output in getattr(while_loop, "mutation_outputs", ())}
    mutated = _mutated_carry_names(while_loop)
    plain = iter(while_loop.outputs)
    result = []
    for carried in while_loop.carried_inputs:
        name, seen = carried.get_name(), set()
        while name in mutated and name not in seen:  # a mutation of a mutation: follow it to the last
            seen.add(name)
            name = mutated[name]
        result.append(mutation_outputs[name] if name in mutation_outputs else next(plain))
    return result


def while_loop_mutated_carries() -> contextlib.AbstractContextManager:
    """pytorch#183657 (module doc), for one compile; a no-op where torch has the fix."""
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    if hasattr(CppWrapperCpu, "_get_while_loop_carried_output_names"):  # torch's own fix is there
        return contextlib.nullcontext()
    original = CppWrapperCpu.codegen_while_loop

    @functools.wraps(original)
    def codegen_while_loop(self, while_loop, *args, **kwargs):
        outputs = while_loop.outputs
        while_loop.outputs = carried_outputs(while_loop)
        try:
            return original(self, while_loop, *args, **kwargs)
        finally:
            while_loop.outputs = outputs

    return _patched(CppWrapperCpu, "codegen_while_loop", codegen_while_loop)


@contextlib.contextmanager
def _patched(owner, name: str, value) -> Iterator[None]:
    original = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _expr_cond_pair(expr, cond):
    return (expr, cond)


def _piecewise(*pairs):
    """Piecewise((e1, c1), ..., (en, True)) as sym_ite(c1, e1, sym_ite(..., en)): torch 2.13's handler."""
    result = pairs[-1][0]
    for expr, cond in reversed(pairs[:-1]):
        result = torch.sym_ite(cond, expr, result)
    return result


@contextlib.contextmanager
def piecewise_in_runtime_asserts() -> Iterator[None]:
    """torch 2.13's Piecewise handlers of PythonReferenceAnalysis, backported for the step: a no-op where
    the installed torch has them (see the module doc)."""
    from torch.utils._sympy.reference import PythonReferenceAnalysis

    if "piecewise" in PythonReferenceAnalysis.__dict__:
        yield
        return
    PythonReferenceAnalysis.expr_cond_pair = staticmethod(_expr_cond_pair)
    PythonReferenceAnalysis.piecewise = staticmethod(_piecewise)
    try:
        yield
    finally:
        del PythonReferenceAnalysis.expr_cond_pair, PythonReferenceAnalysis.piecewise


def _repeat_interleave_expanded(self, repeats, dim=None, *, output_size=None):
    """``self.repeat_interleave(repeats, dim)`` for an int repeats, as torch 2.13's kernel writes it (unsqueeze,
    expand, contiguous clone, view)."""
    if dim is None:
        self, dim = self.flatten(), 0
    size = self.size(dim)  # an IndexError where eager's is (a dim out of range, any dim of a 0-d tensor)
    dim, shape = dim % self.dim(), list(self.shape)
    torch._check(output_size is None or output_size == size * repeats,
                 lambda: f"repeat_interleave: output_size {output_size} is not {size} * {repeats}")
    expanded = self.unsqueeze(dim + 1).expand(*shape[:dim + 1], repeats, *shape[dim + 1:])
    return expanded.clone(memory_format=torch.contiguous_format).view(*shape[:dim], size * repeats, *shape[dim + 1:])


def _collapse_multiples(cls, values) -> object | None:
    """torch 2.13's MinMaxBase._collapse_known_multiplicative_terms: Min/Max(c1*t, c2*t) as one of them, for
    a nonnegative or nonpositive t; None where it does not apply."""
    if len(values) != 2:
        return None
    a, b = values
    (a_coeff, a_term), (b_coeff, b_term) = a.as_coeff_Mul(), b.as_coeff_Mul()
    if a_term != b_term or not (a_coeff.is_comparable and b_coeff.is_comparable):
        return None
    if a_coeff == b_coeff:
        return a
    if a_term.is_nonnegative:
        a_is_smaller = a_coeff < b_coeff
    elif a_term.is_nonpositive:
        a_is_smaller = a_coeff > b_coeff
    else:
        return None
    return a if a_is_smaller == (cls.__name__ == "Min") else b


@contextlib.contextmanager
def min_max_of_multiples_collapsed() -> Iterator[None]:
    """torch 2.13's collapse of Min/Max(c1*t, c2*t), backported for the step (see the module doc); a no-op
    where the installed torch has it."""
    from torch.utils._sympy.functions import MinMaxBase

    if hasattr(MinMaxBase, "_collapse_known_multiplicative_terms"):
        yield
        return
    original = MinMaxBase.__dict__["_find_localzeros"]

    def _find_localzeros(cls, values, **options):
        if not any(value.is_Number for value in values):  # 2.13 collapses only without a number among them
            collapsed = _collapse_multiples(cls, tuple(values))
            if collapsed is not None:
                return {collapsed}
        return original.__func__(cls, values, **options)

    MinMaxBase._find_localzeros = classmethod(_find_localzeros)
    try:
        yield
    finally:
        MinMaxBase._find_localzeros = original


class _RepeatBySize(torch.nn.Module):
    def forward(self, x):
        return x.repeat_interleave(x.shape[0], 0, output_size=x.shape[0] * x.shape[0])


@functools.cache
def _repeat_interleave_specializes() -> bool:
    """Whether the installed torch's repeat_interleave makes a SymInt repeats a constant: a one-op export
    with a dynamic dim, once per process."""
    try:
        torch.export.export(_RepeatBySize(), (torch.zeros(3),), dynamic_shapes=({0: torch.export.Dim("n")},),
                            strict=False)
    except torch._dynamo.exc.UserError:
        return True
    return False


@contextlib.contextmanager
def repeat_interleave_by_expand() -> Iterator[None]:
    """torch 2.13's repeat_interleave(int) formula for the step, where the installed torch's kernel
    specializes a SymInt repeats (see the module doc); a no-op elsewhere."""
    op, key = torch.ops.aten.repeat_interleave.self_int, torch._C.DispatchKey.CompositeImplicitAutograd
    if key in op.py_kernels or not _repeat_interleave_specializes():
        yield
        return
    op.py_impl(key)(_repeat_interleave_expanded)
    op._dispatch_cache.clear()
    try:
        yield
    finally:
        del op.py_kernels[key]
        op._dispatch_cache.clear()


def einsum_contraction_order_unspecialized() -> contextlib.AbstractContextManager:
    """torch.einsum without opt_einsum's contraction order for the step (see the module doc); a no-op on a
    torch without ``torch.backends.opt_einsum.flags``."""
    import torch.backends.opt_einsum as opt_einsum

    flags = getattr(opt_einsum, "flags", None)
    return flags(enabled=False) if flags is not None else contextlib.nullcontext()


@contextlib.contextmanager
def without_pytree_leafspec_warning() -> Iterator[None]:
    """torch's own pytree code warns "isinstance(treespec, LeafSpec) is deprecated" on every
    run_decompositions and AOTI compile (torch 2.11 to 2.13): nothing a user of lower() can act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
        yield


@dataclass(frozen=True)
class TorchFix:
    """One row of the table.

    name: what it fixes, in a few words. torch: the torch versions that need it ("2.11", "2.11-2.13").
    upstream: the upstream issue or PR, or "none filed". detected_by: how aotcuda tells whether the installed
    torch needs it. remove_when: the condition for deleting it. where: the module holding its code.
    steps: the lowering steps ``apply`` is entered around (empty when the fix has no ``apply``).
    apply: a context-manager factory that patches torch for one step, a no-op where not needed.
    """

    name: str
    torch: str
    upstream: str
    detected_by: str
    remove_when: str
    where: str
    steps: tuple[str, ...] = ()
    apply: Callable[[], contextlib.AbstractContextManager] | None = None


FIXES: tuple[TorchFix, ...] = (
    TorchFix("flex_attention captured buffers inlined into the Triton template (CUDA)", "2.11-2.13",
             "pytorch/pytorch#182737", "Inductor's lowering table has flex_attention; force_realize() exists",
             "the oldest supported torch has #182737", __name__, ("compile",), flex_attention_captures_realized),
    TorchFix("while_loop / scan / map with a mutated carry fails in codegen_while_loop", "2.11",
             "pytorch/pytorch#183657", "CppWrapperCpu._get_while_loop_carried_output_names is missing",
             "the oldest supported torch is 2.13", __name__, ("compile",), while_loop_mutated_carries),
    TorchFix("a data-dependent bool cast to int (torch._check_tensor_all) is not traced: 'Piecewise(...) is not "
             "tracked with proxy' in run_decompositions", "2.11", "none filed (2.13 writes the cast as sym_ite)",
             "the graph has cast_symbool_to_symint_guardless nodes", "the oldest supported torch is 2.13",
             "aotcuda.lowering.unbacked"),
    TorchFix("runtime asserts on a sym_ite fail to rebuild: PythonReferenceAnalysis has no Piecewise handler",
             "2.11", "none filed (2.13 has expr_cond_pair and piecewise)",
             "'piecewise' missing from PythonReferenceAnalysis", "the oldest supported torch is 2.13", __name__,
             ("decompose", "passes", "compile"), piecewise_in_runtime_asserts),
    TorchFix("Min/Max(16*s, 32*s) left unsimplified: repeat_kv's stride guard cannot be proven", "2.11",
             "none found (2.13 has MinMaxBase._collapse_known_multiplicative_terms)",
             "MinMaxBase._collapse_known_multiplicative_terms is missing", "the oldest supported torch is 2.13",
             __name__, ("export", "decompose", "passes", "compile"), min_max_of_multiples_collapsed),
    TorchFix("repeat_interleave by a SymInt with output_size makes the dim a constant (diffusers' UNet3D)", "2.11",
             "none found (2.13's kernel expands)",
             "a one-op export of repeat_interleave(n, output_size=...) by a dynamic n fails",
             "the oldest supported torch is 2.13", __name__, ("export", "decompose"), repeat_interleave_by_expand),
    TorchFix("multi-operand einsum makes a dynamic dim a constant (opt_einsum reads sizes as ints)",
             "2.11-2.15 with opt_einsum installed", "none found",
             "always in the export step (torch.backends.opt_einsum.flags; a no-op without opt_einsum)",
             "torch.einsum computes the contraction order without specializing SymInt sizes", __name__,
             ("export",), einsum_contraction_order_unspecialized),
    TorchFix("F.affine_grid makes a dynamic height or width a constant (affine_grid_generator takes int[] sizes)",
             "2.11-2.13", "none filed", "always in the export step, for a call whose sizes hold a SymInt (static "
             "sizes run torch's op)", "aten::affine_grid_generator takes SymInt[] and its decomposition keeps them",
             "aotcuda.lowering.affine_grid", ("export",), affine_grid_over_symbolic_sizes),
    TorchFix("x * 1.0 / x + 0 of a view removed without its layout: a torch.cond branch returning one fails to "
             "compile ('expected same storage_offset but got 0 and 1')", "2.14-2.15",
             "pytorch/pytorch#166552 (remove_no_ops took scalar identities; no stride/offset check)",
             "a probe: Inductor's remove_no_ops drops select(x, 1, 1) * 1.0",
             "remove_no_ops compares strides and storage offset (the probe keeps the mul)",
             "aotcuda.lowering.identity_arithmetic", ("compile",), identity_arithmetic_keeps_layout),
    TorchFix("pytree LeafSpec FutureWarning on every decomposition and compile", "2.11-2.13", "none filed",
             "the warning's text (filtered, not raised)", "torch stops warning from its own code", __name__,
             ("decompose", "passes", "compile"), without_pytree_leafspec_warning),
    TorchFix("one-element mutated buffers folded to constants (self.step += 1 never advances)", "2.11-2.13",
             "none filed", "the program mutates a buffer of one element",
             "Inductor's constant_fold_uniform_value skips mutated buffers", "aotcuda.lowering.pipeline"),
    TorchFix("named-tuple outputs (torch.return_types) cannot be packaged", "2.11-2.14", "none filed",
             "treespec_dumps of the output spec raises", "torch registers return_types for serialization",
             "aotcuda.lowering.pipeline"),
    TorchFix("whole-tensor writes lose copy_'s cast and broadcast in run_decompositions", "2.11-2.13",
             "none filed", "a copy_/fill_ whose value differs from its buffer in dtype, device or shape",
             "functionalization keeps the cast (tests/lowering/test_whole_tensor_writes.py says when)",
             "aotcuda.lowering.whole_tensor_writes"),
    TorchFix("a 0-d constant tensor (h[0] = 1 in forward) reaches Inductor's view lowerings as a number: "
             "'Constant' object has no attribute 'data' (a Hilbert transform's mask)",
             "2.13 (measured; 2.11 and 2.15 not checked here)", "none filed",
             "always (each real or bool 0-d constant tensor, parameter or buffer not written of the program; none: "
             "the program as it is)",
             "Inductor's get_attr keeps a 0-d constant a tensor, or its view lowerings take an ir.Constant",
             "aotcuda.lowering.scalar_constants"),
    TorchFix("a constant read inside a subgraph (a cond branch, a scan body) stays a get_attr there, and "
             "run_decompositions fails: 'Attempting to use FunctionalTensor on its own'",
             "2.13 (measured; 2.11 and 2.15 not checked here)", "none filed",
             "always (each tensor constant of a number dtype a subgraph reads: rebuilt from full nodes, or past 256 "
             "runs passed in as an operand by aotcuda.lowering.subgraph_constants)",
             "torch.export lifts a subgraph's constants, or functionalization takes a get_attr of one",
             "aotcuda.lowering.scalar_constants"),
    TorchFix("a kernel after a scan or map that reuses a carried buffer in place declares its name again in the C++ "
             "wrapper: 'redeclaration of AtenTensorOpaque* buf6_handle' (an S4D layer's scan)",
             "2.13 (measured; 2.11 and 2.15 not checked here)", "none filed",
             "the program has a while_loop, scan or map (compiled with inplace_buffers=False)",
             "CppWrapperCpu.codegen_while_loop records its carried buffers as allocated",
             "aotcuda.lowering.loop_carries"),
    TorchFix("integer division rounded toward zero is a plain C++ '/' in Inductor's CPU code: a zero divisor "
             "ends the process (SIGFPE) where eager raises ZeroDivisionError", "2.11-2.15", "none filed",
             "the program has aten.div.Tensor_mode of integer tensors with rounding_mode='trunc' (then decomposed)",
             "Inductor's truncdiv notes a zero divisor as its floor_divide_integral does",
             "aotcuda.lowering.integer_division"),
    TorchFix("window factory ops have no decomposition (fallback kernels)", "2.11 (all), 2.13 (all but hann)",
             "none filed", "the op is missing from torch.export.default_decompositions()",
             "torch decomposes every window op", "aotcuda.lowering.decompositions"),
    TorchFix("torch.fft.fftfreq / rfftfreq make a dynamic length a constant (they take int n)", "2.11-2.13",
             "none filed", "always in the export step, for a call whose n is a SymInt (an int n runs torch's op)",
             "aten::fft_fftfreq and fft_rfftfreq take SymInt n", "aotcuda.lowering.fft_frequencies", ("export",),
             fft_frequencies_over_symbolic_lengths),
    TorchFix("torch.cov / corrcoef fail in export (DataDependentOutputException: aten.equal): ATen asks whether its "
             "normalization factor, a tensor, is <= 0", "2.11-2.13", "none filed",
             "always in the export step, for a call without weights (fweights/aweights run torch's op)",
             "aten::cov computes its factor from sizes", "aotcuda.lowering.covariance", ("export",),
             covariance_without_value_checks),
    TorchFix("unfold_backward of a broadcast grad (istft's window envelope) decomposes into a loop over the window's "
             "offsets: 4,173 nodes for an n_fft-512 iSTFT, 180 s to lower on 2 cores", "2.13 (measured; 2.14-2.15 by "
             "the probe)", "none filed",
             "a probe: torch's decomposition of a grad of batch 1 against an input of batch 2 traces index_add",
             "torch's decomposition takes its vectorized path for a broadcast grad (the probe finds no index_add)",
             "aotcuda.lowering.overlap_add", ("export", "decompose"), broadcast_grads_expanded_for_tracing),
    TorchFix("FFT sample frequencies (fftfreq, rfftfreq) have no decomposition (proxy-executor ops)", "2.11-2.13",
             "none filed", "the op is missing from torch.export.default_decompositions()",
             "torch decomposes fftfreq and rfftfreq", "aotcuda.lowering.decompositions"),
    TorchFix("antialiased resampling (_upsample_bilinear2d_aa, _upsample_bicubic2d_aa) has no lowering, decomposition "
             "or C shim (proxy-executor ops)", "2.11-2.13", "none filed",
             "the op is missing from torch.export.default_decompositions()",
             "Inductor lowers or decomposes the antialiased upsample ops", "aotcuda.lowering.antialias"),
    TorchFix("size guards torch cannot prove refuse a dynamic dim (padded masks; repeat_kv strides without the "
             "Min/Max row)", "2.11",
             "none filed", "export raises a constraint violation; retried with deferred runtime asserts",
             "the oldest supported torch proves them", "aotcuda.lowering.exporting"),
    TorchFix("a constraint violation whose solved range is a fraction (9/4 <= s) raises AssertionError in "
             "prettify_results instead", "2.13", "none filed",
             "export raises AssertionError from a frame named prettify_results; said as a DynamicShapesError with "
             "the bound", "torch writes such ranges as a constraint violation", "aotcuda.lowering.exporting"),
    TorchFix("make_fx cannot rebuild Max/Min strides from the graph's symbols", "2.11", "none filed",
             "always (dense layouts are made by permutes instead)", "the oldest supported torch tracks them",
             "aotcuda.passes.complex_to_real.layout"),
    TorchFix("sym_ite written as a sympy Piecewise; ReferenceAnalysis builds sympy for some handlers",
             "2.11-2.13", "none filed", "always (handlers overridden)", "torch traces every handler",
             "aotcuda.passes.complex_to_real.symbols"),
    TorchFix("a constant copied to CUDA keeps its CPU layout (Triton gets a CPU tensor)", "2.11-2.13",
             "none filed", "a complex constant used only on another device", "ConstantBuffer.constant_to_device "
             "moves the layout too", "aotcuda.passes.complex_to_real.placement"),
    TorchFix("TreeSpec children: children() (2.13) or children_specs (2.11)", "2.11", "none filed",
             "hasattr(spec, 'children')", "the oldest supported torch is 2.13", "aotcuda.runtime.pytree_types"),
    TorchFix("aten::cholesky is gone (torch.cholesky raises; torch.linalg.cholesky stays): registering its rule "
             "raised AttributeError when the rule table loaded, so every ReplaceComplexWithRealPass failed", "2.14-2.15",
             "none found", "hasattr(torch.ops.aten, 'cholesky')", "the oldest supported torch lacks aten::cholesky",
             "aotcuda.passes.complex_to_real.rules.linalg_factors"),
    TorchFix("AOTInductor launches Triton kernels compiled for programmatic dependent launch (triton.enable_pdl) "
             "without the launch attribute, so they never overlap", "2.11-2.14",
             "pytorch/pytorch#194079 (host-side PDL launches in AOTInductor; in 2.15)",
             "the CUDA kernel driver's source has no cuLaunchKernelEx",
             "the oldest supported torch launches PDL kernels itself", "aotcuda.lowering.dependent_launch",
             ("compile",), host_launches_for_pdl),
    TorchFix("a write that fails while the package is written (a full disk) ends the process: PT2ArchiveWriter."
             "__exit__ never reaches close(), and the C++ writer's destructor throws (std::terminate)",
             "2.13 (measured; 2.11 and 2.15 not checked here)",
             "none filed", "always (PT2ArchiveWriter.__exit__ finishes the writer on failure; a no-op without it)",
             "PT2ArchiveWriter.__exit__ closes the writer when a write fails", "aotcuda.lowering.archive_writer",
             ("compile",), archive_writer_finished_on_failure),
    TorchFix("a CUDA package's .so binds libstdc++ facets privately and crashes in parse_device_str",
             "2.11 (cu130)", "none filed", "always (libstdc++ promoted to the global scope before dlopen)",
             "AOTInductor stops exporting libstdc++ internals", "aotcuda.runtime.libloader"),
)


# Held while any step's patches are in place: one thread's lowering steps at a time in a process (reentrant: a
# nested lower() in the same thread). Why (fixlist, 2026-12-07): each patch sets a function of torch's on entry and
# puts the original back on exit, and takes one already in place for "entered already"; a second thread that
# entered while the first's patch was in place had it taken away when the first's step ended, in the middle of its
# own export (affine_grid and fftfreq of a dynamic size: "Constraints violated", the size made a constant). And
# torch.export itself keeps the export in module globals (torch/export/_trace.py: _EXPORT_MODULE_HIERARCHY, which
# another thread's export ending set to None: "AssertionError: _EXPORT_MODULE_HIERARCHY must not be None").
_STEPS_LOCK = threading.RLock()


def _new_steps_lock_in_child() -> None:
    """A child forked while another thread held the lock would wait for it for good: the child gets its own. One
    forked inside a step of its own thread keeps the lock held, as that thread's step goes on there."""
    global _STEPS_LOCK
    if not _STEPS_LOCK._is_owned():
        _STEPS_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_new_steps_lock_in_child)


@contextlib.contextmanager
def applied(step: str) -> Iterator[None]:
    """Every fix of FIXES that patches torch around ``step`` ("export", "decompose", "passes", "compile"), for the
    duration of the block; each is a no-op where the installed torch does not need it. Another thread's steps wait
    for the block to end (``_STEPS_LOCK``)."""
    with _STEPS_LOCK, contextlib.ExitStack() as stack:
        for fix in FIXES:
            if fix.apply is not None and step in fix.steps:
                stack.enter_context(fix.apply())
        yield
