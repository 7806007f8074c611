"""torch's compiler settings read from the environment as numbers, checked before torch reads them.

Why: torch reads many of its compiler's environment variables with a bare ``int()`` or ``float()`` as it
imports torch._inductor (``torch/_inductor/config.py`` at module level, ``torch/_dynamo/config.py``,
``torch/fx/experimental/_config.py``) or when a compile imports the module that reads it; a value that is not
a number (``TORCHINDUCTOR_COMPILE_THREADS=abc``, or set but empty) ended ``aotcuda lower``, ``demo``,
``inspect`` and ``aotcuda.lower`` in ``ValueError: invalid literal for int() with base 10: 'abc'``, which names
no variable, and torch cannot import its compiler again in that process. Inductor's compile workers are new
processes that import the same config, so a value set after the import is as bad as one set before.

The table is the variables torch 2.13's and 2.15's compilers read with ``int()``/``float()`` (found by reading their
source; tests/lowering/test_compiler_variables.py reads the installed torch's source again and fails on one the
table lacks). Each is refused exactly where torch's own parse would fail: the same ``int()``/``float()`` on the
value, with the words torch accepts besides. A variable the installed torch does not read is still refused for a
value that is no number, which no torch that reads it takes. Flags are not here: torch compares them with ``== "1"``
(or reads "0"/"1" and keeps any other string), which never raises. A number torch reads that the table does not know
yet is named after the fact, from the line that failed (``cache_folders.import_inductor``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from aotcuda.errors import SwitchError, quoted


@dataclass(frozen=True)
class TorchNumber:
    """name: the environment variable. parse: "int", "float", "ints" (integers separated by commas), or "choice"
    (one of ``words`` exactly: torch reads it as an Enum's value). default: what torch uses when it is unset, as
    the message says it. where: the torch module that reads it. words: other values torch accepts (compared as
    torch compares them). unless: a variable that, when set, torch reads instead of this one."""

    name: str
    parse: str
    default: str
    where: str
    words: tuple[str, ...] = ()
    unless: str | None = None


_CONFIG = "torch/_inductor/config.py"
TORCH_NUMBERS: tuple[TorchNumber, ...] = (
    TorchNumber("TORCHINDUCTOR_COMPILE_THREADS", "int", "one per CPU core, up to 32", _CONFIG),
    TorchNumber("TORCHINDUCTOR_PRECOMPILATION_TIMEOUT_SECONDS", "int", "300", _CONFIG),
    TorchNumber("TORCHINDUCTOR_DEFAULT_AUTOTUNE_WARMUP", "int", "25", _CONFIG),
    TorchNumber("TORCHINDUCTOR_DEFAULT_AUTOTUNE_REP", "int", "100", _CONFIG),
    TorchNumber("TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED", "int", "10", _CONFIG, words=("none", "all")),
    TorchNumber("TORCHINDUCTOR_NVGEMM_MAX_PROFILING_CONFIGS", "int", "5", _CONFIG, words=("none", "all")),
    TorchNumber("TORCHINDUCTOR_COLLECTIVE_BENCHMARK_NRUNS", "int", "50", _CONFIG),
    TorchNumber("TORCHINDUCTOR_COLLECTIVE_BENCHMARK_TIMEOUT", "float", "30", _CONFIG),
    TorchNumber("TORCHINDUCTOR_COORDINATE_DESCENT_RADIUS", "int", "1", _CONFIG),
    TorchNumber("TORCHINDUCTOR_MIN_NUM_SPLIT", "int", "0", _CONFIG),
    TorchNumber("TORCHINDUCTOR_FILE_LOCK_TIMEOUT", "int", "600", _CONFIG),
    TorchNumber("TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT", "int", "0", _CONFIG),
    TorchNumber("TORCHINDUCTOR_CHUNKER_NUM_CHUNKS", "int", "chosen by Inductor", _CONFIG),
    TorchNumber("TORCHINDUCTOR_CPP_MIN_CHUNK_SIZE", "int", "512", _CONFIG),
    TorchNumber("TORCHINDUCTOR_CPP_MAX_HORIZONTAL_FUSION_SIZE", "int", "16", _CONFIG),
    TorchNumber("TORCHINDUCTOR_CPP_GEMM_MAX_K_SLICES", "int", "1", _CONFIG),
    TorchNumber("TORCHINDUCTOR_MULTI_KERNEL", "int", "0", _CONFIG),
    TorchNumber("TORCHINDUCTOR_NUM_DECOMPOSE_K_SPLITS", "int", "10", _CONFIG),
    TorchNumber("TORCHINDUCTOR_DECOMPOSE_K_THRESHOLD", "int", "32", _CONFIG),
    TorchNumber("TORCHINDUCTOR_CUTLASS_DYNAMIC_CLUSTER_SHAPE", "ints", "2,1,1", _CONFIG),
    TorchNumber("TORCHINDUCTOR_CUTLASS_DYNAMIC_CLUSTER_FALLBACK", "ints", "that of ..._CLUSTER_SHAPE", _CONFIG),
    TorchNumber("TORCHINDUCTOR_ORIGAMI_TOPK", "int", "6", _CONFIG),
    TorchNumber("AOTINDUCTOR_REPRO_LEVEL", "int", "2", _CONFIG),
    TorchNumber("INDUCTOR_PROVENANCE", "int", "0", _CONFIG),
    TorchNumber("TORCH_COMPILE_DEBUG", "int", "0", _CONFIG, unless="INDUCTOR_PROVENANCE"),
    TorchNumber("TORCHDYNAMO_REPRO_LEVEL", "int", "2", "torch/_dynamo/config.py"),
    # read from torch 2.15 on
    TorchNumber("TORCHINDUCTOR_AUTOTUNE_CUDAGRAPH_BENCHMARKING_ITERS", "int", "1", _CONFIG),
    TorchNumber("TORCHINDUCTOR_COMPILE_WORKER_WATCHDOG_INTERVAL", "int", "60", _CONFIG),
    TorchNumber("TORCH_COMPILE_DEBUG_MAX_EVENTS", "int", "500000", _CONFIG),
    TorchNumber("TORCH_DYNAMO_GC_GEN2_THRESHOLD_DURING_COMPILE", "int", "1000", "torch/_dynamo/config.py"),
    TorchNumber("TORCHDYNAMO_TRANSLATION_VALIDATION_TIMEOUT", "int", "600000", "torch/fx/experimental/_config.py"),
    # read when a compile imports the module (not at torch._inductor's import)
    TorchNumber("TORCHINDUCTOR_AUTOTUNE_POOL_INACTIVITY_TIMEOUT", "int", "600", "torch/_inductor/autotune_process.py"),
    TorchNumber("TORCHINDUCTOR_REDIS_PORT", "int", "6379", "torch/_inductor/remote_cache.py"),
    TorchNumber("PYTORCH_REORDER_COLLECTIVES_LIMIT", "int", "no limit", "torch/_inductor/config_comms.py"),
    TorchNumber("PYTORCH_SINK_WAITS_LIMIT", "int", "no limit", "torch/_inductor/config_comms.py"),
    # read at compile as codegen/debug_utils.py's IntermediateValueDebuggingLevel (codegen/wrapper.py): 'abc' ended
    # lower() in "InductorError: ValueError: 'abc' is not a valid IntermediateValueDebuggingLevel"
    TorchNumber("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "choice", "0", "torch/_inductor/codegen/wrapper.py",
                words=("0", "1", "2", "3")),
)

_KINDS = {"int": "an integer", "float": "a number", "ints": "integers separated by commas (e.g. 2,1,1)", "choice": ""}
_READS = {"int": "with int()", "float": "with float()", "ints": "with int()", "choice": "as one of those values"}


def torch_reads_it(number: TorchNumber, value: str) -> bool:
    """Whether torch's own parse of ``value`` succeeds: the same int()/float() torch calls."""
    if number.parse == "choice":
        return value in number.words
    if value.lower() in number.words:
        return True
    parse = float if number.parse == "float" else int
    try:
        for part in value.split(",") if number.parse == "ints" else (value,):
            parse(part)
    except ValueError:  # int() of more than 4300 digits is a ValueError too
        return False
    return True


def check_compiler_variables(environ=os.environ) -> None:
    """SwitchError naming the first of torch's number variables set to a value torch cannot read as one: its
    value, who reads it, and the fix. Nothing of torch's compiler is imported or run."""
    for number in TORCH_NUMBERS:
        value = environ.get(number.name)
        if value is None or (number.unless and number.unless in environ) or torch_reads_it(number, value):
            continue
        words = " or ".join([_KINDS[number.parse]] * bool(_KINDS[number.parse]) + [repr(w) for w in number.words])
        raise SwitchError(
            f"{number.name}={quoted(value)} is not {words}: torch's compiler reads it {_READS[number.parse]} "
            f"({number.where}), where it would stop with a ValueError that names no variable; unset it (torch's "
            f"default: {number.default}) or set it to {words}; nothing was compiled")


def variables_on_failed_line(exc: BaseException) -> str:
    """What a message adds to a ValueError torch raised as it imported its compiler: the set environment variables
    its failing statement names (name, value, the fix), else that one of torch's variables may hold a bad value.
    Why: a torch newer than TORCH_NUMBERS may read one more variable as a number."""
    import linecache
    import re
    import traceback

    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if f"{os.sep}torch{os.sep}" in frame.filename]
    if frames:
        last = frames[-1]
        statement = "".join(linecache.getline(last.filename, line)
                            for line in range(last.lineno, (last.end_lineno or last.lineno) + 1))
        named = [name for name in dict.fromkeys(re.findall(r"[\"']([A-Z][A-Z0-9_]+)[\"']", statement))
                 if name in os.environ]
        if named:
            values = ", ".join(f"{name}={quoted(os.environ[name])}" for name in named)
            return (f" (torch read {values} there, in {os.path.basename(last.filename)} line {last.lineno}); unset "
                    "it or set it to a value torch reads, then start again")
    return "; an environment variable torch reads may hold a value it cannot take: unset it, then start again"
