"""Generate docs/ops.md, the list of ops ReplaceComplexWithRealPass rewrites, from the rule registry.

    python -m aotcuda.passes.complex_to_real.docs > docs/ops.md

tests/passes/complex_to_real/test_docs.py checks that the committed file is what this prints.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from aotcuda.passes.complex_to_real import coverage, no_rule
from aotcuda.passes.complex_to_real.lapack_kernels import lapack_section
from aotcuda.passes.complex_to_real.registry import RULES, RULES_OF_ABSENT_OPS, Rule, op_name, rule_for
from aotcuda.passes.complex_to_real.scan import REFUSAL_CHECKS
from aotcuda.passes.complex_to_real.spectral.plan import docs_section as fft_section

FAMILY_ORDER = ["creation", "conversion", "comparison", "elementwise", "elementary", "shape", "strided", "indexing",
                "reduction", "linalg", "linalg_embedding", "linalg_factors", "householder", "lu", "nn", "fft",
                "control_flow"]

HEADER = """# Ops ReplaceComplexWithRealPass rewrites

Generated from the rule registry by `python -m aotcuda.passes.complex_to_real.docs > docs/ops.md`;
do not edit by hand.

A complex tensor of shape S is rewritten as a real tensor of shape S + [2] (the layout of
`torch.view_as_real`; complex32 → float16, complex64 → float32, complex128 → float64). Every op below that
reads or writes a complex value is replaced by real math on that pair; an op on complex values that is not
listed makes the pass leave the whole program unchanged (and log why, or raise with `strict=True`).

Complex program inputs and outputs become pair inputs and outputs under the same names (dynamic dims kept;
`complex_boundary(ep)` says which, and `aotcuda.load` adapts them with zero-copy views). Complex parameters,
buffers and constants become pair state under the same names; a complex buffer mutated in place stays a
mutated (pair) buffer (written with a real value, it gets `(value, 0)`, as copy_ does). complex32 ops that
compute (elementwise, elementary functions, reductions, matrix products, polar, index_add and scatter_add) run
in float32 and round once to float16, as eager does. Every result is laid out as eager lays out the value it
replaces (the complex strides ×2, pair dim last), so views, `as_strided` and stride reads after it see eager's
layout; where a rule's natural layout differs (the FFT rules), the result is copied into eager's.

The same rules rewrite the other spellings of these ops (registry.rule_for; the ExecuTorch ones once
aotcuda.executorch, which adds its dialect, is imported): ExecuTorch's Edge-dialect ops
(`exir_ops.edge.aten.*`, by the overload their schema names), the `*_copy` form of every view listed
(`permute_copy`, `view_as_complex_copy`, …: the view's rule, into a fresh contiguous tensor), and ExecuTorch's
dim-order ops (`_clone_dim_order`, `_to_dim_order_copy`, `_empty_dim_order`: clone, `_to_copy`, empty).
"""


def _rows(rules: list[Rule]) -> list[str]:
    by_fn: dict[object, list[Rule]] = defaultdict(list)
    for rule in rules:
        by_fn[rule.fn].append(rule)
    rows = []
    for fn_rules in by_fn.values():
        ops = ", ".join(f"`{op_name(r.op)}`" for r in fn_rules)
        summary = fn_rules[0].summary.replace("|", "\\|")
        rows.append(f"| {ops} | {summary} |")
    return rows


def _first_line(check) -> str:
    """A refusal check's docstring, first line: what the user wrote that is refused, in public terms
    (`z ** p` with a complex p), never the check's function name, which means nothing to a reader."""
    doc = (check.__doc__ or "").strip()
    if not doc:
        raise ValueError(f"refusal check {check.__module__}.{check.__qualname__} has no docstring: give it one "
                         "line naming what a user writes that it refuses (e.g. `torch.pow(z, p)` with a complex p)")
    return doc.splitlines()[0]


def _refusals() -> list[str]:
    lines = [f"- {_first_line(check)}" for check in REFUSAL_CHECKS]
    by_check: dict[object, list[Rule]] = defaultdict(list)
    for rule in RULES.values():
        if rule.refuses is not None:
            by_check[rule.refuses].append(rule)
    for check, rules in by_check.items():
        ops = ", ".join(f"`{op_name(r.op)}`" for r in sorted(rules, key=lambda r: op_name(r.op)))
        lines.append(f"- {ops}: {_first_line(check)}")
    for op, why in sorted(no_rule.NO_RULE.items(), key=lambda item: op_name(item[0])):
        lines.append(f"- `{op_name(op)}` (no rule): {why}.")
    return lines


def _status(name: str, table) -> str:
    """"rule", "decomposed" (export's table or a CompositeImplicit kernel removes it before the pass) or "missing",
    for "aten.op.overload" or a packet name "op" (any overload of it)."""
    parts = name.split(".")
    packet = getattr(torch.ops.aten, parts[1] if len(parts) == 3 else parts[0], None)
    if packet is None:  # an op this torch lacks: covered where aotcuda has its rule for the torches that have it
        return "rule" if name in RULES_OF_ABSENT_OPS else "missing"
    overloads = [getattr(packet, parts[2])] if len(parts) == 3 else [getattr(packet, o) for o in packet.overloads()]
    if any(rule_for(op) is not None for op in overloads):
        return "rule"
    implicit = lambda op: torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")  # noqa: E731
    if any(f"aten.{op._schema.name.split('::')[1]}.{op._overloadname}" in table or implicit(op) for op in overloads):
        return "decomposed"
    return "missing"


def _coverage_line(title: str, names, table) -> str:
    statuses = {name: _status(name, table) for name in names}
    missing = sorted(n for n, s in statuses.items() if s == "missing")
    rules = sum(s == "rule" for s in statuses.values())
    line = (f"- **{title}**: {len(names) - len(missing)} of {len(names)} covered ({rules} by a rule, "
            f"{len(names) - len(missing) - rules} decomposed by export before the pass)")
    return line + (": not covered: " + ", ".join(f"`{n}`" for n in missing) if missing else ".")


def coverage_section() -> str:
    """docs/ops.md's coverage section: the OpInfo walk's overloads and the anchors' lists (coverage.py)."""
    table = coverage.DECOMPOSED_BEFORE_THE_PASS  # names of overloads lower()'s decompositions remove
    lines = ["## Coverage\n",
             "Against the complex ATen overloads left after lower()'s decompositions by PyTorch's OpInfo samples "
             f"(`python -m aotcuda.lowering.opinfo`; {len(coverage.WALKED)} entries {coverage.OPINFO_WALK_NOTE}), "
             "Torch-TensorRT's complex rewriter and torch 2.13's ComplexTensor (coverage.py says what each list holds):\n",
             _coverage_line("OpInfo", sorted(coverage.OPINFO_OVERLOADS), table),
             _coverage_line("Torch-TensorRT", coverage.TORCH_TENSORRT_OPS, table),
             _coverage_line("ComplexTensor", coverage.COMPLEX_TENSOR_OPS, table), "",
             "Where a rule cannot match eager bit for bit: `prod` and `cumprod` multiply in a tree (log2 n rounds), "
             "eager in a loop, so they differ by rounding (about log2 n ulp against eager's n; checked at the dtype's "
             "tolerance on OpInfo's samples); `var`, `linalg_vector_norm` and the `add*mm` forms reduce in torch's own "
             "real kernels, whose order differs from its complex ones by rounding only. The elementary functions "
             "(elementary family) are checked against the true value on the special-value table, where glibc "
             "(eager's) loses digits.\n"]
    return "\n".join(lines)


def render() -> str:
    """The text of docs/ops.md."""
    rule_for(None)  # imports the rule modules, filling RULES
    families: dict[str, list[Rule]] = defaultdict(list)
    for rule in [*RULES.values(), *RULES_OF_ABSENT_OPS.values()]:  # the same text on every supported torch
        families[rule.family].append(rule)
    parts = [HEADER]
    for family in sorted(families, key=lambda f: (FAMILY_ORDER.index(f) if f in FAMILY_ORDER else 99, f)):
        parts.append(f"## {family}\n\n| op overloads | rewritten as |\n|---|---|")
        parts.append("\n".join(_rows(sorted(families[family], key=lambda r: op_name(r.op)))) + "\n")
    parts.append(lapack_section())
    parts.append(fft_section())
    parts.append("## Refused (the program is left unchanged)\n")
    parts.append("\n".join(_refusals()) + "\n")
    parts.append("Any other op that reads or writes a complex value is refused the same way.\n")
    parts.append(coverage_section())
    return "\n".join(parts)


if __name__ == "__main__":
    print(render(), end="")
