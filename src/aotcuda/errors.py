"""Exceptions raised by aotcuda. Every one names the problem and, where there is one, the fix."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass


def clipped(text, limit: int) -> str:
    """``text`` (str() of it) cut to ``limit`` characters, saying how long it was: what a message echoes of
    outside input (a package's strings, a request's shape) stays small whatever that input held."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def quoted(value, limit: int = 80) -> str:
    """A value of a call as a message quotes it: a bounded repr (``reprlib``: a few items of a container, a few
    levels deep, each string and other object cut), at most ``limit`` characters. A call may pass a million
    keywords, a 10 MB name or a list nested 100,000 deep: ``repr`` of those made 10 MB messages, or raised
    RecursionError."""
    import reprlib

    shown = reprlib.Repr()
    shown.maxlevel, shown.maxstring, shown.maxother = 3, limit, limit
    shown.maxlist = shown.maxtuple = shown.maxdict = shown.maxset = 5
    try:
        text = shown.repr(value)
        if "\n" in text or "\r" in text:  # an object's repr of many lines (a tensor): one line of a message
            text = one_line(text)
        return clipped(text, limit)
    except Exception:  # noqa: BLE001 - a caller's __repr__ may raise anything: name the type instead
        return f"<{type(value).__name__}>"


def names_quoted(names, most: int = 5, limit: int = 80) -> str:
    """Names a call passed (keywords, a dict's keys) as a message lists them: at most ``most``, each ``quoted``."""
    names = list(names)
    more = f", ... ({len(names) - most:,} more)" if len(names) > most else ""
    return "[" + ", ".join(quoted(name, limit) for name in names[:most]) + more + "]"


def terminal_safe(text) -> str:
    """Outside text (a package's names and metadata, a request's, a server's answer) as it may reach a terminal or a
    log: control and format characters (ESC sequences, newlines, carriage returns, bidi overrides) written as escapes
    like \\x1b, so that the text cannot move the cursor, recolour, hide text or write a line of its own. The one escape
    of the CLI, the client and the replicas' log."""
    return "".join(char if char == " " or unicodedata.category(char)[0] not in "CZ" else
                   char.encode("unicode_escape").decode("ascii") for char in str(text))


def terminal_clipped(text, limit: int) -> str:
    """Outside text as a message or a log quotes it: cut to ``limit`` characters (``clipped``), then escaped
    (``terminal_safe``)."""
    return terminal_safe(clipped(text, limit))


def one_line(text) -> str:
    """Outside text (a package's) as one line of a message: every run of whitespace, newlines and other line
    breaks included, one space (an error prints a line per newline: the text's own would print a line of its
    choosing)."""
    return " ".join(str(text).split())


@dataclass(frozen=True)
class Advice:
    """A fix an error's message gives, as the Python keyword that applies it, so that a front end (the
    CLI) can say the same fix in its own terms without reading the message's words.

    keyword: the argument of lower()/load()/serve the fix sets: "allow_fallbacks", "device", "cuda_graphs",
        "dynamic_shapes", "max_batch_size", "allow_unbounded_outputs" or "allow_unchecked_indices"; or "eval":
        call model.eval() before lowering (a dropout left in training mode).
    value: what to set it to (True, "cpu", False, "wider" / "dynamic there" / "batch" (a batch Dim at dim 0 of
        every input) for dynamic_shapes, 1).
    relower: the fix is to lower the model again with it (else: to load / call / serve with it).
    """

    keyword: str
    value: object = None
    relower: bool = False


class AotcudaError(Exception):
    """Base class of every error aotcuda raises on purpose. ``advice``: the fixes the message gives, in the
    message's order (a tuple of Advice, empty when it gives none). ``client_text``: the message as a server's
    client may read it, where the message names what only the deployer should see (the lowering host's source
    lines and paths); None: the message itself."""

    advice: tuple[Advice, ...] = ()
    client_text: str | None = None

    def __init__(self, *args, advice: tuple[Advice, ...] = ()):
        super().__init__(*args)
        if advice:
            self.advice = tuple(advice)


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

    def __reduce__(self):  # pickle rebuilds an exception from self.args: here, the message alone
        return type(self), (self.op, self.node, self.stack_trace, self.reason), self.__dict__


class MissingFallbackKernelsError(AotcudaError):
    """The generated code calls ATen fallback kernels outside the allow-list and allow_fallbacks is False."""

    advice = (Advice("allow_fallbacks", True),)  # the message always ends with that fix


class DynamicShapesError(AotcudaError, ValueError):
    """torch.export found that the model does not hold over the dynamic_shapes ranges asked for. The message
    keeps torch's lines that say why (the guard the model needs) and its suggested fixes (e.g.
    ``seq = Dim('seq', max=256)``), under the Dim names the caller gave."""


class DeviceError(AotcudaError, ValueError):
    """lower() was asked for a device it does not lower for, or one this machine does not have; or lower() or
    load() a CPU device index other than 0 (torch has one CPU device)."""


class InputError(AotcudaError, ValueError):
    """A call to a loaded Program got inputs it cannot run: wrong count, dtype, device, rank or shape."""


class OutputError(AotcudaError, ValueError):
    """Caller-provided output buffers do not match the program's outputs."""


class PackageError(AotcudaError):
    """An AOTInductor package cannot be opened or loaded (missing, corrupt, or built for another device), or
    lower() cannot write one where ``package_path`` says (a directory, a file where a folder should be)."""


class PackageChangedError(PackageError):
    """The package file was written into, in place, while it was read: what was read may mix two versions of it,
    so none of it was used. Reading it again once its writer is done reads one version."""


class RuntimeCallError(AotcudaError, RuntimeError):
    """The AOTInductor model container reported an error while running."""


class SwitchError(AotcudaError, ValueError):
    """An ``AOTCUDA_*`` environment switch holds a value it cannot take (aotcuda.switches: a flag that is not 0
    or 1, a number that is not one), or one of torch's compiler variables that torch reads as a number does not
    hold one (aotcuda.lowering.compiler_variables)."""


class SigningKeyError(AotcudaError, ValueError):
    """A signing key that cannot be used (aotcuda.package_tags): fewer than 32 bytes, a key file other users may read
    or write, a path that names no regular file."""


class ServingConfigError(AotcudaError, ValueError):
    """Serving options that do not fit the package or the cluster (aotcuda.serving): batching a program
    without a batch dim, a dtype safetensors cannot carry, more GPUs asked for than the cluster has."""
