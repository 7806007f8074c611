"""The aotcuda package contract: what aotcuda adds to an AOTInductor package (.pt2), and its JSON format.

The lowering writes it (``aotcuda.lower`` → ``write_signature``, from ``aotcuda.lowering.signature``);
the runtime only reads it (``aotcuda.runtime.package``, ``aotcuda.runtime.complex_adapter``). This module
imports neither side, nor torch: it is the format, as PyTorch's Python side writes the AOTI archive that
its C++ runner only reads.

The signature: AOTI's own files say nothing about input dtypes or shape ranges (the generated code checks
them only with AOTI_RUNTIME_CHECK_INPUTS=1, and then as an opaque error code). So aotcuda adds one zip
entry, ``<archive>/aotcuda/signature.json``, written by ``write_signature`` (the lowering builds it from the ExportedProgram:
``aotcuda.lowering.signature.signature_from_exported_program``).
Format (version 2; version 1 is the same without "index_ranges", and is read as well)::

    {"format": "aotcuda.signature", "version": 2,
     "inputs":  [TensorSpec, ...],      # in the container's (flattened) input order
     "outputs": [TensorSpec, ...],      # in the container's output order
     "dim_names": {"s27": "seq"},       # the Dim name the caller gave each input symbol (optional):
                                        # errors and `aotcuda inspect` say "seq", not "s27"; a name
                                        # has at most MAX_DIM_NAME_CHARS (256) characters, printable
     "forward_arg_names": ["x", ...],   # forward's argument names, positional first (optional; torch's
                                        # ModuleCallSignature.forward_arg_names): lets a Program take a
                                        # positional argument by keyword, p(x=t), as ep.module() does
     "forward_parameters": [{"name": "scale", "positional": true, "has_default": true, "default": 1.0}, ...],
                                        # (optional) every named parameter of the exported module's forward,
                                        # in order, with its default where JSON holds it (lowering/
                                        # signature.py forward_parameters): the runtime binds extra positional
                                        # arguments by it and compares left-out and left-at-default arguments
                                        # with the defaults (runtime/constant_arguments.py). Older packages
                                        # lack it and are called as before. A default is a plain JSON scalar
                                        # (plain_value), a name a string given once: else refused at load
     "constant_inputs": [{"leaf": 1, "value": 2.0, "name": "'scale'"}, ...],
                                        # (optional) the non-tensor arguments torch.export specialized into
                                        # the program: their place among the flat leaves of the (args, kwargs)
                                        # input spec (an int, not a tensor input's), the exported value (a
                                        # plain JSON scalar), the argument as the caller writes it
                                        # (a name: printable, at most MAX_TENSOR_NAME_CHARS, check_names)
     "pytree_types": [{"type": "transformers.modeling_outputs.CausalLMOutputWithPast",
                       "module": "transformers.modeling_outputs"}, ...],
                                        # (optional) container types of the input/output pytree specs
                                        # that torch does not register itself, with the module that does:
                                        # aotcuda.load imports it where the type's name lies in it
                                        # (runtime/pytree_types.py: home_module); type and module are
                                        # printable, at most MAX_TENSOR_NAME_CHARS each (check_names)
     "kernels": [{"name": "aoti_torch_cpu_logcumsumexp", "allowed": false, "nodes": ["logcumsumexp"],
                  "sources": ["model.py:12: y = torch.logcumsumexp(z, 0)"]}, ...],
                                        # (optional) the ATen kernels lower() found the generated code
                                        # calling, allowed (library kernels) or not, with the model's lines:
                                        # `aotcuda inspect` shows them as lower() classified them; a
                                        # kernel's name and each node: printable, at most
                                        # MAX_TENSOR_NAME_CHARS (check_names); sources: free text, shown
                                        # escaped and cut
     "state_written": ["angle", ...],  # (optional) the buffers and parameters the program writes in place at
                                        # every call (a KV cache, a step counter): serving refuses batching
                                        # and several replicas for it (each would hold its own state);
                                        # each name printable, at most MAX_TENSOR_NAME_CHARS (check_names)
     "rows_mixed": false,               # (optional) whether an output's row changed with another row of the
                                        # inputs, or with its place among them, along their shared dynamic dim 0
                                        # when lowering ran the program in eager with rows of the example changed
                                        # (lowering/batch_rows.py): serving refuses batching it when true
                                        # (null: not probed; absent: older aotcuda); parse_signature refuses
                                        # anything but true, false or null
     "rows_not_probed": "the program failed on every changed example (4 runs)",
                                        # (optional) where rows_mixed is null although serving would batch the
                                        # program's shapes: why; `aotcuda inspect` shows it
     "rows_graph": "kept apart",        # (optional) what lowering's walk of the program's graph found of its rows
                                        # (lowering/batch_row_flow.py): "kept apart" (proved: every output row
                                        # is computed from the inputs' same row alone), "mixes" (then rows_mixed
                                        # is true) or "not proved" (an op it does not know; the probe's record
                                        # stands alone); absent: older aotcuda, or a program serving does not batch
     "rows_graph_reason": "aten.mean.dim computes along the batch dim (dim 0): ... (model.py:12: ...)",
                                        # (optional) for "mixes" and "not proved": the op and the model's line
     "data_dependent_sizes": [{"expr": "u0", "min": 0, "max": null}, ...],
                                        # (optional) every size the program computes from an input's values
                                        # (an unbacked symbol), output or intermediate, with its range:
                                        # serving refuses one without a max (absent: older aotcuda)
     "tensor_sizes": ["4*s27**2", "32*s27", ...],
                                        # (optional) the bytes of the tensors the program makes (outputs and
                                        # intermediates) whose size depends on the input shapes, as
                                        # expressions of the shape symbols, the largest first (at most 16):
                                        # serving refuses a request whose shapes make one larger than its
                                        # --max-tensor-bytes (absent: older aotcuda, nothing checked)
     "divisors": ["s77", "s17 - 1"],    # (optional) the expressions of the input symbols the program divides by
                                        # (a // or % of sizes, a view's quotient): the generated code computes
                                        # them in C++, where a division by 0 ends the process, so a call whose
                                        # sizes make one 0 is refused (runtime/divisors.py; absent: older aotcuda)
     "library_sha256": "9f86d0..."}     # (optional) the SHA-256 of the model's .so this signature was
                                        # written for (write_signature adds it): load refuses a signature
                                        # of another library, whose shapes the generated code would not read
    TensorSpec = {"name": "x",                      # inputs: the graph-signature name (forward's argument
                                                    # name); outputs: the place in forward's result, "out",
                                                    # "out[0]", "out['logits']", "out.hidden" (older packages
                                                    # hold the FX node name, "add_7": shown, never matched);
                                                    # at most MAX_TENSOR_NAME_CHARS (1,024) characters, with
                                                    # no control or format character, as every other name of
                                                    # the signature (check_names; Dim and forward's names: 256)
                  "dtype": "float32",               # torch dtype name, without "torch."
                  "device": "cpu" | "cuda",         # device type only
                  "shape": [Dim, ...],              # len(shape) is the rank
                  "contiguous": true,               # the exported example was contiguous (inputs)
                  "strides": [Dim, ...],            # the exported example's strides, which the generated
                                                    # code assumes (optional: absent in older packages)
                  "mutated": false,                 # inputs: the program writes it in place (optional:
                                                    # absent in older packages, see runtime/checks.py)
                  "index_ranges": [IndexRange, ...], # inputs (optional; version 2): the values an integer
                                                    # input may hold where it reaches an index (one entry
                                                    # per indexing op it reaches); the runtime checks them
                                                    # before the call (runtime/index_ranges.py)
                  "index_unchecked": ["input 'a' reaches aten.embedding at model.py:12 (128 rows of ...)
                                      through aten.mul at model.py:11: its values are not checked ..."],
                                                    # inputs (optional; version 2, older readers ignore it):
                                                    # where the input reaches an index through an op the
                                                    # lowering cannot bound exactly: no check before the
                                                    # call; shown by `aotcuda inspect`, Program.index_unchecked
                  "scalar": "int",                  # outputs (optional): eager returns a Python int ("float",
                                                    # "bool") here, e.g. x.shape[0] or a constant; the
                                                    # container returns a 0-d CPU int64 (float64, bool) tensor,
                                                    # dtype and shape say so, and a Program's call returns the
                                                    # number (execute() the 0-d tensor); "none": forward
                                                    # returns None there (no handle; a 0-d bool spec, unused).
                                                    # Absent: a tensor
                  "value": {"expr": "2*s77 + 1"},   # a scalar's value: a JSON number where known at lowering,
                                                    # an expression of the input symbols, or null (unknown)
                  "returns_input": 0,               # outputs (optional): forward returns that input (its index in
                                                    # "inputs"), as it is (`return y, x`) or written in place
                                                    # (`x.add_(1); return x`); a call hands the caller's
                                                    # own tensor back there, as eager does (runtime/
                                                    # returned_inputs.py). Its dtype, shape and complex must be
                                                    # the input's, else the package is refused at load
                  "returns_view_of_input": 0,       # outputs (optional): forward returns view_as_complex (or
                                                    # view_as_real) of that input: the same pair, of the other
                                                    # complex kind; a call hands back that view of the caller's
                                                    # tensor (runtime/returned_inputs.py). Dtype and shape are
                                                    # the input's, and only one of them is complex, else refused
                  "same_result_as": 0,              # outputs (optional): forward returns that earlier output's
                                                    # result here too (`return out, out`, one node of the graph);
                                                    # a call hands back that slot's tensor object, as eager does
                                                    # (runtime/shared_results.py). Its dtype, shape and complex
                                                    # must be that output's, else the package is refused at load
                  "complex": null}                  # or "complex64" (complex32, complex128): the caller's
                                                    # complex dtype of a tensor the package takes/returns
                                                    # as its real pair (ReplaceComplexWithRealPass); dtype,
                                                    # shape and strides are the pair's (float32, S + [2]).
                                                    # aotcuda.load adapts it with zero-copy views and checks
                                                    # it in the caller's terms (runtime/complex_adapter.py)
    Dim = 4                                         # a static size, or
        | {"expr": "s77", "min": 2, "max": 64}      # symbolic: an expression of the input symbols, in the
                                                    # grammar below; "max": null means unbounded; an input
                                                    # dim may add "narrowed": "why" where its range is
                                                    # narrower than lowering was asked (a refusal says it),
                                                    # and "narrowed_bounds": ["min"] / ["max"] / both, the
                                                    # ends concerned (without it: both)
    IndexRange = {"min": Bound, "max": Bound,       # eager's range of the index there, as the input's
                  "reason": "aten.embedding.default over 128 rows of emb.weight, at model.py:12: ...",
                  "part": [["select", 0, 0]],     # (optional) only this part of the input is the index (idx[0]):
                                                    # ["select", dim, index], ["slice", dim, start, end, step],
                                                    # ["narrow", dim, start, length], applied in turn; absent: the
                                                    # whole input (older readers ignore it and check all of it)
                  "item": true}                     # (optional) no index: the range torch.export gave the value
                                                    # read from the input with .item(), which the generated code
                                                    # checks itself (lowering/item_ranges.py); refusals and
                                                    # `aotcuda inspect` say so (older readers check it the same)
    Bound = -128                                    # a static bound, or
          | {"expr": "s27 - 1"}                     # an expression of the input size symbols (the grammar), or
          | null                                    # not checked (it depends on a size no input gives)

Shape expressions are read with a small grammar and never evaluated (``parse_shape_expression``): what
``str()`` of torch's shape expressions writes, and nothing else::

    expr  = term (("+" | "-") term)*
    term  = unary (("*" | "//" | "%") unary)*
    unary = "-" unary | power
    power = atom ("**" INTEGER)?                    # a literal exponent, at most 8
    atom  = INTEGER | SYMBOL | FUNCTION "(" expr ("," expr)* ")" | "(" expr ")"
    INTEGER = [0-9]+                                # below 2**1024, so a constant sympy folded reads back
    SYMBOL = [a-z][a-z0-9_]*                        # torch's s27, u0
    FUNCTION = Max | Min | FloorDiv | CleanDiv | CeilDiv | Mod | PythonMod | ModularIndexing | Identity
             | CeilToInt | FloorToInt | TruncToInt | IntTrueDiv     # torch.utils._sympy.functions

bounded in length (``MAX_EXPRESSION_CHARS``), nesting (``MAX_EXPRESSION_DEPTH``) and the size of the value
it can take for sizes below 2**64 (``MAX_EXPRESSION_BITS``), so that no string of a package runs code, recurses
without end, or asks for a number too large to compute; and a signature's tensors, dims and expressions are
counted before any expression is read (``check_signature_counts``).
"""

from __future__ import annotations

import array
import contextlib
import io
import itertools
import json
import os
import re
import shutil
import tempfile
import zipfile
from typing import BinaryIO

from aotcuda.errors import PackageChangedError, PackageError, clipped, terminal_safe
from aotcuda.os_errors import cannot_read
from aotcuda.regular_files import NotARegularFileError, file_version, names_file, open_regular

SIGNATURE_ENTRY = "aotcuda/signature.json"
SIGNATURE_FORMAT, SIGNATURE_VERSION = "aotcuda.signature", 2
READ_VERSIONS = (1, 2)  # what the runtime reads: each version adds optional fields to the one before

# The real dtype of each complex dtype's pair (ReplaceComplexWithRealPass: a complex tensor of shape S is a
# real tensor of shape S + [2]), by torch dtype name as TensorSpec writes them. The one table: the pass
# reads it as torch dtypes (passes/complex_to_real/pair.py), the runtime by name (runtime/complex_adapter.py).
REAL_OF_COMPLEX = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}

# The dtype of the 0-d CPU tensor the model container returns for an output that eager returns as a Python number
# (AOTI's scalar_to_tensor_handle), by the signature's "scalar" ("none": forward returns None there, the slot holds
# no handle; a 0-d bool's spec, unused). The one table: the lowering writes it (lowering/signature.py), the runtime
# checks it (runtime/specs.py).
SCALAR_OUTPUT_DTYPES = {"int": "int64", "float": "float64", "bool": "bool", "none": "bool"}


def archive_root(names: list[str]) -> str:
    """The top folder every entry shares ("twice/"), or "" for old archives without one."""
    tops = {name.split("/", 1)[0] for name in names if "/" in name}
    return f"{tops.pop()}/" if len(tops) == 1 and all("/" in n for n in names) else ""


def lists_a_package(names: list[str]) -> bool:
    """Whether an archive of these entry names is an AOTInductor package: torch.export's package writer puts
    an ``archive_format`` entry in it (``<root>/archive_format``)."""
    return any(name.rsplit("/", 1)[-1] == "archive_format" for name in names)


def open_package_file(path: str) -> PackageFile:
    """The package file at ``path``, opened once for reading (``aotcuda.regular_files``: a FIFO or device that
    another process renames over the path is refused on the descriptor, never waited on or read), with its
    status taken before any byte is read (``PackageFile.check_unchanged``). Raises PackageError naming what is
    there instead and the fix."""
    try:
        handle = open_regular(path)
    except NotARegularFileError as exc:
        if exc.kind == "a directory":
            raise PackageError(f"no AOTInductor package at {path!r}: it is a directory; pass the .pt2 file "
                               "(aotcuda.lower's package_path), not a folder") from None
        raise PackageError(f"no AOTInductor package at {path!r}: it is {exc.kind}, not a regular file; pass the "
                           ".pt2 file aotcuda.lower wrote (copy it to a regular file first)") from None
    except FileNotFoundError:
        raise PackageError(f"no AOTInductor package at {path!r}: the file does not exist") from None
    except OSError as exc:
        raise PackageError(cannot_read(path, exc)) from exc
    raw = handle.detach()
    try:
        return PackageFile(raw, path)
    except BaseException:
        raw.close()
        raise


class PackageFile(io.BufferedReader):
    """A package file opened once (``open_package_file``), which remembers its status from before anything was
    read. Reading a package takes many reads (the directory, each entry, a digest of it all); another process
    that writes into the file meanwhile (``cp new.pt2 model.pt2`` writes over the same file; a rename puts a new
    file at the path and leaves the one open here whole) would have them read parts of two versions: a library
    of one model with another's signature, or a torn library that crashes the process that opens it. So each
    reader asks, once its reading is done and before anything it read is used, whether the file is unchanged."""

    def __init__(self, raw: io.RawIOBase, path: str):
        super().__init__(raw)
        self.package_path = path
        self.opened_version = file_version(self.fileno())

    def check_unchanged(self, error: BaseException | None = None) -> None:
        """PackageChangedError when the file's status is not what it was when it was opened. ``error``: what
        the reading raised, if it failed (it is then the cause: a file changed while read looks damaged, and the
        change is what to fix); an error that is not an Exception (KeyboardInterrupt) or that already says the
        file changed is left as it is, as is a file already closed (nothing left to compare)."""
        if self.closed or (error is not None and (not isinstance(error, Exception)
                                                  or isinstance(error, PackageChangedError))):
            return
        later = file_version(self.fileno())
        changes = self.opened_version.changes_to(later, moved=later.ctime_ns != self.opened_version.ctime_ns
                                                 and not names_file(self.package_path, self.fileno()))
        if changes:
            raise PackageChangedError(
                f"{self.package_path!r} changed while it was read ({', '.join(changes)}): another process wrote into "
                "the file, so what was read may mix two versions of the package; none of it was used. Publish a "
                "package by writing it under a new name in the same folder, then renaming it over the old one (mv, "
                "os.replace; aotcuda lower does so), never by writing over the file in place (cp, shutil.copy, "
                "an editor): a reader then gets the old package or the new one, whole. Then try again") from error


class _PackageZip(zipfile.ZipFile):
    """A ZipFile on a file we opened (``open_package_file``), which it closes: zipfile closes only files it
    opened itself from a path. Leaving its ``with`` block checks that the file was not written into while it
    was read (``PackageFile.check_unchanged``): what a reader read inside the block is of one version."""

    # zipfile's close() (and so __del__) reads _writing, which its __init__ sets late: an interrupt (Ctrl-C, a signal's
    # KeyboardInterrupt) before that printed "Exception ignored in ZipFile.__del__ ... no attribute '_writing'"
    _writing = False

    def __init__(self, handle: PackageFile):
        self._handle = handle
        super().__init__(handle)

    def check_unchanged(self, error: BaseException | None = None) -> None:
        self._handle.check_unchanged(error)

    def __exit__(self, kind, error, traceback) -> None:
        try:
            self._handle.check_unchanged(error)  # a PackageChangedError replaces what the block raised
        finally:
            self.close()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._handle.close()


def open_zip(path: str, handle: PackageFile | None = None) -> zipfile.ZipFile:
    """The package at ``path`` as a zip archive, read through ``handle`` (from ``open_package_file``; opened
    here when None), which the archive then owns and closes, on error too. Raises PackageError for what is no
    zip, a truncated copy, or a file that cannot be read; PackageChangedError where the file changed while its
    directory was read."""
    handle = open_package_file(path) if handle is None else handle
    try:
        try:
            return _PackageZip(handle)
        except _NOT_A_ZIP as exc:
            handle.check_unchanged(exc)
            if _truncated_zip(handle):
                raise PackageError(f"{path!r} is damaged or incomplete (a truncated copy?): it starts as a zip "
                                   f"archive but its end, the archive's directory, is missing ({exc}); copy the "
                                   "package again, or lower the model again") from exc
            raise PackageError(f"{path!r} is not an AOTInductor package (.pt2 zip archive): {exc}") from exc
        except OSError as exc:
            handle.check_unchanged(exc)
            raise PackageError(cannot_read(path, exc)) from exc
    except BaseException:
        handle.close()
        raise


_ZIP_LOCAL_HEADER, _ZIP_END_OF_DIRECTORY = b"PK\x03\x04", b"PK\x05\x06"
_ZIP_END_SEARCH = 22 + 65535  # the end-of-directory record and the longest comment it may be followed by


def _truncated_zip(file: BinaryIO) -> bool:
    """A file that begins as a zip (a local file header at offset 0, as every .pt2 does) but has no
    whole end-of-central-directory record at its end: the start of a zip whose end was cut off (an
    interrupted copy or download). A file that is no zip at all (random bytes, text) does not begin so."""
    try:
        file.seek(0)
        if file.read(4) != _ZIP_LOCAL_HEADER:
            return False
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - _ZIP_END_SEARCH))
        tail = file.read()
    except OSError:
        return False
    end = tail.rfind(_ZIP_END_OF_DIRECTORY)
    if end < 0 or end + 22 > len(tail):
        return True  # no record, or only the start of one
    comment_length = int.from_bytes(tail[end + 20:end + 22], "little")
    return end + 22 + comment_length > len(tail)  # the record's comment runs past the end of the file


# What zipfile's reading of an archive's directory raises for a file that is no zip or a damaged one: besides
# BadZipFile, an entry name that is not UTF-8 although its flag says so (UnicodeDecodeError), a "zip file
# version" it does not know (NotImplementedError), and sizes or offsets its struct reading refuses.
_NOT_A_ZIP = (zipfile.BadZipFile, UnicodeDecodeError, NotImplementedError, ValueError, EOFError, OverflowError)


def library_digest(archive: zipfile.ZipFile) -> str | None:
    """The SHA-256 (hex) of the archive's one model library (``data/aotinductor/<model>/*.so``), or None when it
    holds none or several."""
    libraries = [info for info in archive.infolist()
                 if info.filename.endswith(".so") and "data/aotinductor/" in f"/{info.filename}"]
    return entry_sha256(archive, libraries[0]) if len(libraries) == 1 else None


def entry_sha256(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    """The SHA-256 (hex) of an entry's inflated bytes, read in chunks."""
    import hashlib

    hasher = hashlib.sha256()
    with archive.open(info) as source:
        while chunk := source.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()


# The values a signature records for forward's defaults and constant inputs ("forward_parameters",
# "constant_inputs"): plain JSON scalars of exactly these types (not a subclass: an IntEnum reads back as an
# int, which a call's IntEnum would not match). The lowering records only these, the runtime reads only these.
PLAIN_VALUE_TYPES = (type(None), bool, int, float, str)


def plain_value(value) -> bool:
    """Whether ``value`` is a plain JSON scalar (``PLAIN_VALUE_TYPES``): what a signature records as a default
    or a constant input, and all the runtime compares."""
    return type(value) in PLAIN_VALUE_TYPES


# --- JSON of a package ------------------------------------------------------------------------------------

# Python's json recurses once per nesting level: a 200 KB ``[[[...]]]`` raises RecursionError. Real package
# JSON nests a few levels (a signature 4-5, a pytree call spec two per container level, ~10 for a transformers
# model's outputs), so everything deeper is refused before it is parsed.
MAX_JSON_DEPTH = 64
# What json.loads costs is the objects it builds, and a container is the dearest per byte: 8 MiB of `[{},{},...]`
# are 2.8M dicts (200 MiB; a stored 64 MiB op table of them took load to 1.96 GiB), where a value takes at least
# 2 bytes and at most ~65 bytes parsed. Real package JSON holds few containers: a signature 3 a tensor (its spec,
# shape, strides) and one a shape expression, so 10,000 tensors of 64 dims and 10,000 expressions (the signature's
# bounds) are ~40,000; an op table ~18 a proxy-executor node (~300 bytes), a call spec 2 a leaf.
MAX_JSON_CONTAINERS = 500_000
# Strings are removed in two linear passes, never by one pattern for a whole string: `"(?:[^"\\]|\\.)*"` failed
# from every quote of an unterminated `"\"\"\"...` to the end of the text (quadratic: a 64 KB signature took 9 s,
# 1 MiB ~45 min). First every escape pair goes (left to right, as JSON pairs them: `\\` then `"`), so that each
# remaining quote opens or closes a string; then `"[^"]*"?` removes them, an unterminated one to the end of
# the text (json stops there). A backslash outside a string is invalid JSON, where json stops too. Both run on
# 64 KiB chunks (an escape pair or a string that spans two is carried over): re.sub gathers one fragment per match,
# and on a whole 8 MiB text of `"ab",` those 1.7M fragments took the scan alone to 284 MiB.
_JSON_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_JSON_STRING = re.compile(rb'"[^"]*"?')
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1, +1, -1, -1 as signed bytes


def _json_steps(data: bytes | str, chunk: int = 1 << 16) -> bytes:
    """The brackets of a JSON text outside its strings, as +1 (open) and -1 (close) signed bytes, found in time
    linear in its length at C speed and in memory bounded by ``chunk``, chunk by chunk: escapes, then strings
    removed by two regexes, brackets kept by one translate."""
    data = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    steps, carry, inside = [], b"", False
    for start in range(0, len(data), chunk):
        piece = _JSON_ESCAPE.sub(b"", carry + data[start:start + chunk])
        carry = b""
        if piece.endswith(b"\\"):  # the first half of an escape pair: the next chunk holds the second
            piece, carry = piece[:-1], b"\\"
        if inside:  # a string runs on from the chunk before
            end = piece.find(b'"')
            if end < 0:
                continue
            piece, inside = piece[end + 1:], False
        inside = piece.count(b'"') % 2 == 1
        steps.append(_JSON_STRING.sub(b"", piece).translate(None, _NOT_BRACKETS).translate(_STEPS))
    return b"".join(steps)


def json_depth(data: bytes | str, stop: int | None = None) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count), in linear
    time (``_json_steps``, then depth summed in chunks); with ``stop``, the scan ends at the first chunk that
    goes deeper (a depth above ``stop``)."""
    return _deepest(_json_steps(data), stop)


def json_containers(data: bytes | str) -> int:
    """How many arrays and objects a JSON text opens (brackets inside strings do not count), in linear time."""
    return _json_steps(data).count(1)


def _deepest(steps: bytes, stop: int | None) -> int:
    depth = deepest = 0
    for start in range(0, len(steps), 1 << 16):
        running = list(itertools.accumulate(array.array("b", steps[start:start + (1 << 16)]), initial=depth))
        depth, deepest = running[-1], max(deepest, *running)
        if stop is not None and deepest > stop:
            break
    return deepest


def json_text(data: bytes | str, path: str, what: str) -> str:
    """The text of a package's JSON entry (``what`` names it), decoded strictly as UTF-8: the one encoding
    aotcuda, torch and AOTInductor write. PackageError for anything else: json.loads(bytes) would detect
    UTF-16 and UTF-32 and decode them, where the bounds scan reads bytes as UTF-8 (a UTF-16 U+2200 is the
    bytes of a quote, which hid 1.3M containers from it), so the scan and the parse read this one str."""
    if isinstance(data, str):
        return data
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"{exc.reason} at byte {exc.start}"
    else:
        # UTF-16 and UTF-32 of ASCII are valid UTF-8 with NUL bytes between, and JSON holds no raw NUL anywhere.
        nul = text.find("\0")
        if nul < 0:
            return text
        problem = f"a NUL character at {nul}: UTF-16 or UTF-32?"
    raise PackageError(f"{path!r}: {what} is not UTF-8 text ({problem}); a package's JSON is UTF-8, so it is damaged "
                       "or hostile, nothing of it was parsed. Lower the model again")


def check_json_bounds(data: bytes | str, path: str, what: str) -> None:
    """PackageError naming the package and ``what`` (its entry) when ``data`` is not UTF-8 (``json_text``),
    nests past MAX_JSON_DEPTH or opens more than MAX_JSON_CONTAINERS arrays and objects: one linear scan,
    before json parses any of it."""
    steps = _json_steps(json_text(data, path, what))
    if _deepest(steps, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise PackageError(f"{path!r}: {what} nests more than the {MAX_JSON_DEPTH} levels a package's JSON may (real "
                           "ones nest about 10); it is damaged or hostile, lower the model again")
    containers = steps.count(1)
    if containers > MAX_JSON_CONTAINERS:
        raise PackageError(f"{path!r}: {what} holds {containers:,} arrays and objects, more than the "
                           f"{MAX_JSON_CONTAINERS:,} a package's JSON may (a signature of 10,000 tensors holds about "
                           "40,000); it is damaged or hostile, nothing of it was parsed. Lower the model again")


def load_json(data: bytes | str, path: str, what: str):
    """The JSON value of a package's entry (``what`` names it in errors), bounded in depth before it is
    parsed; PackageError naming the package and the entry for text that is not UTF-8 (``json_text``), JSON
    too deep, of too many containers (``check_json_bounds``) or not valid. Every JSON of a package is parsed
    here (or, already a str, after check_json_bounds)."""
    text = json_text(data, path, what)  # the scan and the parse read the same str
    check_json_bounds(text, path, what)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PackageError(f"{path!r}: {what} is not valid JSON ({exc}); the package is damaged, lower the "
                           "model again") from exc


def parse_signature(data: bytes, entry: str, path: str, read_expression=None) -> dict:
    """The signature in `data` (the bytes of `entry` of the package at `path`), checked to be a JSON
    object of this format and version whose shape expressions ``read_expression`` reads (default: the
    grammar, ``parse_shape_expression``); PackageError otherwise."""
    signature = load_json(data, path, entry)
    if not isinstance(signature, dict):
        raise PackageError(f"{path!r}: {entry} is a {type(signature).__name__}, not a JSON object; "
                           "write it again with aotcuda.package_format.write_signature, or lower the model again")
    if signature.get("format") != SIGNATURE_FORMAT or signature.get("version") not in READ_VERSIONS:
        raise PackageError(f"{path!r}: {entry} has format {signature.get('format')!r} version "
                           f"{signature.get('version')!r}; this aotcuda reads {SIGNATURE_FORMAT} versions "
                           f"{', '.join(map(str, READ_VERSIONS))}")
    check_signature_counts(signature, entry, path)
    check_rows_record(signature, entry, path)
    check_signature_expressions(signature, entry, path, read_expression or parse_shape_expression)
    return signature


def check_rows_record(signature: dict, entry: str, path: str) -> None:
    """Refuse (PackageError naming the field) a ``rows_mixed`` that is not absent, null or a JSON bool, and a
    ``rows_not_probed`` that is not absent or a string: serving refuses batching only for a JSON true, so a "yes" or a
    1 of a damaged or hostile package would have batched a program whose record says its rows mix. Likewise a
    ``rows_graph`` that is not absent or one of ROWS_GRAPH_VERDICTS, a "mixes" beside a rows_mixed that is not true,
    and a ``rows_graph_reason`` that is not absent or a string."""
    mixed = signature.get("rows_mixed")
    if mixed is not None and not isinstance(mixed, bool):
        raise PackageError(f"{path!r}: {entry}: rows_mixed is {clipped(repr(mixed), 80)}, not true, false or null; no "
                           "package aotcuda writes holds that, so it is damaged or hostile. Lower the model again")
    why = signature.get("rows_not_probed")
    if why is not None and not isinstance(why, str):
        raise PackageError(f"{path!r}: {entry}: rows_not_probed is a {type(why).__name__}, not a string; no package "
                           "aotcuda writes holds that, so it is damaged or hostile. Lower the model again")
    if why is not None and len(why) > ROWS_REASON_CHARACTERS:
        raise PackageError(f"{path!r}: {entry}: rows_not_probed is {len(why)} characters, more than the "
                           f"{ROWS_REASON_CHARACTERS} aotcuda writes; the package is damaged or hostile. Lower the "
                           "model again")
    graph = signature.get("rows_graph")
    if graph is not None and graph not in ROWS_GRAPH_VERDICTS:
        raise PackageError(f"{path!r}: {entry}: rows_graph is {clipped(repr(graph), 80)}, not one of "
                           f"{', '.join(map(repr, ROWS_GRAPH_VERDICTS))}; no package aotcuda writes holds that, so it "
                           "is damaged or hostile. Lower the model again")
    if graph == "mixes" and mixed is not True:  # serving reads rows_mixed alone: the two must agree
        raise PackageError(f"{path!r}: {entry}: rows_graph says the rows mix but rows_mixed is {mixed!r}, not true; no "
                           "package aotcuda writes holds that, so it is damaged or hostile. Lower the model again")
    reason = signature.get("rows_graph_reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > ROWS_REASON_CHARACTERS):
        raise PackageError(f"{path!r}: {entry}: rows_graph_reason is not a string of at most "
                           f"{ROWS_REASON_CHARACTERS} characters; no package aotcuda writes holds that, so it is "
                           "damaged or hostile. Lower the model again")


ROWS_GRAPH_VERDICTS = ("kept apart", "mixes", "not proved")  # lowering/batch_row_flow.py's, as it writes them
ROWS_REASON_CHARACTERS = 1000  # lowering writes a sentence and up to 200 characters of an exception (batch_rows.py)


# How much a signature may hold, counted before any expression is read: reading one costs up to ~15 ms (2,000
# characters, the grammar and sympy's constructors), and 3,000 of them held `aotcuda inspect` 34 s. A real
# signature holds tens of tensors of a few dims, with expressions like "2*s27" (~1 KiB in all); a 128-layer
# model's KV cache as inputs is ~260 tensors.
MAX_SIGNATURE_TENSORS, MAX_TENSOR_DIMS, MAX_INDEX_RANGES = 10_000, 64, 1_000
# Dims of every tensor together, shape and strides: each is read into an object (~10 µs) and copied, so the two bounds
# above allowed 1.28 million, which a package of 7 MB of `[1,1,...]` (~34 KB deflated at the ratio bound) spent 26 s of `aotcuda inspect`
# and 15 s of load on (the amplification breaker, 2026-12-07). A real signature holds a few thousand (260 tensors of
# rank 4); this is 10,000 tensors of rank 5.
MAX_SIGNATURE_DIMS = 100_000
MAX_SIGNATURE_EXPRESSIONS, MAX_SIGNATURE_EXPRESSION_CHARS = 10_000, 128 * 1024  # together: well under a second


def check_signature_counts(signature: dict, entry: str, path: str) -> None:
    """Refuse (PackageError naming the field) a signature holding more tensors, dims, index ranges or shape
    expressions (and characters of them) than the bounds above, before any expression is read."""
    def refuse(what: str):
        raise PackageError(f"{path!r}: {entry}: {what}; no package aotcuda writes comes near, so it is damaged or "
                           "hostile, nothing of it was read further. Lower the model again")

    expressions = []
    lists = {kind: signature.get(kind) for kind in ("inputs", "outputs")}
    tensors = sum(len(specs) for specs in lists.values() if isinstance(specs, list))
    if tensors > MAX_SIGNATURE_TENSORS:
        refuse(f"it lists {tensors} inputs and outputs, more than {MAX_SIGNATURE_TENSORS}")
    dims = 0
    for kind, specs in lists.items():
        for index, spec in enumerate(specs if isinstance(specs, list) else ()):
            if not isinstance(spec, dict):
                continue  # specs_from_signature names it
            for field in ("shape", "strides", "index_ranges"):
                values = spec.get(field)
                most = MAX_INDEX_RANGES if field == "index_ranges" else MAX_TENSOR_DIMS
                if isinstance(values, list) and len(values) > most:
                    refuse(f"{kind}[{index}] {field} has {len(values)} entries, more than {most}")
                if isinstance(values, list) and field != "index_ranges":
                    dims += len(values)
                    if dims > MAX_SIGNATURE_DIMS:
                        refuse(f"its tensors have more than {MAX_SIGNATURE_DIMS:,} dims and strides together (at "
                               f"{kind}[{index}] {field})")
                for value in values if isinstance(values, list) else ():
                    bounds = (value.get("min"), value.get("max")) if field == "index_ranges" and isinstance(
                        value, dict) else (value,)
                    expressions += [bound["expr"] for bound in bounds if isinstance(bound, dict)
                                    and isinstance(bound.get("expr"), str)]
            value = spec.get("value")  # a Python-number output's expression
            if isinstance(value, dict) and isinstance(value.get("expr"), str):
                expressions.append(value["expr"])
    divisors = signature.get("divisors")  # read with the grammar, evaluated once per input shape
    expressions += [text for text in divisors if isinstance(text, str)] if isinstance(divisors, list) else []
    # serving reads "tensor_sizes" with the grammar too, and evaluates every one for each request (review 11)
    sizes = signature.get("tensor_sizes")
    expressions += [text for text in sizes if isinstance(text, str)] if isinstance(sizes, list) else []
    # read with the grammar too (check_signature_expressions): counted as the others
    expressions += [text for _, text in _data_dependent_exprs(signature) if isinstance(text, str)]
    # One longer than the grammar takes is refused by its length, at no cost, naming its field: count it so.
    characters = sum(min(len(text), MAX_EXPRESSION_CHARS + 1) for text in expressions)
    if len(expressions) > MAX_SIGNATURE_EXPRESSIONS or characters > MAX_SIGNATURE_EXPRESSION_CHARS:
        refuse(f"it holds {len(expressions)} shape expressions of {characters} characters, more than "
               f"{MAX_SIGNATURE_EXPRESSIONS} or {MAX_SIGNATURE_EXPRESSION_CHARS} characters")


# --- shape expressions ------------------------------------------------------------------------------------

MAX_EXPRESSION_CHARS, MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_BITS = 2000, 32, 1024
MAX_INTEGER_DIGITS = len(str(2**MAX_EXPRESSION_BITS))  # 309: a literal within the value bound
MAX_EXPONENT, SYMBOL_BITS = 8, 64  # a size symbol's value is below 2**64
# name: (fewest arguments, most arguments (None: any), bits of the result from its arguments' bits)
SHAPE_FUNCTIONS = {
    "Max": (2, None, max), "Min": (2, None, max),
    "FloorDiv": (2, 2, lambda a, b: a), "CleanDiv": (2, 2, lambda a, b: a), "CeilDiv": (2, 2, lambda a, b: a + 1),
    "Mod": (2, 2, lambda a, b: b), "PythonMod": (2, 2, lambda a, b: b),
    "ModularIndexing": (3, 3, lambda a, b, c: c), "Identity": (1, 1, lambda a: a),
    "CeilToInt": (1, 1, lambda a: a + 1), "FloorToInt": (1, 1, lambda a: a), "TruncToInt": (1, 1, lambda a: a),
    "IntTrueDiv": (2, 2, lambda a, b: a),
}
_TOKEN = re.compile(r"\s*(?:(?P<int>[0-9]+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>\*\*|//|[-+*%(),]))")
_SYMBOL = re.compile(r"[a-z][a-z0-9_]{0,63}")


class ShapeExpressionError(ValueError):
    """A string of a package that is not a shape expression of the grammar (module docstring)."""


def parse_shape_expression(text: str) -> tuple:
    """The syntax tree of a shape expression (module docstring), built without evaluating anything:
    ("int", n) | ("symbol", name) | ("neg", a) | (op, a, b) for + - * // % | ("**", a, n) |
    ("call", name, (args...)). Raises ShapeExpressionError saying what is wrong."""
    if not isinstance(text, str):
        raise ShapeExpressionError(f"it is a {type(text).__name__}, not a string")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ShapeExpressionError(f"it has {len(text)} characters, more than the {MAX_EXPRESSION_CHARS} "
                                   "a shape expression may have")
    parser = _ExpressionParser(_tokens(text))
    tree, _ = parser.expr(0)
    if parser.peek() is not None:
        raise ShapeExpressionError(f"unexpected {parser.peek()[1]!r} after a complete expression")
    return tree


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            rest = text[position:].lstrip()
            if not rest:
                break
            raise ShapeExpressionError(f"unexpected character {rest[0]!r} "
                                       "(a shape expression has integers, symbols, + - * // % **, parentheses "
                                       "and torch's shape functions)")
        kind = match.lastgroup
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _ExpressionParser:
    """Recursive descent over the tokens; each rule returns (tree, a bound on the value's bits)."""

    def __init__(self, tokens):
        self.tokens, self.at = tokens, 0

    def peek(self):
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, value=None):
        token = self.peek()
        if token is None:
            raise ShapeExpressionError("the expression ends too soon" + (f": {value!r} expected" if value else ""))
        if value is not None and token[1] != value:
            raise ShapeExpressionError(f"{value!r} expected, got {token[1]!r}")
        self.at += 1
        return token

    def binary(self, depth, operand, operators, bits, nesting=()):
        """A left-associative chain; each operator of ``nesting`` is a level deeper (``a // b // c`` is
        FloorDiv(FloorDiv(a, b), c): a chain of 600 is a tree no recursive walk of sympy's takes)."""
        tree, size = operand(depth)
        while (token := self.peek()) is not None and token[0] == "op" and token[1] in operators:
            if token[1] in nesting:
                depth += 1
                if depth > MAX_EXPRESSION_DEPTH:
                    raise ShapeExpressionError(f"it nests more than {MAX_EXPRESSION_DEPTH} levels deep")
            self.take()
            right, right_size = operand(depth)
            tree, size = (token[1], tree, right), _bounded(bits[token[1]](size, right_size))
        return tree, size

    def expr(self, depth):
        if depth > MAX_EXPRESSION_DEPTH:
            raise ShapeExpressionError(f"it nests more than {MAX_EXPRESSION_DEPTH} levels deep")
        grow = lambda a, b: max(a, b) + 1  # noqa: E731
        return self.binary(depth, self.term, ("+", "-"), {"+": grow, "-": grow})

    def term(self, depth):
        return self.binary(depth, self.unary, ("*", "//", "%"),
                           {"*": lambda a, b: a + b, "//": lambda a, b: a, "%": lambda a, b: b}, ("//", "%"))

    def unary(self, depth):
        if self.peek() == ("op", "-"):
            self.take()
            if depth > MAX_EXPRESSION_DEPTH:
                raise ShapeExpressionError(f"it nests more than {MAX_EXPRESSION_DEPTH} levels deep")
            operand, size = self.unary(depth + 1)
            return ("neg", operand), size
        return self.power(depth)

    def power(self, depth):
        base, size = self.atom(depth)
        if self.peek() != ("op", "**"):
            return base, size
        self.take()
        kind, text = self.take()
        if kind != "int" or len(text) > 2 or int(text) > MAX_EXPONENT:
            raise ShapeExpressionError(f"the exponent {text!r} is not an integer from 0 to {MAX_EXPONENT}")
        return ("**", base, int(text)), _bounded(size * max(int(text), 1))

    def atom(self, depth):
        kind, text = self.take()
        if kind == "int":
            # As many digits as the value bound allows: a constant that sympy folded from an accepted
            # expression (167**3**3 prints as 21 digits) must read back when it is printed.
            if len(text) > MAX_INTEGER_DIGITS:
                raise ShapeExpressionError(f"the integer {text[:24]}... has more than {MAX_INTEGER_DIGITS} digits")
            return ("int", int(text)), _bounded(max(int(text).bit_length(), 1))
        if (kind, text) == ("op", "("):
            tree = self.expr(depth + 1)
            self.take(")")
            return tree
        if kind == "name" and text in SHAPE_FUNCTIONS:
            return self.call(depth, text)
        if kind == "name" and _SYMBOL.fullmatch(text):
            return ("symbol", text), SYMBOL_BITS
        if kind == "name":
            raise ShapeExpressionError(f"{text[:40]!r} is neither a size symbol ([a-z][a-z0-9_]*) nor one of "
                                       f"torch's shape functions ({', '.join(SHAPE_FUNCTIONS)})")
        raise ShapeExpressionError(f"unexpected {text!r}")

    def call(self, depth, name):
        fewest, most, bits = SHAPE_FUNCTIONS[name]
        self.take("(")
        args = [self.expr(depth + 1)]
        while self.peek() == ("op", ","):
            self.take()
            args.append(self.expr(depth + 1))
        self.take(")")
        if len(args) < fewest or (most is not None and len(args) > most):
            raise ShapeExpressionError(f"{name} takes {fewest if fewest == most else f'{fewest} or more'} "
                                       f"arguments, got {len(args)}")
        return ("call", name, tuple(tree for tree, _ in args)), _bounded(bits(*(size for _, size in args)))


def _bounded(bits: int) -> int:
    if bits > MAX_EXPRESSION_BITS:
        raise ShapeExpressionError(f"its value could need more than {MAX_EXPRESSION_BITS} bits for sizes below "
                                   "2**64 (a huge power or product)")
    return bits


def check_signature_expressions(signature: dict, entry: str, path: str, read=parse_shape_expression) -> None:
    """Refuse (PackageError naming the package, the entry and the field) every symbolic dim, every expression bound
    of an input's ``index_ranges`` and every ``data_dependent_sizes[].expr`` of the signature whose expression
    ``read`` refuses (ShapeExpressionError): by default the grammar (module docstring); the runtime passes its
    reader, which also refuses what torch cannot build (FloorDiv(s0, 0)).
    Every name of the signature is checked first, and refused as its own check says (``dim_names`` keys and values,
    ``forward_arg_names``, inputs' and outputs' names, forward's parameter names and the other records' names:
    ``check_dim_names`` ... ``check_recorded_names``, each through ``check_names``: bounded, printable)."""
    # The names first: a refusal of an expression quotes its tensor's name, which must be bounded and printable by
    # then (a 7,000,000-character name beside one bad expression made a 7 MB PackageError, review42a).
    check_dim_names(signature, entry, path)
    check_forward_arg_names(signature, entry, path)
    check_tensor_names(signature, entry, path)
    check_forward_parameter_names(signature, entry, path)
    check_recorded_names(signature, entry, path)
    for kind in ("inputs", "outputs"):
        specs = signature.get(kind)
        for index, spec in enumerate(specs if isinstance(specs, list) else ()):
            for field in ("shape", "strides"):
                dims = spec.get(field) if isinstance(spec, dict) else None
                for axis, dim in enumerate(dims if isinstance(dims, list) else ()):
                    if not isinstance(dim, dict) or "expr" not in dim:
                        continue
                    _read_expression(read, dim["expr"], f"{kind}[{index}] ({_name_of(spec)}) {field}[{axis}]",
                                     entry, path)
    for index, spec in enumerate(signature.get("inputs") if isinstance(signature.get("inputs"), list) else ()):
        ranges = spec.get("index_ranges") if isinstance(spec, dict) else None
        for number, allowed in enumerate(ranges if isinstance(ranges, list) else ()):
            for side in ("min", "max"):
                bound = allowed.get(side) if isinstance(allowed, dict) else None
                if not isinstance(bound, dict):
                    continue  # an int or null; anything else IndexRangeChecks refuses (PackageError) at load
                _read_expression(read, bound.get("expr"),
                                 f"inputs[{index}] ({_name_of(spec)}) index_ranges[{number}] {side}", entry, path)
    # what serving and `aotcuda inspect` read of each (its symbols), with the grammar, as every other expression
    for number, text in _data_dependent_exprs(signature):
        _read_expression(read, text, f"data_dependent_sizes[{number}]", entry, path)


def _name_of(spec: dict) -> str:
    """A tensor's name as a refusal of its expression quotes it: its repr, cut to 80 characters (a name that is a str
    is bounded to 1,024 by check_tensor_names before the expressions are read; one that is not, which that check
    leaves to specs_from_signature, is bounded only by this cut)."""
    return clipped(repr(spec.get("name")), 80)


def _data_dependent_exprs(signature: dict) -> list[tuple[int, object]]:
    """(index, expr) of each entry of the signature's optional ``data_dependent_sizes`` that has an "expr" (one
    without, or a record not a list of objects, is serving's PackageError: batching.unbounded_size)."""
    sizes = signature.get("data_dependent_sizes")
    return [(number, size["expr"]) for number, size in enumerate(sizes if isinstance(sizes, list) else ())
            if isinstance(size, dict) and "expr" in size]


def _read_expression(read, text, field: str, entry: str, path: str) -> None:
    """``read(text)``, or PackageError naming the package, the entry and ``field`` where it refuses the expression."""
    try:
        read(text)
    except ShapeExpressionError as exc:
        shown = repr(text)
        shown = shown if len(shown) <= 80 else f"{shown[:60]}... ({len(shown)} characters)"
        raise PackageError(f"{path!r}: {entry}: {field} expr {shown} is not a shape expression: {exc}. Nothing of it "
                           "was run; the package is damaged or hostile, lower the model again") from exc


# The longest Dim name a signature may hold. Why: every expression that names a symbol is shown with the symbol's Dim
# name in its place (specs.under_dim_names, at load, inspect and serve's check), so a name's length multiplies with
# the symbol's uses: a 3.6 MB package whose one dim name was 2 MiB, used 499 times in one output dim's expression,
# took 1 GB more memory at load (break41; the expressions' 128 KiB could name it 32,000 times: 200 GB). A user's
# name is a Python identifier or an input's path (`feats['x']_1`), a few dozen characters.
MAX_DIM_NAME_CHARS = 256


def check_dim_names(signature: dict, entry: str, path: str) -> None:
    """Refuse (PackageError) a ``dim_names`` that is not a JSON object of strings to strings, a key that is not a size
    symbol of the grammar (``_SYMBOL``), or a name that ``check_names`` refuses (longer than ``MAX_DIM_NAME_CHARS``,
    or not printable)."""
    names = signature.get("dim_names")
    if names is None:
        return
    if not isinstance(names, dict) or not all(isinstance(key, str) and isinstance(value, str)
                                              for key, value in names.items()):
        shown = repr(names)
        shown = shown if len(shown) <= 80 else f"{shown[:60]}... ({len(shown)} characters)"
        raise PackageError(f"{path!r}: {entry}: dim_names {shown} is not an object of size symbols to Dim names "
                           "(strings); the package is damaged or hostile, lower the model again")
    # a key is a size symbol (s27), which `aotcuda inspect --json` and messages about the record quote: the grammar's
    # own (_SYMBOL, at most 64 characters), or no expression could name it
    for symbol in names:
        if not _SYMBOL.fullmatch(symbol):
            raise PackageError(f"{path!r}: {entry}: a dim_names key {clipped(repr(symbol), 60)} is not a size symbol "
                               "([a-z][a-z0-9_]*, at most 64 characters, as the shape expressions name them); the "
                               "package is damaged or hostile, lower the model again")
    check_names(((f"dim_names[{clipped(repr(symbol), 40)}]", name) for symbol, name in names.items()),
                MAX_DIM_NAME_CHARS, "a Dim name may have (each expression naming the symbol is shown with the name in "
                "its place, so its length multiplies with them)", entry, path)


def check_forward_arg_names(signature: dict, entry: str, path: str) -> None:
    """Refuse (PackageError) a ``forward_arg_names`` that is not a list of names that ``check_names`` takes (printable,
    of at most ``MAX_DIM_NAME_CHARS``): messages quote them (what a call takes), as Dim names are."""
    arg_names = signature.get("forward_arg_names")
    if arg_names is None:
        return
    if not isinstance(arg_names, list) or not all(isinstance(name, str) for name in arg_names):
        raise PackageError(f"{path!r}: {entry}: forward_arg_names {clipped(repr(arg_names), 80)} is not a list of "
                           "names (strings); the package is damaged or hostile, lower the model again")
    check_names(((f"forward_arg_names[{index}]", name) for index, name in enumerate(arg_names)),
                MAX_DIM_NAME_CHARS, "a name may have (a call's refusal lists them)", entry, path)


# The longest name an input or output may have, and any other name of the signature but Dim names and forward's
# parameter names (check_recorded_names). Why: every refusal of a call quotes the input's name (`input 'x' (#0) ...`),
# so a 7 MB name made each refused call's message 7 MB, which `aotcuda run` printed whole and a replica built for every
# bad request before cutting its answer (break41). Lowering writes torch.export's placeholder names (forward's argument
# and the pytree path below it, `kwargs_past_key_values_key_cache_0`, a few dozen characters), the place in forward's
# result (`out['logits']`), module paths (`layers.3.attn.cache`) and kernel and node names; it shortens a longer one
# (bounded_name).
MAX_TENSOR_NAME_CHARS = 1024


def check_tensor_names(signature: dict, entry: str, path: str) -> None:
    """Refuse (PackageError) an input or output name longer than ``MAX_TENSOR_NAME_CHARS`` or holding a control or
    format character: torch.export names inputs with letters, digits and _, and an output by its place in forward's
    result, where a dict's key is written as Python's repr writes it (``out['a\\x1b']``), escaped; a name that is not
    a str is specs_from_signature's to name."""
    for kind in ("inputs", "outputs"):
        check_names(((f"{kind}[{index}] name", spec["name"]) for index, spec in _listed(signature, kind)
                     if isinstance(spec, dict) and isinstance(spec.get("name"), str)),
                    MAX_TENSOR_NAME_CHARS, "a tensor's name may have (every refusal of a call quotes it)", entry, path)


def check_forward_parameter_names(signature: dict, entry: str, path: str) -> None:
    """Refuse (PackageError) a ``forward_parameters`` name that ``check_names`` refuses (past ``MAX_DIM_NAME_CHARS``
    or holding a control or format character): a call's refusal lists them (``takes 1 to 2 positional argument(s)
    (x, scale; ...)``), as it lists forward_arg_names, and lowering writes forward's parameter names, identifiers
    (break41's review: an ESC sequence there came back raw in that InputError). The rest of the field's form is the
    runtime's to check (constant_arguments._parameters, at load)."""
    check_names(((f"forward_parameters[{index}] name", parameter["name"])
                 for index, parameter in _listed(signature, "forward_parameters")
                 if isinstance(parameter, dict) and isinstance(parameter.get("name"), str)),
                MAX_DIM_NAME_CHARS, "a name may have (a call's refusal lists them)", entry, path)


def check_recorded_names(signature: dict, entry: str, path: str) -> None:
    """Refuse (PackageError, ``check_names``) a name of the signature's other records longer than
    ``MAX_TENSOR_NAME_CHARS`` or holding a control or format character: ``constant_inputs[].name`` (the argument as
    the caller writes it, a pytree path as a tensor's name is), ``state_written[]`` (module paths), ``pytree_types[]``'s
    ``type`` and ``module`` (Python paths) and ``kernels[]``'s ``name`` and ``nodes`` (kernel and graph node names).
    `aotcuda inspect` shows them and serving's refusals name the state written; lowering writes identifiers and paths,
    through bounded_name. What is not a string there is each reader's to judge, as before (they read it
    defensively); the free text beside them (kernels' ``sources``, a range's ``reason``) is quoted escaped and cut
    where it is shown."""
    named = itertools.chain(
        ((f"constant_inputs[{index}] name", constant["name"])
         for index, constant in _listed(signature, "constant_inputs")
         if isinstance(constant, dict) and isinstance(constant.get("name"), str)),
        ((f"state_written[{index}]", name) for index, name in _listed(signature, "state_written")
         if isinstance(name, str)),
        ((f"pytree_types[{index}] {key}", record[key]) for index, record in _listed(signature, "pytree_types")
         if isinstance(record, dict) for key in ("type", "module") if isinstance(record.get(key), str)),
        ((f"kernels[{index}] name", kernel["name"]) for index, kernel in _listed(signature, "kernels")
         if isinstance(kernel, dict) and isinstance(kernel.get("name"), str)),
        ((f"kernels[{index}] nodes[{place}]", node) for index, kernel in _listed(signature, "kernels")
         if isinstance(kernel, dict) for place, node in _listed(kernel, "nodes") if isinstance(node, str)))
    check_names(named, MAX_TENSOR_NAME_CHARS, "a name of the signature may have (messages and `aotcuda inspect` quote "
                "it)", entry, path)


def _listed(record: dict, field: str):
    """(index, item) of each item of ``record[field]`` where it is a list; nothing for any other value."""
    value = record.get(field)
    return enumerate(value if isinstance(value, list) else ())


def check_names(named, most: int, bound: str, entry: str, path: str) -> None:
    """PackageError naming the first name of ``named`` ((where in the signature, the name) pairs) that is longer than
    ``most`` characters (``bound`` says whose bound it is and why: messages quote these names, so a long one makes
    every message that does long) or holds a control or format character (an ESC sequence, a newline, a bidi
    override): lowering writes identifiers and paths (bounded_name), and messages quote these names as they are, in
    an error a Python traceback, a served client's terminal or a log prints (break41: a Dim name of
    ESC [ 31 m ... U+202E recoloured and reordered every refusal naming its dim)."""
    for where, name in named:
        if len(name) > most:
            raise PackageError(f"{path!r}: {entry}: {where} is {len(name):,} characters long "
                               f"({clipped(repr(name), 60)}), more than the {most:,} {bound}; the package is damaged, "
                               "hostile, or lowered by an older aotcuda (which wrote such names): lower the model again")
        # str.isprintable is False exactly where terminal_safe escapes: a character of Unicode's "Other" or
        # "Separator" categories other than the space (the same database; checked over every code point), and it
        # runs in C: a signature of 30,000 names of 256 characters is read in 0.05 s CPU, not 0.83 s
        if not name.isprintable():
            raise PackageError(f"{path!r}: {entry}: {where} holds {clipped(repr(name), 80)}, a name with a control or "
                               "format character (printed, it could recolour, hide or reorder a message's text); "
                               "the package is damaged, hostile, or lowered by an older aotcuda (which wrote such "
                               "names): lower the model again")


def bounded_name(name: str) -> str:
    """``name`` as a signature may hold it where MAX_TENSOR_NAME_CHARS bounds it (``check_names``): a control or
    format character written as its escape (``errors.terminal_safe``: a dict key of the user's is any string, a key
    object's repr any text), and a name longer than the bound cut to its start and a digest of the whole, which keeps
    names apart: the package still loads, and `aotcuda inspect` and serving's requests use the name written. No name
    torch.export writes comes near (a pytree path of a few dozen characters). The lowering writes each name of the
    signature through it but Dim names and forward's parameter names (identifiers, left out past their bound)."""
    written = name if name.isprintable() else terminal_safe(name)
    if len(written) <= MAX_TENSOR_NAME_CHARS:
        return written
    import hashlib

    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{written[:MAX_TENSOR_NAME_CHARS - 40]}..._{digest}"


def signature_bytes(signature: dict) -> bytes:
    """The signature as written into a package: compact JSON (indented, a 2,000-tensor signature was 1.1 MB
    where 0.6 MB say the same)."""
    return json.dumps(signature, separators=(",", ":")).encode()


def write_signature(package_path: str | os.PathLike, signature: dict) -> None:
    """Add (or replace) the ``aotcuda/signature.json`` entry of a .pt2 package, in place. A signature without
    ``library_sha256`` gets the SHA-256 of the package's model library (when it holds one .so): a signature
    that carries another's (copied from another package) keeps it, and load refuses the pair. A new entry is
    appended in place, which a reader of the file at that moment sees as a change (PackageChangedError): this is
    for a file no one reads yet (lower()'s build file, renamed into place after); publish a package by rename.
    A package signed with a key (``aotcuda.package_tags``) must be signed again after: its tag lists the old one."""
    path = os.fspath(package_path)
    with open_zip(path) as archive:
        names = archive.namelist()
        root = archive_root(names)
        if "library_sha256" not in signature:
            digest = library_digest(archive)
            signature = signature if digest is None else {**signature, "library_sha256": digest}
    write_entry(path, f"{root}{SIGNATURE_ENTRY}", signature_bytes(signature))


def write_entry(path: str, entry: str, data: bytes) -> None:
    """Add (or replace) the entry ``entry`` of the zip at ``path``, in place (see write_signature: for a file no one
    reads yet)."""
    with open_zip(path) as archive:
        names = archive.namelist()
    if entry not in names:
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(entry, data)
        return
    # zipfile cannot replace an entry: rewrite the archive without it.
    fd, tmp = tempfile.mkstemp(suffix=".pt2", dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        with zipfile.ZipFile(path) as source:
            write_archive_with(source, tmp, entry, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)  # never leave a half-written copy next to the package
        raise


def write_archive_with(source: zipfile.ZipFile, target, entry: str, data: bytes, dropped=()) -> None:
    """Write into ``target`` (a path, or a binary file open for writing) a zip of every entry of ``source`` but
    ``entry`` and those named in ``dropped``, each as it was stored and read in chunks, then ``entry`` holding
    ``data``."""
    with zipfile.ZipFile(target, "w") as out:
        for info in source.infolist():
            if info.filename != entry and info.filename not in dropped:
                _copy_entry(source, info, out)
        out.writestr(entry, data)


def _without_zip64(extra: bytes) -> bytes:
    """An entry's extra field without its zip64 block (ID 1), which the writer makes anew. zipfile's writer strips the
    block it is given from the central record only: the local header of a copied entry of 4 GiB or more (a library
    whose weights are appended to it) kept the source's block and got the writer's after it, two zip64 blocks, which
    every reader of the package refuses (``archive.check_layout``): re-signing such a package made one no load
    takes."""
    kept, at = [], 0
    while at + 4 <= len(extra):
        ident, size = int.from_bytes(extra[at:at + 2], "little"), int.from_bytes(extra[at + 2:at + 4], "little")
        if ident != 1:
            kept.append(extra[at:at + 4 + size])
        at += 4 + size
    return b"".join(kept) + extra[at:]  # a partial block at the end as it was (the layout check refuses one)


def _copy_entry(source: zipfile.ZipFile, info: zipfile.ZipInfo, target: zipfile.ZipFile) -> None:
    """Copy one entry into ``target``, as it was stored (name, time, method, attributes), in chunks: read whole
    (``source.read``), an entry of 8 GiB of zeros packed in 8 MiB took 8 GiB of memory (MemoryError)."""
    copy = zipfile.ZipInfo(info.filename, info.date_time)
    copy.compress_type, copy.external_attr, copy.create_system = info.compress_type, info.external_attr, \
        info.create_system
    copy.comment, copy.extra = info.comment, _without_zip64(info.extra)
    with source.open(info) as reader, target.open(copy, "w", force_zip64=info.file_size >= zipfile.ZIP64_LIMIT) \
            as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)
