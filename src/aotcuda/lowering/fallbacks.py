"""The fallback-kernel check: which ATen kernels does an AOTInductor package's generated code call?

Inductor generates code (C++ on the CPU, Triton on CUDA) for the ops it can lower. For every other op
the generated wrapper (``<hash>.wrapper.cpp``, kept in the .pt2 package) calls an ATen kernel instead,
in one of three forms (seen with torch 2.11–2.13; the package keeps the wrapper source):

    aoti_torch_cpu_mul_Tensor(buf1, buf4, &buf6_handle)          C shim of an op with one (per device:
    aoti_torch_cuda_polar(...)                                    cpu, cuda, xpu, mps)
    aoti_torch_proxy_executor_call_function(proxy_executor, 0,…)  ops without a C shim, and custom ops;
                                                                  the index points into <hash>.wrapper.json
    aoti_torch_call_dispatcher("aten::sin", "", ...)              the dispatcher path of some builds

Each call follows a comment that names the FX nodes it came from:
``// Topologically Sorted Source Nodes: [full_like, polar], Original ATen: [aten.full_like, aten.polar]``.
Those names are the nodes of the ExportedProgram given to Inductor, whose ``meta["stack_trace"]`` holds
the user's source line. A deployment target must ship every kernel called this way; the allow-list
names the library kernels (matmul, convolution, attention, topk/sort, scans and histograms, grouped matmul)
that Inductor calls on purpose.

Complex values are a special case: Inductor has no code generation for them, so every op on a complex
tensor becomes a fallback. ``complex_value_nodes`` finds those in the ExportedProgram directly, so they
are reported even where the generated code names them differently.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field

import torch

from aotcuda.errors import PackageError
from aotcuda.lowering.inductor_views import dropped_nodes
from aotcuda.os_errors import size_and_limit_shown
from aotcuda.package_format import bounded_name, load_json

# Library kernels Inductor calls deliberately, named by their C-shim op name (device prefix removed).
MATMUL_KERNELS = frozenset({"mm", "mm_out", "addmm", "addmm_out", "bmm", "bmm_out", "baddbmm", "baddbmm_out",
                            "_addmm_activation", "addmv", "_int_mm", "_int_mm_out"})
CONVOLUTION_KERNELS = frozenset({"convolution", "_convolution", "convolution_backward"})
ATTENTION_KERNELS = frozenset({
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_fused_attention_overrideable", "_flash_attention_forward",
    "_efficient_attention_forward",
})
# The CPU backend calls oneDNN/MKL for linear layers and convolutions (after weight prepacking).
ONEDNN_KERNELS = frozenset({"_mkl_linear", "_linear_pointwise", "_linear_pointwise_binary",
                            "mkldnn__convolution_pointwise", "mkldnn__convolution_pointwise_binary",
                            "mkldnn__convolution_pointwise_binary_", "mkldnn__convolution_transpose_pointwise"})
# Selection: Inductor registers topk and sort as fallbacks on purpose (torch/_inductor/lowering.py,
# make_fallback) on every device; MoE routers (DeepSeek, Mixtral, Qwen-MoE) call topk on real scores.
SELECTION_KERNELS = frozenset({"topk", "sort", "sort_stable"})
# Real-valued index bookkeeping that transformers emits on every device (docs/usage.md, "Library kernels
# beyond matmul"): scans (create_causal_mask's packed-sequence check, MoE offsets) and histograms (MoE token
# counts). Each has a C shim on the CPU and CUDA, runs in aotcuda's runtime, and is not complex math, so
# the pass has nothing to rewrite; Inductor generates the scan only on CUDA and falls back on the CPU, and
# the library kernel is the faster of the two there (benchmarks/scan_kernels.py). Allowed on both devices.
SCAN_KERNELS = frozenset({"cumsum", "cumprod", "logcumsumexp", "histc", "bincount"})
# Grouped matmul (MoE experts): a matmul library kernel where the C shim exists (torch 2.13 CPU and CUDA;
# torch 2.11 has none on CUDA, where it becomes a proxy-executor call that aotcuda.load refuses).
GROUPED_MATMUL_KERNELS = frozenset({"_grouped_mm"})
LIBRARY_KERNELS = (MATMUL_KERNELS | CONVOLUTION_KERNELS | ATTENTION_KERNELS | SELECTION_KERNELS | SCAN_KERNELS
                   | GROUPED_MATMUL_KERNELS)

# Ops without a C shim that a library emits, with the change that avoids them (named in the error).
_DATA_DEPENDENT_SIZE = (
    "{op} makes a tensor whose size the values decide, for which Inductor generates no code; its C shim runs in "
    "aotcuda.load, so allow_fallbacks=True ships it, or keep the shape fixed (torch.where(mask, x, fill), the top k "
    "of the scores) and select after the program")

_SORTED_SEARCH = (
    "Inductor generates no CPU code for {op}; its C shim runs in aotcuda.load, so allow_fallbacks=True ships it, or "
    "count the boundaries, which is generated code: (x[..., None] > boundaries).sum(-1) for right=False, >= for "
    "right=True")

_EMBEDDING_RENORM = (
    "nn.Embedding(max_norm=...) (F.embedding with max_norm) renormalises the rows it looks up in the weight, in "
    "place, on every call, in eval mode too; Inductor has no code for that write. Renormalise the weight once and "
    "drop max_norm before lowering: with torch.no_grad(): w = emb.weight; w.mul_((emb.max_norm / "
    "w.norm(p=emb.norm_type, dim=1, keepdim=True).clamp_min(1e-7)).clamp(max=1)); then emb.max_norm = None "
    "(the rows a call looks up then come out as eager's)")

_INTEGER_ANTIALIAS = (
    "antialiased resizing of an integer (uint8) image: lower() decomposes it for floating-point images only, since "
    "ATen resizes uint8 with fixed-point weights and rounds, which generated float code does not reproduce. Resize "
    "img.float() (it lowers and equals eager's float resize) and, where uint8 is needed, .round().clamp(0, 255)"
    ".to(torch.uint8) after (bilinear within 1 of eager's uint8 path, bicubic further where a dim grows)")

KNOWN_FIXES = {
    "transformers::grouped_mm_fallback": (
        "transformers' MoE experts call it for non-bfloat16 weights under export; build the model with "
        "experts_implementation=\"batched_mm\" (e.g. DeepseekV2Config(..., experts_implementation=\"batched_mm\") "
        "or model.set_experts_implementation(\"batched_mm\"))"),
    # A new user's trial (2026-12-06): x[x > 0] got only the generic advice on complex math.
    "index_Tensor": (
        "indexing by a boolean mask (x[mask]) makes a tensor whose size the values decide; keep the shape fixed "
        "with torch.where(mask, x, 0) (or x * mask) and select after the program, or index by integer positions"),
    # The fourth new user's detection head and graph network (2026-12-06): only the generic advice, "rewrite those
    # ops", which says neither why nor into what.
    "nonzero": _DATA_DEPENDENT_SIZE.format(op="torch.nonzero (argwhere, x[mask])"),
    "masked_select": _DATA_DEPENDENT_SIZE.format(op="masked_select"),
    "bucketize": _SORTED_SEARCH.format(op="bucketize"),
    "searchsorted": _SORTED_SEARCH.format(op="searchsorted"),
    # The fifth new user's nn.Embedding(max_norm=1.0) (2026-12-06): only "rewrite that line", max_norm not named.
    "aten::embedding_renorm": _EMBEDDING_RENORM,
    "embedding_renorm": _EMBEDDING_RENORM,
    # The sixth new user's spatial transformer (2026-12-07): float images are decomposed (lowering/antialias.py);
    # an integer one keeps the op, which got only "rewrite that line".
    "aten::_upsample_bilinear2d_aa": _INTEGER_ANTIALIAS,
    "aten::_upsample_bicubic2d_aa": _INTEGER_ANTIALIAS,
    "scatter_reduce_two_out": (
        "on the CPU Inductor calls this kernel for scatter_add_ and scatter_reduce (every reduce); a sum along dim 0 "
        "written as index_add_(0, index, source) with a 1-d index is generated code; its C shim runs in aotcuda.load, "
        "so allow_fallbacks=True ships it where no rewrite fits (amax, amin)"),
    # The eighth new user (2026-12-07), following the hint for torch.linalg.solve_triangular: the real
    # torch.triangular_solve got only "Rewrite those ops", while its C shim runs in aotcuda.load.
    "triangular_solve": (
        "a real triangular solve has no generated code but a C shim, which aotcuda.load runs (checked on the CPU): "
        "pass allow_fallbacks=True to ship it"),
}

# The kernel Inductor calls for the seeds of the random numbers it generates for the program's random ops
# (dropout, rand, bernoulli...: ATen tags them nondeterministic_seeded): its RandomSeeds node
# (torch/_inductor/ir.py, aten.randint.low_out on every device; fx_passes/replace_random.py fuses the seeds
# into one inductor_seeds call) comes from no node of the program, so the wrapper names none for it.
SEED_KERNEL = "randint_low_out"  # Inductor's seeds for the random numbers it generates (ir.py RandomSeeds)
SEED_KERNELS = frozenset({SEED_KERNEL})

# C-shim functions with a device prefix that are runtime helpers, not ATen kernels.
_HELPERS = re.compile(r"(guard|stream|caching_allocator)")
_SHIM_CALL = re.compile(r"\baoti_torch_(cpu|cuda|xpu|mps)_(\w+)\s*\(")
_PROXY_CALL = re.compile(r"\baoti_torch_proxy_executor_call_function\s*\(\s*\w+\s*,\s*(\d+)")
_DISPATCHER_CALL = re.compile(r"\baoti_torch_call_dispatcher\s*\(\s*\"([^\"]+)\"\s*,\s*\"([^\"]*)\"")
# Node names hold no brackets: a list ends at the first "]" and never reaches past the next "[", so that a search
# costs time linear in the text (with "[^\]]*", "Source Nodes: [" repeated without a "]" cost time quadratic in
# it: 120 KB took 3.4 s, a 10 MB source packed to 10 KB hours, in `aotcuda inspect`).
_SOURCE_NODES = re.compile(r"Source Nodes: \[([^\[\]]*)\]")
_NODE_NAME = re.compile(r"[^,]+")
MOST_NODE_NAMES = 10_000  # of one list: a fused kernel's names tens of nodes
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


@dataclass
class FallbackKernel:
    """One ATen kernel the generated code calls.

    name: as the generated code calls it ("aoti_torch_cpu_polar", "aten::sin (proxy executor)",
        "aten.mul.Tensor on complex values").
    op: the C-shim op name or the ATen op ("polar", "aten::sin").
    nodes: FX node names of the ExportedProgram the calls came from.
    sources: the user's source line of each, "file.py:12: code", or "" where unknown.
    complex_valued: a node it came from reads or writes a complex tensor (known only with the ExportedProgram).
    """

    name: str
    op: str
    nodes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    complex_valued: bool = False  # one of its nodes reads or writes a complex tensor
    dropout: bool = False  # its nodes include a dropout, which the program has only in training mode
    other_random: bool = False  # its nodes include a random op that is no dropout (model.eval() keeps it)
    parametrized: list = field(default_factory=list)  # parametrization_of each node (None: outside one)
    functions: list = field(default_factory=list)  # the torch function each node's line called (lapack_kernels)

    def describe(self) -> str:
        where = "; ".join(dict.fromkeys(s for s in self.sources if s)) or (
            f"node {', '.join(self.nodes)}" if self.nodes else f"no node of the program: {self._inductors_own()}")
        return f"{self.name}  <- {where}"

    def _inductors_own(self) -> str:
        # A new user's torch.linalg.inv read "(e.g. the copy back into an input written in place)" for this one.
        if "_linalg_check_errors" in self.op:
            return ("Inductor's check of the info the LAPACK kernel listed with it returns (torch.linalg.inv, solve, "
                    "cholesky raise for a singular or non-definite matrix); it goes with that kernel")
        return "Inductor's own code (e.g. the copy back into an input written in place)"


def wrapper_sources(package_path: str, archive=None):
    """Yield (wrapper.cpp entry, its text, the ops of its proxy-executor node table) for every model in the
    package, one at a time, from one opening of the archive (``archive``: one the caller opened with ``open_archive``, and
    checks and closes itself).

    The package may be hostile (``aotcuda inspect`` reads any file): the archive is checked as load checks
    it (``open_archive``), only the ``*.wrapper.cpp`` directly in a model's folder are read, each within the
    compression-ratio limit, and together within ``max_source_bytes`` (so a thousand 256 MiB sources packed
    to a few KiB each are refused, not read one after another); the node tables are bounded in size and depth.
    """
    from aotcuda.package_format import archive_root
    from aotcuda.runtime.archive import ArchiveLimits, archive_or_open, check_ratio, read_entry
    from aotcuda.runtime.package import model_names, proxy_targets
    from aotcuda.runtime.package_checks import DAMAGED_ZIP, read_json_entry

    limits = ArchiveLimits.from_environment()
    with archive_or_open(package_path, limits, archive) as archive:
        infos = archive.infolist()
        names = {info.filename: info for info in infos}
        root = archive_root(list(names))
        folders = tuple(f"{root}data/aotinductor/{model}/" for model in model_names(list(names)))
        sources = [info for name, info in sorted(names.items()) if name.endswith(".wrapper.cpp")
                   and any(name.startswith(folder) and "/" not in name[len(folder):] for folder in folders)]
        total = sum(info.file_size for info in sources)
        if limits.max_source_bytes and total > limits.max_source_bytes:
            total_shown, limit_shown = size_and_limit_shown(total, limits.max_source_bytes)
            raise PackageError(f"{package_path!r}: its generated sources ({len(sources)} wrapper.cpp entries) are "
                               f"{total_shown} together, more than the {limit_shown} that are read; it is damaged "
                               "or hostile. If you trust it, set AOTCUDA_MAX_SOURCE_BYTES (0: no limit)")
        # Their op tables too, together: each is bounded (max_json_bytes) and ratio-checked from 1 MiB only, so a
        # thousand model folders, each with an empty source and a table of 1 MiB of {} packed to 1 KiB, were parsed
        # one after another (0.29 s each: 200 of them, in a 2.4 MB package, held inspect 53 s)
        tables = [names[table] for table in (info.filename[: -len(".cpp")] + ".json" for info in sources)
                  if table in names]
        table_total = sum(info.file_size for info in tables)
        if limits.max_json_bytes and table_total > limits.max_json_bytes:
            total_shown, limit_shown = size_and_limit_shown(table_total, limits.max_json_bytes)
            raise PackageError(f"{package_path!r}: the op tables of its generated sources ({len(tables)} wrapper.json "
                               f"entries) are {total_shown} together, more than the {limit_shown} that are read "
                               "(a model's table holds ~300 bytes an op); it is damaged or hostile. If you trust it, "
                               "set AOTCUDA_MAX_JSON_BYTES (0: no limit)")
        for info in sources:
            name = info.filename
            check_ratio(package_path, f"its entry {name!r}", info.file_size, info.compress_size, limits)
            table_name = name[: -len(".cpp")] + ".json"
            targets = []
            if table_name in names:  # bounded in depth too: a 200 KB [[[...]]] must not recurse
                table = load_json(read_json_entry(archive, table_name, package_path, limits), package_path,
                                  f"the model's op list {table_name}")
                targets = proxy_targets(table, table_name, package_path)  # load's reading of it
            try:
                source = read_entry(archive, name, package_path, limits, "max_source_bytes")
            except DAMAGED_ZIP as exc:
                raise PackageError(f"{package_path!r} is damaged: its entry {name!r} cannot be read ({exc}); copy "
                                   "the package again, or lower the model again") from exc
            yield name, source.decode(errors="replace"), targets


def _calls_in(text: str, proxy_targets: list[str]):
    """Yield (kernel name, op, source node names) for every fallback call in a wrapper's text; ``proxy_targets``:
    the op of each proxy-executor call by its index (``runtime.package.proxy_targets``)."""
    source_nodes: list[str] = []
    for line in _marked_lines(text):
        if (match := _SOURCE_NODES.search(line)) is not None:
            source_nodes = node_names(match.group(1))
            continue
        for device, op in _SHIM_CALL.findall(line):
            if not _HELPERS.search(op):
                yield f"aoti_torch_{device}_{op}", op, source_nodes
        for index in _PROXY_CALL.findall(line):
            # the index as written (a source may hold 5,000 digits, past int()'s limit): one of the table's, or none
            known = len(index) <= 18 and int(index) < len(proxy_targets)
            target = proxy_targets[int(index)] if known else f"#{index[:20]}"
            yield f"{target} (proxy executor)", target, source_nodes
        for op, overload in _DISPATCHER_CALL.findall(line):
            target = f"{op}.{overload}" if overload else op
            yield f"{target} (dispatcher)", target, source_nodes


def node_names(listed: str) -> list[str]:
    """The node names of a "Source Nodes: [...]" list (its text between the brackets), at most MOST_NODE_NAMES of
    them and always its last (the node a call is traced back to where none is its op). A wrapper.cpp is the
    package's text, read in `aotcuda inspect`: a list of 3,000,000 names (25 MB) was split whole, each name made a
    string and every list's names kept in a set, 630 MB for a 28 MB package."""
    names = [name for match in itertools.islice(_NODE_NAME.finditer(listed), MOST_NODE_NAMES)
             if (name := match.group().strip())]
    last = listed.rpartition(",")[2].strip()
    if last and (not names or names[-1] != last):
        names.append(last)
    return names


# What a line holds where it has a node list or a C-shim call: the lines _calls_in looks into (no other can hold either).
_LINE_MARK = re.compile(r"Source Nodes: \[|aoti_torch_")


def _marked_lines(text: str):
    """The lines of ``text`` (as ``str.splitlines`` splits them) that hold a node list or a C-shim call, one at a
    time, found by one scan for those marks. A wrapper.cpp is the package's text, read in ``aotcuda inspect``:
    splitting it whole made a list of every line and searched each four times, so a source of 32 MiB of empty lines
    (stored, within max_source_bytes) took 710 MB and 17 s, one of 256 MiB about 5 GB and minutes."""
    end = -1
    for mark in _LINE_MARK.finditer(text):
        if mark.start() < end:
            continue  # another mark of a line already given
        start = text.rfind("\n", 0, mark.start()) + 1
        end = text.find("\n", mark.start())
        end = len(text) if end < 0 else end
        yield from text[start:end].splitlines()


def shim_name(target) -> str:
    """The C-shim name of an op overload: aten.mul.Tensor → "mul_Tensor", aten.polar.default → "polar"."""
    packet, overload = target._schema.name.split("::")[-1], target._overloadname
    return packet if overload == "default" else f"{packet}_{overload}"


def _match(op: str, node: torch.fx.Node) -> tuple[int, int]:
    """How well a kernel name fits a node's op: (exact match, length of the op-packet prefix)."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return (0, 0)
    packet = target._schema.name.split("::")[-1]
    exact = op in (shim_name(target), target._schema.name, target.name())
    return (int(exact), len(packet) if op.split("::")[-1].startswith(packet) else 0)


# Inductor's lowerings that call another op's kernel: on the CPU ``scatter_add`` (and ``scatter`` with a reduce)
# falls back to ``scatter_reduce.two_out`` with reduce="sum"
_KERNEL_OF = {"scatter_reduce": ("scatter_add", "scatter")}


def _producing_nodes(op: str, names: list[str], nodes: dict[str, torch.fx.Node]) -> list[torch.fx.Node]:
    """Of the source nodes a call came from, the one whose op the kernel is. Where none is, the list is another
    kernel's: on the CPU a fallback call after a fused kernel has no node list of its own, so the last one before
    it belonged to something else (a graph network's ``scatter_reduce`` was said to come from the ``addmm`` lines
    before it); then every node of the program whose op the kernel is (or whose lowering calls it, ``_KERNEL_OF``),
    else the listed last one."""
    known = [nodes[n] for n in names if n in nodes]
    if known:
        best = max(reversed(known), key=lambda node: _match(op, node))
        if _match(op, best) != (0, 0):
            return [best]
    scores = {node: _match(op, node) for node in nodes.values() if node.op == "call_function"}
    best = max(scores.values(), default=(0, 0))
    packet = op.split("::")[-1]
    lowered = {name for kernel, names in _KERNEL_OF.items() if packet.startswith(kernel) for name in names}
    matching = [node for node, score in scores.items()
                if (score == best and best != (0, 0)) or _packet_name(node) in lowered]
    return matching or known[-1:]


def _packet_name(node: torch.fx.Node) -> str:
    target = node.target
    return target._schema.name.split("::")[-1] if isinstance(target, torch._ops.OpOverload) else ""


def parametrization_of(node) -> tuple[str, str, str] | None:
    """(module path, tensor name, parametrization class) where ``node`` computes a tensor of a
    torch.nn.utils.parametrize parametrization (``orthogonal(nn.Linear(...))``: ("l", "weight",
    "torch.nn.utils.parametrizations._Orthogonal")), read off its nn_module_stack; None otherwise."""
    stack = node.meta.get("nn_module_stack") or {}
    for path, kind in stack.values():
        parts = str(path).split(".")
        if len(parts) >= 3 and parts[-3] == "parametrizations" and parts[-1].isdigit():
            return ".".join(parts[:-3]), parts[-2], str(getattr(kind, "__qualname__", kind))
    return None


def relative_source_line(node: torch.fx.Node | None) -> str:
    """The user's line that produced node, "file:line: code" with the path relative to the working folder
    where it is inside it: the last user frame of meta["stack_trace"] (what the kernel list shows)."""
    trace = (node.meta.get("stack_trace") or "") if node is not None else ""
    frames = _FRAME.findall(trace)
    if not frames:
        return ""
    # The innermost frame outside torch itself: for nn.Linear that is the model line calling the layer.
    user_frames = [f for f in frames if not f[0].startswith(_TORCH_DIR)]
    if not user_frames:  # a model made of torch's modules (nn.Sequential): no line of its own to name
        return module_in_model(node) or ""
    path, line, _, code = user_frames[-1]
    relative = os.path.relpath(path)
    return f"{path if relative.startswith('..') else relative}:{line}: {code.strip()}"


def module_in_model(node: torch.fx.Node) -> str | None:
    """The module of the model that ran ``node``, by its name in ``model.named_modules()`` and its type (the
    innermost entry of meta["nn_module_stack"]): "the model's module 1 (torch.nn.Dropout)", "the model itself
    (...)"; None where the node has no such record. What names a node whose stack is torch's alone: torch's own
    line (``torch/nn/modules/dropout.py:73``) is not one the user wrote or can change."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    path, kind = list(stack.values())[-1]
    kind = kind if isinstance(kind, str) else getattr(kind, "__qualname__", str(kind))
    public = re.sub(r"^torch\.nn\.modules\.\w+\.", "torch.nn.", kind)  # torch.nn.modules.dropout.Dropout
    return f"the model's module {path} ({public})" if path else f"the model itself ({public})"


def touches_complex(node: torch.fx.Node) -> bool:
    """Whether an op node reads or writes a complex tensor (by the fake values in meta["val"])."""
    values = [a.meta.get("val") for a in node.all_input_nodes] + torch.utils._pytree.tree_leaves(node.meta.get("val"))
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in values)


def complex_value_nodes(ep) -> list[torch.fx.Node]:
    """Ops of the ExportedProgram that read or write a complex tensor: Inductor lowers each as a fallback, except a
    no-op it drops before lowering (a view to its operand's shape, a clone, an alias, a whole-dim slice:
    ``inductor_views.dropped_nodes``; no code calls them)."""
    dropped = dropped_nodes(ep.graph)
    return [node for node in ep.graph.nodes
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and touches_complex(node)
            and node not in dropped]


def random_nodes(ep) -> list[torch.fx.Node]:
    """The program's random ops (dropout, rand, bernoulli...), whose random numbers Inductor generates from
    seeds that one kernel of its own makes (``SEED_KERNELS``)."""
    return [node for node in ep.graph.nodes if node.op == "call_function"
            and torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())]


def is_dropout(node: torch.fx.Node) -> bool:
    """A dropout node: torch.export keeps one only where dropout ran in training mode (eval's is the identity)."""
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    # the innermost module, a dropout by its class name (Dropout, Dropout2d, AlphaDropout): a model class named
    # DropoutAndNoise holds other random ops, which model.eval() keeps
    return "dropout" in str(node.target) or bool(stack) and re.search(
        r"dropout(\d+d)?$", str(stack[-1][1]).rsplit(".", 1)[-1].lower()) is not None


def find_fallback_kernels(package_path: str, ep=None) -> list[FallbackKernel]:
    """Every ATen kernel the package's generated code calls (allowed or not), plus the complex-valued
    ops of ``ep`` (the program given to Inductor) that no call was traced back to. One entry per kernel
    name, in the order the code first calls it. Without ``ep``, kernels carry node names only."""
    return scan_kernels(package_path, ep)[0]


def generated_kernel_names(package_path: str) -> list[str]:
    """Names of the kernels Inductor generated (C++ loops on the CPU, Triton on CUDA) that the wrapper runs."""
    return scan_kernels(package_path)[1]


_GENERATED = re.compile(r"\b((?:cpp_fused|triton_\w+?_fused)_\w+)\b")


def scan_kernels(package_path: str, ep=None, archive=None) -> tuple[list[FallbackKernel], list[str]]:
    """(``find_fallback_kernels``, ``generated_kernel_names``) from one reading of the package's sources
    (``archive``: as ``wrapper_sources`` takes it)."""
    return kernels_in(((text, targets) for _, text, targets in wrapper_sources(package_path, archive)), ep)


def kernels_in(sources, ep=None) -> tuple[list[FallbackKernel], list[str]]:
    """``scan_kernels`` of wrapper sources given as (text, proxy-executor op names) pairs."""
    nodes = {n.name: n for n in ep.graph.nodes} if ep is not None else {}
    kernels: dict[str, FallbackKernel] = {}
    generated: dict[str, None] = {}
    mentioned: set[str] = set()
    for text, targets in sources:
        generated.update(dict.fromkeys(_GENERATED.findall(text)))
        for match in _SOURCE_NODES.finditer(text) if ep is not None else ():  # read only against ep's nodes
            mentioned.update(node_names(match.group(1)))
        for name, op, source_nodes in _calls_in(text, targets):
            kernel = kernels.setdefault(name, FallbackKernel(name, op))
            if op in SEED_KERNELS and ep is not None and random_nodes(ep):
                _attribute_to_random_nodes(kernel, ep)  # a comment before it names another kernel's nodes
                continue
            producing = _producing_nodes(op, source_nodes, nodes)
            for node in producing:
                if node.name not in kernel.nodes:
                    kernel.complex_valued = kernel.complex_valued or touches_complex(node)
                    kernel.nodes.append(node.name)
                    kernel.sources.append(relative_source_line(node))
            if not producing and ep is None and source_nodes and source_nodes[-1] not in kernel.nodes:
                kernel.nodes.append(source_nodes[-1])
    for node in complex_value_nodes(ep) if ep is not None else ():
        if node.name not in mentioned:
            name = f"{node.target} on complex values"
            kernel = kernels.setdefault(name, FallbackKernel(name, str(node.target)))
            kernel.nodes.append(node.name)
            kernel.sources.append(relative_source_line(node))
    return list(kernels.values()), list(generated)


def _attribute_to_random_nodes(kernel: FallbackKernel, ep) -> None:
    """The seed kernel's nodes and lines: the program's random ops it makes the seeds for."""
    for node in random_nodes(ep):
        if node.name not in kernel.nodes:
            kernel.nodes.append(node.name)
            kernel.sources.append(relative_source_line(node))
            kernel.dropout = kernel.dropout or is_dropout(node)
            kernel.other_random = kernel.other_random or not is_dropout(node)


def dropout_only(missing: list[FallbackKernel]) -> bool:
    """Whether every kernel refused is the seed kernel of dropouts alone: model.eval() removes them all, and
    allow_fallbacks would ship a program that drops activations at random at every call."""
    return bool(missing) and all(kernel.op in SEED_KERNELS and kernel.dropout and not kernel.other_random
                                 for kernel in missing)


def refusal_advice(missing: list[FallbackKernel], shippable: bool = True) -> tuple:
    """The fixes a MissingFallbackKernelsError gives, in order (errors.Advice): model.eval() first where a dropout
    in training mode is among the kernels, allow_fallbacks only where a kernel would stay after it and AOTInductor
    can compile the kernels (``shippable``: not where one takes a complex number, lowering/complex_scalars.py)."""
    from aotcuda.errors import Advice

    shipped = (Advice("allow_fallbacks", True),) if shippable else ()
    if not any(kernel.dropout for kernel in missing):
        return shipped
    evaluated = Advice("eval", True, relower=True)
    return (evaluated,) if dropout_only(missing) else (evaluated, *shipped)


def kernels_record(missing: list[FallbackKernel], library: list[FallbackKernel]) -> list[dict]:
    """The signature's ``"kernels"`` field: each ATen kernel lower() found, whether it is allowed (a library
    kernel) and the model's lines it came from, as lower() classified them with the program in hand. At most
    RECORDED_PLACES nodes and lines a kernel (a 32-layer model calls a product from hundreds of nodes): the
    signature stays far below the size load accepts (AOTCUDA_MAX_SIGNATURE_BYTES)."""
    return [{"name": bounded_name(kernel.name), "allowed": allowed,
             "nodes": [bounded_name(node) for node in kernel.nodes[:RECORDED_PLACES]],
             "sources": list(dict.fromkeys(kernel.sources))[:RECORDED_PLACES]}
            for allowed, kernels in ((False, missing), (True, library)) for kernel in kernels]


RECORDED_PLACES = 16


def kernels_from_signature(signature: dict | None) -> tuple[list[FallbackKernel], list[FallbackKernel]] | None:
    """(kernels outside the allow-list, library kernels) as the signature's ``"kernels"`` records them, or
    None where it records none (an older package) or not in that form (read from any package: each field's
    type is checked, and what is read is as large as the signature's limits let it be)."""
    record = (signature or {}).get("kernels")
    if not isinstance(record, list):
        return None
    missing, library = [], []
    def strings(value) -> bool:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)

    for entry in record:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)
                and isinstance(entry.get("allowed"), bool) and strings(entry.get("nodes"))
                and strings(entry.get("sources"))):
            return None
        kernel = FallbackKernel(entry["name"], entry["name"], list(entry["nodes"]), list(entry["sources"]))
        (library if entry["allowed"] else missing).append(kernel)
    return missing, library


def split_allowed(kernels: list[FallbackKernel], allowed: frozenset[str]) -> tuple[list, list]:
    """(kernels outside the allow-list, library kernels on it). A scan or histogram kernel on complex
    values is complex math the pass did not rewrite, not index bookkeeping: it stays outside."""
    def is_allowed(kernel: FallbackKernel) -> bool:
        return kernel.op in allowed and not (kernel.op in SCAN_KERNELS and kernel.complex_valued)

    return [k for k in kernels if not is_allowed(k)], [k for k in kernels if is_allowed(k)]


def refusal_line(refusal) -> str:
    """What ReplaceComplexWithRealPass refused (a scan.Refusal), in one line: the first thing to fix."""
    return (f"ReplaceComplexWithRealPass left the program's complex math as it was (all or nothing): it "
            f"cannot rewrite {refusal.op} (node {refusal.node}) at "
            f"{refusal.source or 'an unknown source line'}: {refusal.reason}.")


def missing_kernels_message(method: str, missing: list[FallbackKernel], refusal=None,
                            complex_scalars: list[str] = ()) -> str:
    """The error text: the kernels with their source lines, then what to do. `refusal` (a
    ReplaceComplexWithRealPass Refusal) says why the pass left the complex math as it was: the op, the
    user's source line and the reason, which is then the first thing to fix. `complex_scalars`: the lines of
    complex_scalars.complex_scalar_lines where a kernel takes a complex number, which allow_fallbacks cannot ship:
    they replace the advice to pass it."""
    shipped = "" if complex_scalars else ", or pass allow_fallbacks=True to ship the ATen kernels"
    lines = [f"Method {method} missing fallback kernels ({len(missing)} total):"]
    lines += [f"  - {kernel.describe()}" for kernel in missing]
    lines += [f"  {op}: {fix}" for op, fix in KNOWN_FIXES.items()
              if any(op in kernel.op.replace(".", "::") for kernel in missing)]
    seeded = [kernel for kernel in missing if kernel.op in SEED_KERNELS and kernel.nodes]
    if seeded:
        lines.append(f"  {seeded[0].name} makes the seeds of the random numbers Inductor generates for the program's "
                     f"random ops ({', '.join(seeded[0].nodes)}).")
    if any(kernel.dropout for kernel in seeded):
        lines.append("  The program has dropout, which torch.export keeps only for a model in training mode: to lower "
                     "for inference, call model.eval() before lowering (dropout is then the identity, and the "
                     "kernel goes).")
    if refusal is not None:
        lines.append(refusal_line(refusal))
        # The reason says what to change: an op without a rule, or something else about the program (a
        # complex input written in place), where "rewrite the op" would point at an op that has a rule.
        lines.append("Change that line as the reason says (docs/ops.md lists what the pass rewrites and refuses) and "
                     f"every complex kernel above goes{shipped}"
                     + (" (a package with a proxy-executor kernel runs in torch's loader only, not in aotcuda.load)."
                        if shipped else "."))
    elif dropout_only(missing):
        lines.append("allow_fallbacks=True is no fix here: it would ship the dropout as in training, a program that "
                     "zeroes activations at random at every call; call model.eval() (in an `aotcuda lower` factory: "
                     "return model.eval()).")
    elif len(seeded) == len(missing):
        lines.append("Keep the model's random ops out of the program (model.eval() for dropout), or pass "
                     "allow_fallbacks=True to ship the ATen kernel.")
    else:
        lines.append("Rewrite those ops in the model (complex math is rewritten by ReplaceComplexWithRealPass; "
                     f"see docs/ops.md for what it supports){shipped}.")
    return "\n".join([*lines, *complex_scalars])
