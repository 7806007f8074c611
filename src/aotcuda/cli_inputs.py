"""What the command line reads from the user: a model factory (``MODULE:FACTORY``), its result, the
``--dynamic`` options of ``aotcuda lower``, and the saved inputs of ``aotcuda run``.

Every problem is a ``click.BadParameter`` or ``click.UsageError`` naming the option and the fix, so that
the CLI prints it as a usage error (exit code 2).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect as pyinspect
import os
import re
import sys
import warnings
import zipfile

import click
import torch


def load_factory(spec: str):
    """MODULE:FACTORY (a module name, or a path to a .py file) → the factory callable.

    MODULE is imported with the current directory first on sys.path, as ``python -m`` does, so that
    ``aotcuda lower mymodel:Rope`` finds ./mymodel.py.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter(f"{spec!r}: expected MODULE:FACTORY, e.g. aotcuda.models.attention:attention_block")
    if module_name.endswith(".py") or os.path.sep in module_name:
        module = _import_file(module_name)
    else:
        module = _import_module(module_name)
    factory = getattr(module, attribute, None)
    if not callable(factory):
        callables = sorted(name for name, value in vars(module).items()
                           if callable(value) and not name.startswith("_") and getattr(value, "__module__", None)
                           == module.__name__)
        if hasattr(module, attribute):
            problem = f"{attribute!r} is a {type(factory).__name__}, not a callable that returns a model"
        else:
            problem = f"has no {attribute!r}"
        raise click.BadParameter(f"{module_name}: {problem}; its own callables: {', '.join(callables) or 'none'}")
    return factory


def call_factory(spec: str):
    """What MODULE:FACTORY's factory returns (load_factory), called with no arguments; an exception it raises
    (other than aotcuda's and click's own, printed as they are) becomes a click error that says it came from
    the factory and where (the innermost frame: file and line)."""
    from aotcuda.errors import AotcudaError

    factory = load_factory(spec)
    try:
        return factory()
    except (AotcudaError, click.ClickException):  # aotcuda's own errors (a factory may call lower()) say it all
        raise
    except Exception as exc:  # the user's code: say whose and where, not only what
        import traceback

        frame = traceback.extract_tb(exc.__traceback__)[-1]
        raise click.ClickException(f"the factory {spec} raised {type(exc).__name__}: {exc} "
                                   f"(at {frame.filename}:{frame.lineno}, in {frame.name})") from exc


def _import_file(path: str):
    if not os.path.isfile(path):
        raise click.BadParameter(f"{path!r}: no such file")
    loader_spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(loader_spec)
    loader_spec.loader.exec_module(module)
    return module


def _import_module(name: str):
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(f"{exc.name}.")):
            raise  # the module was found, and something it imports was not: that error is the user's
        raise click.BadParameter(
            f"no module named {name!r} (looked in the current directory {cwd} and on sys.path); "
            f"for a file elsewhere use the path form, e.g. path/to/{name.replace('.', '/')}.py:FACTORY") from exc


def model_and_inputs(made) -> tuple[torch.nn.Module, tuple, dict]:
    """A factory's result → (model, args, kwargs). Accepts (model, inputs) and (model, args, kwargs)."""
    if not isinstance(made, tuple) or len(made) not in (2, 3) or not isinstance(made[0], torch.nn.Module):
        got = (f"a {type(made).__name__} instance" if isinstance(made, torch.nn.Module) else
               f"a tuple of {len(made)}: ({', '.join(type(v).__name__ for v in made)})" if isinstance(made, tuple)
               else f"a {type(made).__name__}")
        hint = (" (FACTORY names an nn.Module class? Point at a function that builds the model and its example "
                "inputs and returns both)" if isinstance(made, torch.nn.Module) else "")
        raise click.UsageError("the factory must return (model, inputs) or (model, args, kwargs), model an "
                               f"nn.Module; it returned {got}{hint}")
    model, args = made[0], made[1]
    kwargs = made[2] if len(made) == 3 else {}
    args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
    return model, args, dict(kwargs or {})


def dynamic_shapes_from(options: tuple[str, ...], model: torch.nn.Module, args: tuple, kwargs: dict):
    """["x:1:2:512", ...] → torch.export dynamic_shapes keyed by forward's argument names (None if empty).

    Each NAME:DIM:MIN:MAX makes dim DIM of input NAME a torch.export.Dim named "<NAME>_<DIM>"; an
    optional fifth field names the Dim, so inputs that share a size share it (x:1:2:512:seq), and
    NAME*N makes the size a multiple of N (audio:1:800:480000:frames*160 is 160·frames samples).
    Raises click.BadParameter naming the option for a malformed one, an unknown or non-tensor input,
    a DIM outside [-rank, rank), or MIN above MAX.
    """
    if not options:
        return None
    bound = pyinspect.signature(model.forward).bind(*args, **kwargs)
    shapes = {name: None for name in bound.arguments}
    dims = {}
    for option in options:
        name, dim, low, high, symbol = _parse_dynamic(option, bound.arguments)
        symbol, multiple = _symbol_and_multiple(option, symbol, low, high)
        # A multiple (SYMBOL*N): the size is N·SYMBOL, and MIN/MAX bound the size, so SYMBOL's own range is
        # [ceil(MIN/N), floor(MAX/N)] (an stft input of 160·frames samples: audio:1:800:480000:frames*160).
        dims.setdefault(symbol, torch.export.Dim(symbol, min=-(-low // multiple), max=high // multiple))
        shapes[name] = {**(shapes[name] or {}), dim: dims[symbol] * multiple if multiple > 1 else dims[symbol]}
    return shapes


def _symbol_and_multiple(option: str, symbol: str, low: int, high: int) -> tuple[str, int]:
    """SYMBOL or SYMBOL*N → (SYMBOL, N ≥ 1); raises click.BadParameter for another form or an empty range."""
    match = re.fullmatch(r"([A-Za-z_]\w*)(?:\*(\d+))?", symbol)
    if match is None or (match.group(2) is not None and int(match.group(2)) < 1):
        raise click.BadParameter(f"{option!r}: SYMBOL must be a name, or NAME*N for a size that is a multiple of N "
                                 "(e.g. frames*160)", param_hint="--dynamic")
    multiple = int(match.group(2) or 1)
    if -(-low // multiple) > high // multiple:
        raise click.BadParameter(f"{option!r}: no multiple of {multiple} lies in [{low}, {high}]", param_hint="--dynamic")
    return match.group(1), multiple


def _parse_dynamic(option: str, arguments: dict) -> tuple[str, int, int, int, str]:
    """NAME:DIM:MIN:MAX[:SYMBOL[*N]] → (name, dim ≥ 0, min, max, symbol: "<NAME>_<dim>" by default), checked
    against the example inputs (DIM may count from the end, as in torch)."""
    fields = option.split(":")
    if len(fields) not in (4, 5) or not re.fullmatch(r"-?\d+", fields[1]) or not all(f.isdigit() for f in fields[2:4]):
        raise click.BadParameter(f"{option!r}: expected NAME:DIM:MIN:MAX[:SYMBOL[*N]] (e.g. x:1:2:512)", param_hint="--dynamic")
    name, dim, low, high = fields[0], *map(int, fields[1:4])
    if name not in arguments:
        raise click.BadParameter(f"{option!r}: forward has no argument {name!r}; it has {', '.join(arguments)}",
                                 param_hint="--dynamic")
    value = arguments[name]
    if not isinstance(value, torch.Tensor):
        raise click.BadParameter(f"{option!r}: input {name} is a {type(value).__name__}, not a tensor; --dynamic "
                                 "makes a dim of a tensor input dynamic", param_hint="--dynamic")
    rank = value.dim()
    if not -rank <= dim < rank:
        raise click.BadParameter(f"{option!r}: input {name} has {rank} dims (shape {tuple(value.shape)}); "
                                 f"DIM must be in [{-rank}, {rank})", param_hint="--dynamic")
    if low > high:
        raise click.BadParameter(f"{option!r}: MIN {low} is above MAX {high}", param_hint="--dynamic")
    dim %= rank
    return name, dim, low, high, fields[4] if len(fields) == 5 else f"{name}_{dim}"


# --- saved inputs of `aotcuda run` ---------------------------------------------------------------------

def _load_failure(exc: Exception) -> str:
    """What torch.load found wrong, without its advice to load with weights_only=False: the CLI never runs
    pickled code from an inputs file, and for a file that torch.save did not write it is not the fix."""
    text = str(exc).strip()
    if text.startswith("Weights only load failed"):
        after = text.partition("WeightsUnpickler error:")[2]  # the reason: the first line after the marker
        detail = next((line.strip() for line in after.splitlines() if line.strip()), "")
        return "the weights-only unpickler refused it" + (f": {detail}" if detail else "")
    return text.splitlines()[0] if text else type(exc).__name__


def _check_inputs_archive(path: str) -> None:
    """click.BadParameter when the inputs file is a zip (torch.save's format) whose entries would inflate
    past the limits packages are read with (``aotcuda.runtime.archive``, the same variables to raise them)."""
    from aotcuda.errors import PackageError
    from aotcuda.runtime.archive import ArchiveLimits, check_directory, check_entries, check_extraction

    if not zipfile.is_zipfile(path):
        return  # torch.load says what it is not
    try:
        limits = ArchiveLimits.from_environment()
        check_directory(path, limits)  # before zipfile builds an object for every record
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            check_entries(path, infos, limits)
            check_extraction(path, infos, limits)
    except PackageError as exc:
        raise click.BadParameter(str(exc), param_hint="--inputs") from None
    except (zipfile.BadZipFile, ValueError, NotImplementedError, OSError):
        return  # torch.load says what is wrong with it


def load_inputs(path: str) -> tuple[tuple, dict]:
    """inputs.pt as saved by ``aotcuda lower --save-inputs``: {"args": tuple, "kwargs": dict}, {name: value}
    (forward's arguments by name), or a bare tensor / tuple / list of tensors. Raises click.BadParameter for
    a file torch.load cannot read with weights_only=True, or another structure, or a zip that would inflate
    past the archive limits (torch.load inflates a deflated record whole: a 256 KiB file made a 256 MiB
    tensor, a 64 MiB one would make 64 GiB), checked from its declared sizes before anything is read."""
    _check_inputs_archive(path)
    try:
        with warnings.catch_warnings():  # torch's advice about pickle protocols, for a file it then refuses
            warnings.simplefilter("ignore")
            saved = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # not a torch.save file, or one holding more than tensors and containers
        why = f"torch.load: {_load_failure(exc)}"
        if not zipfile.is_zipfile(path):  # torch.save's format is a zip archive
            why = f"it is not the zip archive torch.save writes; {why}"
        raise click.BadParameter(f"{path}: not a file torch.load reads with weights_only=True ({why}); "
                                 "save the inputs with torch.save (tensors, lists, tuples, dicts, numbers)",
                                 param_hint="--inputs")
    if isinstance(saved, dict) and "args" in saved:
        return tuple(saved["args"]), dict(saved.get("kwargs") or {})
    if isinstance(saved, dict) and all(isinstance(key, str) for key in saved):
        return (), dict(saved)  # {name: value}: forward's arguments by name
    if isinstance(saved, torch.Tensor):
        return (saved,), {}
    if isinstance(saved, (list, tuple)):
        return tuple(saved), {}
    raise click.BadParameter(f"{path}: expected {{'args': ..., 'kwargs': ...}}, {{name: value}}, a tensor, or a list "
                             "of tensors", param_hint="--inputs")
