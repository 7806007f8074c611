"""What the command line reads from the user: a model factory (``MODULE:FACTORY``), its result, the
``--dynamic`` options of ``aotcuda lower``, and the saved inputs of ``aotcuda run``.

Every problem is a ``click.BadParameter`` or ``click.UsageError`` naming the option and the fix, so that
the CLI prints it as a usage error (exit code 2).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect as pyinspect
import io
import os
import re
import sys
import warnings
import zipfile
from collections.abc import Mapping

import click
import torch

from aotcuda.cli_paths import SHOWN_PATH
from aotcuda.errors import clipped
from aotcuda.os_errors import temporary_folder_advice


def load_factory(spec: str):
    """MODULE:FACTORY (a module name, or a path to a .py file) → the factory callable.

    MODULE is imported with the current directory first on sys.path, as ``python -m`` does, so that
    ``aotcuda lower mymodel:Rope`` finds ./mymodel.py.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter(f"{spec!r}: expected MODULE:FACTORY"
                                 + (_dotted_factory(module_name) or ", e.g. " + (
                                     _factories_of(module_name) or "aotcuda.models.attention:attention_block")))
    if module_name.endswith(".py") or os.path.sep in module_name:
        if not module_name.endswith(".py"):
            raise click.BadParameter(f"{spec!r}: {module_name!r} is a path but not a .py file; give the model's "
                                     f"file, e.g. {module_name}.py:{attribute}, or a module name, e.g. "
                                     f"{os.path.basename(module_name)}:{attribute} from its folder")
        module = _import_file(module_name)
    else:
        module = _import_module(module_name)
    factory = getattr(module, attribute, None)
    if not callable(factory):
        if hasattr(module, attribute):
            problem = f"{attribute!r} is a {type(factory).__name__}, not a callable that returns a model"
        else:
            problem = f"has no {attribute!r}"
        factories = _listed_factories(module_name, _factory_names(module))
        raise click.BadParameter(f"{module_name}: {problem}; " + (
            f"its factories (functions that take no arguments): {factories}" if factories else
            "it defines no factory (a function that takes no arguments and returns the model and its inputs)"))
    return factory


def _factory_names(module) -> list[str]:
    """The public functions a module defines itself (not those it imports) that can be FACTORY: callable with no
    arguments. Why only these: a function with a required parameter fails when `aotcuda lower` calls it, and an
    nn.Module class returns a model without its inputs; both were offered as examples (a new user, nu40)."""
    return sorted(name for name, value in vars(module).items()
                  if pyinspect.isfunction(value) and not name.startswith("_")
                  and value.__module__ == module.__name__ and _takes_no_arguments(value))


def _takes_no_arguments(function) -> bool:
    try:
        parameters = pyinspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)


def _listed_factories(module_name: str, names: list[str], shown: int = 5) -> str | None:
    """``MODULE:A or MODULE:B ...``, the first ``shown`` names, and how many there are where that is not all: every
    message that offers factories counts them the same way."""
    if not names:
        return None
    more = f" ({len(names)} factories in all)" if len(names) > shown else ""
    return " or ".join(f"{module_name}:{name}" for name in names[:shown]) + more


def _imported_quietly(module_name: str):
    """The module a user named (a file or a module name), or None where it does not import."""
    try:
        is_file = module_name.endswith(".py")
        return _import_file(module_name) if is_file else _import_module(module_name)
    except Exception:  # noqa: BLE001 - the usage error says what is expected either way
        return None


def _factories_of(module_name: str) -> str | None:
    """``MODULE:NAME`` for each factory of ``module_name`` (a file or module the user gave without ``:FACTORY``),
    or None where it names none that imports (a new user typed ``aotcuda lower frontend.py``)."""
    module = _imported_quietly(module_name) if module_name else None
    return _listed_factories(module_name, _factory_names(module)) if module is not None else None


def _dotted_factory(spec: str) -> str | None:
    """", did you mean MODULE:NAME?" where ``spec`` is MODULE.NAME, a dot typed for the colon, and NAME is one of
    MODULE's factories (``aotcuda lower mymodels.rope_attention`` got only the generic example); MODULE's factories
    where NAME is not one; None where ``spec`` is no such typo (a module of that name, or none that imports)."""
    module_name, dot, name = spec.rpartition(".")
    if not dot or not module_name or os.path.sep in spec or spec.endswith(".py") or not name.isidentifier():
        return None
    if _imported_quietly(spec) is not None:  # a module of that name: its own factories are the answer
        return None
    module = _imported_quietly(module_name)
    if module is None:
        return None
    factories = _factory_names(module)
    value = getattr(module, name, None)
    if name in factories or (callable(value) and not isinstance(value, type)):  # a decorated one too (review40c)
        return f", did you mean {module_name}:{name}?"
    listed = _listed_factories(module_name, factories)
    return f" with a colon, not a dot, e.g. {listed}" if listed else None


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
    except SystemExit as exc:  # sys.exit(0) in the factory ended `aotcuda lower` with 0 and nothing written
        raise click.ClickException(f"the factory {spec} exited (SystemExit: {_exit_said(exc)}){_where(exc)}; FACTORY "
                                   "must return the model and its inputs, not exit") from exc
    except Exception as exc:  # the user's code: say whose and where, not only what
        import traceback

        frames = traceback.extract_tb(exc.__traceback__)
        if len(frames) == 1 and isinstance(exc, TypeError):  # the call itself: FACTORY takes arguments
            raise click.UsageError(f"the factory {spec} cannot be called with no arguments ({exc}); FACTORY is "
                                   "called with none: point at a function that takes none and returns the model "
                                   "and its inputs") from exc
        frame = frames[-1]
        raise click.ClickException(f"the factory {spec} raised {type(exc).__name__}: {exc} "
                                   f"(at {frame.filename}:{frame.lineno}, in {frame.name})") from exc


def _import_file(path: str):
    """The module of a .py file, with the file's folder first on sys.path, as ``python path/to/model.py`` has it
    (a model file importing a helper beside it failed with ModuleNotFoundError from any other folder)."""
    if not os.path.isfile(path):
        raise click.BadParameter(f"{path!r}: no such file")
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = os.path.basename(path)[:-3]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader_spec)
    # under its name in sys.modules, as an import gives it, where no other module holds the name: an `import name`
    # (pickle saving --save-inputs of a dataclass input; aotcuda.load importing a type's module) then finds this
    # module, not a second copy of the file whose classes are other objects ("Can't pickle <class
    # 'models.Batch'>: it's not the same object as models.Batch")
    registered = name.isidentifier() and name not in sys.modules
    if registered:
        sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except click.ClickException:
        if registered:
            sys.modules.pop(name, None)
        raise
    except (Exception, SystemExit) as exc:  # SystemExit: sys.exit() or argparse at the module's top level
        if registered:
            sys.modules.pop(name, None)
        raise _import_error(path, exc) from exc
    return module


def _import_error(what: str, exc: BaseException) -> click.ClickException:
    """An exception raised (or a SystemExit) while importing the user's ``what``, as a click error that says so, and
    where (the innermost frame of the user's code; a SyntaxError's own line)."""
    if isinstance(exc, SystemExit):  # aotcuda exited with the module's code and said nothing (0: a success)
        return click.ClickException(f"importing {what} exited (SystemExit: {_exit_said(exc)}){_where(exc)}; a file "
                                    "aotcuda imports must not exit: put the script part of it under "
                                    "`if __name__ == \"__main__\":`")
    at = f" (at {exc.filename}:{exc.lineno})" if isinstance(exc, SyntaxError) and exc.filename else _where(exc)
    return click.ClickException(f"importing {what} raised {type(exc).__name__}: {exc}{at}")


def _exit_said(exc: SystemExit) -> str:
    """What a SystemExit carries, as sys.exit was called: its code, or its message, bounded."""
    return clipped(repr(exc.code), 200)


def _where(exc: BaseException) -> str:
    """" (at FILE:LINE, in NAME)": the innermost frame of the user's code that raised ``exc``, or ""."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename
              and not f.filename.startswith("<frozen") and f.filename != __file__]
    return f" (at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""


def _import_module(name: str):
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(f"{exc.name}.")):
            # the module was found, and something it imports was not: that error is the user's, said as such
            raise _import_error(f"module {name}", exc) from exc
        raise click.BadParameter(
            f"no module named {name!r} (looked in the current directory {cwd} and on sys.path); "
            f"for a file elsewhere use the path form, e.g. path/to/{name.replace('.', '/')}.py:FACTORY") from exc
    except click.ClickException:
        raise
    except (Exception, SystemExit) as exc:  # the user's module raised (or exited) while it was imported
        raise _import_error(f"module {name}", exc) from exc


def _a(name: str) -> str:
    """'a Linear', 'an Identity'."""
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def model_and_inputs(made) -> tuple[torch.nn.Module, tuple, dict]:
    """A factory's result → (model, args, kwargs). Accepts (model, inputs) and (model, args, kwargs)."""
    if not isinstance(made, tuple) or len(made) not in (2, 3) or not isinstance(made[0], torch.nn.Module):
        got = (f"{_a(type(made).__name__)} instance" if isinstance(made, torch.nn.Module) else
               f"a tuple of {len(made)}: ({', '.join(type(v).__name__ for v in made)})" if isinstance(made, tuple)
               else _a(type(made).__name__))
        hint = (" (FACTORY names an nn.Module class? Point at a function that builds the model and its example "
                "inputs and returns both)" if isinstance(made, torch.nn.Module) else "")
        if isinstance(made, tuple) and made and isinstance(made[0], type) and issubclass(made[0], torch.nn.Module):
            name = made[0].__name__
            hint = f" (its first item is the class {name}, not a model: return an instance, {name}(...))"
        raise click.UsageError("the factory must return (model, inputs) or (model, args, kwargs), model an "
                               f"nn.Module; it returned {got}{hint}")
    model, args = made[0], made[1]
    kwargs = made[2] if len(made) == 3 else {}
    if kwargs is not None and not isinstance(kwargs, Mapping):  # dict("m.pt2") raised a raw ValueError
        raise click.UsageError(f"the factory returned (model, args, kwargs) with kwargs {_a(type(kwargs).__name__)}; "
                               "kwargs must be a dict of forward's keyword inputs by name (or return (model, inputs))")
    if isinstance(args, dict):  # one positional input that is a dict, or forward's inputs by name? Say which
        raise click.UsageError("the factory returned (model, inputs) with inputs a dict; return (model, (the_dict,)) "
                               "if forward takes the dict as one argument, or (model, (), the_dict) to pass its items "
                               "by name")
    args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
    return model, args, dict(kwargs or {})


def dynamic_shapes_from(options: tuple[str, ...], model: torch.nn.Module, args: tuple, kwargs: dict):
    """["x:1:2:512", ...] → torch.export dynamic_shapes keyed by forward's argument names (None if empty).

    Each NAME:DIM:MIN:MAX makes dim DIM of input NAME (an argument, or a tensor inside one: ``feats_x`` as
    `aotcuda inspect` names it, or ``feats.x``, ``feats['x']``, ``xs[0]``) a torch.export.Dim named "<NAME>_<DIM>"; an
    optional fifth field names the Dim, so inputs that share a size share it (x:1:2:512:seq), and
    NAME*N makes the size a multiple of N (audio:1:800:480000:frames*160 is 160·frames samples).
    Raises click.BadParameter naming the option for a malformed one, an unknown or non-tensor input,
    a DIM outside [-rank, rank), MIN above MAX, or a Dim name given two ranges.
    """
    if not options:
        return None
    from aotcuda.lowering.options import check_inputs_fit

    bound = check_inputs_fit(model, args, kwargs) or pyinspect.signature(model.forward).bind(*args, **kwargs)
    shapes = {name: None for name in bound.arguments}
    nested = {}  # {argument: {key path: {dim: Dim}}} for tensors inside a dict, list or tuple argument
    dims, first_option, option_of_dim = {}, {}, {}
    for option in options:
        name, dim, low, high, symbol = _parse_dynamic(option, bound.arguments)
        if option_of_dim.setdefault((name, dim), option) != option:  # x:1:2:128 and x:1:4:64: one would be dropped
            _dim_given_twice(option_of_dim[(name, dim)], option, dim)
        name, path = name if isinstance(name, tuple) else (name, None)
        symbol, multiple = _symbol_and_multiple(option, symbol, low, high)
        # A multiple (SYMBOL*N): the size is N·SYMBOL, and MIN/MAX bound the size, so SYMBOL's own range is
        # [ceil(MIN/N), floor(MAX/N)] (an stft input of 160·frames samples: audio:1:800:480000:frames*160).
        symbol_range = (-(-low // multiple), high // multiple)
        if symbol in dims and (dims[symbol].min, dims[symbol].max) != symbol_range:
            _conflicting_ranges(symbol, first_option[symbol], (dims[symbol].min, dims[symbol].max), option, symbol_range)
        first_option.setdefault(symbol, option)
        dims.setdefault(symbol, torch.export.Dim(symbol, min=symbol_range[0], max=symbol_range[1]))
        size = dims[symbol] * multiple if multiple > 1 else dims[symbol]
        if path is None:
            shapes[name] = {**(shapes[name] or {}), dim: size}
        else:
            nested.setdefault(name, {}).setdefault(path, {})[dim] = size
    for name, by_path in nested.items():  # torch's form: the argument's structure, a dim dict at each tensor
        shapes[name] = _dims_at_leaves(bound.arguments[name], by_path)
    return shapes


def inputs_to_save(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[dict, str | None]:
    """What ``aotcuda lower --save-inputs`` writes: ``{"args": ..., "kwargs": ...}``, or, where an argument holds a
    container that ``torch.load(weights_only=True)`` (``aotcuda run``) does not read (a dataclass, a named tuple,
    any type registered with torch's pytree), the tensors by the names `aotcuda inspect` lists (``batch_tokens``),
    which ``aotcuda run`` takes; the arguments that are no tensors are left out, as fixed at lowering. Also the name
    of the first such type (None where the first form is written)."""
    kept = next((found for found in map(_not_plain, (*args, *kwargs.values())) if found), None)
    if kept is None:
        return {"args": args, "kwargs": kwargs}, None
    try:
        bound = pyinspect.signature(model.forward).bind(*args, **kwargs)
    except TypeError:
        return {"args": args, "kwargs": kwargs}, None  # eager's own call refuses it: lower() says so first
    by_name = {}
    for name, value in bound.arguments.items():
        if isinstance(value, torch.Tensor):
            by_name[name] = value
        else:
            by_name.update((leaf_name, leaf) for leaf_name, _, leaf in _tensor_leaves(name, value))
    return by_name, kept


def _not_plain(value, depth: int = 0) -> str | None:
    """The name of the first type in value that torch.load(weights_only=True) does not read back (None: none)."""
    if isinstance(value, (torch.Tensor, bool, int, float, complex, str, type(None), torch.dtype, torch.device)):
        return None
    if depth > 64:
        return None  # load_inputs refuses deeper structures with its own message
    if type(value) in (tuple, list):
        return next((found for found in (_not_plain(v, depth + 1) for v in value) if found), None)
    if type(value) is dict:
        return next((found for found in (_not_plain(v, depth + 1) for v in value.values()) if found), None)
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _tensor_leaves(name: str, value) -> list[tuple[str, tuple, torch.Tensor]]:
    """(name `aotcuda inspect` shows, pytree key path, tensor) of each tensor inside an argument: torch.export names
    a nested input by its path's keys joined with ``_`` (``feats_x``, ``xs_0``), as inspect lists it."""
    import torch.utils._pytree as pytree

    try:
        leaves = pytree.tree_flatten_with_path(value)[0]
    except Exception:  # noqa: BLE001 - a container without key paths: named by the message without its leaves
        return []
    found = []
    for path, leaf in leaves:
        if isinstance(leaf, torch.Tensor) and path:
            keys = [re.sub(r"[^a-zA-Z0-9]", "_", str(_key_of(key))).lower() for key in path]
            found.append(("_".join([name.lower(), *keys]), tuple(_key_of(key) for key in path), leaf))
    return found


def _key_of(key):
    return getattr(key, "key", getattr(key, "idx", getattr(key, "name", key)))


# a path to a tensor inside an argument: feats.x, feats['x'], feats["x"], feats[x], xs[0], xs.0
_PATH_STEP = re.compile(r"\.([^.\[\]]+)|\[(?:'([^']*)'|\"([^\"]*)\"|([^\]]*))\]")


def _path_keys(text: str, name: str) -> tuple | None:
    """The keys of a dotted or bracketed path after ``name`` (None where the text is no such path)."""
    rest, keys = text[len(name):], []
    while rest:
        match = _PATH_STEP.match(rest)
        if match is None:
            return None
        keys.append(next(group for group in match.groups() if group is not None))
        rest = rest[match.end():]
    return tuple(keys) if keys else None


def _nested_tensor(text: str, arguments: dict):
    """(argument, key path, tensor, inspect's name) for a NAME of --dynamic that names a tensor inside an argument, by
    the name `aotcuda inspect` lists (``feats_x``) or by a path (``feats.x``, ``feats['x']``, ``xs[0]``); None if it
    names none."""
    head = re.match(r"[A-Za-z_]\w*", text)
    for name, value in arguments.items():
        if isinstance(value, torch.Tensor):
            continue
        keys = _path_keys(text, name) if head and head.group(0) == name else None
        for shown_name, path, tensor in _tensor_leaves(name, value):
            if text == shown_name or (keys is not None and tuple(map(str, path)) == keys):
                return name, path, tensor, shown_name
    return None


def _nested_names(arguments: dict) -> list[str]:
    return [shown_name for name, value in arguments.items() if not isinstance(value, torch.Tensor)
            for shown_name, _, _ in _tensor_leaves(name, value)]


def _dims_at_leaves(value, by_path: dict):
    """``value``'s structure with a dim dict at each tensor whose path has dynamic dims, None elsewhere."""
    import torch.utils._pytree as pytree

    return pytree.tree_map_with_path(
        lambda path, leaf: by_path.get(tuple(_key_of(key) for key in path)), value)


def _dim_given_twice(first: str, option: str, dim: int):
    """Two options for one dim of one input: a dim takes one range and one SYMBOL, so it is a usage error."""
    name = option.split(":")[0]
    raise click.BadParameter(
        f"{option!r} and {first!r} both make dim {dim} of input {name} dynamic; a dim takes one --dynamic option: "
        f"keep one of them (its MIN:MAX, and a SYMBOL where another input shares the size)", param_hint="--dynamic")


def _conflicting_ranges(symbol: str, first: str, first_range: tuple, option: str, option_range: tuple):
    """One Dim name given two ranges: one would be dropped without a word, so it is a usage error."""
    raise click.BadParameter(
        f"{option!r} gives Dim {symbol} the range [{option_range[0]}, {option_range[1]}], but {first!r} gave it "
        f"[{first_range[0]}, {first_range[1]}]; a Dim name has one range: give the same MIN:MAX in both options "
        f"(inputs that share the size), or two names (sizes that differ)", param_hint="--dynamic")


def _symbol_and_multiple(option: str, symbol: str, low: int, high: int) -> tuple[str, int]:
    """SYMBOL or SYMBOL*N → (SYMBOL, N ≥ 1); raises click.BadParameter for another form or an empty range."""
    match = re.fullmatch(r"([A-Za-z_]\w*)(?:\*(\d+))?", symbol)
    if match is None or (match.group(2) is not None and int(match.group(2)) < 1):
        raise click.BadParameter(f"{option!r}: SYMBOL must be a name, or NAME*N for a size that is a multiple of N "
                                 "(e.g. frames*160)", param_hint="--dynamic")
    multiple = int(match.group(2) or 1)
    if -(-low // multiple) > high // multiple:
        raise click.BadParameter(f"{option!r}: no multiple of {multiple} lies in [{low}, {high}]", param_hint="--dynamic")
    if -(-low // multiple) == high // multiple:  # torch.export.Dim asserts min < max (a raw AssertionError)
        raise click.BadParameter(f"{option!r}: one size only ({high // multiple * multiple}) lies in [{low}, {high}]"
                                 f"{f' as a multiple of {multiple}' if multiple > 1 else ''}; a dynamic dim takes a "
                                 "range of sizes: widen it, or leave --dynamic out for a dim of one size",
                                 param_hint="--dynamic")
    return match.group(1), multiple


MAX_DIM_SIZE = 2**63 - 1  # a tensor's sizes are int64


def _parse_dynamic(option: str, arguments: dict) -> tuple[str | tuple, int, int, int, str]:
    """NAME:DIM:MIN:MAX[:SYMBOL[*N]] → (name, dim ≥ 0, min, max, symbol: "<NAME>_<dim>" by default), checked
    against the example inputs (DIM may count from the end, as in torch); name is (argument, key path) for a
    tensor inside an argument."""
    fields = option.split(":")
    # ASCII digits only: str.isdigit() and \d also take "²" (which int() refuses: a raw ValueError) and other scripts'
    # digits (which it reads)
    if len(fields) not in (4, 5) or not re.fullmatch(r"-?[0-9]+", fields[1]) or \
            not all(re.fullmatch(r"[0-9]+", f) for f in fields[2:4]):
        raise click.BadParameter(f"{option!r}: expected NAME:DIM:MIN:MAX[:SYMBOL[*N]] (e.g. x:1:2:512)", param_hint="--dynamic")
    if any(len(f.lstrip("-")) > len(str(MAX_DIM_SIZE)) or int(f) > MAX_DIM_SIZE for f in fields[1:4]):
        # (the length first: int() of 4,301 digits or more raises ValueError) no tensor has such a size or dim, and
        # the package's range would end past int64
        raise click.BadParameter(f"{clipped(repr(option), 80)}: a number past {MAX_DIM_SIZE} (int64's largest), more "
                                 "than any tensor's size; give the largest size the input will have",
                                 param_hint="--dynamic")
    name, dim, low, high = fields[0], *map(int, fields[1:4])
    label = name
    found = None if name in arguments else _nested_tensor(name, arguments)
    if found is not None:  # a tensor inside an argument: (argument, key path), named by inspect's name
        argument, path, value, label = found
        name = (argument, path)
    elif name not in arguments:
        inside = _nested_names(arguments)
        also = (f"; a tensor inside one is named as `aotcuda inspect` lists it ({', '.join(inside[:6])}) or by its "
                "path (feats.x, feats['x'], xs[0])") if inside else ""
        raise click.BadParameter(f"{option!r}: forward has no argument {name!r}; it has {', '.join(arguments)}{also}",
                                 param_hint="--dynamic")
    else:
        value = arguments[name]
    if not isinstance(value, torch.Tensor):
        inside = [shown_name for shown_name, _, _ in _tensor_leaves(name, value)]
        fix = (f"; name a tensor inside it, as `aotcuda inspect` lists it ({', '.join(inside[:6])}) or by its path "
               f"({name}.KEY, {name}['KEY'], {name}[INDEX]): e.g. --dynamic {inside[0]}:{fields[1]}:{fields[2]}:"
               f"{fields[3]}{':' + fields[4] if len(fields) == 5 else ''}") if inside else ""
        raise click.BadParameter(f"{option!r}: input {name} is a {type(value).__name__}, not a tensor; --dynamic "
                                 f"makes a dim of a tensor input dynamic{fix}", param_hint="--dynamic")
    rank = value.dim()
    if not -rank <= dim < rank:
        raise click.BadParameter(f"{option!r}: input {label} has {rank} dims (shape {tuple(value.shape)}); "
                                 f"DIM must be in [{-rank}, {rank})", param_hint="--dynamic")
    if low > high:
        raise click.BadParameter(f"{option!r}: MIN {low} is above MAX {high}", param_hint="--dynamic")
    dim %= rank
    return name, dim, low, high, fields[4] if len(fields) == 5 else f"{label}_{dim}"


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


# torch.load takes a file for a zip archive exactly when it starts with a zip's local header (torch.serialization
# _is_zipfile), and reads it with its own zip reader (miniz), which accepts archives Python's zipfile refuses.
ZIP_MAGIC = b"PK\x03\x04"
# How deep and how large a saved structure may be: torch's pytree (which hands the call its tensors) recurses
# once per level, and walks a container each time it is reached, so a 1.9 KB pickle whose 40 levels each hold
# one list twice (shared through the pickle memo) is 2**40 values to it. Real inputs nest a few levels (a KV
# cache: a tuple of layers of pairs) and hold at most thousands of values.
MAX_INPUTS_DEPTH = 64
MAX_INPUTS_VALUES = 100_000
# The pickle (data.pkl) is bounded before torch.load runs it (aotcuda.pickle_count): 5 bytes of it build a tensor
# view, and an 88 KB file built 12M of them (6.7 GiB, 3 minutes) before MAX_INPUTS_VALUES was checked. torch.save
# writes ~87 bytes, ~36 opcodes, 3 calls and 17-19 counted objects (calls, argument tuples, memo entries, its key
# and slot) for a 4-dim tensor: 100,000 of them take 8.7 MB, 3.3M opcodes, 300,000 calls and 1.9M objects.
# Dict keys that are not strings (whose hashes an attacker can make collide) are few in real inputs.
MAX_INPUTS_PICKLE_BYTES = 32 << 20
MAX_INPUTS_PICKLE_OBJECTS = 25 * MAX_INPUTS_VALUES
MAX_INPUTS_PICKLE_CALLS = 5 * MAX_INPUTS_VALUES
MAX_INPUTS_PICKLE_HASHED = MAX_INPUTS_VALUES // 10
MAX_INPUTS_PICKLE_OPCODES = 64 * MAX_INPUTS_VALUES
# Containers the pickle nests (torch.save's tensor adds ~4 levels of argument tuples; a call nested 64 deep is ~68):
# a tuple is hashed and compared by recursion in C, without the recursion limit, so a 400,000-deep one (400 KB) as a
# dict key ended torch.load with SIGSEGV before the structure check could see it.
MAX_INPUTS_PICKLE_DEPTH = 2 * MAX_INPUTS_DEPTH
# Values handed to calls, each counted again at each call it is handed to (a call may copy what it is given:
# torch.Size(l) copies l): 100,000 4-dim tensors hand 2.8M; one memoized list of 1M ints handed to 400 torch.Size
# calls (4.9 MB) made torch.load build 3.2 GB. 10M copied values take at most a few hundred MB.
MAX_INPUTS_PICKLE_COPIED = 100 * MAX_INPUTS_VALUES


# The archive limits' advice names aotcuda.load's argument, which an inputs file is not read through.
_PACKAGE_OVERRIDE = re.compile(r"if you trust this package, raise the limit: set (\w+) \(0: no limit\), or pass "
                               r"limits=ArchiveLimits\(\w+=\.\.\.\) to aotcuda\.load")


def _refuse(message: str):
    message = _PACKAGE_OVERRIDE.sub(r"if you trust this file, raise the limit: set \1 (0: no limit)", message)
    return click.BadParameter(message, param_hint="--inputs")


def _open_regular(path: str):
    """The inputs file, opened for reading, refused unless it is a regular file: a FIFO would wait for a writer
    for ever and a device (/dev/zero) would be read until memory runs out (``aotcuda.regular_files``: checked
    before the open and on the descriptor that every later read uses, since the path may change)."""
    from aotcuda.regular_files import NotARegularFileError, open_regular

    try:
        return open_regular(path)
    except NotARegularFileError as exc:
        path = clipped(path, SHOWN_PATH)
        raise _refuse(f"{path} is {exc.kind}; --inputs reads a regular file: save the inputs with torch.save to a "
                      "file and pass its path") from None
    except OSError as exc:
        raise _refuse(f"{clipped(path, SHOWN_PATH)}: cannot be read ({exc.strerror})") from None


def _private_copy(path: str, opened, limits):
    """A copy of the opened inputs file that no other process can reach, which every check and torch.load then
    read: the checks read the file's bytes several times, and torch.load once more, so a file written into in
    place between them (by whoever can write it) made torch.load read bytes that were never checked, a bomb
    among them. The copy is an unnamed temporary file (O_TMPFILE where the file system has it, else one of
    mode 0600 unlinked at once), so the disk holds it, not memory; refused past the archive limit on the bytes
    a package may extract (AOTCUDA_MAX_EXTRACT_BYTES), which no entry of it can pass anyway.

    Only the bytes the file's size says are copied: a file that holds more grows as it is read (another process
    appending to it) or is a kernel file that says 0 (``/proc/self/pagemap``: gigabytes), and copying it to its end
    held the CLI and filled the temporary folder; it is refused once it has given one byte past its size."""
    import tempfile

    size = os.fstat(opened.fileno()).st_size
    if limits.max_extract_bytes and size > limits.max_extract_bytes:
        raise _refuse(f"{path} is {size:,} bytes, past AOTCUDA_MAX_EXTRACT_BYTES={limits.max_extract_bytes:,}: "
                      "if you trust this file, raise the limit: set AOTCUDA_MAX_EXTRACT_BYTES (0: no limit)")
    # unbuffered: a write that fails (a full temporary folder, a file-size limit) fails in _copy_range, which names it;
    # a buffered copy's failed writes surfaced at its seek or truncate, as os's raw OSError, and again at its close
    # (the process breaker, 2026-12-06)
    try:
        copy = tempfile.TemporaryFile(buffering=0)
    except OSError as exc:
        raise _copy_refused(path, exc) from None
    try:
        copied = _copy_at_most(path, opened, copy, size)
        copy.seek(0)
    except BaseException:
        copy.close()
        raise
    copy = io.BufferedReader(copy)  # read many times over by the checks and torch.load
    if copied > size:
        copy.close()
        raise _refuse(f"{path} holds more bytes than its size says ({size:,}): it is growing as it is read (another "
                      "process is writing it), or it is no file on disk (a file of the kernel, such as /proc's); pass "
                      "a torch.save file once it is written whole")
    return copy


def _check_holes(path: str, file, limits) -> None:
    """click.BadParameter for an inputs file whose size its disk blocks hold less than 1/max_ratio of (above the ratio
    floor): a stored record over a hole has a ratio of 1, which no ratio check refuses, and torch.load reads it whole:
    a 1 GiB file of 8 KiB on disk made 1 GiB of zeros in memory, one of 60 GiB meets the OOM killer (the amplification
    breaker, 2026-12-07). Asked of the file given, before it is copied, and of the copy (which keeps its holes)."""
    from aotcuda.errors import PackageError
    from aotcuda.runtime.archive import check_allocation

    try:
        check_allocation(path, file, limits, kind="file")
    except PackageError as exc:
        raise _refuse(str(exc)) from None


def _copy_at_most(path: str, source, target, size: int) -> int:
    """Copy ``source`` into ``target`` until its end or ``size`` + 1 bytes, whichever comes first; the bytes copied.
    An error reading says the file cannot be read; one writing, that the temporary folder cannot take the copy.

    A sparse file's holes stay holes in the copy (its data found with SEEK_DATA / SEEK_HOLE where the file system
    has them): an inputs file behind a 20 GB hole (a torch.save file appended to ``truncate -s 20G``: 2 KB on disk)
    was copied as 20 GB of zeros written to the temporary folder (up to AOTCUDA_MAX_EXTRACT_BYTES, 64 GiB), before
    its layout check refused the gap (archive.check_layout)."""
    extents = _data_extents(source.fileno(), size)
    if extents is None:  # no SEEK_DATA here (/proc, some file systems): every byte, in order
        return _copy_range(path, source, target, 0, size + 1)
    for start, end in extents:
        source.seek(start)
        target.seek(start)
        if _copy_range(path, source, target, start, end) < end - start:  # truncated as it was read: zeros after
            break
    try:
        target.truncate(size)  # the holes up to the size, at the end too
    except OSError as exc:  # a file-size limit below the size: EFBIG
        raise _copy_refused(path, exc) from None
    source.seek(size)
    try:
        more = source.read(1)
    except OSError as exc:
        raise _refuse(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return size + len(more)


def _data_extents(descriptor: int, size: int) -> list[tuple[int, int]] | None:
    """The (start, end) byte ranges of the file's data within its first ``size`` bytes, holes left out; None where
    the file system cannot say (then every byte is data)."""
    import errno

    extents, at = [], 0
    while at < size:
        try:
            start = os.lseek(descriptor, at, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here to the end
                break
            return None  # EINVAL: /proc's files and file systems without it
        if start >= size:
            break
        try:
            end = min(os.lseek(descriptor, start, os.SEEK_HOLE), size)
        except OSError:
            return None
        extents.append((start, end))
        at = end
    return extents


def _copy_range(path: str, source, target, start: int, end: int) -> int:
    """Copy the bytes of ``source`` from its position (``start``) until ``end`` or its end; the bytes copied."""
    copied = 0
    while start + copied < end:
        try:
            piece = source.read(min(1 << 20, end - start - copied))
        except OSError as exc:
            raise _refuse(f"{path}: cannot be read ({exc.strerror or exc})") from None
        if not piece:
            break
        try:
            view = memoryview(piece)
            while view:  # an unbuffered write may take part of it (a disk filling up): the rest, or its error
                view = view[target.write(view):]
        except OSError as exc:
            raise _copy_refused(path, exc) from None
        copied += len(piece)
    return copied


def _copy_refused(path: str, exc: OSError):
    """The refusal of an inputs file whose private copy cannot be written, with the advice of the error's errno."""
    import tempfile

    return _refuse(f"{path}: cannot copy it for reading ({exc.strerror or exc}): "
                   f"{temporary_folder_advice(exc, tempfile.gettempdir())}")


def _refuse_other_formats(path: str, handle) -> None:
    """A NumPy file given as inputs: torch's unpickler refused it as "Unsupported operand 147" (a new user's); a
    safetensors file, what `aotcuda serve` takes, was "not a zip archive ... save the inputs again with torch.save"
    (another's), which did not say how to carry its tensors over."""
    if _starts_with(handle, b"\x93NUMPY"):
        raise _refuse(f"{path} is a NumPy .npy file; --inputs reads a torch.save file: save the arrays with "
                      "torch.save({'args': (torch.from_numpy(numpy.load(PATH)),)}, 'inputs.pt')")
    handle.seek(0)
    start = handle.read(9)
    size = os.fstat(handle.fileno()).st_size
    handle.seek(0)
    # safetensors: the header's length (8 bytes, little-endian), then the header, a JSON object
    if len(start) == 9 and start[8:] == b"{" and 8 + int.from_bytes(start[:8], "little") <= size:
        raise _refuse(f"{path} is a safetensors file (what `aotcuda serve` takes); --inputs reads a torch.save file: "
                      "save its tensors, by forward's argument names, with "
                      "torch.save(safetensors.torch.load_file(PATH), 'inputs.pt')")


def _refuse_a_package(path: str, infos: list[zipfile.ZipInfo]) -> None:
    """An AOTInductor package given as inputs (the two paths of `aotcuda run` swapped): torch.load said only
    that its zip had no data.pkl (a new user's)."""
    from aotcuda.package_format import lists_a_package

    if lists_a_package([info.filename for info in infos]):
        raise _refuse(f"{path} is an AOTInductor package, not inputs: `aotcuda run PACKAGE --inputs FILE` takes the "
                      "package first and a torch.save file of the inputs after --inputs")


def _starts_with(handle, magic: bytes) -> bool:
    handle.seek(0)
    start = handle.read(len(magic))
    handle.seek(0)
    return start == magic


def _inputs_limits():
    """The limits packages are read with (``aotcuda.runtime.archive``), and the variables that raise them."""
    from aotcuda.errors import PackageError
    from aotcuda.runtime.archive import ArchiveLimits

    try:
        return ArchiveLimits.from_environment()
    except PackageError as exc:
        raise _refuse(str(exc)) from None


def _check_inputs_archive(path: str, handle, limits) -> list[zipfile.ZipInfo]:
    """The entries of the inputs file, which torch.load will read as a zip (it starts as one); click.BadParameter
    when it is one Python's zipfile cannot read, one whose entries overlap or whose extra fields zip readers read
    differently (``check_layout``), or one whose entries would inflate past the archive limits.

    An archive zipfile refuses is refused, not left to torch.load: torch's more lenient reader inflated one
    (64 bytes of junk before the end record) to 256 MiB from 262 KB while this check was skipped."""
    from aotcuda.errors import PackageError
    from aotcuda.runtime.archive import check_directory, check_entries, check_extraction, check_layout

    try:
        check_directory(path, handle, limits)  # before zipfile builds an object for every record
        _check_holes(path, handle, limits)
    except PackageError as exc:
        raise _refuse(str(exc)) from None
    try:
        with zipfile.ZipFile(handle) as archive:
            infos = archive.infolist()
            _check_one_directory(archive, handle, len(infos))
            directory_start = archive.start_dir
    except (zipfile.BadZipFile, ValueError, NotImplementedError, OSError, EOFError) as exc:
        raise _refuse(f"{path} starts as a zip archive (torch.save's format) but is not one Python's zipfile can "
                      f"read ({exc}): it is damaged or was altered, and its sizes cannot be checked before torch.load "
                      "inflates it; save the inputs again with torch.save") from None
    finally:
        handle.seek(0)
    try:
        check_entries(path, infos, limits)
        # before the ratios: they add up declared packed sizes, which overlapping entries count many times
        check_layout(path, handle, infos, directory_start, fix="Save the inputs again with torch.save")
        check_extraction(path, infos, limits)
    except PackageError as exc:
        raise _refuse(str(exc)) from None
    except OSError as exc:
        raise _refuse(f"{path}: cannot be read ({exc.strerror})") from None
    finally:
        handle.seek(0)
    _check_memory_room(path, infos)
    return infos


def _check_memory_room(path: str, infos: list[zipfile.ZipInfo]) -> None:
    """click.BadParameter when the records inflate to more than the memory this process has (the machine's, its
    cgroups', its rlimits': ``host_memory``): torch.load reads every record into memory, where a package's entries
    go to disk, so the ratio bound a package has (200x) let a 15.9 MB file (a 2 GiB storage deflated 135x) take
    2 GiB, and in a 1.5 GiB memory cgroup the kernel killed `aotcuda run` (SIGKILL; the amplification breaker,
    2026-12-07); with no limit, it swaps. A file that fits is read as before."""
    from aotcuda.os_errors import size_and_limit_shown
    from aotcuda.runtime.host_memory import available_cpu_bytes

    inflated = sum(info.file_size for info in infos)
    if inflated < 1 << 28:  # below 256 MiB nothing is asked (the layout copy's threshold)
        return
    room = available_cpu_bytes()
    if inflated > room:
        inflated_shown, room_shown = size_and_limit_shown(inflated, room)
        raise _refuse(f"{path}: its records inflate to {inflated_shown}, which torch.load reads into memory, "
                      f"more than the {room_shown} this process has available (the machine's, or its memory "
                      "cgroup's or ulimit's where lower): it would be killed or swap; nothing of it was read. Run it "
                      "where the inputs fit in memory, or save smaller inputs")


def _check_one_directory(archive: zipfile.ZipFile, handle, count: int) -> None:
    """zipfile.BadZipFile unless zipfile read the directory torch's reader reads: zipfile takes a directory that
    is not where the end record says as shifted by bytes before the archive, and reads entries until the
    directory's size is used up; miniz reads the declared number of entries at the declared offset. Two
    directories, one for each reader, would let the checked entries differ from the inflated ones. With a zip64
    record (torch.save writes one), zipfile takes its values and a reader may take the classic record's: those
    must be the same, or the classic record's "see zip64" marker."""
    from aotcuda.runtime.archive import read_end_records

    records = read_end_records(handle)
    if records is None:
        raise zipfile.BadZipFile("no end of central directory record")
    disagreement = records.disagreement()
    if disagreement:
        raise zipfile.BadZipFile(disagreement)
    if archive.start_dir != records.directory_offset:
        raise zipfile.BadZipFile(f"its central directory is at byte {archive.start_dir}, not at "
                                 f"{records.directory_offset} as its end record says")
    if count != records.entries:
        raise zipfile.BadZipFile(f"its central directory holds {count} entries, its end record says "
                                 f"{records.entries}")


def _check_pickles(path: str, handle, infos: list[zipfile.ZipInfo], limits) -> None:
    """click.BadParameter, before torch.load runs any of it, for a data.pkl (every entry of that name: torch's
    reader takes the one under the archive's folder) over MAX_INPUTS_PICKLE_BYTES, inflating at more than the
    archive ratio from READ_RATIO_FLOOR (as a package's JSON), or whose opcodes would build more objects, or run
    more opcodes, than inputs of MAX_INPUTS_VALUES values need (``aotcuda.pickle_count``)."""
    from aotcuda.errors import PackageError
    from aotcuda.os_errors import size_and_limit_shown
    from aotcuda.runtime.archive import READ_RATIO_FLOOR, check_ratio

    fix = ("save the inputs with torch.save as a tuple of tensors or {'args': (...), 'kwargs': {...}}, holding at "
           f"most {MAX_INPUTS_VALUES:,} values")
    # torch's reader finds the record whatever its case (miniz looks names up case-insensitively): DATA.PKL too
    pickles = [info for info in infos if info.filename.rpartition("/")[2].lower() == "data.pkl"]
    size = sum(info.file_size for info in pickles)  # together: one reading of the directory reads them all
    if size > MAX_INPUTS_PICKLE_BYTES:
        several = len(pickles) > 1
        size_shown, limit_shown = size_and_limit_shown(size, MAX_INPUTS_PICKLE_BYTES)
        raise _refuse(f"{path}: its pickle{'s' if several else ''} ({pickles[0].filename!r}"
                      f"{' and more' if several else ''}) take{'' if several else 's'} {size_shown}, more "
                      f"than the {limit_shown} that inputs of {MAX_INPUTS_VALUES:,} values "
                      f"need (torch.save writes ~9 MB for 100,000 tensors); nothing of it was run: {fix}")
    try:
        with zipfile.ZipFile(handle) as archive:
            for info in pickles:
                check_ratio(path, f"its pickle {info.filename!r}", info.file_size, info.compress_size, limits,
                            READ_RATIO_FLOOR)
                with archive.open(info) as source:
                    _check_pickle(path, info.filename, source.read(MAX_INPUTS_PICKLE_BYTES + 1), fix)
    except PackageError as exc:
        raise _refuse(str(exc)) from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise _refuse(f"{path}: its pickle cannot be read ({exc}): the file is damaged; save the inputs again with "
                      "torch.save") from None
    finally:
        handle.seek(0)


def _check_pickle(path: str, name: str, data: bytes, fix: str) -> None:
    from aotcuda.pickle_count import NUMPY_VALUE, count_pickle

    count = count_pickle(data, MAX_INPUTS_PICKLE_OBJECTS, MAX_INPUTS_PICKLE_OPCODES, MAX_INPUTS_PICKLE_CALLS,
                         MAX_INPUTS_PICKLE_HASHED, MAX_INPUTS_PICKLE_DEPTH, MAX_INPUTS_PICKLE_COPIED)
    if count.refused and count.refused.startswith(NUMPY_VALUE):
        raise _refuse(f"{path}: its pickle {name!r} holds {count.refused}, which --inputs does not read (nothing of "
                      "it was run): save tensors in its place, torch.from_numpy(array) for each array, e.g. "
                      "torch.save({'args': (torch.from_numpy(array),)}, 'inputs.pt')")
    if count.refused:
        raise _refuse(f"{path}: its pickle {name!r} holds {count.refused}, which inputs never do, so nothing of it "
                      f"was run; {fix}")
    if not count.stopped:
        return
    if count.objects > MAX_INPUTS_PICKLE_OBJECTS:
        what = f"would build more than {MAX_INPUTS_PICKLE_OBJECTS:,} objects (containers, their items, memo entries)"
    elif count.calls > MAX_INPUTS_PICKLE_CALLS:
        what = f"would make more than {MAX_INPUTS_PICKLE_CALLS:,} calls (tensors, their storages and hooks)"
    elif count.depth > MAX_INPUTS_PICKLE_DEPTH:
        what = (f"nests containers more than {MAX_INPUTS_PICKLE_DEPTH} levels deep (Python hashes and compares a "
                "nested tuple by recursing in C, where a deep one overflows the stack)")
    elif count.copied > MAX_INPUTS_PICKLE_COPIED:
        what = (f"hands more than {MAX_INPUTS_PICKLE_COPIED:,} values to its calls, each counted at every call it is "
                "handed to (a call may copy what it is given: one list handed to many calls)")
    elif count.hashed > MAX_INPUTS_PICKLE_HASHED:
        what = (f"puts more than {MAX_INPUTS_PICKLE_HASHED:,} keys that are not strings into dicts (keys whose hashes "
                "can be made to collide, which makes each insertion slower than the last)")
    else:
        what = f"runs more than {MAX_INPUTS_PICKLE_OPCODES:,} pickle opcodes"
    raise _refuse(f"{path}: its pickle {name!r} {what}, counted from its opcodes before torch.load ran any (at "
                  f"least {count.objects:,} objects, {count.calls:,} calls in {count.opcodes:,} opcodes): more than "
                  f"inputs of {MAX_INPUTS_VALUES:,} values need, so nothing of it was run; {fix}")


def _torch_load(path: str, handle):
    """torch.load(weights_only=True) of the open file; click.BadParameter for what it refuses, in its words."""
    try:
        with warnings.catch_warnings():  # torch's advice about pickle protocols, for a file it then refuses
            warnings.simplefilter("ignore")
            return torch.load(handle, weights_only=True, map_location="cpu")
    except RecursionError:  # a nesting torch.load's own code recurses through (its pickle opcodes do not)
        raise _refuse(f"{path}: its values nest too deeply for torch.load to read (Python's recursion limit); "
                      f"inputs nest a few levels (at most {MAX_INPUTS_DEPTH}): save them as a tuple of "
                      "tensors or {'args': (...), 'kwargs': {...}}") from None
    except Exception as exc:  # a zip that is no torch.save file, or one holding more than tensors and containers
        why = f"torch.load: {_load_failure(exc)}"
        raise _refuse(f"{path}: not a file torch.load reads with weights_only=True ({why}); "
                      "save the inputs with torch.save (tensors, lists, tuples, dicts, numbers)") from None


def _children(value) -> list | tuple | None:
    """What pytree walks inside a loaded value (a dict's values, a list's or tuple's items); None for a leaf."""
    if isinstance(value, dict):
        return list(value.values())
    return value if isinstance(value, (list, tuple)) else None


def _check_structure(path: str, saved) -> None:
    """click.BadParameter when the loaded structure nests deeper than MAX_INPUTS_DEPTH, holds itself, or
    reaches more than MAX_INPUTS_VALUES values counted as a walk reaches them (a container held twice, twice).

    Iterative, and each container is walked once (``reached`` remembers by id what it reaches), so this walk
    stays as small as the file while the walks after it (pytree, the runtime's) get a bounded tree."""
    if _children(saved) is None:
        return
    reached: dict[int, int] = {}  # id of a container walked whole → values reached through it, itself included
    open_ids = {id(saved)}
    frames = [[saved, iter(_children(saved)), 1]]  # [container, its items to walk, values reached so far]
    total = 1
    fix = "save the inputs as a tuple of tensors or {'args': (...), 'kwargs': {...}}"
    while frames:
        frame = frames[-1]
        child = next(frame[1], frames)  # frames: the end marker, never an item
        if child is frames:
            frames.pop()
            open_ids.discard(id(frame[0]))
            reached[id(frame[0])] = frame[2]
            if frames:
                frames[-1][2] += frame[2]
            continue
        if id(child) in reached:  # a container met again: pytree walks it again
            count = reached[id(child)]
        elif _children(child) is None:
            count = 1
        elif id(child) in open_ids:
            raise _refuse(f"{path}: a container in it holds itself (a cycle), which no call can take; {fix}")
        elif len(frames) >= MAX_INPUTS_DEPTH:
            raise _refuse(f"{path}: its containers nest more than {MAX_INPUTS_DEPTH} levels deep; {fix}")
        else:
            frames.append([child, iter(_children(child)), 1])
            open_ids.add(id(child))
            total += 1
            _check_values(path, total, fix)
            continue
        frame[2] += count
        total += count
        _check_values(path, total, fix)


def _check_values(path: str, total: int, fix: str) -> None:
    if total > MAX_INPUTS_VALUES:
        raise _refuse(f"{path}: it holds more than {MAX_INPUTS_VALUES:,} values, counting a container as often as it "
                      f"is reached (one list held by two others is walked twice); {fix}, each container held once")


def _tensors(saved):
    """(where, tensor) for each tensor a walk reaches, where as the subscripts that reach it (``['args'][0]``);
    only after _check_structure, which bounds how many there are."""
    stack = [("", saved)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, torch.Tensor):
            yield where or "the top level", value
        elif isinstance(value, dict):
            stack.extend((f"{where}[{key!r}]", item) for key, item in reversed(value.items()))
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{where}[{index}]", item) for index, item in reversed(list(enumerate(value))))


def _check_dense_bytes(path: str, saved, file_bytes: int, limits) -> None:
    """click.BadParameter when the tensors, as the program reads them (dense: numel × element size), would take
    more than the archive limits allow for the file's size: the inflate ratio (above its floor) and the bound
    on what one load extracts. A 1.5 KB file held zeros(1, 4).expand(2**26, 4) (stride 0) and the runtime's
    dense copy took 1 GiB."""
    from aotcuda.runtime.archive import GiB, MiB

    total = 0
    for where, tensor in _tensors(saved):
        try:
            size = tensor.numel() * tensor.element_size()
        except RuntimeError:  # a nested tensor has no one size: the program's input checks refuse it by name
            continue
        total += size
        over_ratio = (limits.max_ratio and total > limits.ratio_floor
                      and total > limits.max_ratio * max(file_bytes, 1))
        if not over_ratio and not (limits.max_extract_bytes and total > limits.max_extract_bytes):
            continue
        expanded = " (an expanded view: a stride of 0 repeats the elements it holds)" if 0 in tensor.stride() \
            else ""
        limit, variable = ((f"{limits.max_ratio:g}x the file's {file_bytes:,} bytes", "AOTCUDA_MAX_COMPRESSION_RATIO")
                           if over_ratio else (f"{limits.max_extract_bytes / GiB:.2f} GiB",
                                               "AOTCUDA_MAX_EXTRACT_BYTES"))
        raise _refuse(f"{path}: its tensors would take {total / MiB:.1f} MiB dense, more than the limit of {limit}; "
                      f"the tensor at {where} (shape {tuple(tensor.shape)}, strides {tuple(tensor.stride())}"
                      f"{expanded}) takes {size / MiB:.1f} MiB. Save the inputs dense (tensor.contiguous()), or, "
                      f"if you trust this file, set {variable} (0: no limit)")


def _args_and_kwargs(path: str, saved) -> tuple[tuple, dict]:
    """The call a loaded inputs file holds (load_inputs), or click.BadParameter saying what the file must hold."""
    forms = "{'args': (...), 'kwargs': {...}}, {name: value}, a tensor, or a list of tensors"
    if isinstance(saved, dict) and "args" in saved:
        others = [key for key in saved if key not in ("args", "kwargs")]
        args, kwargs = saved["args"], saved.get("kwargs")
        if others:
            raise _refuse(f"{path}: holds {clipped(repr(others[0]), 80)} beside 'args'; the form "
                          "{'args': (...), 'kwargs': {...}} has only those two keys (a dict of arguments by name has "
                          "no 'args')")
        if isinstance(args, torch.Tensor):
            args = (args,)  # one positional argument, as a bare tensor file is
        if not isinstance(args, (list, tuple)):
            raise _refuse(f"{path}: its 'args' has type {type(args).__name__}; it must be a tuple or list of the "
                          "positional arguments, e.g. {'args': (x,), 'kwargs': {}}")
        kwargs = {} if kwargs is None else kwargs
        _check_names(path, kwargs, "its 'kwargs'")
        return tuple(args), dict(kwargs)
    if isinstance(saved, dict):
        _check_names(path, saved, f"it is a dict, so it must be {forms}; as arguments by name, it")
        return (), dict(saved)  # {name: value}: forward's arguments by name
    if isinstance(saved, torch.Tensor):
        return (saved,), {}
    if isinstance(saved, (list, tuple)):
        return tuple(saved), {}
    raise _refuse(f"{path}: holds a value of type {type(saved).__name__}; expected {forms}")


def _check_names(path: str, kwargs, what: str) -> None:
    if not isinstance(kwargs, dict):
        raise _refuse(f"{path}: {what} has type {type(kwargs).__name__}; it must be a dict of arguments by name, "
                      "e.g. {'args': (x,), 'kwargs': {'mask': m}}")
    key = next((key for key in kwargs if not isinstance(key, str)), None)
    if key is not None:
        raise _refuse(f"{path}: {what} has the key {key!r} ({type(key).__name__}); its keys must be forward's "
                      "argument names (str), e.g. {'args': (x,), 'kwargs': {'mask': m}}")


def load_inputs(path: str) -> tuple[tuple, dict]:
    """inputs.pt as saved by ``aotcuda lower --save-inputs``: {"args": tuple, "kwargs": dict}, {name: value}
    (forward's arguments by name), or a bare tensor / tuple / list of tensors → (args, kwargs).

    Raises click.BadParameter, naming the problem and the fix, for: a path that is not a regular file; a file
    that starts as a zip (torch.load then reads it as one) that Python's zipfile cannot read, or whose entries
    would inflate past the archive limits (checked from the declared sizes before anything is inflated:
    torch.load inflates a deflated record whole, a 256 KiB file made a 256 MiB tensor); a pickle (data.pkl) too
    large, or whose opcodes would build more than inputs of MAX_INPUTS_VALUES values need (_check_pickles,
    before torch.load runs any of it); a file torch.load
    cannot read with weights_only=True; a structure too deep, cyclic or large to walk (_check_structure);
    tensors whose dense size is out of proportion to the file (_check_dense_bytes); another structure.
    A file that does not start as a zip is refused: torch.load would try it as a tar archive (the pre-1.6
    format), whose pax headers Python 3.11.7's tarfile scans in quadratic time.
    """
    limits = _inputs_limits()
    opened = _open_regular(path)
    path = clipped(path, SHOWN_PATH)  # what every refusal below quotes: a name of 4 KB made 4 KB lines
    with opened:
        _check_holes(path, opened, limits)  # before a byte is copied (a copy without SEEK_DATA writes the zeros)
        handle = _private_copy(path, opened, limits)
    with handle:
        _refuse_other_formats(path, handle)
        if not _starts_with(handle, ZIP_MAGIC):
            # torch.load tries any other file as a tar archive first (its pre-1.6 format), and Python's tarfile
            # scans pax headers with a quadratic pattern (CVE-2024-6232; 3.11.7): a 300 KB file held the CLI at
            # full CPU for a minute, 10 MB for hours. torch.save has written zip archives since torch 1.6.
            raise _refuse(f"{path} is not a zip archive, which torch.save writes (since torch 1.6; the older "
                          "formats are not read here): save the inputs again with torch.save, e.g. "
                          "torch.save({'args': (x,)}, 'inputs.pt')")
        infos = _check_inputs_archive(path, handle, limits)
        _refuse_a_package(path, infos)
        _check_pickles(path, handle, infos, limits)
        saved = _torch_load(path, handle)
        file_bytes = os.fstat(handle.fileno()).st_size
    _check_structure(path, saved)
    _check_dense_bytes(path, saved, file_bytes, limits)
    return _args_and_kwargs(path, saved)
