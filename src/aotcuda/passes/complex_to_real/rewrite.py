"""ReplaceComplexWithRealPass: scan → decide → rewrite every complex op of an ExportedProgram as real math.

How the rewrite works: the program's graph runs in a torch.fx.Interpreter on fake values, with every
complex value carried as a `Pair` (its view_as_real form). Nodes that read or write a complex value call
their rule; the others run their own op. make_fx traces that run, so the new graph holds exactly the
ops the rules and the untouched nodes called, each with meta["val"] (SymInts stay symbolic: the
program's own fake tensors and shape env are reused) and, through preserve_node_meta, the stack trace
of the node it replaces. One pass over the graph: linear time. Two things keep the constant small: a
rule call repeated on the same values reuses the first result (reuse.py), and an op repeated on
inputs of the same metadata copies the first result's metadata instead of a fake-tensor dispatch
(replay.py).
"""

from __future__ import annotations

import contextlib
import logging

import torch
import torch.fx.traceback as fx_traceback
from torch.export.graph_signature import CustomObjArgument, InputKind, OutputKind
from torch.utils import _pytree as pytree

from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes.complex_to_real.boundary import mutation_targets, written_state_returned
from aotcuda.passes.complex_to_real.half import in_float32
from aotcuda.passes.complex_to_real.layout import as_laid_out_in_eager
from aotcuda.passes.complex_to_real.pair import Pair, real_as_pair, real_dtype, same_size, shared_constants
from aotcuda.passes.complex_to_real.placement import constant_devices
from aotcuda.passes.complex_to_real.program import rebuild_program
from aotcuda.passes.complex_to_real.registry import Rule, op_name
from aotcuda.passes.complex_to_real.replay import ReplayMode, suspended, traced_node_argument
from aotcuda.passes.complex_to_real.reuse import RuleResults
from aotcuda.passes.complex_to_real.scan import (
    Plan,
    Refusal,
    holds_complex,
    program_has_complex,
    scan,
    source_location,
)
from aotcuda.passes.complex_to_real.spectral.transform import kernel_forms
from aotcuda.passes.complex_to_real.spectral.filter import fuse_filters
from aotcuda.passes.complex_to_real.spectral.product import fuse_products
from aotcuda.passes.complex_to_real.spectral.real_bins import as_eager_writes
from aotcuda.passes.complex_to_real.spectral.window import fuse_windows
from aotcuda.passes.complex_to_real.subgraphs import pair_function
from aotcuda.passes.complex_to_real.symbols import track_symbols, user_ranges
from aotcuda.passes.complex_to_real.torch_internals import (
    get_proxy_mode,
    get_proxy_slot,
    make_fx,
    speedups_default,
    track_tensor,
)
from aotcuda.passes.result import PassResult

logger = logging.getLogger("aotcuda")


class ReplaceComplexWithRealPass:
    """Rewrite every op on complex tensors of an ExportedProgram as real math on view_as_real pairs.

    A complex tensor of shape S becomes a real tensor of shape S + [2] (complex64 → float32,
    complex128 → float64); view_as_complex / view_as_real become no-ops. Complex parameters, buffers and
    constants become real pair tensors under the same names.

    Args:
        strict: raise instead of logging when the program cannot be rewritten.
        speedups: replay repeated ops' metadata and copy unchanged nodes (the two uses of torch internals
            that only save time, see torch_internals.py); False traces every node, for the same graph.
            Default: on, unless AOTCUDA_PASS_SPEEDUPS=0.
        fft_kernels: None (default): an FFT of a covered length becomes one aotcuda kernel op where the
            switches say (aotcuda::fft_rows, a Triton kernel, off the CPU: AOTCUDA_FFT_KERNEL;
            aotcuda::fft_rows_cpu, a C++ template kernel, on the CPU: AOTCUDA_FFT_CPU_KERNEL). Those ops run
            in eager PyTorch and compile in Inductor and AOTInductor (aotcuda imported). False: plain ATen ops
            only, for a program meant for a runtime without aotcuda's ops (an ExecuTorch CPU backend).

    Calling the pass returns a new ExportedProgram and leaves its argument unchanged. A program with no
    complex value is returned as it is. A program with an op the pass cannot rewrite (no rule, or one of
    the cases refused in scan.REFUSAL_CHECKS) is returned as it is, after one line on the "aotcuda"
    logger naming the op and the user's source line.

    A GraphPass (passes/result.py): `result` says what the last call did: changed, the counts of
    rewritten nodes and of nodes computed in float32 (complex32), and the refusal (op, node, source,
    reason) when it left the program as it was (lower() puts it in its error).

    Raises:
        UnsupportedComplexOpError: with strict=True, for a program that cannot be rewritten.
    """

    def __init__(self, strict: bool = False, speedups: bool | None = None, fft_kernels: bool | None = None):
        if fft_kernels not in (None, False):
            raise ValueError(f"fft_kernels={fft_kernels!r}: pass None (the kernel forms where the switches "
                             "AOTCUDA_FFT_KERNEL and AOTCUDA_FFT_CPU_KERNEL say) or False (plain ATen ops only)")
        self.strict = strict
        self.fft_kernels = fft_kernels
        self.speedups = speedups_default() if speedups is None else speedups
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
        self.result = PassResult(type(self).__name__)
        if not program_has_complex(ep):
            return ep
        decision = scan(ep)
        if isinstance(decision, Plan):
            try:
                with kernel_forms(self.fft_kernels):
                    rewritten = rewrite(ep, decision, self.speedups)
            except RuleFailed as failure:
                decision = failure.refusal
            else:
                self.result = PassResult(type(self).__name__, changed=True, counts={
                    "rewritten nodes": len(decision.rules), "in float32": len(decision.in_float32)})
                return rewritten
        if isinstance(decision, Refusal):
            self.result = PassResult(type(self).__name__, refusal=decision)
            if self.strict:
                raise UnsupportedComplexOpError(decision.op, decision.node, decision.source, decision.reason)
            logger.warning(decision.log_line(), extra={"aotcuda_refusal": decision})  # lower() holds it back
        return ep


class RuleFailed(Exception):
    """A rule raised while rewriting: the program is left as it was, like any refusal."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal.log_line())
        self.refusal = refusal


class _PairInterpreter(torch.fx.Interpreter):
    """Runs the original graph with complex values as Pairs, calling the plan's rule for complex nodes.

    A node with no complex value whose inputs are exactly the original ones is copied into the traced
    graph with its original meta (see `_copy_unchanged`), not run again: re-running an op on fake tensors
    with symbolic shapes costs about a millisecond, and most nodes of a model are such nodes.
    """

    def __init__(self, gm: torch.fx.GraphModule, plan: Plan, complex_placeholders: set[str], speedups: bool = True):
        super().__init__(gm, garbage_collect_values=True)
        self.extra_traceback = False  # keep RuleFailed as it is raised
        self.plan = plan
        self.complex_placeholders = complex_placeholders
        self.tracer = get_proxy_mode().tracer
        self.results = RuleResults()  # repeated rule calls reuse the first result (see reuse.py)
        self.speedups = speedups  # replay and copying unchanged nodes (see torch_internals.py)
        self.replay = ReplayMode() if speedups else None  # repeated ops skip fake-tensor metadata (replay.py)

    def run(self, *args):
        with self.replay if self.replay is not None else contextlib.nullcontext():
            return super().run(*args)

    def run_node(self, n: torch.fx.Node):
        # Higher-order ops refuse user dispatch modes: they run with the replay mode suspended.
        if self.replay is not None and isinstance(n.target, torch._ops.HigherOrderOperator):
            with suspended(self.replay):
                return self._run_node(n)
        return self._run_node(n)

    def _run_node(self, n: torch.fx.Node):
        if n.op == "placeholder":
            value = super().run_node(n)
            if n.name in self.complex_placeholders:
                return Pair(value)
            return self._original_if_same(value, n.meta.get("val"))
        rule = self.plan.rules.get(n)
        if rule is not None:
            if n in self.plan.in_float32:
                rule = in_float32(rule)
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            result = self.results.reuse_or_run(n.target, args, kwargs, lambda: self._run_rule(n, rule, args, kwargs))
            return as_eager_writes(n, args, result)  # an FFT's real bins, per node (spectral/real_bins.py)
        if n.op == "call_function" and self.speedups and self._inputs_unchanged(n):
            return self._copy_unchanged(n)
        if n.op != "call_function":
            return super().run_node(n)
        try:
            return super().run_node(n)
        except RuleFailed:
            raise
        except Exception as error:  # e.g. a graph whose metadata disagrees with its values: refuse, whole
            raise RuleFailed(Refusal(op_name(n.target), n.name, source_location(n),
                                     f"running it on the rewritten values failed: {type(error).__name__}: "
                                     f"{str(error).splitlines()[0] if str(error) else ''}")) from error

    def _run_rule(self, n: torch.fx.Node, rule: Rule, args, kwargs):
        """The rule's result for node n, checked; any failure becomes a RuleFailed naming the node."""
        with self._set_current_node(n):
            args = [pair_function(a, self._run_subgraph) if isinstance(a, torch.fx.GraphModule) else a
                    for a in args]
            try:
                track_symbols(n.meta.get("val"), self.tracer)  # rules read the original's sizes
                result = rule.fn(n.meta.get("val"), *args, **kwargs)
                result = as_laid_out_in_eager(result, n.meta.get("val"))  # what follows may read strides
            except Exception as error:  # a bug or an unforeseen argument: refuse, never half-rewrite
                raise RuleFailed(Refusal(op_name(n.target), n.name, source_location(n),
                                         f"its rule failed: {type(error).__name__}: {error}")) from error
        misplaced = misplaced_device(result, n.meta.get("val"))
        if misplaced:
            raise RuleFailed(Refusal(op_name(n.target), n.name, source_location(n),
                                     f"its rule put a result on {misplaced}"))
        result = as_recorded_kind(result, n.meta.get("val"))
        disagreement = complexity_disagreement(result, n.meta.get("val"))
        if disagreement:  # what follows the node would read the wrong kind of value: refuse, not guess
            raise RuleFailed(Refusal(op_name(n.target), n.name, source_location(n),
                                     f"the graph's metadata disagrees with its values: {disagreement} (torch's "
                                     "functionalization can drop the cast of real_state.copy_(complex_value) "
                                     "where the state is read again; take .real explicitly before the copy)"))
        return self._original_if_same(result, n.meta.get("val"))

    def _run_subgraph(self, gm: torch.fx.GraphModule, complex_placeholders: set[str], *args) -> tuple:
        """Run a higher-order op's subgraph with the same plan, in whichever trace is current (its own)."""
        return type(self)(gm, self.plan, complex_placeholders, self.speedups).run(*args)

    def _inputs_unchanged(self, n: torch.fx.Node) -> bool:
        """True if n returns one tensor and every input value is the original one (so is its result)."""
        if not isinstance(n.meta.get("val"), torch.Tensor) or not isinstance(n.target, torch._ops.OpOverload):
            return False
        for a in n.all_input_nodes:
            new, old = self.env[a], a.meta.get("val")
            if new is old:
                continue
            if not (isinstance(new, torch.SymInt) and same_size(new, old)):
                return False
        return True

    def _copy_unchanged(self, n: torch.fx.Node) -> torch.Tensor:
        """Put a copy of n into the traced graph, with its original meta and value.

        The node is created directly (not through create_proxy) because its meta, stack trace included,
        is copied whole from n: the provenance bookkeeping of create_proxy would only be overwritten.
        """
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        node_args, node_kwargs = pytree.tree_map(self._node_of, (args, kwargs))
        node = self.tracer.graph.create_node("call_function", n.target, node_args, node_kwargs, n.name)
        node.meta.update(n.meta)
        value = n.meta["val"]
        track_tensor(value, self.tracer.proxy(node), constant=None, tracer=self.tracer)
        return value

    def _original_if_same(self, result, original):
        """A real rule result with the original value's metadata continues as the original value.

        Rules end where complex values turn real again (view_as_real, real, abs, ...). When the real
        result matches the original node's value in dtype, shape, strides and offset, the nodes after it
        can be copied unchanged (`_copy_unchanged`) instead of being run again.
        """
        if not (self.speedups and isinstance(result, torch.Tensor) and isinstance(original, torch.Tensor)
                and same_metadata(result, original)):
            return result
        track_tensor(original, get_proxy_slot(result, self.tracer).proxy, constant=None, tracer=self.tracer)
        return original

    def _node_of(self, value):
        """The traced graph's node that computes a value of the run (literals stay literals)."""
        argument = traced_node_argument(value, self.tracer)
        return argument.node if isinstance(argument, torch.fx.Proxy) else argument


def as_written_into(value, into_complex: bool):
    """A mutation's new value as the state it is copied into needs it.

    The program writes state back with copy_, which casts and broadcasts: functionalization may hand over
    a real value for complex state (``buffer.fill_(real_tensor)`` returns the real tensor itself), which
    copy_ would spread over both halves of the pair, or a complex value for real state, whose copy_ keeps
    the real part. Both become what copy_ on the complex tensors does.
    """
    if into_complex and isinstance(value, torch.Tensor) and not isinstance(value, Pair):
        return real_as_pair(value)
    if not into_complex and isinstance(value, Pair):
        return value.t.select(-1, 0)
    return value


def misplaced_device(result, original) -> str:
    """"" if every tensor of a rule's result is on the device of the original node's value; else which.

    Rules must put what they create on the result's device: a tensor left on the CPU next to CUDA
    tensors is an error in a Triton kernel even where eager would accept it (a 0-dim CPU scalar).
    Results are compared leaf by leaf with the original's values where both have as many (a
    while_loop may carry a CPU counter next to CUDA values); otherwise with its first tensor's device.
    """
    originals = pytree.tree_leaves(original)
    results = [v.t if isinstance(v, Pair) else v
               for v in pytree.tree_leaves(result, is_leaf=lambda v: isinstance(v, Pair))]
    if len(originals) != len(results):
        first = next((v for v in originals if isinstance(v, torch.Tensor)), None)
        originals = [first] * len(results)
    for tensor, value in zip(results, originals):
        if isinstance(tensor, torch.Tensor) and isinstance(value, torch.Tensor) and tensor.device != value.device:
            return f"{tensor.device}, the op's result is on {value.device}"
    return ""


def as_recorded_kind(result, original):
    """A rule's real tensor result where the node's meta["val"] is complex, as the pair (x, 0); else as is.

    This happens when functionalization dropped a real-to-complex cast: after ``self.h.copy_(x)`` (h
    complex) the graph reads the real x where eager reads h = x + 0i, so ``self.h * 2`` is a mul of real
    operands recorded as complex64. The rules that accept real operands treat them as (x, 0), so their
    real result is the complex result's real part, its imaginary part zero: exact. Left real, it would
    reach the program's outputs as a real tensor where the complex boundary records a complex one. Rules
    that need a pair operand fail on a real one, which refuses the program.
    """
    if isinstance(result, torch.Tensor) and not isinstance(result, Pair) and isinstance(original, torch.Tensor) \
            and original.dtype.is_complex and not result.dtype.is_complex:
        return real_as_pair(result.to(real_dtype(original.dtype)))
    return result


def complexity_disagreement(result, original) -> str:
    """"" if no result of a rule is complex (a Pair) where the node's meta["val"] is real; else which.
    Compared leaf by leaf where both have as many leaves.

    A complex value recorded as real (the dropped cast of ``real_state.copy_(complex_value)``) cannot be
    repaired: eager computes on the real part, and the part of a result is not the result of the part.
    """
    originals = pytree.tree_leaves(original)
    results = pytree.tree_leaves(result, is_leaf=lambda v: isinstance(v, Pair))
    if len(originals) != len(results):
        return ""
    for i, (value, recorded) in enumerate(zip(results, originals)):
        if isinstance(recorded, torch.Tensor) and isinstance(value, Pair) and not recorded.dtype.is_complex:
            return f"result {i} is recorded as {recorded.dtype} but computes a complex value"
    return ""


def same_metadata(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, device, shape, strides and storage offset, SymInts compared by expression."""
    return (a.dtype == b.dtype and a.device == b.device and a.ndim == b.ndim
            and all(map(same_size, a.shape, b.shape)) and all(map(same_size, a.stride(), b.stride()))
            and same_size(a.storage_offset(), b.storage_offset()))


def _pair_fake(value: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
    """A fresh fake real tensor of shape S + [2] for a fake complex tensor of shape S, in its fake mode,
    on `device` (default: the complex tensor's)."""
    with value.fake_mode:
        return torch.empty([*value.shape, 2], dtype=real_dtype(value.dtype), device=device or value.device)


def _traced_input(value):
    """What a placeholder's meta["val"] is fed to the trace as: a custom object's (torchbind) real object,
    which make_fx fakifies itself (it refuses one fake already), else the value itself (a fake tensor, a
    SymInt, a constant input's Python value)."""
    if isinstance(value, CustomObjArgument) and value.fake_val is not None:
        return value.fake_val.real_obj
    return value


def rewrite(ep: torch.export.ExportedProgram, plan: Plan, speedups: bool = True) -> torch.export.ExportedProgram:
    """Trace the program through the rules into a new graph and rebuild the ExportedProgram around it
    (`speedups`: see ReplaceComplexWithRealPass)."""
    placeholders = list(ep.graph.find_nodes(op="placeholder"))
    complex_placeholders = {p.name for p in placeholders if holds_complex(p.meta.get("val"))}
    devices = constant_devices(ep, complex_placeholders)
    fake_args = [_pair_fake(p.meta["val"], devices.get(p.name)) if p.name in complex_placeholders
                 else _traced_input(p.meta["val"]) for p in placeholders]

    written, state_returned = mutation_targets(ep), written_state_returned(ep)

    def run(*args):
        outputs = _PairInterpreter(ep.graph_module, plan, complex_placeholders, speedups).run(*args)
        outputs = [as_written_into(o, written[i] in complex_placeholders) if written[i] else o
                   for i, o in enumerate(outputs)]
        # A user output that returns written state is the state's new value, as ep.module() returns it.
        outputs = [o if state_returned[i] is None else outputs[state_returned[i]] for i, o in enumerate(outputs)]
        return [o.t if isinstance(o, Pair) else o for o in outputs]  # complex outputs leave as pairs

    # decomposition_table={}: torch 2.14+ make_fx, given none, rewrites detach to alias, which ReplayMode's
    # replayed calls would not (the two ways would differ); an explicit table keeps detach, as 2.11 and 2.13 do.
    with fx_traceback.preserve_node_meta(), shared_constants(), user_ranges(ep.range_constraints):
        gm = make_fx(run, decomposition_table={}, tracing_mode="symbolic", _allow_non_fake_inputs=True)(*fake_args)
    fused = fuse_windows(gm.graph)  # stft's window multiply into the kernel form's fft_rows (spectral/window.py)
    fused += fuse_products(gm.graph)  # a product before a kernel's c2r or c2c into it (spectral/product.py)
    fused += fuse_filters(gm, ep)  # a constant filter at a Bluestein length as one convolution (spectral/filter.py)
    if fused:
        gm.recompile()
    return rebuild_program(ep, gm, complex_placeholders, devices)
