"""PyTorch's OpInfo samples through the pass, at the ExportedProgram level, against eager (no AOTI compile).

For every OpInfo entry whose complex overloads (coverage.OPINFO_OVERLOADS, from the walk in opinfo.py) all have a
rule, its samples (fresh random ones each run: OpInfo draws them) in complex64 and complex128 are exported as
lower() exports them, rewritten with strict=True, and the rewritten program's module compared with eager on the
same inputs. Entries share one export per group (an export costs about a second, a sample milliseconds).

Tolerances: relative 1e-5 for complex64, 1e-10 for complex128 (with an absolute floor at the same level
times the output's largest magnitude, for parts that cancel). Looser only where a comment says why.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch.utils import _pytree as pytree

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.lowering import opinfo
from aotcuda.passes.complex_to_real import coverage
from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes.complex_to_real.registry import rule_for

aten = torch.ops.aten

pytest.importorskip("expecttest")  # torch.testing._internal needs it (a test dependency)

SAMPLES_PER_DTYPE = 3
GROUP_SIZE = 12
RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
# prod and cumprod multiply in a tree, eager in a loop: up to log2 n more roundings per product, on samples of
# up to 5 factors of magnitude ~9 (cumprod of OpInfo's make_tensor samples); 4x the dtype's tolerance covers it.
LOOSER = {"prod": 4, "cumprod": 4}
# Samples the pass refuses, by entry and the op it refuses, each exported alone and checked to be refused (the pass
# rewrites a program only when it can rewrite all of it). tensor_split by a tensor of indices: export reads the
# indices with .item(), so each piece's storage offset is an unbacked symbol (u5) that export asserts >= 0 with
# sym_storage_offset. The pair's slice gets a fresh unbacked offset of its own (u35), which no expression relates
# to eager's u5: the rule cannot show the pair laid out as eager's tensor (its check against FFT-like layouts), and
# refuses. Only samples whose export has that op are expected refused; the entry's other samples are checked.
# Entries whose values are random draws (OpInfo's randn seeds torch's generator before each eager call, which the
# exported program does not): their results are compared by shape, dtype and finiteness here, their statistics
# against eager's in test_random.py.
RANDOM = {"randn"}
REFUSED = {"tensor_split": (aten.sym_storage_offset.default,
                            r"the pair's storage offset is \(u[0-9]+//2\) where eager's is u[0-9]+:")}
# Eigen- and singular vectors are unique only up to a phase each: only the values have a rule (linalg_factors.py),
# so the entries that read the vectors are refused at that op.
VECTORS = r"eigen- and singular vectors are unique only up to a phase each"
REFUSED.update({name: (aten._linalg_svd.default, VECTORS) for name in ("svd", "linalg.svd", "svd_lowrank",
                                                                       "pca_lowrank")})
REFUSED["linalg.eigh"] = (aten._linalg_eigh.default, VECTORS)


def _overload(name: str):
    """The overload named, or None where the installed torch has no such op (coverage.OPINFO_OVERLOADS is the walk
    on torch 2.13; torch 2.14 removed aten.cholesky, and with it its OpInfo entry: nothing to check there)."""
    namespace, op, overload = name.split(".")
    packet = getattr(getattr(torch.ops, namespace), op, None)
    return None if packet is None else getattr(packet, overload)


def _entries_with_rules() -> list[str]:
    names: dict[str, bool] = {}
    for overload, entries in coverage.OPINFO_OVERLOADS.items():
        op = _overload(overload)
        ok = op is not None and rule_for(op) is not None
        for entry in entries:
            names[entry] = names.get(entry, True) and ok
    return sorted(name for name, ok in names.items() if ok)


ENTRIES = _entries_with_rules()
GROUPS = [ENTRIES[i:i + GROUP_SIZE] for i in range(0, len(ENTRIES), GROUP_SIZE)]


def _close(got: torch.Tensor, expected: torch.Tensor, name: str) -> str | None:
    if name in RANDOM:
        same = got.shape == expected.shape and got.dtype == expected.dtype and bool(torch.isfinite(got).all())
        return None if same else f"{name}: {got.shape} {got.dtype} (finite: {torch.isfinite(got).all()}) against " \
                                 f"{expected.shape} {expected.dtype}"
    if expected.dtype == torch.bool or not expected.is_floating_point():
        return None if torch.equal(got, expected) else f"{name}: {got} != {expected}"
    rtol = RTOL.get(expected.dtype, 1e-3) * LOOSER.get(name.split(".")[0], 1)
    finite = expected[torch.isfinite(expected)]
    scale = finite.abs().max().item() if finite.numel() else 0.0
    try:
        torch.testing.assert_close(got, expected, rtol=rtol, atol=rtol * scale, equal_nan=True)
    except AssertionError as error:
        return f"{name}: {str(error).splitlines()[0]} ({str(error).splitlines()[-1]})"
    return None


def _refused_alone(program, name) -> bool:
    """Whether the sample is one REFUSED expects refused: then it is checked here, alone, to be refused at that op."""
    if name not in REFUSED:
        return False
    try:
        ep = opinfo.export(program)
    except Exception:  # noqa: BLE001  (export's limit, not the pass's: _exported leaves it out)
        return False
    op, reason = REFUSED[name]
    if not any(node.target is op for node in ep.graph.nodes):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UnsupportedComplexOpError, match=rf"cannot rewrite {re.escape(str(op))} .*{reason}"):
            ReplaceComplexWithRealPass(strict=True)(ep)
    return True


def _runs(program, ep) -> bool:
    """Whether the exported program, before the pass, runs on the sample's inputs."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep.module()(*program.inputs)
        return True
    except Exception:  # noqa: BLE001
        return False


def _exported(programs, owners):
    """The samples as one exported program; where torch.export cannot take one of them (a data-dependent size:
    tensor_split by a tensor), the group without the samples export refuses (as the walk leaves them out). So too
    the samples whose exported program fails on their own inputs before the pass: as_strided.partial_views reads
    past its input's storage (OpInfo's sample is a view into a larger base, a program input is not), and export
    bounds masked_select's count by the input's numel where a broadcast mask selects more (u0 <= 10 fails)."""
    try:
        program = opinfo.bundle(programs)
        ep = opinfo.export(program)
        if _runs(program, ep):
            return program, ep, owners
        raise RuntimeError("the exported program fails before the pass")
    except Exception:  # noqa: BLE001
        kept = []
        for p, owner in zip(programs, owners):
            try:
                if _runs(p, opinfo.export(p)):
                    kept.append((p, owner))
            except Exception:  # noqa: BLE001  (export's limit, not the pass's)
                pass
        program = opinfo.bundle([p for p, _ in kept])
        return program, opinfo.export(program), [owner for _, owner in kept]


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: f"{g[0]}..{g[-1]}")
def test_opinfo_samples_match_eager(group):
    infos = {opinfo.full_name(info): info for info in opinfo.complex_ops(set(group))}
    programs, owners = [], []
    for name in group:
        for dtype in opinfo.COMPLEX_DTYPES:
            if name in infos and dtype in infos[name].supported_dtypes("cpu"):
                for program in opinfo.sample_programs(infos[name], dtype, SAMPLES_PER_DTYPE):
                    if _refused_alone(program, name):
                        continue
                    programs.append(program)
                    owners.append(name)
    program, ep, owners = _exported(programs, owners)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new = ReplaceComplexWithRealPass(strict=True)(ep)
        expected = program.module(*program.inputs)
        got = new.module()(*program.inputs)
    found = []
    for name, e, g in zip(owners, expected, got):
        for e_leaf, g_leaf in zip(pytree.tree_leaves(e), pytree.tree_leaves(g)):
            if isinstance(e_leaf, torch.Tensor):
                problem = _close(g_leaf, e_leaf, name)
                if problem:
                    found.append(problem)
    assert not found, "\n".join(found)


def test_every_walked_overload_with_a_rule_is_exercised():
    """Each overload the walk found and a rule covers is run by some entry checked above (an entry is checked only
    when all its overloads have rules)."""
    exercised = {o for o, entries in coverage.OPINFO_OVERLOADS.items() if set(entries) & set(ENTRIES)}
    with_rules = {o for o in coverage.OPINFO_OVERLOADS if _overload(o) is not None and rule_for(_overload(o)) is not None}
    # used only by entries that also need an overload without a rule (scatter.src: scatter's samples also
    # reduce): checked by test_issue27_rules.py instead
    elsewhere = {"aten.scatter.src"}
    assert with_rules - elsewhere <= exercised, sorted(with_rules - elsewhere - exercised)
