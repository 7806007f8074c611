"""The A/B of the complex product's form: four ways to write mul_pairs, each lowered by aotcuda and timed.

    python3 benchmarks/scripts/pair_mul_forms.py [--forms flip,fold,flip-cat,unbind] [--json out.json]
        [--batch 4 --seq 4096 --heads 32 --head-dim 128]                  # CUDA: the A/B
    python3 benchmarks/scripts/pair_mul_forms.py --check                  # CPU, seconds: each form is right

The product (ar + i·ai)(br + i·bi) of pairs a[..., 2], b[..., 2] can be written several ways; Inductor
compiles them to kernels that differ by up to 1.4× on a memory-bound RoPE:

- ``flip`` (the product's form, passes/complex_to_real/pair_algebra.py ``mul_pairs``):
  a·br + flip(a, −1)·(−bi, bi), br broadcast as [..., 1], (−bi, bi) built in the kernel.
- ``fold``: ``flip``, and when b depends only on constants (parameters, buffers the program does not
  write, lifted constants: the rotation table of every RoPE) through ops with static shapes, its two
  tables are computed once at lowering time and stored as program constants, so the kernel reads two
  ready tables ((br, br) at the full pair shape, and (−bi, bi)) instead of building them from b. A table
  sliced or indexed by an input, or larger than the constants it came from, stays as ``flip``.
- ``flip-cat``: ``flip`` with (br, br) made by ``cat`` (the form measured first, benchmarks/NOTES.md).
- ``unbind``: the textbook form, four real products of the unbound parts, then stack.

Result, H200, torch 2.11, 2026-12-01, one run (RoPE of benchmarks/rope.py: B=4, S=4096, H=32, D=128,
bf16; raw rows: benchmarks/results/rope-h200-torch2.11-pair-mul.json, measured when the forms were an
environment switch, AOTCUDA_PAIR_MUL, of the product):

| form | median µs | vs. a device copy of the same bytes (134.1 µs) |
|---|---|---|
| ``flip`` | 144.4 | 1.077 |
| ``fold`` | 144.6 | 1.079 |
| ``flip-cat`` | 144.4 | 1.077 |
| ``unbind`` | 198.8 | 1.482 |

So the product keeps ``flip``: ``fold`` buys nothing (the kernel is bound by the q/k traffic, not by the
table arithmetic) and stores the tables twice over; ``flip-cat`` is no faster; ``unbind`` is 1.38× slower.

How a form is built (``product_form(form)``): mul_pairs is replaced, in every module of the complex pass
that holds it, by that form's; for ``fold``, FoldConstantProductTablesPass (below) is added after the
product's passes (``aotcuda.lowering.pipeline.passes``), so that the complex pass keeps the program's
state names as they are. Folding, step by step: the form tags b's two table nodes (``meta[TABLE_KEY]``);
the pass evaluates each tagged node whose every ancestor is a constant placeholder, replaces it by a
lifted constant and lets dead-code elimination drop the ops that made it. Each form is lowered in its own
child process (they compile side by side), then each package is timed with rope.py's timer.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import subprocess
import sys
import tempfile
import time
import warnings

import torch

BENCHMARKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, BENCHMARKS)

from aotcuda.lowering import pipeline  # noqa: E402
from aotcuda.passes.complex_to_real import pair_algebra  # noqa: E402
from aotcuda.passes.complex_to_real.boundary import STATE_KINDS, boundary_of, record_boundary  # noqa: E402
from aotcuda.passes.complex_to_real.pair import Pair, derived_once, rotate_sign  # noqa: E402
from aotcuda.passes.complex_to_real.torch_internals import (  # noqa: E402
    ConstantAttrMap,
    get_proxy_mode,
    get_proxy_slot,
    lift_constants_pass,
)
from aotcuda.passes.program_copy import with_graph  # noqa: E402
from aotcuda.passes.result import PassResult  # noqa: E402

FORMS = ("flip", "fold", "flip-cat", "unbind")
TABLE_KEY = "aotcuda_product_table"  # node meta: "re" for (br, br) / br, "im" for (−bi, bi)
_FOLDED_PREFIX = "_aotcuda_product_table"
_PRODUCT_MUL_PAIRS = pair_algebra.mul_pairs


# --- the forms -----------------------------------------------------------------------------------------

def mul_pairs_as(form: str):
    """mul_pairs written in ``form``: the product's own for ``flip``."""
    if form not in FORMS:
        raise ValueError(f"{form!r} is not a form of the complex product; use one of {', '.join(FORMS)}")
    if form == "flip":
        return _PRODUCT_MUL_PAIRS

    def mul_pairs(a: Pair, b: Pair) -> Pair:
        if form == "unbind":
            ar, ai = a.t.unbind(-1)
            br, bi = b.t.unbind(-1)
            return Pair(torch.stack([ar * br - ai * bi, ar * bi + ai * br], -1))
        b_re, b_im_signed = _factors(b, form)
        return Pair(a.t * b_re + a.t.flip(-1) * b_im_signed)

    return mul_pairs


def _factors(b: Pair, form: str) -> tuple[torch.Tensor, torch.Tensor]:
    """As pair_algebra.product_factors; (br, br) by cat for ``flip-cat``; tagged for folding for ``fold``."""
    def make():
        b_re = b.t[..., :1]
        if form == "flip-cat":
            b_re = torch.cat([b_re, b_re], -1)
        b_im_signed = b.t[..., 1:] * rotate_sign(b.dtype, b.t.device)
        if form == "fold":
            _tag_table(b_re, "re")
            _tag_table(b_im_signed, "im")
        return b_re, b_im_signed

    return derived_once(b.t, f"pair_mul_forms_{form}", make)


@contextlib.contextmanager
def product_form(form: str):
    """Lowering (``aotcuda.lower``, ``pipeline.passes()``) writes complex products in ``form`` inside."""
    from aotcuda.passes.complex_to_real import rules  # noqa: F401  (the rule modules that hold mul_pairs)

    replacement = mul_pairs_as(form)
    holders = [module for name, module in list(sys.modules.items())
               if name.startswith("aotcuda.passes.complex_to_real") and getattr(module, "mul_pairs", None)
               is _PRODUCT_MUL_PAIRS]
    product_passes = pipeline.passes
    try:
        for module in holders:
            module.mul_pairs = replacement
        if form == "fold":
            pipeline.passes = lambda: [*product_passes(), FoldConstantProductTablesPass()]
        yield
    finally:
        for module in holders:
            module.mul_pairs = _PRODUCT_MUL_PAIRS
        pipeline.passes = product_passes


# --- fold: the constant factor's tables stored as program constants ------------------------------------

def _tag_table(t: torch.Tensor, kind: str) -> torch.Tensor:
    """Mark the node that makes `t` in the graph being traced as b's ``kind`` table ("re" or "im")."""
    mode = get_proxy_mode()
    if mode is not None:
        try:
            get_proxy_slot(t, mode.tracer).proxy.node.meta[TABLE_KEY] = kind
        except (KeyError, AttributeError):  # not traced (a constant-tracked tensor): nothing to fold
            pass
    return t


class FoldConstantProductTablesPass:
    """Store the tagged product tables of constant factors as program constants (the module docstring).

    A GraphPass (aotcuda/passes/result.py): returns a new ExportedProgram with one CONSTANT_TENSOR input
    per folded table (named like export's lifted constants), or the argument itself when nothing is
    folded; ``result`` counts the folded tables.
    """

    def __init__(self):
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
        self.result = PassResult(type(self).__name__, counts={"folded": 0})
        values, known = constant_placeholder_values(ep), {}
        if not any(TABLE_KEY in node.meta and _evaluate(node, values, known) is not None for node in ep.graph.nodes):
            return ep  # nothing to fold (e.g. a decode step's table indexed by the position): no graph copy
        gm = copy.deepcopy(ep.graph_module)
        folded = fold_product_tables(gm, values)
        if not folded:
            return ep
        self.result = PassResult(type(self).__name__, changed=True, counts={"folded": folded})
        signature = copy.deepcopy(ep.graph_signature)
        constants = dict(ep.constants)
        constants.update(lift_constants_pass(gm, signature, ConstantAttrMap()))
        new = with_graph(ep, gm, graph_signature=signature, constants=constants)
        record_boundary(new, boundary_of(ep))
        return new


def constant_placeholder_values(ep: torch.export.ExportedProgram) -> dict[str, torch.Tensor]:
    """Real values of the placeholders whose value is the same for every call: parameters, lifted
    constants and the buffers the program does not write."""
    mutated = set(ep.graph_signature.buffers_to_mutate.values())
    values = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in STATE_KINDS or spec.target in mutated:
            continue
        value = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
        if isinstance(value, torch.Tensor):
            values[spec.arg.name] = value
    return values


def fold_product_tables(gm: torch.fx.GraphModule, constant_values: dict[str, torch.Tensor]) -> int:
    """Replace each tagged table node computed only from constants (``constant_values``, by placeholder
    name) by a get_attr of a constant attribute of `gm`; returns how many. Lifted afterwards."""
    folded = 0
    values: dict[torch.fx.Node, torch.Tensor] = {}
    for node in list(gm.graph.nodes):
        kind = node.meta.get(TABLE_KEY)
        if kind is None:
            continue
        value = _evaluate(node, constant_values, values)
        if value is None:
            continue
        if kind == "re":  # (br, br): the full pair shape, so the kernel reads it like a
            value = value.expand(*value.shape[:-1], 2)
        value = value.contiguous().clone()
        if value.numel() > _source_numel(node, constant_values):
            continue  # an expand to a batch: the program would grow by that much
        name = f"{_FOLDED_PREFIX}{folded}"
        while hasattr(gm, name):
            name += "_"
        setattr(gm, name, value)  # like make_fx's _tensor_constant attributes: lifted afterwards
        with gm.graph.inserting_before(node), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "get_attr of a plain tensor attribute": intended
            attr = gm.graph.get_attr(name)
        attr.meta.update({k: v for k, v in node.meta.items() if k not in ("val", "tensor_meta", TABLE_KEY)})
        attr.meta["val"] = _fake_like(node.meta.get("val"), value)
        node.replace_all_uses_with(attr)
        folded += 1
    if folded:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return folded


def _evaluate(node: torch.fx.Node, constants: dict[str, torch.Tensor], values: dict) -> torch.Tensor | None:
    """The real value of `node` when all its ancestors are constant placeholders and aten ops; else None."""
    if node in values:
        return values[node]
    value = None
    if node.op == "placeholder":
        value = constants.get(node.name)
    elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and \
            not node.target._schema.is_mutable and torch.Tag.nondeterministic_seeded not in node.target.tags:
        if all(_evaluate(arg, constants, values) is not None for arg in node.all_input_nodes):
            def real(x):
                return values[x] if isinstance(x, torch.fx.Node) else x
            try:
                value = node.target(*torch.fx.node.map_aggregate(node.args, real),
                                    **torch.fx.node.map_aggregate(node.kwargs, real))
            except Exception:  # noqa: BLE001 - an op that will not run eagerly here is simply not folded
                value = None
            if not isinstance(value, torch.Tensor):
                value = None
    values[node] = value
    return value


def _source_numel(node: torch.fx.Node, constants: dict[str, torch.Tensor]) -> int:
    """Elements of the constant placeholders `node` is computed from."""
    seen, stack, total = set(), [node], 0
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "placeholder":
            total += constants[current.name].numel()
        stack.extend(current.all_input_nodes)
    return total


def _fake_like(fake, value: torch.Tensor):
    """A fake tensor of `value`'s metadata in `fake`'s mode (what the node's users saw), or None."""
    mode = getattr(fake, "fake_mode", None)
    if mode is None:
        return None
    return mode.from_tensor(value, static_shapes=True)


# --- --check: every form computes the product (CPU, no compile) ----------------------------------------

def check() -> None:
    """Each form on each kind of factor of tests/passes/complex_to_real/test_product_forms.py, against
    eager; ``fold`` lifts the constant factor's two tables and nothing else."""
    sys.path.insert(0, os.path.join(BENCHMARKS, ".."))
    from torch.export import Dim

    from tests.passes.complex_to_real.helpers import export
    from tests.passes.complex_to_real.test_product_forms import (
        SEQ,
        ConstantFactor,
        InputFactor,
        WrittenFactor,
        lifted,
        x_like,
    )

    def passed(ep):
        for graph_pass in pipeline.passes():
            ep = graph_pass(ep)
        return ep

    def same(got, want):
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)

    constant, inputs, written = ConstantFactor(), InputFactor(), WrittenFactor()
    programs = {"constant": export(constant, (x_like(),)), "inputs": export(inputs, (x_like(), x_like())),
                "written": export(copy.deepcopy(written), (x_like(),)),
                "dynamic": export(constant, (x_like(),), ({1: Dim("s", min=2, max=SEQ)},))}
    for form in FORMS:
        with product_form(form):
            new = {name: passed(ep) for name, ep in programs.items()}
        x, y = x_like(), x_like()
        same(new["constant"].module()(x), constant(x))
        assert lifted(new["constant"]) == (2 if form == "fold" else 0), form  # one pair of tables, both products
        same(new["inputs"].module()(x, y), inputs(x, y))
        module, model = new["written"].module(), copy.deepcopy(written)
        for _ in range(3):  # each call sees the state the one before wrote
            same(module(x), model(x))
        x7 = x_like(seq=7)
        same(new["dynamic"].module()(x7), constant(x7))
        assert lifted(new["inputs"]) == lifted(new["written"]) == lifted(new["dynamic"]) == 0, form
        ops = {n.target for n in new["inputs"].graph.nodes}  # the form in force is the one written
        assert (torch.ops.aten.flip.default in ops) == (form != "unbind"), form
        assert (torch.ops.aten.cat.default in ops) == (form == "flip-cat"), form
        print(f"{form}: the product of each kind of factor matches eager")


# --- the A/B on CUDA -----------------------------------------------------------------------------------

def lower_in_children(forms, shape, workdir) -> dict:
    """One child process per form, lowering rope.py's ComplexRope (they compile side by side).
    Returns {form: (Popen, package path, log path)}."""
    children = {}
    for form in forms:
        path, log = f"{workdir}/pair-mul-{form}.pt2", f"{workdir}/pair-mul-{form}.log"
        command = [sys.executable, os.path.abspath(__file__), "--lower-to", path, "--forms", form,
                   "--batch", str(shape[0]), "--seq", str(shape[1]), "--heads", str(shape[2]),
                   "--head-dim", str(shape[3])]
        with open(log, "w") as out:
            children[form] = (subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT), path, log)
    return children


def lower_child(opts) -> None:
    """``--lower-to PATH --forms FORM``: lower ComplexRope for CUDA in that form, then exit."""
    import aotcuda
    from rope_modules import ComplexRope

    shape = (opts.batch, opts.seq, opts.heads, opts.head_dim)
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    start = time.perf_counter()
    with product_form(opts.forms):
        aotcuda.lower(ComplexRope(opts.head_dim, opts.seq).cuda(), (q, k), device="cuda",
                      package_path=opts.lower_to)
    print(f"lowered in {time.perf_counter() - start:.1f} s")


def form_rows(children, q, k):
    """(name, callable or None, compile seconds, note) per form, from the children's packages."""
    import aotcuda

    rows = []
    for form, (proc, path, log) in children.items():
        name = f"aotcuda, product form {form}"
        if proc.wait() != 0:
            with open(log) as f:
                tail = f.read().strip().splitlines()[-1:]
            rows.append((name, None, None, f"lowering failed: {' '.join(tail)[:150]}"))
            continue
        with open(log) as f:
            seconds = float(f.read().split("lowered in ")[-1].split()[0])
        program = aotcuda.load(path)
        rows.append((name, lambda p=program: p(q, k), seconds, "the product's form" if form == "flip" else ""))
    return rows


def main() -> None:
    from rope import add_shape_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forms", default=",".join(FORMS), help=f"comma-separated, of {', '.join(FORMS)}")
    add_shape_arguments(parser)
    parser.add_argument("--check", action="store_true", help="check every form against eager on the CPU, then exit")
    parser.add_argument("--lower-to", help=argparse.SUPPRESS)  # child process: lower one form
    opts = parser.parse_args()
    forms = [f for f in opts.forms.split(",") if f]
    if any(f not in FORMS for f in forms):
        sys.exit(f"--forms: {forms} has a form that is not one of {', '.join(FORMS)}")
    if opts.check:
        return check()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/scripts/pair_mul_forms.py needs a CUDA device (or --check)")
    if opts.lower_to:
        return lower_child(opts)
    from rope import copy_variant, measure, reference, report

    shape = (opts.batch, opts.seq, opts.heads, opts.head_dim)
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    with tempfile.TemporaryDirectory() as workdir:
        children = lower_in_children(forms, shape, workdir)
        rows = measure([copy_variant(q, k), *form_rows(children, q, k)], reference(q, k))
    report(rows, q, opts.json)

if __name__ == "__main__":
    main()
