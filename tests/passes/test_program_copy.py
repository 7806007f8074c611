"""copied_graph_module: the copy of a program's graph that every pass changes keeps the names the graph signature
gives its nodes, also where a forward argument is named after a Python builtin (``input``, as in every
``nn.Sequential``): torch.fx's deepcopy renames such a node (``input_1``), and a program made around it fails torch's
check."""

import pytest
import torch
from torch.export import Dim

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.pipeline import before_compile
from aotcuda.passes.common_subexpressions import EliminateCommonSubexpressionsPass
from aotcuda.passes.program_copy import copied_graph_module, with_graph


def relative_error(actual, expected):
    return ((actual - expected).norm() / expected.norm()).item()


class Builtins(torch.nn.Module):
    """forward's arguments named after builtins; the same mask twice, for the common-subexpression pass to merge."""

    def forward(self, input, max, sum):
        first = torch.softmax(input + torch.where(input > max, 0.0, -1e4), -1)
        second = torch.softmax(input * 2 + torch.where(input > max, 0.0, -1e4), -1)
        return first + second * sum


def _builtins_program():
    args = (torch.randn(4, 8), torch.randn(8), torch.randn(()))
    with torch.no_grad():
        return torch.export.export(Builtins(), args).run_decompositions(decomposition_table())


def test_the_copy_keeps_every_node_name_and_the_program_made_around_it_is_valid():
    ep = _builtins_program()
    placeholders = [node.name for node in ep.graph.nodes if node.op == "placeholder"]
    assert placeholders == ["input", "max", "sum"]  # torch.export's names, as the signature gives them
    copied = copied_graph_module(ep)
    assert [node.name for node in copied.graph.nodes] == [node.name for node in ep.graph.nodes]
    assert [node.target for node in copied.graph.find_nodes(op="placeholder")] == placeholders
    program = with_graph(ep, copied)  # torch checks the signature's names against the graph's here
    args = (torch.randn(4, 8), torch.randn(8), torch.randn(()))
    assert relative_error(program.module()(*args), Builtins()(*args)) <= 1e-6


def test_a_pass_changes_a_program_whose_arguments_are_named_after_builtins():
    ep = _builtins_program()
    graph_pass = EliminateCommonSubexpressionsPass()
    merged = graph_pass(ep)
    assert graph_pass.result.changed  # it made a program around its copy: before, torch's check refused it
    for _ in range(3):
        args = (torch.randn(4, 8), torch.randn(8), torch.randn(()))
        assert relative_error(merged.module()(*args), Builtins()(*args)) <= 1e-6


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_sequential_with_a_batch_norm_reaches_inductor_with_eagers_values(dynamic):
    # nn.Sequential.forward(self, input); BatchNorm's num_batches_tracked is a 0-d buffer that lowering turns
    # into a full() (scalar_constants), which copies the graph: before, "Input spec name input does not match
    # node name input_1" ended lower()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 16 * 16, 10)).eval()
    with torch.no_grad():
        model[1].running_mean.normal_()
        model[1].running_var.uniform_(0.5, 2.0)
    shapes = {"input": {0: Dim("batch", min=1, max=8)}} if dynamic else None
    ep = before_compile(model, (torch.randn(4, 3, 16, 16),), None, shapes).program
    assert [node.name for node in ep.graph.nodes if node.op == "placeholder"][-1] == "input"
    for batch in (3, 5) if dynamic else (4, 4):
        x = torch.randn(batch, 3, 16, 16)
        with torch.no_grad():
            assert relative_error(ep.module()(x), model(x)) <= 1e-5
