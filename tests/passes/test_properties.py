"""Property-based tests of ReplaceComplexWithRealPass: random programs of registry ops, rewritten, match eager.

Each example is a program of 1-8 ops drawn from the rule registry (program_gen.py, op_gen.py) with
random shapes (size-1, zero-size and broadcast dims), complex64/complex128/mixed precision, real
operands and Python int/float/complex scalars. It is exported (torch.export + run_decompositions),
rewritten with strict=True, and its `.module()` compared with the eager module on fresh inputs.

Tolerance: the dtype's relative tolerance (complex64 1e-5, complex128 1e-10) both as rtol and, scaled by
the largest magnitude any intermediate value reaches, as atol: rounding errors of sums and products are
relative to their operands, not to a result that cancellation made small. Ops that amplify error get
operands away from their singularities (program_gen's "safe" values) instead of looser tolerances.

Profiles (HYPOTHESIS_PROFILE=<name>): "ci" (default: 180 random programs, plus one single-op program per
generated op: ~340 examples; 12 min in a `-n 2` run on 2 cores shared with other jobs, 2026-12-03, the 180
random programs 4.5-7 min of it), "soak" (10,000 random programs), "dev" (20).
Export + run_decompositions dominate (~0.3 s a program on this 2-core machine).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.passes import ReplaceComplexWithRealPass, ReplaceViewCopyWithViewPass
from aotcuda.passes.complex_to_real.registry import RULES, op_name, rule_for

from complex_to_real.helpers import TOLERANCES, assert_no_complex
from op_gen import GENERATORS, NOT_GENERATED
from program_gen import Program, ProgramModule, programs

_COMMON = dict(deadline=None, derandomize=False, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
settings.register_profile("ci", max_examples=180, **_COMMON)
# HYPOTHESIS_SOAK_EXAMPLES splits a soak over processes (one per core, each with its own --hypothesis-seed).
settings.register_profile("soak", max_examples=int(os.environ.get("HYPOTHESIS_SOAK_EXAMPLES", 10_000)), **_COMMON)
settings.register_profile("dev", max_examples=20, **_COMMON)
PIPELINES = ["default", "lowering", "rules_kept"]
rule_for(None)  # fills RULES, which the "rules_kept" pipeline reads before the pass first runs
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def export_and_rewrite(module: torch.nn.Module, args: tuple, pipeline: str):
    """"default": torch.export's default decompositions, then the pass; "lowering": lower()'s own table and
    pass list (views first), the complex pass made strict; "rules_kept": the default table minus the ops
    that have a rule, so that rules of ops the default table decomposes (transpose, matmul, ...) run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # casting complex to real warns that it drops the imaginary part
        ep = torch.export.export(module, args)
        if pipeline == "rules_kept":
            table = {op: fn for op, fn in torch.export.default_decompositions().items() if op not in RULES}
            ep = ep.run_decompositions(table)
        elif pipeline == "default":
            ep = ep.run_decompositions()
        else:
            ep = ReplaceViewCopyWithViewPass()(ep.run_decompositions(decomposition_table()))
        return ep, ReplaceComplexWithRealPass(strict=True)(ep)


def check_program(program: Program, fresh_seed: int = 1, pipeline: str = "default") -> None:
    """Export `program`, rewrite it strictly, and compare the rewritten module with eager on fresh inputs.

    The rewritten program is compared with the program the pass was given (run with complex kernels)
    first, so that a failure says whether the pass or torch's export/decompositions changed the result.
    """
    module = ProgramModule(program)
    ep, new = export_and_rewrite(module, program.fresh_inputs(seed=0), pipeline)
    assert_no_complex(new)
    inputs = program.fresh_inputs(seed=fresh_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected, before, actual = module(*inputs), ep.module()(*inputs), new.module()(*inputs)
        scale, dtype = module.error_scale(*inputs)
    tol = TOLERANCES[dtype]["rtol"]
    for reference, what in ((before, "the program before the pass"), (expected, "eager")):
        assert len(reference) == len(actual)
        for i, (e, a) in enumerate(zip(reference, actual)):
            torch.testing.assert_close(a, e, rtol=tol, atol=tol * scale, equal_nan=True,
                                       msg=lambda m, i=i, w=what: f"output {i} differs from {w} in\n{program!r}\n{m}")


def test_every_registered_op_has_a_generator():
    missing = [op_name(op) for op in RULES if op not in GENERATORS and op not in NOT_GENERATED]
    assert not missing, f"add a generator to tests/passes/op_gen.py (or a reason to NOT_GENERATED) for {missing}"
    stale = [op_name(op) for op in [*GENERATORS, *NOT_GENERATED] if op not in RULES]
    assert not stale, f"op_gen.py covers ops with no rule: {stale}"


@pytest.mark.parametrize("op", sorted(GENERATORS, key=op_name), ids=op_name)
@settings(settings.get_profile("dev"), max_examples=1)
@given(program=st.data(), pipeline=st.sampled_from(PIPELINES))
def test_each_op_alone(op, program, pipeline):
    """Every generated op at least once on its own, whatever the random mix below draws."""
    check_program(program.draw(programs(max_ops=1, ops=[op])), pipeline=pipeline)


@settings(settings.get_profile(PROFILE))
@given(program=programs(), fresh_seed=st.integers(1, 2**31 - 1), pipeline=st.sampled_from(PIPELINES))
def test_random_programs_match_eager(program, fresh_seed, pipeline):
    check_program(program, fresh_seed, pipeline)
    _count_example()


_examples_run = 0


def _count_example() -> None:
    """In the long profiles, a progress line every 100 examples (run pytest with -s to see it)."""
    global _examples_run
    _examples_run += 1
    if PROFILE == "soak" and _examples_run % 100 == 0:
        print(f"test_properties: {_examples_run} examples passed", flush=True)
