"""Inductor's lowering of ``aotcuda::fft_rows_cpu`` (kernels/fft_cpu.py) as a C++ template.

Inductor's CPU backend has C++ templates (torch/_inductor/codegen/cpp_template.py: CppTemplate, whose
`render` writes a whole kernel, compiled into the package like any other Inductor kernel); flex attention
on the CPU is the precedent for one outside GEMMs (kernel/flex/flex_cpu.py). Here a lowering registered
for the op makes the template's one choice (CppTemplate.generate: a CppTemplateCaller) and its output
node, a CppTemplateBuffer, whose kernel is fft_cpu_source.kernel_body over the input's sizes and strides
(symbolic sizes become kernel arguments: a dynamic row count compiles once). Consumers are not fused
into it (TemplateBuffer.allow_epilogue_fusion False, torch 2.12 on; on 2.11, which lacks it, the buffer's name
in V.graph.no_fuse_buffer_names, which Scheduler.can_fuse refuses): the kernel writes its whole output, and
the next op reads it.

These are torch internals. ``available()`` checks, once, what this module uses (the imports, CppTemplate's
constructor, and one of the two ways to refuse fusion above); where something is missing the pass keeps the
Stockham ATen form (spectral/transform.py asks before it emits the op), so an unsupported torch costs speed,
not correctness. Checked: torch 2.11.0, 2.12.1, 2.13.0, 2.14.1, 2.15.0 (available() True on each).
"""

from __future__ import annotations

import functools
import inspect

import sympy
import torch

from aotcuda.kernels import fft_cpu, fft_cpu_source


@functools.cache
def available() -> bool:
    """Whether this torch has the template machinery this module uses (module docstring); registers the
    lowering the first time it says yes."""
    try:
        from torch._inductor.lowering import register_lowering  # noqa: F401  (first: the template's import cycle)
        from torch._inductor import ir
        from torch._inductor.codegen.cpp_template import CppTemplate
        from torch._inductor.codegen.cpp_utils import DTYPE_TO_CPP, cexpr_index  # noqa: F401
        from torch._inductor.utils import parallel_num_threads  # noqa: F401

        params = list(inspect.signature(CppTemplate.__init__).parameters)
        if params[:5] != ["self", "name", "input_nodes", "layout", "num_threads"]:
            return False
        if not _can_refuse_fusion(ir):
            return False
    except Exception:  # an ImportError, or a source torch cannot show: no template
        return False
    _register()
    return True


def _can_refuse_fusion(ir) -> bool:
    """Whether this torch lets a lowering keep consumers out of a template buffer: the graph's
    no_fuse_buffer_names (torch 2.11 on: Scheduler.can_fuse refuses any pair with a buffer named there) or
    TemplateBuffer.allow_epilogue_fusion (torch 2.12 on)."""
    from torch._inductor.graph import GraphLowering

    return ("no_fuse_buffer_names" in inspect.getsource(GraphLowering.__init__)
            or "allow_epilogue_fusion" in inspect.getsource(ir.TemplateBuffer.__init__))


def _contiguous_strides(sizes: list) -> list:
    strides, acc = [], sympy.Integer(1)
    for size in reversed(sizes):
        strides.append(acc)
        acc = acc * size
    return list(reversed(strides))


def _out_layout(x, dim: int, out_len: int, kind: str):
    """fft_cpu.empty_out's layout as a FixedLayout: x's batch dims in order, then (a pair's 2 where
    fft_cpu.PLANES, then) the transformed dim, (else the pair's 2)."""
    from torch._inductor import ir

    sizes = list(x.get_size())
    rank = len(sizes) - (0 if kind == "r2c" else 1)
    pair = kind != "c2r"
    order = [d for d in range(rank) if d != dim]  # axes of the output from outermost to innermost
    order += ([rank, dim] if fft_cpu.PLANES else [dim, rank]) if pair else [dim]
    out_sizes = [sizes[d] for d in range(rank)] + ([sympy.Integer(2)] if pair else [])
    out_sizes[dim] = sympy.Integer(out_len)
    strides = _contiguous_strides([out_sizes[d] for d in order])
    out_strides = [None] * len(out_sizes)
    for axis, stride in zip(order, strides):
        out_strides[axis] = stride
    return ir.FixedLayout(x.get_device(), x.get_dtype(), out_sizes, out_strides)


def _template_class():
    from torch._inductor.codegen.cpp_template import CppTemplate
    from torch._inductor.codegen.cpp_utils import DTYPE_TO_CPP, cexpr_index
    from torch._inductor.utils import parallel_num_threads

    class FFTRowsTemplate(CppTemplate):
        """One fft_rows_cpu transform: fft_cpu_source.kernel_body inside the function def_kernel declares."""

        def __init__(self, input_nodes, layout, spec: dict) -> None:
            super().__init__("aotcuda_fft_rows", input_nodes, layout, parallel_num_threads())
            self.spec = spec

        def render(self, kernel, template_buffer_node=None, flag_template_buffer_has_other_users=None,
                   epilogue_nodes=None, **kwargs) -> str:
            if epilogue_nodes:
                raise NotImplementedError("aotcuda fft_rows_cpu: no epilogue fusion")
            spec = self.spec
            x = self.input_nodes[0]
            named = dict(zip(spec["operands"], self.input_nodes[1:]))
            window, weight = named.get("window"), named.get("weight")
            out = template_buffer_node if template_buffer_node is not None else self.output_node
            inputs = {"X": x}
            if window is not None:
                inputs["WIN"] = window
            if weight is not None:
                inputs["WGT"] = weight
            signature = kernel.def_kernel(inputs=inputs, outputs={"Y": out})

            def expr(e) -> str:
                return cexpr_index(kernel.rename_indexing(sympy.sympify(e)))

            dim, kind = spec["dim"], spec["kind"]
            pair_in, pair_out = kind != "r2c", kind != "c2r"
            x_dims = len(x.get_size()) - (1 if pair_in else 0)
            batch = [d for d in range(x_dims) if d != dim]
            x_stride, out_stride = x.get_stride(), out.get_layout().stride
            fast = x.get_dtype() == torch.float32
            pre, body = fft_cpu_source.kernel_body(
                spec["n"], kind, spec["inverse"], spec["in_len"], spec["out_len"], spec["scale"],
                window is not None,
                sizes=[expr(x.get_size()[d]) for d in batch],
                x_strides=[expr(x_stride[d]) for d in batch],
                y_strides=[expr(out_stride[d]) for d in batch],
                xt=expr(x_stride[dim]), xp=expr(x_stride[-1]) if pair_in else "0",
                yt=expr(out_stride[dim]), yp=expr(out_stride[-1]) if pair_out else "0",
                ws=expr(window.get_stride()[0]) if window is not None else "0",
                x_offset=expr(x.get_layout().offset), y_offset=expr(out.get_layout().offset),
                y_type=DTYPE_TO_CPP[out.get_layout().dtype], fast=fast,
                weight=None if weight is None else _weight_strides(weight, x, dim, batch, expr))
            window_offset = (f"WIN += {expr(window.get_layout().offset)};\n" if window is not None else "")
            return (self.header().getvalue() + pre + '\nextern "C"\n' + signature + "\n{\n" + window_offset
                    + body + "\n}\n")

    return FFTRowsTemplate


def _weight_strides(weight, x, dim: int, batch: list, expr) -> dict:
    """fft_cpu_source.kernel_body's `weight`: the pair weight's strides along x's batch dims, its dim and its
    pair dim, broadcast as torch broadcasts it (aligned at the last dim; "0" where it has no such dim or one
    point), its offset, and whether every batch stride is 0 (one weight for every row)."""
    sizes, strides = weight.get_size(), weight.get_stride()
    lead = len(x.get_size()) - len(sizes)

    def stride(d: int) -> str:
        w = d - lead
        return "0" if w < 0 or sizes[w] == 1 else expr(strides[w])

    batch_strides = [stride(d) for d in batch]
    return dict(strides=batch_strides, wt=stride(dim), wp=stride(len(x.get_size()) - 1),
                offset=expr(weight.get_layout().offset), uniform=all(s == "0" for s in batch_strides))


def _realized(node):
    """node as a buffer or a view of one with a fixed layout (the template reads it with its strides)."""
    from torch._inductor import ir

    node = ir.ExternKernel.realize_input(node)
    if isinstance(node, (ir.TensorBox, ir.StorageBox)) or not isinstance(node, ir.ReinterpretView):
        try:
            node.freeze_layout()
        except (AttributeError, NotImplementedError):
            pass
    return node


def _planes_where_free(x, dim: int):
    """A pair x (c2c, c2r) laid out as fft_cpu.PLANES (each row's re, then its im; the batch dims in order)
    where that costs no copy: x is a pointwise result whose layout is not fixed yet (the filter's complex
    product before its irfft). The op that computes x then writes planes, vectorized along the points,
    where the pair's default layout (re, im interleaved) had it transpose 2×16 blocks (docs/performance.md,
    branch cpu4). Anything else keeps its layout: the kernel reads any strides."""
    from torch._inductor import ir

    data = getattr(x, "data", None)
    if not (fft_cpu.PLANES and isinstance(x, ir.TensorBox) and isinstance(data, ir.StorageBox)):
        return x
    if ir.IRNode.is_realized_node(data.data) and not isinstance(data.data.get_layout(), ir.FlexibleLayout):
        return x
    rank = len(x.get_size())
    batch = [d for d in range(rank - 1) if d != dim]
    order = [0] * rank  # order[d]: the rank of dim d's stride, 0 the smallest
    order[dim], order[rank - 1] = 0, 1
    for i, d in enumerate(reversed(batch)):
        order[d] = 2 + i
    return ir.ExternKernel.require_stride_order(x, order)


def _register() -> None:
    from torch._inductor.lowering import register_lowering

    template_class = _template_class()

    @register_lowering(torch.ops.aotcuda.fft_rows_cpu.default, type_promotion_kind=None)
    def _lower(x, dim, n, out_len, kind, inverse, scale, window=None, weight=None):
        if kind != "r2c":
            x = _planes_where_free(x, dim)
        x = _realized(x)
        operands = {name: _realized(t) for name, t in (("window", window), ("weight", weight)) if t is not None}
        inputs = [x, *operands.values()]
        in_len = x.get_size()[dim]
        spec = dict(dim=dim, n=n, out_len=out_len, kind=kind, inverse=inverse, scale=float(scale),
                    in_len=int(in_len), operands=list(operands))
        layout = _out_layout(x, dim, out_len, kind)
        template = template_class(inputs, layout, spec)
        choice = template.generate()
        result = choice.output_node()
        buffer = result.data.data if hasattr(result, "data") and hasattr(result.data, "data") else None
        if buffer is not None:  # no epilogue fused into the template (render writes none): _can_refuse_fusion
            if hasattr(buffer, "allow_epilogue_fusion"):
                buffer.allow_epilogue_fusion = False
            else:  # torch 2.11: no per-template switch; the scheduler's list of unfusable buffers
                from torch._inductor.virtualized import V

                V.graph.no_fuse_buffer_names.add(buffer.get_name())
        return result
