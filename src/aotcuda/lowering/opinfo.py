"""The complex ops PyTorch's OpInfo database exercises, as the ATen overloads they leave after lower()'s decompositions.

    python -m aotcuda.lowering.opinfo [--dtype complex64|complex128] [--op NAME ...]

Walks `torch.testing._internal.common_methods_invocations.op_db` for every op whose dtypes include
complex64 or complex128, exports each of its sample inputs (a tiny module calling the op; complex tensors
enter as view_as_real pairs, as a program's complex inputs do) with torch.export, applies
`run_decompositions(decomposition_table())` as lower() does, and prints every ATen overload that still
reads or writes a complex value (scan.touches_complex), each marked with whether the rule table covers it.
The printed list is what `coverage.OPINFO_OVERLOADS` holds (docs/ops.md's coverage section reads it);
tests/passes/complex_to_real/test_opinfo.py runs the same samples through the pass against eager.

OpInfo lives in torch's test package (torch.testing._internal), not a public API: it is imported only here,
when asked, never by the pass.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from collections.abc import Callable, Iterator

import torch
from torch.utils import _pytree as pytree

COMPLEX_DTYPES = (torch.complex64, torch.complex128)

# OpInfo entries not walked, and why (each a class of op, not a failure of ours).
SKIPPED = {
    # random: each call draws fresh values, eager and the program cannot agree
    "bernoulli", "multinomial", "normal", "rand_like", "randint_like", "randn_like", "uniform", "cauchy",
    "exponential", "geometric", "log_normal", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.feature_alpha_dropout_with_train",
    # uninitialised memory: its values are unspecified
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
}


def complex_ops(names: set[str] | None = None) -> list:
    """The OpInfo entries whose dtypes include complex64 or complex128 (on the CPU), minus SKIPPED."""
    from torch.testing._internal.common_methods_invocations import op_db

    found = []
    for info in op_db:
        if names is not None and info.name not in names and _full_name(info) not in names:
            continue
        if _full_name(info) in SKIPPED or info.name in SKIPPED:
            continue
        if any(dtype in info.supported_dtypes("cpu") for dtype in COMPLEX_DTYPES):
            found.append(info)
    return found


def _full_name(info) -> str:
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


def full_name(info) -> str:
    """The OpInfo's name with its variant ("linalg.norm.subgradients_at_zero")."""
    return _full_name(info)


@dataclasses.dataclass
class SampleProgram:
    """One OpInfo sample as a program: `module(*inputs)` calls the op on it; complex tensors enter as pairs."""

    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]


class _CallSample(torch.nn.Module):
    """forward(*tensors) = op(sample) with the sample's tensors replaced by `tensors` (complex ones arrive as
    view_as_real pairs and are made complex again); complex results leave as view_as_real pairs."""

    def __init__(self, op: Callable, spec, leaves: list, tensor_slots: list[int], complex_slots: set[int]):
        super().__init__()
        self.op, self.spec, self.leaves = op, spec, leaves
        self.tensor_slots, self.complex_slots = tensor_slots, complex_slots

    def forward(self, *tensors):
        leaves = list(self.leaves)
        for slot, t in zip(self.tensor_slots, tensors):
            leaves[slot] = torch.view_as_complex(t) if slot in self.complex_slots else t
        sample_input, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        out = self.op(sample_input, *args, **kwargs)
        return pytree.tree_map(_as_pair, out)


def _as_pair(value):
    if isinstance(value, torch.Tensor) and value.is_complex():
        return torch.view_as_real(value.resolve_conj().resolve_neg())
    return value


def sample_programs(info, dtype: torch.dtype, limit: int | None = None) -> Iterator[SampleProgram]:
    """Each sample of `info` in `dtype` as a program (at most `limit`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = list(info.sample_inputs("cpu", dtype, requires_grad=False))
    for sample in samples[:limit]:
        leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        slots = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        if any(leaves[i].layout != torch.strided for i in slots):  # sparse samples: programs take dense tensors
            continue
        complex_slots = {i for i in slots if leaves[i].is_complex()}
        inputs = tuple(torch.view_as_real(leaves[i].resolve_conj().resolve_neg()).clone() if i in complex_slots
                       else leaves[i].clone() for i in slots)
        yield SampleProgram(_CallSample(info.op, spec, leaves, slots, complex_slots), inputs)


class _CallSamples(torch.nn.Module):
    """Several samples as one program: one export for all (an export costs a second or more, a sample
    milliseconds), each sample's tensors in turn."""

    def __init__(self, programs: list[SampleProgram]):
        super().__init__()
        self.samples = torch.nn.ModuleList(p.module for p in programs)
        self.counts = [len(p.inputs) for p in programs]

    def forward(self, *tensors):
        outs, start = [], 0
        for sample, count in zip(self.samples, self.counts):
            outs.append(sample(*tensors[start:start + count]))
            start += count
        return outs


def bundle(programs: list[SampleProgram]) -> SampleProgram:
    """The samples as one program whose outputs are each sample's outputs, in order."""
    return SampleProgram(_CallSamples(programs), tuple(t for p in programs for t in p.inputs))


def export(program: SampleProgram) -> torch.export.ExportedProgram:
    """The sample exported and decomposed as lower() does it."""
    from aotcuda.lowering.decompositions import decomposition_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(program.module, program.inputs, strict=False)
        return ep.run_decompositions(decomposition_table())


def complex_overloads(ep: torch.export.ExportedProgram) -> set[str]:
    """The ops of `ep` (subgraphs included) that read or write a complex value, by name."""
    from aotcuda.passes.complex_to_real.registry import op_name
    from aotcuda.passes.complex_to_real.scan import PASS_THROUGH, _call_nodes_deep, _reads_or_writes_complex

    return {op_name(n.target) for n in _call_nodes_deep(ep.graph_module)
            if n.target not in PASS_THROUGH and _reads_or_writes_complex(n)}


@dataclasses.dataclass
class Walk:
    """What the walk found: overload → the OpInfo names that use it; names whose samples did not export."""

    overloads: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    not_exported: dict[str, str] = dataclasses.field(default_factory=dict)


def walk(infos: list, dtypes=COMPLEX_DTYPES, limit: int | None = None, log=None) -> Walk:
    """Export every sample of every op in each dtype it supports; collect the complex overloads."""
    found = Walk()
    for info in infos:
        name = full_name(info)
        for dtype in dtypes:
            if dtype not in info.supported_dtypes("cpu"):
                continue
            programs = list(sample_programs(info, dtype, limit))
            try:  # all samples in one export; one by one where that fails (to keep those that export)
                eps = [export(bundle(programs))]
            except Exception:  # noqa: BLE001
                eps = []
                for program in programs:
                    try:
                        eps.append(export(program))
                    except Exception as error:  # noqa: BLE001  (a sample export cannot take: recorded, shown)
                        found.not_exported.setdefault(name, _first_line(error))
            for ep in eps:
                for overload in complex_overloads(ep):
                    found.overloads.setdefault(overload, set()).add(name)
        if log:
            log(name, sorted(o for o, names in found.overloads.items() if name in names))
    return found


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:120]}" if text else type(error).__name__


def main(argv: list[str] | None = None) -> None:
    from aotcuda.passes.complex_to_real.registry import RULES, op_name, rule_for

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=[str(d).split(".")[-1] for d in COMPLEX_DTYPES], action="append")
    parser.add_argument("--op", action="append", help="only these OpInfo names")
    parser.add_argument("--limit", type=int, default=None, help="samples per op and dtype")
    parser.add_argument("--verbose", action="store_true", help="each op and its overloads on stderr as it goes")
    parser.add_argument("--part", default="0/1", help="K/N: only the K-th of N equal parts of the op list")
    options = parser.parse_args(argv)
    dtypes = [getattr(torch, d) for d in options.dtype] if options.dtype else COMPLEX_DTYPES
    infos = complex_ops(set(options.op) if options.op else None)
    part, parts = map(int, options.part.split("/"))
    infos = infos[part::parts]
    log = (lambda name, overloads: print(f"# {name}\t{' '.join(overloads)}", file=sys.stderr, flush=True)) \
        if options.verbose else None
    found = walk(infos, dtypes, options.limit, log)
    rule_for(None)
    covered = {op_name(op) for op in RULES}
    print(f"# {len(infos)} OpInfo entries with complex dtypes; {len(found.overloads)} complex ATen overloads, "
          f"{sum(o in covered for o in found.overloads)} with a rule")
    for overload in sorted(found.overloads):
        mark = "covered" if overload in covered else "MISSING"
        print(f"{overload}\t{mark}\t{', '.join(sorted(found.overloads[overload]))}")
    for name, why in sorted(found.not_exported.items()):
        print(f"# not exported: {name}: {why}")


if __name__ == "__main__":
    main()
