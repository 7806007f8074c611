"""Request batching for a program with a dynamic batch dim: which dim, how requests combine, how results split.

A program batches when every input and every output has one shape symbol as its dim 0 (the exported
``Dim("batch")``), no other dim mentions that symbol, every other dim of an output is set by the inputs' other
dims, and so the rows of a batch are computed independently (the usual case for a model's batch dim; a
program that mixes rows across its batch dim must be served with ``max_batch_size=1``). Requests combine when
they agree on every other dim; a batch holds at most the symbol's exported maximum of rows, so a burst of
requests may run as several batches.

Why the outputs' other dims: requests that agree on their inputs' shapes must get answers of the shapes they
would get alone. A dim the program computes from the inputs' values (``lengths.max().item()``: an unbacked
u0) is computed over the whole batch: batched with a request of length 7, one of length 3 got a mask 7 wide,
which told it the other client's length (and one large value set the memory of every answer in its batch).
Why the index ranges: an input whose recorded range (the signature's "index_ranges") mentions the batch symbol
indexes across the batch dim (``x[ids]`` over x's rows): batched, one client's ``ids=[0]`` read another
client's row, and a value refused alone (``ids=[-2]`` for one row) was accepted, whatever the values.
Pure tensor code: unit-tested without Ray.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from aotcuda.errors import Advice, PackageError, ServingConfigError, clipped, one_line, terminal_clipped, terminal_safe

__all__ = ["BatchPlan", "combine", "index_records", "serving_plan", "split_rows", "state_written_names",
           "training_norm_cause",
           "tensor_size_records", "unbounded_output_dim"]


@dataclass(frozen=True)
class BatchPlan:
    """How one program batches.

    Attributes:
        symbol: the dim-0 shape symbol every input and output shares, or None when the program does not batch.
        max_rows: that symbol's exported maximum (None: unbounded).
        reason: why the program does not batch ("" when it does).
        dim_zero: the reason is its dim 0, which lowering it again with a batch Dim at dim 0 of every input fixes
            (not so for an output dim the inputs do not set: that is the program's own computation).
        dim_name: the batch dim as the user named it when lowering (``Dim("batch")``, ``--dynamic x:0:1:64:batch``;
            the signature's dim_names), None where the package records no name; ``symbol`` is torch's (``s52``).
    """

    symbol: str | None
    max_rows: int | None = None
    reason: str = ""
    dim_zero: bool = False
    dim_name: str | None = None

    @property
    def batches(self) -> bool:
        return self.symbol is not None

    @classmethod
    def from_specs(cls, input_specs, output_specs, index_ranges: dict | None = None) -> BatchPlan:
        """Read the plan off a Program's ``input_specs`` / ``output_specs`` (TensorSpec tuples or None) and the
        inputs' index ranges (``{name: (IndexRange, ...)}``, see index_records; None: none recorded)."""
        if not input_specs or output_specs is None:
            return cls(None, reason="the package has no aotcuda signature (inputs and outputs unknown)")
        first = [spec.dims[0] if spec.rank else None for spec in (*input_specs, *output_specs)]
        symbols = {dim.expr for dim in first if dim is not None and dim.expr is not None}
        if any(dim is None or dim.expr is None for dim in first) or len(symbols) != 1:
            inputs = {spec.dims[0].expr if spec.rank else None for spec in input_specs}
            if len(inputs) == 1 and None not in inputs:  # the inputs share a batch dim: an output is why
                (batch,) = inputs
                output = next(spec for spec in output_specs if not spec.rank or spec.dims[0].expr != batch)
                shown = input_specs[0].dims[0].shown
                return cls(None, reason=f"output {output.name!r} (shape {output.shape_text()}) does not have the "
                                        f"inputs' batch dim ({shown}) at dim 0, so a batch's answer does not split "
                                        "into one per request (the program computes it over the whole batch)")
            return cls(None, reason="not every input and output has the same dynamic dim 0 (export it with "
                                    "dynamic_shapes={name: {0: Dim('batch', max=...)}} for every input)",
                       dim_zero=True)
        (symbol,) = symbols
        if not re.fullmatch(r"[A-Za-z_]\w*", symbol):
            return cls(None, reason=f"dim 0 is the expression {symbol}, not a plain batch symbol", dim_zero=True)
        mentions = re.compile(rf"\b{re.escape(symbol)}\b")
        for spec in (*input_specs, *output_specs):
            if any(dim.expr is not None and mentions.search(dim.expr) for dim in spec.dims[1:]):
                return cls(None, reason=f"{spec.name!r} uses the batch symbol {symbol} in another dim")
        unset = _dim_not_set_by_inputs(input_specs, output_specs) or \
            _index_across_batch(symbol, index_ranges, input_specs)
        if unset:
            return cls(None, reason=unset)
        return cls(symbol, first[0].max, dim_name=first[0].user_expr)

    def chunks(self, requests: list[list[torch.Tensor]]) -> list[list[int]]:
        """Group request indices into batches: requests in one batch agree on every dim but dim 0 and
        hold at most ``max_rows`` rows together; the order within each batch is the arrival order."""
        groups: dict[tuple, list[list[int]]] = {}
        rows: dict[tuple, int] = {}
        for index, tensors in enumerate(requests):
            key = tuple(tuple(t.shape[1:]) for t in tensors)
            n = tensors[0].shape[0]
            if key not in groups or (self.max_rows is not None and rows[key] + n > self.max_rows):
                groups.setdefault(key, []).append([])
                rows[key] = 0
            groups[key][-1].append(index)
            rows[key] += n
        return [batch for batches in groups.values() for batch in batches]


def _dim_not_set_by_inputs(input_specs, output_specs) -> str:
    """Why an output's dim past dim 0 is not a function of the inputs' dims past dim 0 ("" when each is): then
    the requests of one batch, which agree on those, could get answers of other sizes than they would alone."""
    from aotcuda.runtime.shape_expressions import shape_expression

    def symbols(dim) -> set[str]:
        return {str(symbol) for symbol in shape_expression(dim.expr).free_symbols}

    known = {name for spec in input_specs for dim in spec.dims[1:] if dim.expr is not None for name in symbols(dim)}
    for spec in output_specs:
        for index, dim in enumerate(spec.dims[1:], 1):
            if dim.expr is None:
                continue
            if dim.data_dependent:
                return (f"output {spec.name!r} dim {index} ({dim.shown}) is data-dependent (computed from the inputs' "
                        "values): over a batch it would take the size the batch's values give, so one request's "
                        "answer would show another request's data")
            if not symbols(dim) <= known:
                return (f"output {spec.name!r} dim {index} ({dim.shown}) is not set by the inputs' dims past dim 0: "
                        "requests batched together could get answers of other sizes than they would alone")
    return ""


def _index_across_batch(symbol: str, index_ranges: dict | None, input_specs) -> str:
    """Why an input indexes across the batch dim ("" when none does): its recorded index range has a bound that
    mentions the batch symbol (``x[ids]`` over x's rows: [-batch, batch - 1]). Over a batch the range is the
    batch's rows, not the request's: one request's index would read another request's rows, and a value
    refused alone would be accepted. No value check can fix that: the program's computation crosses rows."""
    from aotcuda.runtime.specs import DimSpec, under_dim_names

    names = {dim.expr: dim.user_expr for spec in input_specs for dim in spec.dims
             if dim.user_expr and re.fullmatch(r"[A-Za-z_]\w*", dim.expr)}  # torch symbol -> the user's Dim name

    def text(bound) -> str:  # an int, a DimSpec of an expression, or None (that side is not checked)
        return under_dim_names(bound.expr, names) if isinstance(bound, DimSpec) else "unchecked" if bound is None \
            else str(bound)

    for name, ranges in (index_ranges or {}).items():
        for allowed in ranges:
            if any(isinstance(bound, DimSpec) and symbol in bound.symbols for bound in (allowed.low, allowed.high)):
                shown = f"{text(allowed.low)}, {text(allowed.high)}"
                why = clipped(allowed.reason, 200) or "no op recorded"  # one line: IndexRange.from_json
                return (f"input {clipped(name, 60)!r} is an index over the batch dim: the values it may hold, "
                        f"[{shown}], depend on the batch size ({why}); over a batch one request's index would read "
                        "another request's rows, and a value refused alone would be accepted")
    return ""


def index_records(signature: dict | None, where: str) -> tuple[dict, dict]:
    """The inputs' index records of a signature (a package's, or the one a Program loaded): ``({name:
    (IndexRange, ...)}, {name: [line, ...]})``, the "index_ranges" (read by the runtime's
    ``parse_index_ranges``, which load reads them with) and the "index_unchecked" lines of each input that has
    them, each one line and escaped (``errors.terminal_safe``: a ServingConfigError quotes them, which a traceback, a
    terminal or a log prints; break41's review found an ESC sequence there raw through ``check_package``).
    PackageError for ranges not in their form (load refuses them too)."""
    from aotcuda.runtime.index_ranges import parse_index_ranges

    inputs = (signature or {}).get("inputs")
    inputs = inputs if isinstance(inputs, list) else []
    ranges = {str(inputs[index].get("name", f"#{index}")): entries
              for index, entries in parse_index_ranges(signature, where).items()}
    unchecked = {}
    for index, spec in enumerate(inputs):
        lines = spec.get("index_unchecked") if isinstance(spec, dict) else None
        if lines:
            unchecked[str(spec.get("name", f"#{index}"))] = \
                [terminal_safe(one_line(line)) for line in (lines if isinstance(lines, list) else [lines])]
    return ranges, unchecked


def unchecked_index_inputs(index_unchecked: dict | None) -> str:
    """The inputs whose values reach an index unchecked (the signature's "index_unchecked": lowering could not
    bound the index), with the model lines recorded, in words ("" when none)."""
    if not index_unchecked:
        return ""
    names = ", ".join(repr(clipped(name, 60)) for name in list(index_unchecked)[:4])
    more = f" and {len(index_unchecked) - 4} more" if len(index_unchecked) > 4 else ""
    lines = "; ".join(clipped(line, 300) for entries in list(index_unchecked.values())[:4] for line in entries[:2])
    return f"input{'s' * (len(index_unchecked) > 1)} {names}{more} reach{'es' * (len(index_unchecked) == 1)} an " \
           f"index that lowering could not bound, so {'its' if len(index_unchecked) == 1 else 'their'} values are " \
           f"not checked before a call ({lines})"


def combine(requests: list[list[torch.Tensor]]) -> tuple[list[torch.Tensor], list[int]]:
    """One batch's flat inputs (each input concatenated along dim 0) and each request's row count."""
    counts = [tensors[0].shape[0] for tensors in requests]
    if len(requests) == 1:
        return list(requests[0]), counts
    return [torch.cat(column) for column in zip(*requests)], counts


def split_rows(outputs: list[torch.Tensor], counts: list[int]) -> list[list[torch.Tensor]]:
    """Each request's outputs, cut from the batch's along dim 0 (views of the batch's outputs)."""
    if len(counts) == 1:
        return [list(outputs)]
    pieces = [torch.split(output, counts) for output in outputs]
    return [[piece[i] for piece in pieces] for i in range(len(counts))]


def graph_rows_reason(signature: dict) -> str | None:
    """Where lowering's graph walk (lowering/batch_row_flow.py) found a program's rows mixed, from its signature: the
    op and the model's line, for serving_plan's refusal; None where the walk found no mix (or the package is older)."""
    reason = signature.get("rows_graph_reason")
    return reason if signature.get("rows_graph") == "mixes" and isinstance(reason, str) else None


def serving_plan(input_specs, output_specs, max_batch_size: int, where: str, *,
                 allow_unbounded_outputs: bool = False, data_dependent_sizes: list | None = None,
                 index_ranges: dict | None = None, index_unchecked: dict | None = None,
                 allow_unchecked_indices: bool = False, state_written: list | None = None,
                 rows_mixed: object = None, rows_found: object = None) -> BatchPlan:
    """The batch plan of a program about to be served, after checking that the options fit it.

    Raises ServingConfigError when max_batch_size > 1 and the program does not batch (an input whose
    ``index_ranges`` mention the batch symbol included), when one of its input or output dtypes cannot travel
    as safetensors, when an output has a data-dependent dim with no upper bound, or ``data_dependent_sizes``
    (the signature's: intermediates too) holds one (unless ``allow_unbounded_outputs``: see unbounded_output_dim
    and unbounded_size), or when ``index_unchecked`` names an input (unless ``allow_unchecked_indices``; and
    then still when max_batch_size > 1: nothing shows such an index stays within one request's rows), or when
    ``state_written`` (the signature's: the state the program writes at every call) names any and max_batch_size > 1,
    or when ``rows_mixed`` (the signature's: lowering's probe, lowering/batch_rows.py) is True and max_batch_size > 1,
    saying where lowering's graph walk found the mix where ``rows_found`` (graph_rows_reason of the signature) says.
    ``index_ranges`` and ``index_unchecked``: index_records of the signature (``index_unchecked`` is also
    Program.index_unchecked). PackageError for a ``data_dependent_sizes`` that is not in its form.
    """
    from aotcuda.serving.codec import unsupported_dtypes

    nothing = [spec.name for spec in output_specs or () if getattr(spec, "scalar", None) == "none"]
    if nothing:  # an answer is one safetensors file of output_0 ... output_<n-1>, each a tensor
        raise ServingConfigError(f"{where}: output {nothing[0]!r} is None at every call (forward returns None there), "
                                 "and a served answer holds one tensor per output; serve a program whose forward "
                                 "returns tensors and numbers only (leave the None out of its result)")
    refused = unsupported_dtypes(spec.dtype for spec in (*(input_specs or ()), *(output_specs or ())))
    if refused:
        raise ServingConfigError(f"{where}: safetensors cannot carry {', '.join(map(str, refused))}, which this "
                                 "program takes or returns; serve a program without them")
    unbounded = unbounded_output_dim(output_specs, input_specs) or unbounded_size(data_dependent_sizes)
    if unbounded and not allow_unbounded_outputs:
        raise ServingConfigError(
            f"{where}: {unbounded}, with no upper bound: one request of a few bytes (lengths=[2**36]) makes a replica "
            "allocate as much memory as its value says. Bound it in the model: torch._check(n <= N) after the "
            "value is read (n = lengths.max().item()), which torch.export records as the size's max and the "
            "program checks at every call; or, accepting that any client may make a replica allocate any amount, "
            "serve it with allow_unbounded_outputs=True",
            advice=(Advice("allow_unbounded_outputs", True),))
    unchecked = unchecked_index_inputs(index_unchecked)
    if unchecked and not allow_unchecked_indices:
        raise ServingConfigError(
            f"{where}: {unchecked}. One request holding an index out of range, a few bytes, ends the replica's "
            "process (on the CPU the generated code's own bounds check aborts it: `terminate called`) or leaves its "
            "CUDA context unusable (a device-side assert), with every request in it. Make the index one that "
            "lowering bounds, so that each request is checked and refused with 400: pass it as an input of its own "
            "(position_ids into the embedding, checked against the table's rows), or compute it only through the "
            "ops lowering follows, or bound it into the table whatever the input holds (a clamp to the table's "
            "rows, e.g. (mask.cumsum(-1) - 1).clamp(0, rows - 1): docs/reliability.md, 'Out-of-range indices'); "
            "or, accepting that any client can end a replica, serve it with allow_unchecked_indices=True",
            advice=(Advice("allow_unchecked_indices", True),))
    state = state_written_names(state_written)
    if state and max_batch_size > 1:
        # Before the batch plan's reasons: a program that writes its state is never batched, so a reason about its
        # dims (with a hint to lower it again with a batch dim) would send the user to a fix that cannot work.
        cause = training_norm_cause(state_written)
        raise ServingConfigError(f"{where} writes its state at every call ({state}): a batch of requests is one "
                                 "call, so its state would advance once a batch, not once a request; a program that "
                                 "writes its state is never batched: serve it with max batch size 1 (the default)"
                                 + (f". But {cause}: then it batches" if cause else ""),
                                 advice=(Advice("max_batch_size", 1),))
    if unchecked and max_batch_size > 1:  # allowed to run unchecked, still not to mix requests
        raise ServingConfigError(f"{where} cannot be batched: {unchecked}, so nothing shows that a request's index "
                                 "values stay within its own rows of a batch (an index over the batch dim reads "
                                 "other clients' rows); serve it with max batch size 1 (the default)",
                                 advice=(Advice("max_batch_size", 1),))
    plan = BatchPlan.from_specs(input_specs, output_specs, index_ranges)
    if max_batch_size > 1 and plan.batches and rows_mixed is True:  # the shapes batch; the values do not
        found = (f"lowering found it in the program's graph: {terminal_clipped(rows_found, 300)}" if isinstance(rows_found, str)
                 else "lowering ran it on the example inputs: changing one row, or leaving the first out, changed "
                      "other rows of an output")
        raise ServingConfigError(f"{where} cannot be batched: an output's row depends on other rows of its inputs' "
                                 f"batch dim, or on its place among them ({found}; as x - x.mean(0), x.cumsum(0), "
                                 "x.flip(0) or x * len(x) do), so in a batch one client's answer would be computed "
                                 "from, and tell it, other clients' rows; serve it with max batch size 1 (the default)",
                                 advice=(Advice("max_batch_size", 1),))
    if max_batch_size > 1 and not plan.batches:
        relower = [Advice("dynamic_shapes", "batch", relower=True)] * plan.dim_zero  # only where dim 0 is why
        raise ServingConfigError(f"{where} cannot be batched: {plan.reason}; serve it with max batch size 1 "
                                 "(the default)", advice=(Advice("max_batch_size", 1), *relower))
    return plan


def state_written_names(state_written) -> str:
    """The state a program writes at every call (the signature's "state_written": a KV cache, a step counter), its
    names in words ("" when none, or when the record is not a list of names: an older aotcuda wrote none)."""
    if not (isinstance(state_written, list) and state_written and all(isinstance(name, str) for name in state_written)):
        return ""
    more = f" and {len(state_written) - 4} more" if len(state_written) > 4 else ""
    return ", ".join(repr(clipped(name, 60)) for name in state_written[:4]) + more


_NORM_STATISTICS = ("running_mean", "running_var", "num_batches_tracked")


def training_norm_cause(state_written) -> str:
    """Where the state a program writes is a norm's running statistics (``....running_mean``, ``running_var``,
    ``num_batches_tracked``: a BatchNorm, or an InstanceNorm tracking them, left in training mode, whose program
    normalizes each call by its own batch and updates the statistics), the likely cause and its fix, in words;
    else "". A model lowered after .eval() reads them and writes nothing."""
    if not (isinstance(state_written, list) and state_written and all(isinstance(name, str) for name in state_written)):
        return ""
    if not all(name.rsplit(".", 1)[-1] in _NORM_STATISTICS for name in state_written):
        return ""
    return ("the state written is a norm's running statistics: likely a BatchNorm left in training mode, whose "
            "program normalizes each call by that call's own batch and updates running_mean/running_var; call "
            "model.eval() before lowering (in an `aotcuda lower` factory: return model.eval()) and lower it again")


def unbounded_output_dim(output_specs, input_specs=None) -> str:
    """The first output dim whose size comes from an input's values (an unbacked symbol: ``n =
    lengths.max().item()``), or holds a symbol no input dim has (``input_specs`` given), with no recorded
    maximum, in words ("" when none). Such a size is whatever a request's values say, so a request's bytes do
    not bound what the program allocates for it."""
    unbounded = unbounded_dims(output_specs, input_specs)
    if not unbounded:
        return ""
    spec, index, dim = unbounded[0]
    return f"output {spec.name!r} dim {index} is {dim.shown}, a size the program computes from an input's values " \
           "(data-dependent)"


def unbounded_dims(output_specs, input_specs=None) -> list:
    """Every (output spec, dim index, DimSpec) that unbounded_output_dim refuses, in order (``aotcuda inspect``
    lists them all)."""
    bound_by_inputs = {symbol for spec in input_specs or () for dim in spec.dims for symbol in dim.symbols}
    return [(spec, index, dim) for spec in output_specs or () for index, dim in enumerate(spec.dims)
            if (dim.data_dependent or (input_specs is not None and not dim.symbols <= bound_by_inputs))
            and dim.max is None]


def tensor_size_records(recorded, where: str, dim_names=None) -> tuple:
    """The signature's "tensor_sizes" (lowering.signature.tensor_sizes: the bytes of the tensors the program makes,
    as expressions of the shape symbols) as ``((text, expression), ...)``, read with the runtime's small grammar,
    the text under the user's Dim names where ``dim_names`` (the signature's) gives them ("264*batch*seq", not
    "264*s27*s77"); () when absent (an older aotcuda). PackageError for a record not in that form."""
    from aotcuda.runtime.shape_expressions import shape_expression
    from aotcuda.runtime.specs import under_dim_names

    names = ({symbol: clipped(name, 40) for symbol, name in dim_names.items()
              if isinstance(symbol, str) and isinstance(name, str)} if isinstance(dim_names, dict) else None)

    if recorded is None:
        return ()
    if not isinstance(recorded, list) or not all(isinstance(text, str) for text in recorded) or len(recorded) > 64:
        raise PackageError(f"{where}: the signature's tensor_sizes is not a list of at most 64 expressions: "
                           f"{clipped(repr(recorded), 80)}; lower the model again")
    try:
        return tuple((under_dim_names(text, names), shape_expression(text)) for text in recorded)
    except ValueError as error:
        raise PackageError(f"{where}: the signature's tensor_sizes holds an expression aotcuda cannot read "
                           f"({clipped(str(error), 120)}); lower the model again") from None


def unbounded_size(recorded) -> str:
    """The first size of the signature's "data_dependent_sizes" (lowering.signature.data_dependent_sizes: every
    size computed from an input's values, intermediates included) with no maximum, in words ("" when none;
    None, from an older aotcuda, records nothing). PackageError for a record not in that form."""
    if recorded is None:
        return ""
    if not isinstance(recorded, list) or not all(
            isinstance(size, dict) and isinstance(size.get("expr"), str) and
            (size.get("max") is None or (type(size.get("max")) is int and size["max"] >= 0)) for size in recorded):
        raise PackageError(f"the signature's data_dependent_sizes is not a list of {{'expr': str, 'max': int or "
                           f"null}}: {clipped(repr(recorded), 80)}; lower the model again")
    for size in recorded:
        if size.get("max") is None:
            # escaped: load reads no grammar into this optional record, and a ServingConfigError quotes it
            return (f"the program computes a tensor size, {clipped(terminal_safe(size['expr']), 40)}, from an input's values "
                    "(data-dependent; an intermediate tensor's, or an output's)")
    return ""
