"""Whether a program mixes the rows of its dim 0: probed once at lowering, by running it in eager on the example inputs.

Why: serving batches the requests of a program whose inputs and outputs share one dynamic dim 0 (serving/batching.py),
which assumes that an output's row is computed from the same row of the inputs alone. A program that mixes rows
(``x - x.mean(0)``, ``x.cumsum(0)``, ``x.flip(0)``, attention across dim 0) passed every shape check and was batched:
alice's answer was computed from mallory's rows too, and told her their values (break40, 2026-12-07: ``x - x.mean(0)``
answered alice's row [1, 2, 3] alone with zeros, and, batched with mallory's [100, 200, 300] with [-49.5, -99, -148.5],
from which mallory's row follows). The shapes cannot tell, so the program is run on the example inputs, then with one
row of every input changed (up to four rows spread over the batch, each in three ways): an output whose other rows
changed with it reads across rows.
A probe sees the mixes the example's values reach; it only ever refuses batching, never allows what the other checks
refuse, and a program it cannot run is recorded as not probed (None).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from aotcuda.switches import flag

logger = logging.getLogger("aotcuda")
# What counts as a change of an output's row: more than rounding (a reduction's order), far less than the change made
# (each element of the changed row doubled and moved by 1), which a mean over 64 rows still passes on to every row
# (float32). That tolerance compares runs of one batch size whose kernels repeat themselves exactly; runs that may
# round otherwise (the probe's run of one row fewer, kernels chosen by batch size; a program whose repeated run
# differs, CUDA's atomics) allow an output of fewer bits _ULPS of its own eps (review40a: a bfloat16 or float16
# program rounds a row one ulp apart between batch sizes, about 4e-3 of it in bfloat16, which 1e-4 took for mixed rows
# and refused batching an honest model), relative to each element and, for elements near 0 (a difference of larger
# values), to the output's largest magnitude.
_RTOL, _ATOL = 1e-4, 1e-5
_ULPS = 2  # of finfo.eps: 2 to 4 ulps of a value, an ulp being eps/2 to eps of it
_TF32_EPS = 2.0 ** -10


def rows_mixed(ep: ExportedProgram, args: tuple, kwargs: dict) -> bool | None:
    """True when, along the dynamic dim 0 every input and output shares (the dim serving batches), an output's row
    changed with another row of the inputs (up to _MOST_ROWS of their rows, each changed in _CHANGES' ways), False when
    none did, None when not probed: the inputs do not share a dynamic dim 0, the program ran on no changed example,
    no change changed an input (rows all alike), or AOTCUDA_BATCH_ROWS_PROBE=0 (probe_rows says which)."""
    return probe_rows(ep, args, kwargs).mixed


@dataclass(frozen=True)
class RowsProbe:
    """What the probe found: ``mixed`` as rows_mixed says, and, where it is None although serving would batch the
    program's shapes, ``not_probed``: why (lower() warns with it, the signature keeps it for `aotcuda inspect`)."""

    mixed: bool | None
    not_probed: str | None = None


def not_probed_warning(reason: str) -> str:
    """lower()'s warning for a program whose rows were not probed: serving batches it unchecked."""
    return (f"aotcuda: whether an output row depends on other rows of the batch dim was not probed ({reason}); "
            "serving batches this program unchecked: if an output row may depend on other rows (a mean, a sum or an "
            "attention over dim 0), serve it with --max-batch-size 1")


def probe_rows(ep: ExportedProgram, args: tuple, kwargs: dict) -> RowsProbe:
    """rows_mixed, with why not probed. A change that makes the program fail (an index out of range) skips that
    change alone: the others still say what they see; not probed only where no change ran."""
    rows = _shared_rows(ep, args, kwargs)
    if rows is None:
        return RowsProbe(None)  # serving does not batch these shapes: nothing to probe or to say
    if not flag("AOTCUDA_BATCH_ROWS_PROBE"):  # the probe's forwards cost too much on a large model
        return RowsProbe(None, "AOTCUDA_BATCH_ROWS_PROBE=0")
    try:
        # each run from one seed, the caller's generators left as they were: a dropout or a torch.randn in forward
        # draws the same numbers in every run, so that only the changed row can change the outputs
        with torch.no_grad(), torch.random.fork_rng(devices=_seeded_devices()):
            module = _runnable_module(ep)
            args, kwargs = _with_rows(*_as_the_program_takes(ep, args, kwargs), rows)
            rows = max(rows, 2)
            _seed(0)
            base = pytree.tree_leaves(module(*_copies(args), **_copies(kwargs)))
            # a run that repeats itself exactly (the CPU's kernels) shows a change of any size beyond _RTOL; one that
            # does not (CUDA's atomics) is compared within its dtype's rounding, as rows of another batch size are
            _seed(0)
            again = pytree.tree_leaves(module(*_copies(args), **_copies(kwargs)))
            exact = [_equal(a, b) for a, b in zip(base, again)]
            on_cpu = all(tensor.device.type == "cpu" for tensor in pytree.tree_leaves((args, kwargs))
                         if isinstance(tensor, torch.Tensor))
            failed = ran = 0
            for row in _probed_rows(rows):
                for how in (_CHANGES if on_cpu else _IN_DOMAIN_CHANGES):
                    inputs = _changed((args, kwargs), row, how)
                    if _alike(inputs, (args, kwargs)):
                        continue  # a change that changed nothing (an integer row under "scale"): no run to spend
                    _seed(0)
                    try:
                        changed = pytree.tree_leaves(module(*inputs[0], **inputs[1]))
                    except Exception as exc:  # noqa: BLE001 - a change the program cannot take: the others can
                        failed += 1
                        logger.debug("aotcuda: the batch-rows probe's change %s of row %d failed (%s: %s)", how, row,
                                     type(exc).__name__, exc)
                        continue
                    ran += 1
                    if any(_other_rows_differ(a, b, row, rows, rounding=not same) for a, b, same
                           in zip(base, changed, exact) if same or _rounds(a)):
                        return RowsProbe(True)
            if not ran and not failed:
                return RowsProbe(None, "every row of the example inputs is alike (integer or bool rows of equal "
                                       "values): no change of a row changed an input; lower it with example rows "
                                       "that differ")
            if not ran:
                return RowsProbe(None, f"the program failed on every changed example ({failed} runs)")
            return RowsProbe(_rows_move_with_their_place(module, args, kwargs, base, rows, exact))
    except Exception as exc:  # noqa: BLE001 - a probe, not a check of the program: not run is "not probed"
        logger.debug("aotcuda: the batch-rows probe did not run (%s: %s)", type(exc).__name__, exc)
        return RowsProbe(None, f"the program did not run in eager on the example inputs: {type(exc).__name__}: "
                               f"{str(exc)[:200]}")


def _rows_move_with_their_place(module, args: tuple, kwargs: dict, base: list, rows: int, exact: list[bool]) -> bool:
    """Whether the rows after the first, run without it, differ from the same rows of the whole run: an output row that
    depends on its place or on how many rows there are (``x + torch.arange(x.shape[0])[:, None]``, ``x * len(x)``), which
    changing values cannot show. Not asked (False) of a program that draws random numbers (another seed changes its
    outputs: its draws land on other rows when the rows move), nor where the program takes no batch one row smaller."""
    _seed(1)
    again = pytree.tree_leaves(module(*_copies(args), **_copies(kwargs)))
    # within a rounding where the same seed's run did not repeat itself (review40d: one ulp of CUDA's atomics in
    # bfloat16 was taken for random draws, and x * len(x) went unasked)
    if any(_other_rows_differ(a, b, None, rows, rounding=not same) for a, b, same in zip(base, again, exact)
           if same or _rounds(a)):
        return False
    fewer = pytree.tree_map_only(torch.Tensor, lambda t: t[1:].clone() if t.dim() else t, (args, kwargs))
    _seed(0)
    try:
        moved = pytree.tree_leaves(module(*fewer[0], **fewer[1]))
    except Exception:  # noqa: BLE001 - a size below the batch dim's min: the value probes said what they saw
        return False
    return any(isinstance(a, torch.Tensor) and a.dim() and a.shape[0] == rows and (same or _rounds(a))
               and _other_rows_differ(a[1:], b, None, rows - 1, rounding=True) for a, b, same in zip(base, moved, exact))


def _rounds(output) -> bool:
    """Whether an output that did not repeat itself can still be compared, within a rounding: a floating or complex
    one; an integer one that differs between runs of one seed (an argmax over a near tie, under CUDA's atomics) says
    nothing of rows (review40d: it had an honest program recorded as mixing)."""
    return isinstance(output, torch.Tensor) and (output.is_floating_point() or output.is_complex())


def _equal(a, b) -> bool:
    """Whether two runs' outputs are the same, bit for bit but for nan's payload."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or (
            (a.is_floating_point() or a.is_complex()) and torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all()))
    return True


def _seed(seed: int) -> None:
    """Seed the generators a run draws from: the CPU's, and CUDA's only where CUDA is initialized (fork_rng restores
    those). Not torch.manual_seed: on a host where CUDA is not initialized it queues a seed of every CUDA generator for
    CUDA's first use, which fork_rng does not undo: after lower(device="cpu"), the caller's first CUDA draw came from
    seed 0 instead of their own seed."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        for device in _seeded_devices():
            torch.cuda.default_generators[device].manual_seed(seed)


def _seeded_devices() -> list[int]:
    """The CUDA devices whose generators _seed sets, each restored after the probe; named, since fork_rng warns
    where it must guess them on a host of several GPUs."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []


def _shared_rows(ep: ExportedProgram, args: tuple, kwargs: dict) -> int | None:
    """The example's dim-0 size where every tensor input's dim 0 is one symbol of the program (None otherwise)."""
    user_inputs = set(ep.graph_signature.user_inputs)
    symbols = set()
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs:
            value = node.meta.get("val")
            if isinstance(value, torch.Tensor):
                if value.dim() == 0 or not isinstance(value.shape[0], torch.SymInt):
                    return None
                symbols.add(str(value.shape[0]))
    tensors = [leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
    sizes = {tensor.shape[0] for tensor in tensors if tensor.dim()}
    if len(symbols) != 1 or len(sizes) != 1 or not _outputs_have_the_dim(ep, symbols.pop()):
        return None
    return sizes.pop()


def _outputs_have_the_dim(ep: ExportedProgram, symbol: str) -> bool:
    """Whether every tensor the program returns has ``symbol`` as its dim 0, as serving wants of a program it batches
    (serving/batching.py): of another program (``x.sum(0)``) the probe has nothing to say (review40d: lower() warned
    that serving batches it unchecked, where serving refuses it by its shapes)."""
    user_outputs = set(ep.graph_signature.user_outputs)
    output = next(node for node in ep.graph.nodes if node.op == "output")
    for node in pytree.tree_leaves(output.args):
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) and node.name in user_outputs else None
        if isinstance(value, torch.Tensor) and (value.dim() == 0 or str(value.shape[0]) != symbol):
            return False
    return True


def _runnable_module(ep: ExportedProgram) -> torch.nn.Module:
    """``ep.module()`` with its inputs' placeholders given names of the probe's own.

    Why (review41c, torch 2.13): the module's generated code renames a placeholder named after a builtin by an
    assignment (``input_1 = input``), which overwrote another argument named ``input_1``: ``forward(self, input,
    input_1)`` returning ``input + (input_1.sum(0) - input.sum(0))`` ran as ``input``, and the probe said the rows
    stay apart. The compiled program is not affected (Inductor reads the graph, not this code)."""
    module = ep.module()
    if not isinstance(module, torch.fx.GraphModule):
        return module
    for index, node in enumerate(module.graph.find_nodes(op="placeholder")):
        rename = getattr(node, "_rename", None)  # torch.fx's, private: where it is missing the names stay
        if rename is not None:
            rename(f"probed_input_{index}")
    module.recompile()
    return module


def _as_the_program_takes(ep: ExportedProgram, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The example inputs as the lowered program takes them: a complex input as its real pairs (view_as_real) where
    ReplaceComplexWithRealPass rewrote the program (its inputs are then real pairs with a trailing dim of 2)."""
    user_inputs = set(ep.graph_signature.user_inputs)
    if any(node.op == "placeholder" and node.name in user_inputs and isinstance(node.meta.get("val"), torch.Tensor)
           and node.meta["val"].is_complex() for node in ep.graph.nodes):
        return args, kwargs  # the pass left the program complex: it takes the inputs as they are
    return pytree.tree_map_only(torch.Tensor, lambda t: torch.view_as_real(t.resolve_conj()).clone() if t.is_complex()
                                else t, (args, kwargs))


def _with_rows(args: tuple, kwargs: dict, rows: int) -> tuple[tuple, dict]:
    """The example inputs with at least two rows: an example of one row is repeated (a second row as valid as the
    first, integer and index inputs too)."""
    if rows >= 2:
        return args, kwargs
    return pytree.tree_map_only(torch.Tensor, lambda t: torch.cat([t, t]) if t.dim() else t, (args, kwargs))


def _copies(tree):
    return pytree.tree_map_only(torch.Tensor, torch.Tensor.clone, tree)  # the program may write its inputs


# How a row is changed, in turn: first to another row's values (in the data's domain: a coordinate that indexes stays
# in range, as an integer input's does), then each floating element doubled and moved by 1 (zeros too), then each
# multiplied by 1000 (past a threshold: a mix only large values reach, torch.where(x.abs().amax() > 10, ...); and -1,
# which x*2+1 leaves as it is). Each of up to _MOST_ROWS rows, spread over the batch: a mix that depends on which row
# changes (a capacity of top-1 routing counted by cumsum along dim 0) is seen from more places.
_CHANGES = ("copy", "affine", "scale")
# On CUDA, a row of another example row's values, the same row for every input, alone: the other changes can make an
# index out of range (a user id rolled into an item's column, a coordinate doubled), which the CPU raises as an
# IndexError the probe skips, and CUDA as a device-side assert that ends the process's CUDA context (review40d).
_IN_DOMAIN_CHANGES = ("whole row",)
# With _CHANGES: at most 12 changed runs, and 4 more (the base, again, seed 1, one row fewer), ~3x the CPU time of the
# two-row probe on a 6-layer transformer at (8, 128, 256); 8 rows (28 runs) cost ~5x (docs/reliability.md). On CUDA
# (_IN_DOMAIN_CHANGES): at most 4 changed runs, 8 in all.
_MOST_ROWS = 4


def _probed_rows(rows: int) -> list[int]:
    """Up to _MOST_ROWS of the example's rows, the first and the last among them, the others spread between."""
    if rows <= _MOST_ROWS:
        return list(range(rows))
    return sorted({round(index * (rows - 1) / (_MOST_ROWS - 1)) for index in range(_MOST_ROWS)})


def _changed(tree, row: int, how: str):
    """A copy with ``row`` of every input changed ``how`` (_CHANGES): "copy", the row replaced by the next row's values
    that differ from its own, which are as valid for it (an index, a mask, a length, a coordinate) as its own, so that
    a program cannot fail on them; "affine", a floating (or complex) row's each element doubled and moved by 1, an
    integer or bool row's own elements rolled by one along the last dim (equal rows, ``tokenizer(["hello"] * 4)``,
    still change); "scale", a floating row multiplied by 1000 (an integer or bool one left as it is)."""
    if how == "whole row":
        return _whole_row_copied(tree, row)

    def change(tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.clone()
        if not tensor.dim():
            return tensor
        if how != "copy" and (tensor.is_floating_point() or tensor.is_complex()):
            tensor[row] = tensor[row] * 2 + 1 if how == "affine" else tensor[row] * 1000
        elif how == "copy":
            other = next((tensor[(row + step) % len(tensor)] for step in range(1, len(tensor))
                          if not torch.equal(tensor[(row + step) % len(tensor)], tensor[row])), None)
            if other is not None:
                tensor[row] = other.clone()
        elif how == "affine" and tensor.dim() > 1:
            tensor[row] = tensor[row].roll(1, -1)  # its own values, as valid for it: tokens in another order
        return tensor

    return pytree.tree_map_only(torch.Tensor, change, tree)


def _whole_row_copied(tree, row: int):
    """A copy with ``row`` of every input replaced by one other row of the example, the same for every input (the next
    one where some input differs): a row of the example as a whole, every value in its domain and consistent with the
    others (an id and its length, a coordinate and its table); the tree itself where every row is alike."""
    tensors = [leaf for leaf in pytree.tree_leaves(tree) if isinstance(leaf, torch.Tensor) and leaf.dim()]
    count = len(tensors[0]) if tensors else 0
    source = next(((row + step) % count for step in range(1, count)
                   if any(not torch.equal(t[(row + step) % count], t[row]) for t in tensors)), None)
    if source is None:
        return tree

    def copied(tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.clone()
        if tensor.dim():
            tensor[row] = tensor[source].clone()
        return tensor

    return pytree.tree_map_only(torch.Tensor, copied, tree)


def _alike(tree, other) -> bool:
    """Whether two trees of inputs hold equal tensors (a change that changed nothing)."""
    return all(not isinstance(a, torch.Tensor) or torch.equal(a, b)
               for a, b in zip(pytree.tree_leaves(tree), pytree.tree_leaves(other)))


def _other_rows_differ(a, b, row: int | None, rows: int, rounding: bool = False) -> bool:
    """Whether output ``a`` and ``b`` (the run with ``row`` changed) differ in a row other than ``row`` (None: any):
    beyond _RTOL and _ATOL, or with ``rounding`` (runs whose kernels may round otherwise: another batch size, atomics)
    beyond a rounding of the output's dtype (``_tolerances``)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.dim() == 0 or a.shape != b.shape \
            or a.shape[0] != rows:
        return False
    keep = [index for index in range(rows) if index != row]  # all of them for row None
    first, second = a[keep], b[keep]
    if first.is_complex():
        first, second = torch.view_as_real(first), torch.view_as_real(second)
    if first.is_floating_point():  # within a rounding: a kernel that adds in another order each run (CUDA's atomics)
        rtol, atol = _tolerances(first) if rounding else (_RTOL, _ATOL)
        return not bool(torch.isclose(first, second, rtol=rtol, atol=atol, equal_nan=True).all())
    return not torch.equal(first, second)


def _tolerances(output: torch.Tensor) -> tuple[float, float]:
    """(rtol, atol) of a rounding for ``output``'s dtype: _RTOL and _ATOL, or _ULPS of its eps where that is more (a
    bfloat16 or float16 output, a float32 one on CUDA where TF32 is allowed; float32's own 2.4e-7 is less), atol
    scaled by the output's largest finite magnitude (a rounding of a sum is one of its terms' size, not of the small
    result's)."""
    eps = torch.finfo(output.dtype).eps
    if output.dtype == torch.float32 and output.is_cuda and (torch.backends.cuda.matmul.allow_tf32
                                                             or torch.backends.cudnn.allow_tf32):
        eps = _TF32_EPS  # matmuls and convolutions of float32 in TF32 (cuDNN's default): 10 bits of mantissa
    finite = output[torch.isfinite(output)]
    scale = max(float(finite.abs().max()), 1.0) if finite.numel() else 1.0
    return max(_RTOL, _ULPS * eps), max(_ATOL, _ULPS * eps * scale)
