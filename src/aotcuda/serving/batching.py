"""Request batching for a program with a dynamic batch dim: which dim, how requests combine, how results split.

A program batches when every input and every output has one shape symbol as its dim 0 (the exported
``Dim("batch")``), no other dim mentions that symbol, and so the rows of a batch are computed
independently (the usual case for a model's batch dim; a program that mixes rows across its batch dim
must be served with ``max_batch_size=1``). Requests combine when they agree on every other dim; a batch
holds at most the symbol's exported maximum of rows, so a burst of requests may run as several batches.
Pure tensor code: unit-tested without Ray.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from aotcuda.errors import Advice, ServingConfigError

__all__ = ["BatchPlan", "combine", "serving_plan", "split_rows"]


@dataclass(frozen=True)
class BatchPlan:
    """How one program batches.

    Attributes:
        symbol: the dim-0 shape symbol every input and output shares, or None when the program does not batch.
        max_rows: that symbol's exported maximum (None: unbounded).
        reason: why the program does not batch ("" when it does).
    """

    symbol: str | None
    max_rows: int | None = None
    reason: str = ""

    @property
    def batches(self) -> bool:
        return self.symbol is not None

    @classmethod
    def from_specs(cls, input_specs, output_specs) -> BatchPlan:
        """Read the plan off a Program's ``input_specs`` / ``output_specs`` (TensorSpec tuples or None)."""
        if not input_specs or output_specs is None:
            return cls(None, reason="the package has no aotcuda signature (inputs and outputs unknown)")
        first = [spec.dims[0] if spec.rank else None for spec in (*input_specs, *output_specs)]
        symbols = {dim.expr for dim in first if dim is not None and dim.expr is not None}
        if any(dim is None or dim.expr is None for dim in first) or len(symbols) != 1:
            return cls(None, reason="not every input and output has the same dynamic dim 0 (export it with "
                                    "dynamic_shapes={name: {0: Dim('batch', max=...)}} for every input)")
        (symbol,) = symbols
        if not re.fullmatch(r"[A-Za-z_]\w*", symbol):
            return cls(None, reason=f"dim 0 is the expression {symbol}, not a plain batch symbol")
        mentions = re.compile(rf"\b{re.escape(symbol)}\b")
        for spec in (*input_specs, *output_specs):
            if any(dim.expr is not None and mentions.search(dim.expr) for dim in spec.dims[1:]):
                return cls(None, reason=f"{spec.name!r} uses the batch symbol {symbol} in another dim")
        return cls(symbol, first[0].max)

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


def serving_plan(input_specs, output_specs, max_batch_size: int, where: str) -> BatchPlan:
    """The batch plan of a program about to be served, after checking that the options fit it.

    Raises ServingConfigError when max_batch_size > 1 and the program does not batch, or when one of its
    input or output dtypes cannot travel as safetensors.
    """
    from aotcuda.serving.codec import unsupported_dtypes

    refused = unsupported_dtypes(spec.dtype for spec in (*(input_specs or ()), *(output_specs or ())))
    if refused:
        raise ServingConfigError(f"{where}: safetensors cannot carry {', '.join(map(str, refused))}, which this "
                                 "program takes or returns; serve a program without them")
    plan = BatchPlan.from_specs(input_specs, output_specs)
    if max_batch_size > 1 and not plan.batches:
        raise ServingConfigError(f"{where} cannot be batched: {plan.reason}; serve it with max batch size 1 "
                                 "(the default)", advice=(Advice("max_batch_size", 1),))
    return plan
