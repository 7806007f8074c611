"""The ``aotcuda`` command (also ``python -m aotcuda``): demo, lower, run, inspect, serve.

    aotcuda demo [--device auto|cpu|cuda[:N]] [--dtype bfloat16|float16|float32|float64] [--batch 2] [--seq 64]
                 [--calls 50] [--output demo.pt2] [--save-inputs inputs.pt]
    aotcuda lower MODULE:FACTORY -o model.pt2 [--device auto|cpu|cuda[:N]] [--dynamic NAME:DIM:MIN:MAX[:SYMBOL[*N]] ...]
                  [--save-inputs inputs.pt] [--allow-fallbacks]
    aotcuda run model.pt2 --inputs inputs.pt [--device] [--cuda-graphs] [--save-outputs outputs.pt]
    aotcuda inspect model.pt2
    aotcuda serve model.pt2 [--replicas N] [--port 8000] [--host 127.0.0.1] [--max-batch-size B]
                  [--batch-wait-ms W] [--cuda-graphs]                 (pip install 'aotcuda[serve]')

Errors print as "error: ..." (a message of several lines keeps them, indented, never wrapped), then a "hint:" line
with the command-line form of the library's advice where there is one, and exit with code 1; usage
errors (click's) exit with code 2. Set AOTCUDA_DEBUG=1 for the traceback. Output that cannot be written to stdout
(closed, a full disk) exits with code 1 and one "error: cannot write the output to stdout" line; a reader that left
(a broken pipe: `| head -1`) with code 1 quietly (docs/usage.md, "CLI").
"""

from __future__ import annotations

import aotcuda.cli_torch  # noqa: F401 # isort: skip - first: torch's import, refused by its environment, in one line
import contextlib
import errno
import fcntl
import functools
import io
import json
import logging
import math
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings

import click
import torch
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.progress import Progress, ProgressColumn, SpinnerColumn, TextColumn
from rich.table import Table
from rich.text import Text

from aotcuda import standard_descriptors
from aotcuda.cli_inputs import call_factory, dynamic_shapes_from, inputs_to_save, load_inputs, model_and_inputs
from aotcuda.cli_paths import ExistingFile
from aotcuda.errors import AotcudaError, DynamicShapesError, InputError, PackageError, clipped, terminal_safe
from aotcuda.interrupt_forwarding import interrupt_descendants_in_group
from aotcuda.os_errors import os_errno, write_failure_advice
from aotcuda.package_tags import KEY_FILE_HELP, key_file_path, signing_key
from aotcuda.runtime.specs import under_dim_names


class OutputLost(Exception):
    """The command's output could not be written to stdout (``error``: the OSError, EPIPE for a reader that left).
    The command line answers it once, for every command (``_Commands.main``), not as an error of the command's
    work: a closed, full or broken stdout is the caller's to fix, and the command's own message would not say so."""

    def __init__(self, error: OSError):
        super().__init__(str(error))
        self.error = error


class _Stdout:
    """The file the commands' console writes to: whatever sys.stdout is at the time (click's CliRunner swaps it;
    Python sets it to None where file descriptor 1 was closed), a failed write or flush raised as OutputLost.
    Without it rich wrote nowhere when stdout was closed (`aotcuda inspect P >&-` exited 0 with nothing
    written), and a full disk's OSError was shown as the command's own error."""

    def write(self, text: str) -> int:
        try:
            return self._call("write", text)
        except UnicodeEncodeError:  # stdout's encoding lacks a character: PYTHONIOENCODING=ascii, a Latin-1 locale
            # inspect's "∈" of every dynamic shape (or a name of the package's) ended `aotcuda inspect` with
            # "error: UnicodeEncodeError: 'ascii' codec can't encode character '\u2208'" and no table; such a character
            # is written as its escape, as Python writes it to stderr
            encoding = self.encoding
            return self._call("write", text.encode(encoding, "backslashreplace").decode(encoding))

    def flush(self) -> None:
        self._call("flush")

    def isatty(self) -> bool:
        return sys.stdout is not None and sys.stdout.isatty()

    @property
    def encoding(self) -> str:
        return getattr(sys.stdout, "encoding", None) or "utf-8"

    @staticmethod
    def _call(name: str, *args):
        if sys.stdout is None:
            raise OutputLost(OSError(errno.EBADF, "it is closed"))
        try:
            return getattr(sys.stdout, name)(*args)
        except OSError as error:
            raise OutputLost(error) from error


class _Stderr:
    """The file the status console writes to: whatever sys.stderr is at the time, a failed write or flush dropped
    (``to_stderr``: stderr is then the null device). Status lines (the steps' times, warnings, the error line) are no
    command's result, whose answer is its exit code and its output: `aotcuda lower ... 2>/dev/full` (or `2>&-`, or a
    pipe whose reader left) exited 1 at its first step line, with no package and no word (the process breaker,
    2026-12-06), where `serve` already went on without its lines."""

    def write(self, text: str) -> int:
        to_stderr(text)
        return len(text)

    def flush(self) -> None:
        try:
            if sys.stderr is not None:
                sys.stderr.flush()
        except (OSError, ValueError):
            _discard(sys.stderr, 2)

    def isatty(self) -> bool:
        try:
            return sys.stderr is not None and sys.stderr.isatty()
        except ValueError:  # closed by the program
            return False

    @property
    def encoding(self) -> str:
        return getattr(sys.stderr, "encoding", None) or "utf-8"


# The least width the consoles draw at. rich takes its width from COLUMNS (and the terminal's), whatever it says:
# COLUMNS=0 printed nothing at all, so `aotcuda inspect` of a damaged package exited 1 with no error line and one of
# a good package printed no line, with exit 0; COLUMNS=10 drew inspect's and run's tables with every cell empty (the
# names, dtypes and shapes dropped). Narrower than this, a line is drawn at this width and the terminal wraps it.
MIN_WIDTH = 40


class _Console(Console):
    """A rich Console that never draws narrower than MIN_WIDTH (above)."""

    @property
    def size(self) -> ConsoleDimensions:
        width, height = Console.size.fget(self)
        return ConsoleDimensions(max(width, MIN_WIDTH), height)

    @size.setter
    def size(self, new_size) -> None:
        Console.size.fset(self, new_size)


# emoji=False: a package's names may hold ":lock:"-style codes, which rich would draw as emoji where markup is on.
console = _Console(file=_Stdout(), emoji=False)
status_console = _Console(file=_Stderr(), emoji=False)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}

# The library's errors give Python-API advice, and say which (AotcudaError.advice); on the command line,
# this is how to follow each. Read from the error, never matched against its words.
_FLAG_HINTS = {
    ("allow_fallbacks", True, False): "on the command line, --allow-fallbacks keeps going with these kernels",
    ("cuda_graphs", False, False): "on the command line, leave out --cuda-graphs",
    ("eval", True, True): "call .eval() on the model in the factory (`return model.eval(), inputs`) and lower it again; "
                          "--allow-fallbacks would ship the dropout as in training (random masks at every call)",
    ("dynamic_shapes", "wider", True): "on the command line, lower it again with a wider range: "
                                       "`aotcuda lower ... --dynamic NAME:DIM:MIN:MAX`",
    # the dim is static in the program: the first fix is the size it was exported with, re-lowering second
    ("dynamic_shapes", "dynamic there", True): "pass the size the program was exported with (change the --inputs "
                                               "file), or lower it again with that dim dynamic: "
                                               "`aotcuda lower ... --dynamic NAME:DIM:MIN:MAX`",
    ("allow_unbounded_outputs", True, False): "on the command line, --allow-unbounded-outputs serves it anyway",
    ("allow_unchecked_indices", True, False): "on the command line, --allow-unchecked-indices serves it anyway",
    ("max_batch_size", 1, False): "on the command line, leave out --max-batch-size",
    ("dynamic_shapes", "batch", True): "to batch, lower it again with `aotcuda lower ... --dynamic NAME:0:1:MAX:batch` "
                                       "for every input",
}


def cli_hints(error: BaseException) -> list[str]:
    """The command-line form of each fix the error gives (its ``advice``), in the error's order; then those a
    command worked out itself (``command_line_hints``)."""
    hints = []
    for advice in getattr(error, "advice", ()):
        if advice.keyword == "device":
            hints.append(f"on the command line, lower it again with `aotcuda lower ... --device {advice.value}`"
                         if advice.relower else f"on the command line, --device {advice.value}")
        elif (hint := _FLAG_HINTS.get((advice.keyword, advice.value, advice.relower))) is not None:
            hints.append(hint)
    return hints + list(getattr(error, "command_line_hints", ()))


# torch's suggested fixes of a dynamic-shapes error: "seq = Dim('seq', max=128)", or "x_1 = 16" (static). Blanks
# within one line only: \s would take newlines, and from each of n blank lines scan the rest (quadratic).
_SUGGESTED_DIM = re.compile(r"^[ \t]*(\w+) = Dim\('\w+'(?:, min=(\d+))?(?:, max=(\d+))?\)[ \t]*$", re.M)
_SUGGESTED_STATIC = re.compile(r"^[ \t]*(\w+) = (\d+)[ \t]*$", re.M)
# torch's fix for a dim the model needs a multiple of N (a U-Net's stride-2 down and up: h = 2*_h)
_SUGGESTED_MULTIPLE = re.compile(r"^[ \t]*(\w+) = (\d+)\*(\w+)[ \t]*$", re.M)


# torch's fix for two Dims the model needs equal (ids and mask of one batch): "mask_0 = ids_0"
_SUGGESTED_EQUAL = re.compile(r"^[ \t]*(\w+) = ([A-Za-z_]\w*)[ \t]*$", re.M)


# exporting's note for a guard that refuses one size alone, at an end of the Dim's range (Ne(t, 128)), or the sizes
# at one end of it where the guard reads the size through a quotient (Ne((samples - 400)//160, 0))
_ONE_END_OFF = re.compile(r"every (other size of (\w+)|size of (\w+) (?:from|up to) \d+) holds it; "
                          r"give its Dim (max|min)=(\d+)")
# export_hints' note for a dim a tensor op met with a size that is not dynamic (another input's static dim)
_MET_BY_A_STATIC_SIZE = re.compile(r"There a tensor op needs (\w+) equal to a size \d+ that is not dynamic")
# export_hints' note for a dim given to istft as its length=, and the multiple it says (a hop, or HOP)
_ISTFT_LENGTH = re.compile(r"To keep (\w+) dynamic, drop length= .*?--dynamic NAME:DIM:MIN:MAX:frames\*(\w+) ")


def _dynamic_fix_hints(message: str, options: tuple[str, ...], notes: str = "") -> list[str]:
    """torch's suggested fixes of a DynamicShapesError as --dynamic options: each option NAME:DIM:MIN:MAX[:SYMBOL]
    whose Dim the message suggests a new range for, with that range (a size that is a multiple keeps its
    multiple), as a multiple where it suggests one (``h = 2*_h``: SYMBOL*2), or to leave out where it suggests a
    static size; where the error's ``notes`` say a tensor op met
    the dim with a size that is not dynamic (q's seq beside a static k), first the same SYMBOL for that input.
    A hint names every option of the SYMBOL it changes: a Dim has one range, so changing one of two options that
    share it is refused (a new user's `--dynamic xq:1:2:1024:seq --dynamic xk:1:2:1024:seq` was told of xk's alone)."""
    by_symbol: dict[str, list[tuple[list[str], int]]] = {}  # each symbol's options: (fields, multiple)
    for option in options:
        fields = option.split(":")
        if len(fields) == 5:
            symbol, _, multiple = fields[4].partition("*")
            by_symbol.setdefault(symbol, []).append((fields, int(multiple or 1)))
        elif len(fields) == 4 and fields[1].isdigit():
            by_symbol.setdefault(f"{fields[0]}_{fields[1]}", []).append((fields, 1))
    hints = []
    for symbol, low, high in _SUGGESTED_DIM.findall(message):
        if symbol in by_symbol:
            new = [[fields[0], fields[1], str(int(low) * multiple) if low else fields[2],
                    str(int(high) * multiple) if high else fields[3], *fields[4:]]
                   for fields, multiple in by_symbol[symbol]]
            hints.append(f"on the command line, {_as_options(new)} (torch's suggested range)")
    roots = {symbol: (low, high) for symbol, low, high in _SUGGESTED_DIM.findall(message)}
    for symbol, factor, root in _SUGGESTED_MULTIPLE.findall(message):
        if symbol in by_symbol and all(multiple == 1 for _, multiple in by_symbol[symbol]) and int(factor) > 1:
            multiple = int(factor)
            low, high = roots.get(root, ("", ""))
            new = [[fields[0], fields[1], str(int(low) * multiple) if low else fields[2],
                    str(int(high) * multiple) if high else fields[3], f"{symbol}*{multiple}"]
                   for fields, _ in by_symbol[symbol]]
            hints.append(f"on the command line, {_as_options(new)} (a multiple of {multiple}: torch's "
                         "suggested fix)")
    for sizes, one_off, at_one_end, side, bound in _ONE_END_OFF.findall(notes):
        symbol = one_off or at_one_end
        narrowed = [_with_bound(option, side, int(bound)) for option in options if _symbol_of(option) == symbol]
        if narrowed and all(narrowed):
            hints.append(f"on the command line, {' '.join(f'--dynamic {o}' for o in narrowed)} (every {sizes})")
    hints += _shared_symbol_hints(message, by_symbol)
    met = set(_MET_BY_A_STATIC_SIZE.findall(notes))
    istft_hops = dict(_ISTFT_LENGTH.findall(notes))
    for symbol, _ in _SUGGESTED_STATIC.findall(message):
        if symbol in by_symbol and symbol in istft_hops and len(by_symbol[symbol][0][0]) == 4:
            fields = by_symbol[symbol][0][0]
            hints.append(f"on the command line, with istft's length= dropped from the model: --dynamic "
                         f"{':'.join(fields)}:frames*{istft_hops[symbol]}; or leave out --dynamic {':'.join(fields)}: "
                         "the program then takes one size there")
        elif symbol in by_symbol and symbol in met:
            fields = by_symbol[symbol][0][0]
            named = fields if len(fields) == 5 else [*fields, symbol]
            hints.append(f"on the command line, where another input meets it there (k beside q), give that input's "
                         f"dim the same SYMBOL: --dynamic {':'.join(named)} --dynamic OTHER:DIM:{named[2]}:"
                         f"{':'.join(named[3:])}; if the model takes one size there, leave out --dynamic "
                         f"{':'.join(fields)}")
        elif symbol in by_symbol:
            hints.append(f"on the command line, leave out {_as_options(f for f, _ in by_symbol[symbol])}: the model "
                         "takes one size there")
    return hints


def _as_options(fields_of_options) -> str:
    """Options' fields as the command line gives them: `--dynamic x:1:2:64:seq --dynamic y:1:2:64:seq`."""
    return " ".join(f"--dynamic {':'.join(fields)}" for fields in fields_of_options)


def _shared_symbol_hints(message: str, by_symbol: dict) -> list[str]:
    """torch's "mask_0 = ids_0" (two Dims the model needs equal) as --dynamic options that share one SYMBOL, with the
    range both options hold: the command line's form of one Dim for both (torch's own fix is Python). The SYMBOL is
    one an option gives already, else "batch" for dims 0, else the root's name (ids_1)."""
    groups: dict[str, list[str]] = {}
    for symbol, root in _SUGGESTED_EQUAL.findall(message):
        if symbol in by_symbol and root in by_symbol:
            groups.setdefault(root, [root]).append(symbol)
    hints = []
    for root, symbols in groups.items():
        sharing = [option for symbol in symbols for option in by_symbol[symbol]]
        if any(multiple > 1 for _, multiple in sharing):
            continue  # a multiple (SYMBOL*N) bounds N·SYMBOL: the shared range is no plain intersection
        fields = [f for f, _ in sharing]
        low, high = max(int(f[2]) for f in fields), min(int(f[3]) for f in fields)
        named = next((f[4] for f in fields if len(f) == 5), None)
        shared = named or ("batch" if all(f[1] == "0" for f in fields) else root)
        if low >= high:
            continue  # their ranges share no two sizes: nothing one Dim could take
        options = " ".join(f"--dynamic {f[0]}:{f[1]}:{low}:{high}:{shared}" for f in fields)
        hints.append(f"on the command line, the model needs these dims equal: give them one SYMBOL, "
                     f"{options}")
    return hints


def _symbol_of(option: str) -> str | None:
    """The size symbol of a --dynamic option: its SYMBOL (without *N), or NAME_DIM."""
    fields = option.split(":")
    if len(fields) == 5:
        return fields[4].partition("*")[0]
    return f"{fields[0]}_{fields[1]}" if len(fields) == 4 else None


def _with_bound(option: str, side: str, bound: int) -> str | None:
    """The option with its MAX (side "max") or MIN set to ``bound`` (a size; None for a multiple, whose bound is
    another number)."""
    fields = option.split(":")
    if len(fields) == 5 and "*" in fields[4]:
        return None
    fields[3 if side == "max" else 2] = str(bound)
    return ":".join(fields)


def print_error(message: str, kind: str = "", hints: list[str] = ()) -> None:
    """Print 'error: ...' lines unwrapped (soft_wrap: a log or a pipe gets whole lines), then the hints.

    The message's later lines are indented: only aotcuda's own 'error:', 'hint:' and 'warning:' lines start at
    the first column, so that text a message quotes (a package's names, another library's error) cannot print
    a line that reads as one of them, whatever newline it holds."""
    lines = message.split("\n") or [""]  # only newlines break lines: other control characters are shown escaped
    status_console.print(f"[red]error:[/red] {shown(kind + lines[0])}", highlight=False, soft_wrap=True)
    _print_later_lines(lines[1:])
    for hint in hints:
        status_console.print(f"hint: {hint}", highlight=False, markup=False, soft_wrap=True)


def _debugging() -> bool:
    from aotcuda import switches

    try:
        return switches.flag("AOTCUDA_DEBUG")
    except ValueError as exc:  # said once, then the error it was asked for is shown as usual
        status_console.print(f"warning: {exc}", highlight=False, markup=False, soft_wrap=True)
        return False


def print_warning(message: str) -> None:
    """Print 'warning: ...' with the message's later lines indented, as print_error prints an error."""
    first, *rest = message.split("\n")
    status_console.print(f"warning: {terminal_safe(first)}", highlight=False, markup=False, soft_wrap=True)
    _print_later_lines(rest)


def _print_later_lines(lines: list[str]) -> None:
    """A message's lines after its first, indented: only aotcuda's own 'error:', 'hint:' and 'warning:' lines
    start at the first column."""
    for line in lines:
        status_console.print(f"  {terminal_safe(line)}" if line else "", highlight=False, markup=False, soft_wrap=True)


_PACKAGE_FOLDER = os.path.dirname(os.path.abspath(__file__)) + os.sep


@contextlib.contextmanager
def _own_warnings_as_lines():
    """aotcuda's own warnings (those its modules raise: an index left unchecked, a model in training mode) as
    'warning:' lines like the command's others, not as Python shows a warning (the file path and source line
    of aotcuda's code, which tell a user nothing); another library's are shown as Python shows them. A warning
    aotcuda points at the model's line (a dynamic-length FFT's cost) is its own by its "aotcuda: " prefix; its text
    names that line."""
    with warnings.catch_warnings():  # restores showwarning after
        python_shows = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if os.path.abspath(filename).startswith(_PACKAGE_FOLDER) or str(message).startswith("aotcuda: "):
                print_warning(str(message).removeprefix("aotcuda: "))
            else:
                python_shows(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def _clean_errors(command):
    """Turn exceptions into 'error: ...' lines and exit code 1 (AOTCUDA_DEBUG=1 re-raises); aotcuda's own
    warnings into 'warning: ...' lines."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            with _own_warnings_as_lines():
                return command(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort, OutputLost):
            raise
        except Exception as exc:
            if _debugging():
                raise
            kind = "" if isinstance(exc, AotcudaError) else f"{type(exc).__name__}: "
            message = str(exc).strip() or type(exc).__name__
            if not isinstance(exc, AotcudaError):  # another library's text: its colours are not ours to show
                message = ANSI_ESCAPE.sub("", message)
            # Our errors may list kernels on the lines after the first: keep them; others' tails are noise.
            lines = message.splitlines() if isinstance(exc, AotcudaError) else message.splitlines()[:1]
            print_error("\n".join(lines + list(getattr(exc, "__notes__", ()))), kind, cli_hints(exc))
            sys.exit(1)

    return wrapper


_COMMAND_WRAPPER = _clean_errors(print).__code__  # the code of every command's wrapper: one closure


def _from_a_command(error: BaseException) -> bool:
    """Whether ERROR came out of a command's work (through its _clean_errors wrapper, which hands it on as it came
    under AOTCUDA_DEBUG=1), not out of click's own output (--help, --version), written while the arguments are read
    and through no wrapper."""
    return any(frame.f_code is _COMMAND_WRAPPER for frame, _ in traceback.walk_tb(error.__traceback__))


class _StepTime(ProgressColumn):
    """One time per step: the elapsed time while it runs, then the time lower() measured for it."""

    def render(self, task) -> Text:
        seconds = task.fields.get("seconds")
        return Text(f"{(task.elapsed or 0.0) if seconds is None else seconds:.1f} s", style="progress.elapsed")


class _StepProgress:
    """rich progress for lower()'s steps, one line each: a spinner and the time so far while a step runs,
    its measured time when it ends.

    ``transient=True`` (the demo, whose table lists the step times) clears the lines at the end, and shows
    nothing where stderr is no terminal (the table gives the times), so that each step's time is printed once.
    """

    def __init__(self, transient: bool = False, console: Console | None = None):
        console = console or status_console
        # Where stderr is no terminal (a log, a pipe) a live display has nothing to redraw: each finished step
        # is one plain line instead, with no spinner character ("lower: 12.3 s").
        self._plain = None if console.is_terminal else (None if transient else console)
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), _StepTime(),
                                  console=console, transient=transient, disable=not console.is_terminal)
        self._tasks = {}

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc_info):
        self._progress.__exit__(*exc_info)

    def __call__(self, step: str, seconds: float | None) -> None:
        if self._plain is not None:
            if seconds is not None:
                self._plain.print(f"{step}: {seconds:.1f} s", highlight=False, markup=False, soft_wrap=True)
        elif seconds is None:
            self._tasks[step] = self._progress.add_task(step, total=1, seconds=None)
        else:
            self._progress.update(self._tasks[step], completed=1, seconds=seconds)


# What a write to stdout fails with where its file cannot take the output: a full disk or quota, a file size
# limit, an I/O error, a descriptor not open for writing. Any other OSError that reaches the command line is not
# the output's: it is shown as it is.
_OUTPUT_ERRORS = {errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF}


def _stdout_problem() -> OSError | None:
    """Why stdout cannot take the command's output before anything is written (closed: ``>&-``, or open for
    reading only: ``1<FILE``); None where writing can be tried (an in-memory stdout has no descriptor to ask)."""
    if sys.stdout is None:  # Python's stdout where file descriptor 1 was closed at its start
        return OSError(errno.EBADF, "it is closed")
    try:
        descriptor = sys.stdout.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both: click's CliRunner
        return None
    try:
        mode = fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError as error:
        return error
    return OSError(errno.EBADF, "it is open for reading only") if mode == os.O_RDONLY else None


def _output_lost(error: OSError) -> None:
    """Exit 1, after one line on stderr that says why the output could not be written and what to do; quietly
    where the reader left (EPIPE: `| head`), as Unix tools do. Exit status 1 there too, which is what Python's
    documentation on SIGPIPE, click and rich choose (click answers a broken pipe of its --help and --version so):
    one status for every path, and the exit handlers still run (dying of the signal itself, as C tools do, would
    skip them: the temporary folders of a load, Ray's shutdown)."""
    _discard_stdout()
    if error.errno != errno.EPIPE:
        full = error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        fix = ("free space where it is written, or send it elsewhere (> FILE)" if full else
               "give the command somewhere to write it (> FILE, or > /dev/null to discard it)"
               if error.errno == errno.EBADF else "check where stdout goes, or send it elsewhere (> FILE)")
        done = "".join(f"; {note}" for note in _written)
        with contextlib.suppress(OSError):
            print_error(f"cannot write the output to stdout ({error.strerror or error}); {fix}{done}")
    sys.exit(1)


# What the running command has written where its output is no report of (a package, a saved file), so that an output
# lost afterwards does not read as a command that did nothing: `aotcuda lower ... > /dev/full` wrote the package and
# then said only "cannot write the output to stdout" (the process breaker, 2026-12-06).
_written: list[str] = []


def _wrote(path) -> None:
    _written.append(f"{terminal_safe(os.fspath(path))} was written before that")


def _discard_stdout() -> None:
    """Point file descriptor 1 at the null device where it is this process's stdout, so that what is still buffered
    (Python flushes stdout at exit) goes somewhere instead of failing again with a traceback. (Where stdout was
    closed at the start Python has no stdout to flush; an in-memory one, click's CliRunner's, is left alone.)"""
    _discard(sys.stdout, 1)


def _discard(stream, descriptor: int) -> None:
    try:
        if stream is None or stream.fileno() != descriptor:
            return
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):
        return
    try:
        os.dup2(null, descriptor)
    except OSError:
        pass
    finally:
        os.close(null)


def to_stderr(text: str) -> None:
    """Write TEXT on stderr, or drop it where stderr cannot take it (closed: `2>&-`; full; a reader that left). The
    command line's answer is its exit code (click's 2 for a usage error), which must not hang on whether its message
    could be written: the failed write's traceback, which nobody could read, made it Python's 1. stderr is then
    pointed at the null device, so that what is left buffered is not tried again at exit (a line left for a broken
    pipe made the status 1 there too)."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(text)
            sys.stderr.flush()
    except (OSError, ValueError):  # ValueError: a stream closed by the program
        _discard(sys.stderr, 2)


class _Commands(click.Group):
    """click's group, except that click's own errors (usage errors, exit code 2) print "error: ..." like
    every other error of the command, not click's "Error: ...", with click's usage line and "Try" hint kept;
    and that output which cannot be written to stdout ends every command the same way (``_output_lost``): before
    any work where stdout is closed, else when a write fails."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        _written.clear()  # what an earlier command of this process wrote (click's CliRunner runs many)
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        problem = _stdout_problem()
        if problem is not None:
            _output_lost(problem)
        standard_descriptors.fill_closed()  # a closed stdin or stderr: no file of the command takes its number
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)  # click handles a broken pipe itself
            console.file.flush()  # what is left buffered: its write may fail too
        except OutputLost as lost:
            _output_lost(lost.error)
        except OSError as error:  # click's own output (--help, --version): the commands turn their errors into lines
            # AOTCUDA_DEBUG=1 hands on a command's own, as it came; a failed write of --help is the user's stdout,
            # whatever the switch, and was a traceback with it
            if error.errno not in _OUTPUT_ERRORS or (_from_a_command(error) and _debugging()):
                raise
            _output_lost(error)
        except click.ClickException as exc:
            shown_error = io.StringIO()
            exc.show(file=shown_error)
            to_stderr(re.sub(r"^Error: ", "error: ", shown_error.getvalue(), count=1, flags=re.MULTILINE))
            sys.exit(exc.exit_code)
        except click.Abort as abort:
            interrupt = abort.__cause__ if isinstance(abort.__cause__, KeyboardInterrupt) else None
            # What the interrupted call said it left (lower(): "No package was written ..."): its notes
            for note in getattr(interrupt, "__notes__", ()):
                first, *rest = str(note).split("\n")
                status_console.print(terminal_safe(first), highlight=False, markup=False, soft_wrap=True)
                _print_later_lines(rest)
            to_stderr("Aborted!\n")  # stderr may be closed (`2>&-`): the exit code still says it was a Ctrl-C
            sys.exit(130 if interrupt is not None else 1)  # 128 + SIGINT, as a shell reports a Ctrl-C
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="aotcuda")
def main():
    """Lower PyTorch programs ahead of time with AOTInductor (complex numbers included) and run them."""
    # torch 2.13 warns about its own pytree internals on every export; it says nothing to our users.
    warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated", category=FutureWarning)


class TargetDevice(click.ParamType):
    """--device of demo and lower (auto, cpu, cuda or cuda:N) and of run (``auto=False``: no auto; its default
    is the package's device), in any case; CUDA where torch sees none is a usage error, as any other value."""

    def __init__(self, auto: bool = True):
        self.auto = auto
        self.name = "auto|cpu|cuda[:N]" if auto else "cpu|cuda[:N]"

    def get_metavar(self, *args, **kwargs) -> str:  # as typed: click would show AUTO|CPU|CUDA[:N]
        return self.name

    def convert(self, value, param, ctx):
        from aotcuda.errors import DeviceError

        try:
            from aotcuda.lowering.devices import target_device  # the one place a lowering device is read
        except AotcudaError as error:  # torch's compiler cannot be imported (import_inductor): not a usage error
            raise click.ClickException(str(error)) from None

        device = str(value).strip().lower()
        if device not in (("auto",) if self.auto else ()) + ("cpu", "cuda") and not re.fullmatch(r"(cuda|cpu):\d+",
                                                                                                device):
            self.fail(f"{value!r}: expected {'auto, ' if self.auto else ''}cpu, cuda or cuda:N", param, ctx)
        try:
            return str(target_device(device))  # "auto" resolved: "cuda" or "cpu"; "cpu:0" is "cpu"
        except DeviceError:
            import torch

            if device.startswith("cpu"):  # cpu:1 (target_device's words: the CPU takes no device index)
                self.fail(f"{value}: the CPU takes no device index (torch has one CPU device); use --device cpu",
                          param, ctx)

            if torch.cuda.is_available():  # an index torch does not see (cuda:7 on a machine of one GPU)
                count = torch.cuda.device_count()
                self.fail(f"{value}: torch sees {count} CUDA device{'' if count == 1 else 's'} here (cuda:0"
                          f"{'' if count == 1 else f' to cuda:{count - 1}'}); use --device cuda or one of those",
                          param, ctx)
            self.fail(f"{value}: torch sees no CUDA device here; use --device cpu{' or auto' if self.auto else ''}",
                      param, ctx)


# --- demo ------------------------------------------------------------------------------------------------

@main.command(short_help="Lower, run and check the built-in attention block.")
@click.option("--device", type=TargetDevice(), default="auto", show_default=True,
              help="auto: CUDA when torch sees a GPU, else the CPU.")
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default=None,
              help="default: bfloat16 on CUDA, float32 on the CPU.")
@click.option("--batch", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--seq", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--calls", type=click.IntRange(min=1), default=50, show_default=True,
              help="calls per latency median.")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              help="keep the package here (for `aotcuda inspect` or `run`); default: a temporary folder, removed "
                   "at the end.")
@click.option("--save-inputs", type=click.Path(dir_okay=False), default=None,
              help="save the input the demo ran (torch.save): with -o, `aotcuda run PACKAGE --inputs` takes it.")
@_clean_errors
def demo(device, dtype, batch, seq, calls, output, save_inputs):
    """Lower the built-in attention block (complex RoPE), run it, compare with eager."""
    from aotcuda.demo import check_demo_size, run_demo
    from aotcuda.lowering.pipeline import checked_package_path

    where = torch.device(device)  # resolved by the option ("auto" is "cuda" or "cpu" here)
    try:  # sizes the memory cannot hold are a usage error, said before the minute of lowering
        check_demo_size(where, DTYPES[dtype] if dtype else torch.bfloat16 if where.type == "cuda" else torch.float32,
                        batch, seq)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--batch' / '--seq'") from None
    if output is not None:
        output = checked_package_path(output)  # a bad -o is said before the minute of lowering
    if save_inputs:
        save_inputs = _checked_save_path(save_inputs, "--save-inputs", "the demo's input", package=output)
    status_console.print(f"Lowering the attention block for {device} ...")
    with _StepProgress(transient=True) as progress, _interrupts_seen() as interrupts:
        result = run_demo(device, DTYPES[dtype] if dtype else None, batch, seq, calls, package_path=output,
                          progress=_stopping_on(interrupts, progress))
        if interrupts:  # a Ctrl-C Python dropped after the lowering (while timing): stop before the table
            raise KeyboardInterrupt
    console.print(_demo_table(result))
    if output is not None:  # after the table, unwrapped: a path is copied from here
        console.print(f"package kept: {terminal_safe(result.lowered.package_path)}", highlight=False, markup=False,
                      soft_wrap=True)
    if save_inputs:
        _saved({"args": (result.inputs,), "kwargs": {}}, save_inputs)
        run_line = f" (aotcuda run {result.lowered.package_path} --inputs {save_inputs})" if output is not None else ""
        console.print(terminal_safe(f"wrote the demo's input to {save_inputs}{run_line}"), highlight=False, markup=False,
                      soft_wrap=True)
    if result.machine_busy:
        status_console.print(f"warning: the machine is busy (other work kept {result.busy_cores:.2f} of "
                             f"{result.cores} cores busy): the latencies and the speed-up measure the contention, "
                             "not the program; run the demo again on an idle machine",
                             highlight=False, markup=False, soft_wrap=True)
    if not result.passed:
        raise click.ClickException("the lowered program does not match eager within the tolerance")


def _demo_table(result) -> Table:
    table = Table(title="aotcuda demo: Llama-style attention block with complex rotary embeddings")
    table.add_column("")
    table.add_column("value", justify="right")
    table.add_row("device / dtype", f"{result.device} / {str(result.dtype).removeprefix('torch.')}")
    table.add_row("input shape", " × ".join(map(str, result.input_shape)))
    table.add_row("relative error vs eager", f"{result.relative_error:.2e} (≤ {result.tolerance:.0e})")
    table.add_row("fallback kernels", str(len(result.lowered.fallback_kernels)))
    # one a line: the CPU's attention kernel alone is 43 characters, and a comma list wraps mid-name at 80 columns
    table.add_row("library kernels", "\n".join(k.op for k in result.lowered.library_kernels) or "none")
    for step, seconds in result.lowered.step_times.items():
        table.add_row(f"lowering: {step}", f"{seconds:.2f} s")
    table.add_row("latency per call, aotcuda", _microseconds(result.latency_s))
    if result.graphs_latency_s is not None:
        table.add_row("latency per call, aotcuda + CUDA graphs", _microseconds(result.graphs_latency_s))
    table.add_row("latency per call, eager", _microseconds(result.eager_latency_s))
    busy = " (unreliable: machine busy)" if result.machine_busy else ""
    table.add_row("speed-up vs eager", f"{result.eager_latency_s / result.latency_s:.2f}×{busy}")
    table.add_row("other work at timing", _load_text(result))
    return table


def _load_text(result) -> str:
    if result.busy_cores is None:
        return f"unknown ({result.cores} cores)"
    return f"{result.busy_cores:.2f} of {result.cores} cores busy{': unreliable timing' if result.machine_busy else ''}"


def _microseconds(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


# --- lower -----------------------------------------------------------------------------------------------

@main.command("lower")
@click.argument("factory")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="the .pt2 to write; folders of the path that do not exist are created (checked before any work).")
@click.option("--device", type=TargetDevice(), default="auto", show_default=True,
              help="auto: CUDA when torch sees a GPU, else the CPU.")
@click.option("--dynamic", multiple=True, metavar="NAME:DIM:MIN:MAX[:SYMBOL[*N]]",
              help="make dim DIM of input NAME dynamic in [MIN, MAX]; inputs given one SYMBOL share the size; "
                   "SYMBOL*N makes the size a multiple of N; a tensor inside a dict, list or tuple input is NAME as "
                   "`aotcuda inspect` lists it (feats_x) or its path (feats.x, feats['x'], xs[0]) (repeatable).")
@click.option("--save-inputs", type=click.Path(dir_okay=False), help="save the example inputs (torch.save).")
@click.option("--allow-fallbacks", is_flag=True, help="accept ATen fallback kernels outside the allow-list.")
@click.option("--signing-key-file", type=click.Path(dir_okay=False), default=None,
              help=f"sign the package with the key in this file. {KEY_FILE_HELP}")
@_clean_errors
def lower_command(factory, output, device, dynamic, save_inputs, allow_fallbacks, signing_key_file):
    """Lower FACTORY's model to an AOTI package.

    FACTORY is MODULE:FACTORY (a module importable from the current directory, e.g. mymodel:Rope for
    ./mymodel.py) or path/to/model.py:FACTORY; called with no arguments, it returns (model, inputs) or
    (model, args, kwargs).
    """
    from aotcuda.lowering import lower
    from aotcuda.lowering.pipeline import checked_package_path

    checked_package_path(output)  # a bad -o is said before the model is even imported
    signing_key_file = key_file_path(signing_key_file)
    signing_key(signing_key_file)  # and a key file others may read
    if save_inputs:
        save_inputs = _checked_save_path(save_inputs, "--save-inputs", "the example inputs", package=output)
    model, args, kwargs = model_and_inputs(call_factory(factory))
    dynamic_shapes = dynamic_shapes_from(dynamic, model, args, kwargs)
    with _StepProgress() as progress, _interrupts_seen() as interrupts, warnings.catch_warnings(), \
            _without_inductor_shim_notes():
        warnings.filterwarnings("ignore", message=".*proxy executor", category=UserWarning)  # said below
        try:
            lowered = lower(model, args, kwargs, dynamic_shapes=dynamic_shapes, device=device,
                            package_path=output, allow_fallbacks=allow_fallbacks,
                            progress=_stopping_on(interrupts, progress), signing_key=signing_key_file)
        except DynamicShapesError as error:
            error.command_line_hints = _dynamic_fix_hints(str(error), dynamic, "\n".join(
                map(str, getattr(error, "__notes__", ()))))
            raise
        if interrupts:  # a Ctrl-C Python dropped after the last step: the package is there, the command still stops
            interrupt = KeyboardInterrupt()
            interrupt.add_note(f"The package was written to {lowered.package_path} before the interrupt took effect.")
            raise interrupt
    _wrote(lowered.package_path)
    if save_inputs:
        saved_inputs, by_names_for = inputs_to_save(model, args, kwargs)
        _saved(saved_inputs, save_inputs)
    console.print(f"wrote {terminal_safe(lowered.package_path)} ({lowered.device}; "
                  f"{_counted(len(lowered.fallback_kernels), 'fallback kernel')}, "
                  f"{_counted(len(lowered.library_kernels), 'library kernel')})",
                  highlight=False, markup=False, soft_wrap=True)
    for kernel in lowered.fallback_kernels:
        console.print(f"  fallback: {kernel.describe()}", highlight=False, markup=False, soft_wrap=True)
    if save_inputs:
        by_names = (f", its tensors by the names aotcuda inspect lists: {by_names_for} is a type torch.load("
                    "weights_only=True) does not read" if by_names_for else "")
        # the command that runs it, only where `aotcuda run` can (the warning below says why not)
        run_line = (f" (aotcuda run {lowered.package_path} --inputs {save_inputs})"
                    if lowered.runs_in_aotcuda_runtime else "")
        console.print(terminal_safe(f"wrote the example inputs to {save_inputs}{by_names}{run_line}"),
                      highlight=False, markup=False, soft_wrap=True)
    if not lowered.runs_in_aotcuda_runtime:
        ops = ", ".join(sorted(set(lowered.proxy_executor_ops)))
        status_console.print(f"warning: {ops} run through AOTInductor's proxy executor: `aotcuda run` and aotcuda.load "
                             f"cannot run this package, torch._inductor.aoti_load_package can",
                             highlight=False, markup=False, soft_wrap=True)


@contextlib.contextmanager
def _interrupts_seen():
    """The SIGINTs that arrive in the block (a list, one entry each), each still raising KeyboardInterrupt as
    Python's own handler does.

    Why: Python drops an exception raised in a weakref callback or a __del__ ("Exception ignored in: ..."), and the
    KeyboardInterrupt of a Ctrl-C is raised wherever the main thread runs, often in one of torch's weakref callbacks
    while Inductor compiles: in a new user's trial (2026-12-06) one Ctrl-C in four during `aotcuda lower` printed
    "Exception ignored in: <function WeakIdKeyDictionary.__init__.<locals>.remove ...> ... KeyboardInterrupt", and the
    command went on to write the package and exit 0. With the list, the command stops at the next step's end
    (``_stopping_on``). Outside the main thread, or where another handler than Python's is set, nothing changes.

    Each SIGINT is passed on to the processes the command started in its process group (the compilers Inductor
    runs), as a terminal's Ctrl-C reaches them: a SIGINT to the command's pid alone (``kill -INT``, a supervisor)
    otherwise left a compiler writing into the temporary folder torch was removing (aotcuda/interrupt_forwarding.py)."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield seen
        return

    def interrupted(signum, frame):
        seen.append(signum)
        interrupt_descendants_in_group()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def _stopping_on(interrupts: list, progress):
    """lower()'s progress callback that raises KeyboardInterrupt at a step's end once ``interrupts`` holds one: a
    Ctrl-C whose own KeyboardInterrupt Python dropped (``_interrupts_seen``) still stops the lowering, inside it, so
    that its partial build is removed and the note says no package was written."""

    def checked(step: str, seconds: float | None) -> None:
        progress(step, seconds)
        if seconds is not None and interrupts:
            raise KeyboardInterrupt

    return checked


class _DropShimNotes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "missing a c-shim implementation" not in str(record.msg)


@contextlib.contextmanager
def _without_inductor_shim_notes():
    """Inductor logs "<op> is missing a c-shim implementation, using proxy executor as fallback" for each such
    op (torch/_inductor/ir.py); the command says the same once, in its own words, after the progress lines."""
    shim_filter = _DropShimNotes()
    inductor_log = logging.getLogger("torch._inductor.ir")
    inductor_log.addFilter(shim_filter)
    try:
        yield
    finally:
        inductor_log.removeFilter(shim_filter)


# --- run -------------------------------------------------------------------------------------------------

# The generated code prints a failed run's C++ exception on stderr with its whole stack trace (~50 lines of
# "frame #N: ..."), where the error aotcuda raises already has the message. A filter in a child process (it
# reads what the call writes on stderr and passes it on without those traces) sees even what is written just
# before the process dies (an abort's "terminate called ..."), which output held in this process would lose.
_TRACE_FILTER = r"""
import re, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the call's to answer: pass on all it writes, to the end
start = re.compile(rb"Exception raised from .*\(most recent call first\):\r?\n$")
frame = re.compile(rb"(frame #\d+: .*|<omitting python frames>)\r?\n$")
out, held, tracing = sys.stdout.buffer, None, False
for line in sys.stdin.buffer:
    if tracing:
        if frame.match(line):
            continue
        tracing = False
        if not line.strip():
            continue
    if held is not None:
        if start.match(line):
            held, tracing = None, True
            continue
        out.write(held)
        held = None
    if line.startswith(b"Error: "):
        held = line
        continue
    out.write(line)
    out.flush()
if held is not None:
    out.write(held)
out.flush()
"""


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _stderr_without_cxx_traces():
    """While the block runs, this process's stderr (file descriptor 2) goes through _TRACE_FILTER, in a child
    process that writes it on to the real stderr as it comes, without the generated code's C++ exception traces.
    (Muting std::cerr itself would write into libstdc++'s memory: the AOTCUDA_FOREIGN_WRITES switch.) Where the
    child cannot start, or there is no stderr (file descriptor 2 closed: Python's sys.stderr is then None), stderr
    is left as it is."""
    if sys.stderr is None or not _fd_open(2):
        yield
        return
    sys.stderr.flush()
    try:
        child = subprocess.Popen([sys.executable, "-S", "-c", _TRACE_FILTER], stdin=subprocess.PIPE, stdout=2)
    except OSError:
        yield
        return
    saved = os.dup(2)
    os.dup2(child.stdin.fileno(), 2)
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        finally:  # stderr is given back even where the flush fails (a reader that went away)
            os.dup2(saved, 2)
            os.close(saved)
            child.stdin.close()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _called(program, args: tuple, kwargs: dict):
    """The program called on an inputs file's arguments; a dict of exactly the tensors `aotcuda inspect` lists, by
    those names (a nested argument's as ``xs_0``, ``opts_scale``: what `aotcuda serve` takes), is run as those
    inputs where the call by forward's arguments refuses it (a new user passed inspect's names and was told to
    pass forward's). Beside them, the file may give the arguments fixed at lowering, by the names inspect shows
    them under, each with the value the program was lowered with (InputError for another value: the program
    computes with its own). A dict of forward's own argument names is a call by them: its refusal stands (it ran as
    inspect's names where those were the same, ``{"x": t}``, and so skipped the check of the fixed arguments that
    the call refused: eager computes with forward's default ``scale=1.0``, the package with the lowered 2.0)."""
    try:
        return program(*args, **kwargs)
    except InputError as error:
        names = list(program.input_names)
        fixed = {name: value for name, value in kwargs.items() if name not in names}
        if not args and set(names) & set(kwargs) and not _calls_forward(program, kwargs):
            _refuse_incomplete_inspect_names(names, kwargs, program.constant_inputs, error)
        if args or not kwargs or _calls_forward(program, kwargs) or not set(names) <= set(kwargs) or not all(
                isinstance(kwargs[name], torch.Tensor) for name in names) or not set(fixed) <= set(
                program.constant_inputs):
            raise
        program._constant_arguments().check_named(fixed)  # another value: the program computes with its own
    return program._structure_outputs(program.execute([kwargs[name] for name in names]))


def _refuse_incomplete_inspect_names(names: list[str], kwargs: dict, constants: dict, error: InputError) -> None:
    """InputError naming what a dict by inspect's names lacks or has beyond them, where it has some of them: the
    call's own refusal spoke of forward's arguments (``the program takes batch``), which a file by those names was
    not written in (a new user left out ``batch_scale`` and was told that ``batch_a`` did not match)."""
    missing = [name for name in names if name not in kwargs]
    unknown = [name for name in kwargs if name not in names and name not in constants]
    if not missing and not unknown:
        return
    lacks = [f"lacks {', '.join(map(repr, missing))}"] if missing else []
    extra = [f"has {', '.join(map(repr, unknown))}, which {'is' if len(unknown) == 1 else 'are'} not one of them"] \
        if unknown else []
    raise InputError(f"the inputs are given by the names `aotcuda inspect` lists ({', '.join(map(repr, names))}), "
                     f"but the dict {' and '.join(lacks + extra)}; give each of those names a tensor") from error


def _calls_forward(program, kwargs: dict) -> bool:
    """Whether every name of ``kwargs`` is one of forward's parameters, as the package records them (False where it
    does not: a package of an older aotcuda)."""
    parameters = (program.signature or {}).get("forward_parameters")
    return parameters is not None and set(kwargs) <= {parameter.get("name") for parameter in parameters}


@main.command(short_help="Run PACKAGE on saved inputs; show its outputs.")
@click.argument("package", type=ExistingFile())
@click.option("--inputs", "inputs_path", required=True, type=ExistingFile(),
              help="a torch.save file: a tuple of positional arguments, a dict by name, or "
                   "{'args': (...), 'kwargs': {...}} (what `aotcuda lower --save-inputs` writes).")
@click.option("--device", type=TargetDevice(auto=False), default=None, help="default: the package's device.")
@click.option("--cuda-graphs", is_flag=True, help="capture in CUDA graphs after three warm-up calls.")
@click.option("--save-outputs", type=click.Path(dir_okay=False), help="save the outputs (torch.save).")
@click.option("--signing-key-file", type=click.Path(dir_okay=False), default=None,
              help=f"run the package only if it is signed with the key in this file. {KEY_FILE_HELP}")
@_clean_errors
def run(package, inputs_path, device, cuda_graphs, save_outputs, signing_key_file):
    """Run PACKAGE on saved inputs; print each output's shape, dtype and device."""
    from aotcuda.runtime.program import load

    if save_outputs:
        save_outputs = _checked_save_path(save_outputs, "--save-outputs", "the outputs", inputs=inputs_path)
    args, kwargs = load_inputs(inputs_path)
    with load(package, device=device, cuda_graphs=cuda_graphs, signing_key=key_file_path(signing_key_file)) as program:
        # onto the program's device; a tensor with no data (meta) stays as it is, for the call's own check to name
        args, kwargs = torch.utils._pytree.tree_map_only(
            torch.Tensor, lambda t: t if t.is_meta else t.to(program.device), (args, kwargs))
        try:
            # no_grad: a run is inference; an input saved with requires_grad is written as eager writes it there, not
            # refused with advice (call under torch.no_grad()) that a command line cannot follow
            with _stderr_without_cxx_traces(), torch.no_grad():
                outputs = _called(program, args, kwargs)
        except InputError as error:  # the call is the file's: say how to change the file, not a Python call
            error.add_note(f"The inputs come from {clipped(inputs_path, 200)}. The forms it may take: a tuple of positional "
                           "arguments, a dict of arguments by name, or {'args': (...), 'kwargs': {...}} (what "
                           f"`aotcuda lower --save-inputs` writes); `aotcuda inspect {clipped(package, 200)}` lists the names, "
                           "shapes and dtypes the program takes.")
            raise
    table = Table(title=f"outputs of {shown(os.path.basename(package))}")  # a file name is anyone's text
    for column in ("output", "shape", "dtype", "device"):
        table.add_column(column)
    # a None output is a leaf here: torch's pytree reads None as an empty container, which left its row out
    leaves, spec = torch.utils._pytree.tree_flatten(outputs, is_leaf=lambda leaf: leaf is None)
    for name, tensor in zip(_output_labels(spec), leaves):
        if isinstance(tensor, torch.Tensor):
            table.add_row(shown(name), escape(str(tuple(tensor.shape))), str(tensor.dtype).removeprefix("torch."),
                          str(tensor.device))
        elif tensor is None:  # forward returns None there, as eager does
            table.add_row(shown(name), "-", "None", "-")
        elif isinstance(tensor, (bool, int, float)):  # a Python-number output (x.shape[0]), as eager returns it
            table.add_row(shown(name), "-", f"{type(tensor).__name__} = {_clip(repr(tensor), 40)}", "-")
    console.print(table)
    if save_outputs:
        _saved(_plain(_compact_on_cpu(outputs)), save_outputs)
        status_console.print(f"wrote {terminal_safe(save_outputs)}", highlight=False, markup=False, soft_wrap=True)


def _counted(count: int, thing: str) -> str:
    """'1 fallback kernel', '3 fallback kernels'."""
    return f"{count} {thing}{'' if count == 1 else 's'}"


def _checked_save_path(path: str, option: str, what: str, package: str | None = None,
                       inputs: str | None = None) -> str:
    """A file ``option`` saves ``what`` to (torch.save), checked before any work, as -o is: a folder that takes
    it, no file there but an earlier torch.save file (``--save-inputs model.py`` would replace the model's
    source), and neither ``package``, the -o this command writes first (``-o m.pt2 --save-inputs m.pt2`` replaced
    the package it had just written with the inputs), nor ``inputs``, the file it reads the call from (``run
    --inputs in.pt --save-outputs in.pt`` replaced the inputs with the outputs). Its missing folders are made when
    it is written."""
    from aotcuda.lowering.pipeline import checked_output_path, is_torch_save_file

    try:
        path = checked_output_path(path, what, is_torch_save_file, "a torch.save file", "saved.pt")
    except PackageError as error:
        raise click.BadParameter(str(error), param_hint=option) from None
    if package is not None and os.path.realpath(path) == os.path.realpath(os.path.expanduser(package)):  # lower()'s
        stem = os.path.splitext(os.path.basename(package))[0]
        raise click.BadParameter(f"{clipped(path, 200)!r} is also the package's path (-o): {what} would replace the package just "
                                 f"written; give another file, e.g. {stem}.inputs.pt", param_hint=option)
    if inputs is not None and os.path.realpath(path) == os.path.realpath(inputs):
        stem = os.path.splitext(os.path.basename(inputs))[0]
        raise click.BadParameter(f"{clipped(path, 200)!r} is also the inputs file (--inputs): {what} would replace the inputs "
                                 f"read from it; give another file, e.g. {stem}.outputs.pt", param_hint=option)
    return path


def _saved(value, path: str) -> None:
    """torch.save ``value`` to ``path``, written to a new file beside it and renamed over the path: what another
    process puts at the path after it was checked (a symlink to another file, a FIFO) is replaced, never
    followed or waited on, and a failed save leaves the path as it was. The folders of the path are made (as
    -o does); the file gets the mode a plain open would give it (0666 less the umask)."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    descriptor, partial = _new_file_beside(folder)
    try:
        with os.fdopen(descriptor, "wb") as file:
            torch.save(value, file)
        os.replace(partial, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.remove(partial)
        if isinstance(exc, (OSError, RuntimeError)) and os_errno(exc) is not None:  # torch.save's writer: its cause
            # a full disk or a file-size limit raised os's (or torch's "unexpected pos") raw error, naming no file
            raise AotcudaError(f"could not write {terminal_safe(path)!r}: {os.strerror(os_errno(exc))}; "
                               f"{write_failure_advice(exc, folder)}; nothing was written there") from None
        raise
    _wrote(path)


def _new_file_beside(folder: str) -> tuple[int, str]:
    """(descriptor, path) of a new file in ``folder`` with a random name, made by this call (O_EXCL: never a file,
    symlink or FIFO already there) with mode 0666, which the kernel lessens by the umask as for any new file
    (reading the umask would mean setting it, for the whole process, for a moment)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        partial = os.path.join(folder, f".aotcuda-{secrets.token_hex(8)}.partial")
        with contextlib.suppress(FileExistsError):  # a name taken by chance (or planted): draw another
            return os.open(partial, flags, 0o666), partial
    raise FileExistsError(f"no new file name was free in {folder} after 100 tries")


def _output_labels(spec) -> list[str]:
    """Each output leaf as the caller reaches it (out, out[0], out['logits']), as `inspect` names it; its
    flat index for a container type registered with torch's pytree without key paths."""
    from aotcuda.runtime.keywords import output_leaf_names

    try:
        return output_leaf_names(spec)
    except ValueError:
        return [str(index) for index in range(spec.num_leaves)]


def _compact_on_cpu(outputs):
    """The outputs on the CPU, each tensor that views a larger storage copied to hold its own elements alone: torch.save
    writes a tensor's whole storage, and AOTInductor returns a view of the buffer it computed where the program returns
    part of one (``(x @ w)[:, :1]``): `aotcuda run --save-outputs` of that (100,000, 1) output of 400 KB wrote 1.6 GB,
    the product's whole (100,000, 4096) buffer. A tensor given in several slots stays one tensor (one copy), as the
    program returned it; an expanded one (stride 0, more elements than storage) keeps its storage."""
    copies: dict[int, torch.Tensor] = {}

    def compact(tensor: torch.Tensor) -> torch.Tensor:
        if id(tensor) not in copies:  # the outputs hold every tensor meanwhile: an id is not reused
            on_cpu = tensor.cpu()
            larger = on_cpu.untyped_storage().nbytes() > on_cpu.numel() * on_cpu.element_size()
            copies[id(tensor)] = on_cpu.clone() if larger else on_cpu
        return copies[id(tensor)]

    return torch.utils._pytree.tree_map_only(torch.Tensor, compact, outputs)


def _plain(value):
    """Outputs with library types (a transformers ModelOutput, a named tuple) as plain dicts and tuples, so
    that ``torch.load(path)`` reads the saved file with its default weights_only=True."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):  # a named tuple too
        return tuple(_plain(item) for item in value)
    return value


# --- sign ------------------------------------------------------------------------------------------------

@main.command(short_help="Sign a package with a key.")
@click.argument("package", type=ExistingFile())
@click.option("--signing-key-file", type=click.Path(dir_okay=False), default=None,
              help=f"the key to sign with. {KEY_FILE_HELP}")
@_clean_errors
def sign(package, signing_key_file):
    """Sign PACKAGE with a key, so that load, run and serve under that key take it (a signed copy is written beside
    it and renamed over it). Sign only a package you trust: the key then vouches for it; `aotcuda lower
    --signing-key-file` signs as it lowers."""
    from aotcuda.package_tags import sign_package

    key = signing_key(key_file_path(signing_key_file))
    if key is None:
        raise click.UsageError("no key to sign with: pass --signing-key-file KEY (or set AOTCUDA_SIGNING_KEY_FILE)")
    key_id = sign_package(package, key, by_rename=True)
    console.print(f"signed {terminal_safe(package)} (key id {key_id})", highlight=False, markup=False, soft_wrap=True)


# --- inspect ---------------------------------------------------------------------------------------------

def _signing(package: str, key, limits, archive) -> dict:
    """Whether the package is signed with a key (package_tags), and, with a key, whether load would take it, as
    inspect --json gives it: {"signed": bool, "key_id": str | None, "load_with_key": bool | None (None: no key
    given), "signing": the line the table shows (what load refuses in the refusal's own words)}."""
    from aotcuda.runtime.package import package_key_id

    try:
        key_id = package_key_id(package, key, limits=limits, archive=archive)
    except PackageError as error:
        said = terminal_safe(_clip(error, 5 * SHOWN_CHARS))
        if key is None:
            return {"signed": False, "key_id": None, "load_with_key": None,
                    "signing": f"signed with a key: its tag is damaged: {said}"}
        # the key refuses it: whether it is signed at all (with another key) is the tag's own business
        unkeyed = _signing(package, None, limits, archive)
        return {**unkeyed, "load_with_key": False,
                "signing": f"signed with a key: load with {key.source} refuses it: {said}"}
    if key_id is None:
        return {"signed": False, "key_id": None, "load_with_key": None if key is None else False,
                "signing": "signed with a key: no (load with a signing key refuses it)"}
    checked = f"checked with {key.source}: load takes it" if key is not None else \
        "not checked (no key given: --signing-key-file)"
    return {"signed": True, "key_id": key_id, "load_with_key": None if key is None else True,
            "signing": f"signed with a key: yes (HMAC-SHA256, key id {key_id}; {checked})"}


@main.command(short_help="Show a package's inputs, outputs and kernels.")
@click.argument("package", type=ExistingFile())
@click.option("--signing-key-file", type=click.Path(dir_okay=False), default=None,
              help=f"check that the package is signed with the key in this file, as load does. {KEY_FILE_HELP}")
@click.option("--json", "as_json", is_flag=True,
              help="print one JSON object instead (device, signing, the signature's inputs and outputs as the caller "
                   "sees them, the kernels), for scripts; every string of the package escaped as JSON writes it")
@_clean_errors
def inspect(package, signing_key_file, as_json):
    """Show PACKAGE's device, inputs, outputs and the kernels its generated code calls."""
    from aotcuda.lowering.devices import DEVICE_PROFILES
    from aotcuda.lowering.fallbacks import kernels_from_signature, scan_kernels, split_allowed
    from aotcuda.runtime.archive import ArchiveLimits, open_archive
    from aotcuda.runtime.package import describe_package

    key = signing_key(key_file_path(signing_key_file))
    # Everything shown is read from one opening of the file, found unchanged when the block ends, before any of
    # it is printed: one version of the package (read within limits; nothing extracted, nothing run).
    limits = ArchiveLimits.from_environment()
    with open_archive(package, limits) as archive:
        metadata, signature = describe_package(package, limits=limits, archive=archive)
        kernels, generated = scan_kernels(package, archive=archive)  # the generated sources, run never
        signing = _signing(package, key, limits, archive)
    device = metadata.get("AOTI_DEVICE_KEY", "")
    profile = DEVICE_PROFILES.get(device)
    missing, library = split_allowed(kernels, profile.allowed_kernels if profile else frozenset())
    recorded = kernels_from_signature(signature)
    unlike = []
    if recorded is not None:  # what lower() recorded, for the kernels the sources call: see _as_lowered
        missing, library, unlike = _as_lowered(missing, library, *recorded)
    if as_json:
        _print_inspect_json(package, device, signing, signature, generated, library, missing, unlike)
        return
    console.print(f"[bold]{shown(package)}[/bold]: device {shown(_clip(device) or '?')}", highlight=False,
                  soft_wrap=True)
    console.print(signing["signing"], highlight=False, markup=False, soft_wrap=True)
    if signature:
        user_signature, input_specs, output_specs, refusal = _callers_signature(signature, package)
        if refusal is not None:  # what load would refuse is shown as it is, after a warning that says why
            status_console.print(f"warning: {terminal_safe(refusal)}; aotcuda.load refuses this package",
                                 highlight=False, markup=False, soft_wrap=True)
        names = signature.get("dim_names") if isinstance(signature.get("dim_names"), dict) else None
        for kind in ("inputs", "outputs"):
            console.print(_signature_table(kind, _listed(user_signature.get(kind)), names, _listed(signature.get(kind))))
        written = [str(spec.get("name")) for spec in _listed(signature.get("inputs"))
                   if isinstance(spec, dict) and spec.get("mutated") is True]
        if written:  # user-input mutations: a call writes into the caller's tensors, as eager's in-place ops do
            names_text = ", ".join(written[:SHOWN_ROWS]) + (" ..." if len(written) > SHOWN_ROWS else "")
            console.print(f"inputs written in place at every call: {shown(_clip(names_text, 5 * SHOWN_CHARS))} (each "
                          "call writes them into the caller's tensors, as the module's in-place ops do)",
                          highlight=False, soft_wrap=True)
        for line in _checked_index_lines(_listed(signature.get("inputs")), names) + \
                _returned_input_lines(_listed(user_signature.get("outputs")), _listed(signature.get("inputs"))):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        unchecked = [spec for spec in _listed(signature.get("inputs"))  # inputs whose index values go unchecked
                     if isinstance(spec, dict) and isinstance(spec.get("index_unchecked"), list) and spec["index_unchecked"]]
        for spec in unchecked[:SHOWN_ROWS]:
            lines = [str(line) for line in spec["index_unchecked"][:SHOWN_ROWS]]
            console.print(f"index values not checked: {shown(_clip('; '.join(lines), 5 * SHOWN_CHARS))}; aotcuda serve "
                          "refuses it without --allow-unchecked-indices", highlight=False, soft_wrap=True)
        if more := _more_than_shown(len(unchecked)):
            console.print(f"index values not checked: ... {more} inputs", highlight=False, soft_wrap=True)
        try:  # what serve refuses (serving.batching: unbounded_output_dim, and unbounded_size for intermediates)
            from aotcuda.serving.batching import unbounded_dims, unbounded_size
        except ImportError:
            unbounded_dims, unbounded_size = (lambda *specs: []), (lambda recorded: "")
        places = {}  # one line per unbounded symbol: the output dims it sizes
        for spec, index, dim in unbounded_dims(output_specs, input_specs):
            places.setdefault(dim.symbols, []).append(
                f"output {shown(repr(_clip(spec.name)))} dim {index} ({shown(_clip(dim.shown))})")
        for where in list(places.values())[:SHOWN_ROWS]:
            more = _more_than_shown(len(where))
            console.print(f"unbounded data-dependent size: {', '.join(where[:SHOWN_ROWS])}{' ' + more if more else ''} "
                          f"{'is' if len(where) == 1 else 'are'} computed from an input's values with no upper bound "
                          "(torch._check(n <= N) in the model bounds it); aotcuda serve refuses it without "
                          "--allow-unbounded-outputs", highlight=False, soft_wrap=True)
        for inner in _unbounded_inner_sizes(signature.get("data_dependent_sizes"), unbounded_size,
                                            set().union(*places))[:SHOWN_ROWS]:
            console.print(f"unbounded data-dependent size: {shown(inner)}, with no upper bound; aotcuda serve refuses "
                          "it without --allow-unbounded-outputs", highlight=False, soft_wrap=True)
        constants = _constant_inputs_line(signature)
        if constants:
            console.print(constants, highlight=False, soft_wrap=True)  # one line to grep, as the kernel lines
        state = signature.get("state_written")
        if isinstance(state, list) and state:  # serving takes one replica and no batching for it
            names = ", ".join(str(name) for name in state[:SHOWN_ROWS]) + (" ..." if len(state) > SHOWN_ROWS else "")
            from aotcuda.serving.batching import training_norm_cause

            cause = training_norm_cause(state)
            console.print(f"state written at every call: {shown(_clip(names, 5 * SHOWN_CHARS))}"
                          + (f" ({cause})" if cause else ""), highlight=False, soft_wrap=True)
        rows_line = _rows_line(signature)
        if rows_line:
            console.print(rows_line, highlight=False, soft_wrap=True)
    else:
        console.print("no aotcuda signature entry (not written by aotcuda.lower): inputs/outputs unknown",
                      soft_wrap=True)
    if unlike:
        status_console.print(f"warning: the signature's record of kernels differs from what the generated "
                             f"code calls ({shown(_clip(', '.join(unlike), 5 * SHOWN_CHARS))}): listed as the "
                             "code calls them", highlight=False, markup=False, soft_wrap=True)
    console.print(f"generated kernels: {len(generated)}", soft_wrap=True)
    console.print(f"library kernels (allowed): {shown(_clip(', '.join(k.name for k in library) or 'none', 5 * SHOWN_CHARS))}",
                  highlight=False, soft_wrap=True)
    console.print(f"fallback kernels: {len(missing)}", soft_wrap=True)
    for kernel in missing[:SHOWN_ROWS]:
        console.print(f"  - {shown(_clip(kernel.describe()))}", highlight=False, soft_wrap=True)
    if more := _more_than_shown(len(missing)):
        console.print(f"  ... {more}", highlight=False, soft_wrap=True)
    if any(kernel.name.endswith("(proxy executor)") for kernel in missing):
        console.print("runs in: torch._inductor.aoti_load_package only (a proxy-executor kernel: `aotcuda run` and "
                      "aotcuda.load refuse it)", highlight=False, soft_wrap=True)


# The signature's entries inspect --json always gives, each with its value where the package records none (a
# script reads report["signature"]["constant_inputs"] without a membership test; docs/usage.md lists them).
_JSON_SIGNATURE_ENTRIES = {"inputs": list, "outputs": list, "dim_names": dict, "constant_inputs": list,
                           "state_written": list, "data_dependent_sizes": list}


def _print_inspect_json(package: str, device: str, signing: dict, signature, generated, library, missing,
                        unlike) -> None:
    """``aotcuda inspect --json``: what inspect shows, as one JSON object on stdout, of one schema whatever the
    package holds (docs/usage.md: every key always there, an empty list or object where there is nothing). The
    signature's entries are the caller's view (complex tensors as complex: complex_adapter.split_signature), or as
    stored where load would refuse the package (``"refused_by_load"`` then says why). json.dumps writes every
    non-ASCII and control character of the package's strings as an escape, so the output is as safe on a terminal
    as the table."""
    report = {"package": package, "device": device, **signing, "signature": None, "refused_by_load": None}
    if signature:
        user_signature, _, _, report["refused_by_load"] = _callers_signature(signature, package)
        report["signature"] = {key: user_signature[key] if key in user_signature else empty()
                               for key, empty in _JSON_SIGNATURE_ENTRIES.items()}
    report["kernels"] = {"generated": len(generated), "library": [kernel.name for kernel in library],
                         "fallback": [{"name": kernel.name, "where": kernel.describe()} for kernel in missing],
                         "record_differs_for": list(unlike)}
    report["runs_in_aotcuda_load"] = not any(kernel.name.endswith("(proxy executor)") for kernel in missing)
    click.echo(json.dumps(_finite_numbers(report), ensure_ascii=True, indent=1, default=str, allow_nan=False))


def _finite_numbers(value):
    """``value`` with each float JSON has no number for as the string Python writes it ("inf", "-inf", "nan"). A
    package records them (a constant argument of float('inf'), or a hostile signature's NaN), and json.dumps writes them
    as Infinity and NaN, which are no JSON: jq, JSON.parse and serde refuse the whole report (break42, 2026-12-07)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {key: _finite_numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_numbers(item) for item in value]
    return value


def _as_lowered(missing, library, recorded_missing, recorded_library):
    """The kernels the generated code calls (the scan: ``missing``, ``library``), each classified and given the
    model's lines as lower() recorded them (it had the program: a scan on complex values is complex math, not a
    library kernel; the record can only refuse more), plus the recorded ops on complex values no call was
    traced to (known only from the program). A package's record is never trusted over its code: a kernel the
    code calls stays listed whatever the record says, and the names where the two differ are returned to be
    warned about."""
    record = {kernel.name: (kernel, allowed) for allowed, kernels in ((False, recorded_missing),
                                                                     (True, recorded_library)) for kernel in kernels}
    out_missing, out_library, unlike = [], [], []
    for scanned, allowed in [(k, False) for k in missing] + [(k, True) for k in library]:
        kernel, recorded_allowed = record.pop(scanned.name, (None, None))
        if kernel is None:
            unlike.append(scanned.name)
            kernel, recorded_allowed = scanned, allowed
        # the record may only make a kernel stricter (a scan on complex values), never allow one the code's
        # own classification refuses
        (out_library if allowed and recorded_allowed else out_missing).append(kernel)
    for name, (kernel, allowed) in record.items():
        if name.endswith(" on complex values") and not allowed:
            out_missing.append(kernel)
        else:
            unlike.append(name)
    return out_missing, out_library, unlike


# What `aotcuda inspect` shows of a package at most: its lists are as long as its JSON and sources allow (tens of
# MiB), and its output is read by a person. 200,000 outputs in a signature took 106 s and printed 12 MB.
SHOWN_ROWS, SHOWN_CHARS = 50, 200


def _more_than_shown(count: int) -> str:
    """What a list of ``count`` lines cut to SHOWN_ROWS leaves out, as its last line ends: "and 3 more"; empty where
    nothing was cut. One place for the arithmetic of every list inspect cuts."""
    return f"and {count - SHOWN_ROWS} more" if count > SHOWN_ROWS else ""


def _clip(text, limit: int = SHOWN_CHARS) -> str:
    """A string of a package, cut to ``limit`` characters (errors.clipped)."""
    return clipped(text, limit)


def _unbounded_inner_sizes(recorded, unbounded_size, said: set[str]) -> list[str]:
    """The signature's unbounded data_dependent_sizes in words (``unbounded_size``), one per symbol, leaving out
    those whose symbols ``said`` (an output line's) already holds: an output sized u0 is also recorded there."""
    from aotcuda.runtime.shape_expressions import shape_expression

    try:
        if not unbounded_size(recorded):
            return []
    except PackageError as exc:
        return [f"the signature's data_dependent_sizes cannot be read ({_clip(str(exc))})"]
    lines = []
    for size in recorded:
        if size.get("max") is not None:
            continue
        try:
            symbols = {str(symbol) for symbol in shape_expression(size["expr"]).free_symbols} or {size["expr"]}
        except ValueError:
            symbols = {size["expr"]}
        if not symbols <= said:
            said |= symbols
            lines.append(unbounded_size([size]))
    return lines


def _rows_line(signature: dict) -> str | None:
    """inspect's line of the batch rows: mixed (lowering's graph walk, lowering/batch_row_flow.py, with where; or its
    probe, lowering/batch_rows.py), not probed, or kept apart, proved by the graph or probed; None for a package of an
    older aotcuda or one serving does not batch."""
    mixed, graph = signature.get("rows_mixed"), signature.get("rows_graph")
    reason = signature.get("rows_graph_reason")
    why = f" ({shown(_clip(reason, 2 * SHOWN_CHARS))})" if isinstance(reason, str) else ""
    if mixed is True:
        where = f": found in the graph{why}" if graph == "mixes" else ""
        return ("rows mixed along dim 0: an output's row depends on other rows of the batch dim; aotcuda serve refuses "
                f"--max-batch-size above 1{where}")
    proved = "; proved kept apart by the graph" if graph == "kept apart" else ""
    if mixed is None and isinstance(signature.get("rows_not_probed"), str):
        return (f"rows: not probed ({shown(_clip(signature['rows_not_probed'], 2 * SHOWN_CHARS))}); aotcuda serve "
                f"batches it unchecked{proved}")
    if mixed is False and graph == "kept apart":
        return "rows kept apart along dim 0: proved by the graph, and probed"
    if mixed is False and graph == "not proved":
        return f"rows kept apart along dim 0: probed, not proved by the graph{why}"
    return None


def _constant_inputs_line(signature: dict) -> str | None:
    """One line naming the non-tensor arguments fixed at lowering (``scale=2.0 (module default 1.0)``), which
    the program computes with whatever a call passes; None when there are none. Forward's defaults come from
    the signature's "forward_parameters" (absent in older packages: then not shown)."""
    from aotcuda.runtime.constant_arguments import argument_name

    recorded = signature.get("constant_inputs") or []
    recorded = [entry for entry in recorded if isinstance(entry, dict)] if isinstance(recorded, list) else []
    if not recorded:
        return None
    parameters = signature.get("forward_parameters")
    defaults = {p["name"]: p for p in parameters if isinstance(p, dict) and isinstance(p.get("name"), str)} \
        if isinstance(parameters, list) else None
    arg_names = signature.get("forward_arg_names") if isinstance(signature.get("forward_arg_names"), list) else []
    shown_values = []
    for entry in recorded[:SHOWN_ROWS]:
        name = argument_name(str(entry.get("name", f"#{entry.get('leaf')}")), arg_names)
        text = f"{name}={entry.get('value')!r}"
        parameter = defaults.get(name) if defaults is not None else None
        if defaults is not None and "[" not in name:
            text += (f" (module default {parameter['default']!r})" if parameter is not None and "default" in parameter
                     else " (module default: none recorded)")
        shown_values.append(text)
    return (f"arguments fixed at lowering (the program computes with these values whatever a call passes): "
            f"{shown(_clip(', '.join(shown_values), 5 * SHOWN_CHARS))}")


def _callers_signature(signature: dict, package: str) -> tuple[dict, tuple, tuple, str | None]:
    """(the signature as the caller sees it: complex tensors as complex, its input specs, its output specs, None); or,
    for a signature load refuses, (the signature as stored, (), (), why, clipped)."""
    from aotcuda.runtime.complex_adapter import split_signature
    from aotcuda.runtime.specs import specs_from_signature

    try:
        user_signature, _ = split_signature(signature, package)
        input_specs, output_specs = specs_from_signature(user_signature, package)
    except PackageError as error:
        return signature, (), (), _clip(error, 5 * SHOWN_CHARS)
    return user_signature, input_specs, output_specs, None


def _checked_index_lines(inputs: list, names) -> list[str]:
    """One line per index range the runtime checks before every call (the signature's "index_ranges":
    runtime/index_ranges.py), as a reader of the package needs it: the input (and the part of it that is the index),
    the values taken, why. A bound of null is a side left unchecked (it depends on a size no input gives). All of it
    read from the package: anything malformed is shown as it is written (load refuses it, and says so)."""
    lines = []
    for spec in inputs:
        ranges = spec.get("index_ranges") if isinstance(spec, dict) else None
        for entry in ranges if isinstance(ranges, list) else []:
            if not isinstance(entry, dict):
                continue
            part = "".join(f".{step[0]}({', '.join(str(arg) for arg in step[1:])})"
                           for step in _listed(entry.get("part")) if isinstance(step, list) and step)
            low, high = (_bound_text(entry.get(side), names) for side in ("min", "max"))
            # in the user's Dim names, as the runtime's refusal says it (a reason may name a dim: lowering/item_ranges.py)
            reason = f" ({under_dim_names(_clip(entry['reason'], 5 * SHOWN_CHARS), names)})" if isinstance(
                entry.get("reason"), str) else ""
            # a value read with .item() (lowering/item_ranges.py) is no index: its range is torch.export's
            what = "value read with .item()" if entry.get("item") is True else "index values"
            lines.append(terminal_safe(_clip(f"{what} checked before every call: {spec.get('name')}{part} in "
                                             f"[{low}, {high}]{reason}", 5 * SHOWN_CHARS)))
    if more := _more_than_shown(len(lines)):
        lines[SHOWN_ROWS:] = [f"index values checked before every call: ... {more}"]
    return lines


def _bound_text(bound, names) -> str:
    if bound is None:
        return "unchecked"
    if isinstance(bound, dict) and isinstance(bound.get("expr"), str):
        return under_dim_names(_clip(bound["expr"]), names)
    return _clip(str(bound))


def _returned_input_lines(outputs: list, inputs: list) -> list[str]:
    """One line per output that is an input (the signature's "returns_input") or a view of one ("returns_view_of_
    input"): a call hands back the caller's own tensor there, as eager does (runtime/returned_inputs.py)."""
    lines = []
    for spec in outputs:
        for key, what in (("returns_input", "the caller's own tensor"),
                          ("returns_view_of_input", "a view of the caller's tensor (view_as_complex or view_as_real)")):
            index = spec.get(key) if isinstance(spec, dict) else None
            if type(index) is int and 0 <= index < len(inputs) and isinstance(inputs[index], dict):
                lines.append(terminal_safe(_clip(f"output {spec.get('name')} is input {inputs[index].get('name')}: "
                                                 f"a call returns {what}", 5 * SHOWN_CHARS)))
    if more := _more_than_shown(len(lines)):
        lines[SHOWN_ROWS:] = [f"outputs that are inputs: ... {more}"]
    return lines


def _listed(value) -> list:
    return value if isinstance(value, list) else []


def _dim_text(dim, names) -> str:
    """A signature dim as inspect shows it: 4, or batch∈[2, 64] (anything else as it is written)."""
    if isinstance(dim, dict) and isinstance(dim.get("expr"), str):
        narrowed = " (narrowed at lowering)" if dim.get("narrowed") else ""  # why: a refusal at run time says it
        shown = under_dim_names(_clip(dim["expr"]), names)
        return f"{shown}∈[{dim.get('min') or 0}, {_bound(dim.get('max'))}]{narrowed}"
    return _clip(dim, 40)


def _bound(value) -> str:
    return "∞" if value is None else str(value)  # a Dim without max=


def _signature_table(kind: str, specs: list[dict], names: dict[str, str] | None = None,
                     package_specs: list[dict] | None = None) -> Table:
    """Specs in the caller's terms (a complex tensor as complex64, shape S); ``package_specs``, the same
    slots as the package stores them, add where a complex tensor is a real pair [..., 2] inside it."""
    table = Table(title=kind)
    for column in ("name", "dtype", "shape", "device"):
        table.add_column(column)
    for spec, stored in list(zip(specs, package_specs or specs))[:SHOWN_ROWS]:
        spec, stored = (item if isinstance(item, dict) else {"name": item} for item in (spec, stored))
        dims = _listed(spec.get("shape"))
        shape = ", ".join(_dim_text(dim, names) for dim in dims[:SHOWN_ROWS])
        if len(dims) > SHOWN_ROWS:
            shape += f", ... ({len(dims)} dims)"
        dtype = spec.get("dtype", "?")
        if stored.get("complex") is not None:
            dtype = f"{dtype} ({stored.get('dtype')} pairs inside)"
        if spec.get("scalar") is not None:  # a Python number in eager and in a call's result (x.shape[0], a constant)
            none = spec["scalar"] == "none"
            table.add_row(*(shown(_clip(text)) for text in (
                spec.get("name", "?"), "None" if none else f"{spec['scalar']} (Python number)",
                _scalar_value_text("none" if none else spec.get("value"), names), "-")))
            continue
        table.add_row(*(shown(_clip(text)) for text in (spec.get("name", "?"), dtype, f"[{shape}]", spec.get("device", ""))))
    if more := _more_than_shown(len(specs)):
        table.add_row(f"... {more}", "", "", "")
    return table


def _scalar_value_text(value, names) -> str:
    """A Python-number output's value as inspect shows it: "= 2*batch + 1", "= 3", or "value known at run time"."""
    if value == "none":
        return "= None"
    if isinstance(value, dict) and isinstance(value.get("expr"), str):
        return f"= {under_dim_names(_clip(value['expr']), names)}"
    if value is None:
        return "value known at run time"
    return f"= {_clip(repr(value), 40)}"


# CSI sequences (colours, cursor moves: ESC [ params final) and other two-character ESC sequences.
ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")


def shown(text) -> str:
    """terminal_safe text, with rich markup escaped too (for strings printed with markup on)."""
    return escape(terminal_safe(text))


def _serve_command() -> click.Command:
    """`aotcuda serve` lives with aotcuda.serving (Ray is imported only when it runs); its errors print
    like every other command's."""
    from aotcuda.serving.command import serve_command

    serve_command.callback = _clean_errors(serve_command.callback)
    serve_command.short_help = serve_command.short_help or "Serve a package over HTTP with Ray Serve."  # one line
    return serve_command


main.add_command(_serve_command())


if __name__ == "__main__":
    main()
