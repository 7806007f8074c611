"""The issue's speed bar: a 2,000-node program rewritten in under 2 s on the 2-core CI machine.

Two programs: 17 Llama-style blocks (most nodes real, copied as they are) and the worst case, a chain
where every node is complex (every node goes through a rule). Each is timed as the best of 3 runs, so
that a moment of load from other jobs on the machine does not decide the result.
"""

import time

import pytest

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import pass_scaling_module

pytestmark = pytest.mark.slow  # exports two 2,000-node programs; deselect with -m "not slow"


def _best_of_three(ep):
    best, new = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        new = ReplaceComplexWithRealPass(strict=True)(ep)
        best = min(best, time.perf_counter() - start)
    return best, new


@pytest.mark.parametrize("program", ["llama_blocks", "all_complex_chain"])
def test_two_thousand_nodes_in_under_two_seconds(program):
    benchmark = pass_scaling_module()
    ep = benchmark.exported_model(17) if program == "llama_blocks" else benchmark.exported_chain(160)
    assert len(ep.graph.nodes) >= 2000
    best, new = _best_of_three(ep)
    assert new is not ep
    assert not any(n.meta["val"].dtype.is_complex for n in new.graph.nodes
                   if hasattr(n.meta.get("val"), "dtype"))
    assert best < 2.0, f"{program}: {len(ep.graph.nodes)} nodes took {best:.2f} s"
