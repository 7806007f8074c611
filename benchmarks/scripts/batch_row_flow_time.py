"""What lower()'s batch-rows checks cost on a 6-layer nn.TransformerEncoder (batch 8, seq 128, d 256), CPU:
the graph walk (lowering/batch_row_flow.py) and the probe (lowering/batch_rows.py), each the least of 5 runs, on
the program Inductor is given (before_compile: export, decompositions, passes; no compile).

    PYTHONPATH=src python3 benchmarks/scripts/batch_row_flow_time.py
"""

import time

import torch
from torch.export import Dim

from aotcuda.lowering.batch_row_flow import row_flow
from aotcuda.lowering.batch_rows import probe_rows
from aotcuda.lowering.pipeline import before_compile


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def least(call, runs: int = 5) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return min(times), result


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(8, 128, 256)
    ep = before_compile(Encoder().eval(), (x,), {}, ({0: Dim("batch", min=1, max=64)},))[0]
    nodes = sum(1 for node in ep.graph.nodes if node.op == "call_function")
    walk, flow = least(lambda: row_flow(ep))
    probe, found = least(lambda: probe_rows(ep, (x,), {}), runs=2)
    print(f"{nodes} call nodes; graph walk {walk * 1e3:.1f} ms ({flow.verdict}); probe {probe:.2f} s "
          f"(mixed={found.mixed}); torch {torch.__version__}, {torch.get_num_threads()} threads")
