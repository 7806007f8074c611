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
                                        # errors and `aotcuda inspect` say "seq", not "s27"
     "forward_arg_names": ["x", ...],   # forward's argument names, positional first (optional; torch's
                                        # ModuleCallSignature.forward_arg_names): lets a Program take a
                                        # positional argument by keyword, p(x=t), as ep.module() does
     "pytree_types": [{"type": "transformers.modeling_outputs.CausalLMOutputWithPast",
                       "module": "transformers.modeling_outputs"}, ...]}
                                        # (optional) container types of the input/output pytree specs
                                        # that torch does not register itself, with the module that does:
                                        # aotcuda.load imports it (runtime/pytree_types.py)
    TensorSpec = {"name": "x",                      # inputs: the graph-signature name (forward's argument
                                                    # name); outputs: the place in forward's result, "out",
                                                    # "out[0]", "out['logits']", "out.hidden" (older packages
                                                    # hold the FX node name, "add_7": shown, never matched)
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
                  "complex": null}                  # or "complex64" (complex32, complex128): the caller's
                                                    # complex dtype of a tensor the package takes/returns
                                                    # as its real pair (ReplaceComplexWithRealPass); dtype,
                                                    # shape and strides are the pair's (float32, S + [2]).
                                                    # aotcuda.load adapts it with zero-copy views and checks
                                                    # it in the caller's terms (runtime/complex_adapter.py)
    Dim = 4                                         # a static size, or
        | {"expr": "s77", "min": 2, "max": 64}      # symbolic: a sympy expression of the input symbols;
                                                    # "max": null means unbounded
    IndexRange = {"min": Bound, "max": Bound,       # eager's range of the index there, as the input's
                  "reason": "aten.embedding.default over 128 rows of p_emb_weight, at model.py:12: ..."}
    Bound = -128                                    # a static bound, or
          | {"expr": "s27 - 1"}                     # an expression of the input size symbols, or
          | null                                    # not checked (it depends on a size no input gives)
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile

from aotcuda.errors import PackageError

SIGNATURE_ENTRY = "aotcuda/signature.json"
SIGNATURE_FORMAT, SIGNATURE_VERSION = "aotcuda.signature", 2
READ_VERSIONS = (1, 2)  # what the runtime reads: each version adds optional fields to the one before

# The real dtype of each complex dtype's pair (ReplaceComplexWithRealPass: a complex tensor of shape S is a
# real tensor of shape S + [2]), by torch dtype name as TensorSpec writes them. The one table: the pass
# reads it as torch dtypes (passes/complex_to_real/pair.py), the runtime by name (runtime/complex_adapter.py).
REAL_OF_COMPLEX = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}


def archive_root(names: list[str]) -> str:
    """The top folder every entry shares ("twice/"), or "" for old archives without one."""
    tops = {name.split("/", 1)[0] for name in names if "/" in name}
    return f"{tops.pop()}/" if len(tops) == 1 and all("/" in n for n in names) else ""


def open_zip(path: str) -> zipfile.ZipFile:
    if not os.path.isfile(path):
        raise PackageError(f"no AOTInductor package at {path!r}: the file does not exist")
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise PackageError(f"{path!r} is not an AOTInductor package (.pt2 zip archive): {exc}") from exc


def parse_signature(data: bytes, entry: str, path: str) -> dict:
    """The signature in `data` (the bytes of `entry` of the package at `path`), checked to be a JSON
    object of this format and version; PackageError otherwise."""
    try:
        signature = json.loads(data)
    except ValueError as exc:
        raise PackageError(f"{path!r}: {entry} is not valid JSON: {exc}") from exc
    if not isinstance(signature, dict):
        raise PackageError(f"{path!r}: {entry} is a {type(signature).__name__}, not a JSON object; "
                           "write it again with aotcuda.package_format.write_signature, or lower the model again")
    if signature.get("format") != SIGNATURE_FORMAT or signature.get("version") not in READ_VERSIONS:
        raise PackageError(f"{path!r}: {entry} has format {signature.get('format')!r} version "
                           f"{signature.get('version')!r}; this aotcuda reads {SIGNATURE_FORMAT} versions "
                           f"{', '.join(map(str, READ_VERSIONS))}")
    return signature


def write_signature(package_path: str | os.PathLike, signature: dict) -> None:
    """Add (or replace) the ``aotcuda/signature.json`` entry of a .pt2 package, in place."""
    path = os.fspath(package_path)
    with open_zip(path) as archive:
        names = archive.namelist()
        root = archive_root(names)
    entry = f"{root}{SIGNATURE_ENTRY}"
    data = json.dumps(signature, indent=1).encode()
    if entry not in names:
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(entry, data)
        return
    # zipfile cannot replace an entry: rewrite the archive without it.
    fd, tmp = tempfile.mkstemp(suffix=".pt2", dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        with zipfile.ZipFile(path) as source, zipfile.ZipFile(tmp, "w") as target:
            for info in source.infolist():
                if info.filename != entry:
                    target.writestr(info, source.read(info))
            target.writestr(entry, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)  # never leave a half-written copy next to the package
        raise
