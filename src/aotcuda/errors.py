"""Exceptions raised by aotcuda. Every one names the problem and, where there is one, the fix."""


class AotcudaError(Exception):
    """Base class of every error aotcuda raises on purpose."""


class UnsupportedComplexOpError(AotcudaError):
    """ReplaceComplexWithRealPass(strict=True) met an op on complex values that it has no rule for.

    Attributes:
        op: the op overload's name, e.g. "aten.add.Tensor".
        node: the FX node's name in the exported graph.
        stack_trace: the user's source line(s) that produced the op (node.meta["stack_trace"]), or "".
        reason: why it cannot be rewritten.
    """

    def __init__(self, op: str, node: str, stack_trace: str, reason: str):
        self.op, self.node, self.stack_trace, self.reason = op, node, stack_trace, reason
        where = f"\n  at {stack_trace.strip()}" if stack_trace else ""
        super().__init__(f"cannot rewrite {op} (node {node}) as real math: {reason}{where}")


class MissingFallbackKernelsError(AotcudaError):
    """The generated code calls ATen fallback kernels outside the allow-list and allow_fallbacks is False."""


class DeviceError(AotcudaError, ValueError):
    """lower() was asked for a device it does not lower for, or one this machine does not have."""


class InputError(AotcudaError, ValueError):
    """A call to a loaded Program got inputs it cannot run: wrong count, dtype, device, rank or shape."""


class OutputError(AotcudaError, ValueError):
    """Caller-provided output buffers do not match the program's outputs."""


class PackageError(AotcudaError):
    """An AOTInductor package cannot be opened or loaded (missing, corrupt, or built for another device)."""


class RuntimeCallError(AotcudaError, RuntimeError):
    """The AOTInductor model container reported an error while running."""


class ServingConfigError(AotcudaError, ValueError):
    """Serving options that do not fit the package or the cluster (aotcuda.serving): batching a program
    without a batch dim, a dtype safetensors cannot carry, more GPUs asked for than the cluster has."""
