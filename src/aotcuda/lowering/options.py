"""lower()'s options and example inputs checked before any work: a value of the wrong kind was taken as it came
(allow_fallbacks="False" is true), or failed later in torch's words (an Inductor option name with a typo, at the
compile; example inputs that do not fit forward, at the export; a meta tensor, as it was moved)."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterator

import torch

from aotcuda.errors import clipped, names_quoted, quoted


def check_options(allow_fallbacks, inductor_configs, progress) -> None:
    """Raise TypeError (ValueError for an Inductor option torch does not have) naming the option and the fix."""
    if not isinstance(allow_fallbacks, bool):
        raise TypeError(f"allow_fallbacks must be True or False, got {quoted(allow_fallbacks)} "
                        f"({type(allow_fallbacks).__name__}), which would be taken for "
                        f"{bool(_truth(allow_fallbacks))}; pass allow_fallbacks=True or allow_fallbacks=False")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a function called as progress(step, seconds), or None; got "
                        f"{quoted(progress)} ({type(progress).__name__})")
    if progress is not None:
        _check_progress_takes_two(progress)
    if inductor_configs is not None:
        check_inductor_configs(inductor_configs)


def _check_progress_takes_two(progress) -> None:
    """TypeError when ``progress`` cannot be called with two arguments (a ``lambda step: ...``): the first step
    raised "<lambda>() takes 1 positional argument but 2 were given", which named neither progress nor lower."""
    try:
        signature = inspect.signature(progress)
    except (TypeError, ValueError):  # a builtin or C callable: no signature to read; it says for itself
        return
    try:
        signature.bind("export", None)
    except TypeError as exc:
        raise TypeError(f"progress is called as progress(step, seconds) (seconds None as a step starts), but "
                        f"{getattr(progress, '__name__', type(progress).__name__)}{clipped(signature, 100)} cannot "
                        f"take those two arguments ({exc}); give it two parameters, e.g. "
                        "lambda step, seconds: print(step, seconds)") from None


def _truth(value) -> bool:
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - an object whose __bool__ raises is taken for nothing
        return False


def check_inductor_configs(configs) -> None:
    """``configs`` as Inductor reads them: a dict of option names it has (``torch._inductor.config``, dotted for
    nested ones, e.g. "cpp.weight_prepack"), each switch (an option whose default is True or False) given a bool,
    an int or None (some are tristate), no ``aot_inductor.output_path`` (torch refuses it at the compile:
    package_path says where the package goes), and none that makes a package aotcuda.load refuses (lowered, and
    refused only at load: C++ sources without a library, ``package_cpp_only``; weights outside the library in
    another format than "binary_blob"), and no ``aot_inductor.use_runtime_constant_folding`` (torch's results with it
    are wrong: see below)."""
    if not isinstance(configs, dict):
        raise TypeError(f"inductor_configs must be a dict of Inductor option names to values, got "
                        f"{type(configs).__name__}; e.g. inductor_configs={{'max_autotune': True}}")
    from torch._inductor import config as inductor_config

    defaults = inductor_config.get_config_copy()
    for name, value in configs.items():
        if not isinstance(name, str) or name not in defaults:
            close = difflib.get_close_matches(name, list(defaults), n=3) if isinstance(name, str) else []
            raise ValueError(f"inductor_configs names {quoted(name)}, which is not an option of "
                             f"torch._inductor.config (torch {torch.__version__})"
                             + (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else
                                "; see torch/_inductor/config.py for the option names"))
        if name == "aot_inductor.output_path":
            raise ValueError("inductor_configs sets 'aot_inductor.output_path', which torch refuses when it packages "
                             "the program; say where the package goes with package_path=... instead")
        if name == "aot_inductor.package_cpp_only" and value:
            raise ValueError("inductor_configs sets 'aot_inductor.package_cpp_only', which packages the C++ sources "
                             "without a compiled library: aotcuda.load refuses such a package; leave it out")
        if isinstance(defaults[name], bool) and value is not None and not isinstance(value, (bool, int)):
            raise TypeError(f"inductor_configs[{name!r}] is a switch (True or False), got {quoted(value)} "
                            f"({type(value).__name__}), which Inductor would take for {_truth(value)}; "
                            f"pass True or False")
        if name == "aot_inductor.use_runtime_constant_folding" and value:
            # torch's own AOTInductor, no aotcuda step between (torch 2.13 CPU; 2.11 CUDA): a RoPE whose rotation table
            # is sliced from a buffer gave inf on the CPU, and on CUDA wrong values that changed from call to call
            # (relative error 0.9-5.2) and, at a larger size, an illegal memory access, under torch's loader and ours
            raise ValueError("inductor_configs sets 'aot_inductor.use_runtime_constant_folding', with which torch's "
                             "AOTInductor computes wrong results (inf or values that change between calls, and an "
                             "illegal memory access on CUDA) for programs that slice a constant, such as a rotary "
                             "embedding's table, so aotcuda refuses it for every program; leave it out")

    in_so = configs.get("aot_inductor.package_constants_in_so", True)
    on_disk = configs.get("aot_inductor.package_constants_on_disk_format")
    if (on_disk is not None or not in_so) and on_disk != "binary_blob":
        # torch's default on-disk format then is pickle_weights (data/weights/), which aotcuda.load does not read
        raise ValueError(f"inductor_configs keeps the weights outside the model library (package_constants_in_so="
                         f"{in_so}, package_constants_on_disk_format="
                         f"{quoted(on_disk)}): aotcuda.load reads them there only as 'binary_blob'; set "
                         "'aot_inductor.package_constants_on_disk_format': 'binary_blob', or leave both out (weights "
                         "inside the library)")


def check_inputs_fit(model: torch.nn.Module, args: tuple, kwargs: dict) -> inspect.BoundArguments | None:
    """``model.forward``'s arguments bound to the example inputs (None where forward has no signature to read).
    Raises TypeError naming forward's signature and what was given: torch.export's bind said only "too many
    positional arguments" or "missing a required argument: 'y'", of no function, and the CLI's --dynamic the same."""
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return None
    try:
        return signature.bind(*args, **kwargs)
    except TypeError as exc:
        given = f"{len(args)} positional" + (f" and the keywords {names_quoted(kwargs)}" if kwargs else "")
        raise TypeError(f"the example inputs do not fit {type(model).__name__}.forward"
                        f"{clipped(signature, 200)}: {exc} ({given} given); give args one example input per "
                        "positional argument of forward, in order, and kwargs the others by name") from None


def check_example_tensors(model: torch.nn.Module, args: tuple, kwargs: dict) -> None:
    """TypeError naming an example input that is a NumPy array or scalar (torch.export advised register_dataclass
    and register_pytree_node, where the fix is a tensor: a new user's trial, 2026-12-05), an iterator (a generator:
    the same advice), one that is not dense (sparse: Inductor's compile failed on it), or a parameter, buffer or
    example input on the meta device (a shape without values: a model built under
    torch.device("meta") or accelerate's init_empty_weights, weights never loaded), with the fix: moving it to
    the target device raised torch's raw "NotImplementedError: Cannot copy out of meta tensor; no data!"."""
    import sys

    import torch.utils._pytree as pytree

    numpy = sys.modules.get("numpy")  # an array can only come from numpy once it is imported

    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        name = next((name for name, tensor in named if tensor.is_meta), None)
        if name is not None:
            raise TypeError(f"the model's {kind} {quoted(name)} is on the meta device: it has a shape but no values "
                            "(the model was built under torch.device('meta') or init_empty_weights and its weights "
                            "never loaded); load them first, e.g. model.to_empty(device='cpu') then "
                            "model.load_state_dict(weights), or model.load_state_dict(weights, assign=True)")
    _refuse_packed_weights(model)
    for path, value in pytree.tree_flatten_with_path((args, kwargs))[0]:
        where = ("args" if path[0] == pytree.SequenceKey(0) else "kwargs") + pytree.keystr(path[1:])
        if numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic)):
            array = isinstance(value, numpy.ndarray)
            fix = "torch.from_numpy(value) (or torch.as_tensor(value))" if array else "torch.as_tensor(value)"
            raise TypeError(f"example input {where} is a NumPy {'array' if array else 'scalar'} "
                            f"({type(value).__module__}.{type(value).__name__}); torch.export traces tensors: pass "
                            f"{fix} in its place")
        if isinstance(value, Iterator):  # torch.export: "Unsupported input type <class 'generator'>", then its advice
            raise TypeError(f"example input {where} is a {type(value).__name__}, an iterator, which torch.export does "
                            "not read; pass its items as a tuple or list, e.g. tuple(...)")
        if not isinstance(value, torch.Tensor):
            continue
        if value.layout != torch.strided:  # Inductor failed at the compile: "Cannot access storage of SparseTensorImpl"
            raise TypeError(f"example input {where} is a {value.layout} tensor, but lowering traces dense (strided) "
                            "tensors, and the package takes dense ones; pass a dense one, e.g. tensor.to_dense()")
        if value.is_meta:
            raise TypeError(f"example input {where} is a meta tensor (shape {tuple(value.shape)}, no values), which "
                            f"cannot be moved to the device lowered for; pass a tensor with values, e.g. "
                            f"torch.zeros({', '.join(map(str, value.shape))}, dtype={value.dtype})")


def _refuse_packed_weights(model: torch.nn.Module) -> None:
    """TypeError naming a module whose weights are a TorchScript object (``torch.ao.quantization.quantize_dynamic``'s
    quantized Linear holds ``LinearPackedParamsBase``): torch.export ended in ``AttributeError:
    __torch__.torch.classes.quantized.LinearPackedParamsBase ... does not have a field with name '__obj_flatten__'``,
    which named neither the module nor a way out (the fourth new user, 2026-12-06)."""
    for name, module in model.named_modules():
        held = next((attribute for attribute, value in vars(module).items()
                     if isinstance(value, torch.ScriptObject) and not _flattens(value)), None)
        if held is None:
            continue
        kind = f"{type(module).__module__}.{type(module).__name__}"
        raise TypeError(
            f"the model's module {quoted(name or 'model')} ({kind}) holds its weights as a TorchScript object "
            f"({quoted(held)}, packed by torch.ao.quantization), which torch.export cannot trace. Lower the float "
            "model, or keep the quantized weights as tensors: an int8 weight buffer and its scales, the product "
            "written as (x @ weight.to(x.dtype).T) * scale, which Inductor compiles (weight-only int8)")


def _flattens(value: torch.ScriptObject) -> bool:
    """Whether torch.export can trace a TorchScript object: its class defines ``__obj_flatten__``."""
    try:
        return bool(value._has_method("__obj_flatten__"))
    except (AttributeError, RuntimeError):
        return False


def model_kind_fix(model) -> str:
    """What to pass instead of ``model``, which is not a torch.nn.Module (or is a TorchScript one), for the error
    that says so: torch.export's own refusal of a ScriptModule pointed at a torch-internal converter."""
    from torch.export import ExportedProgram

    if isinstance(model, torch.jit.ScriptModule):
        return ("a TorchScript module (torch.jit.script or torch.jit.trace), which torch.export does not trace; pass "
                "the nn.Module it was made from")
    if isinstance(model, ExportedProgram):
        return "an ExportedProgram; pass its module, model.module(), with the example inputs"
    if callable(model) and not isinstance(model, type):
        return (f"{type(model).__name__}; lower() takes a torch.nn.Module: wrap the function in one whose forward "
                "calls it")
    if isinstance(model, type) and issubclass(model, torch.nn.Module):
        return f"the class {model.__name__}, not a module; pass an instance, e.g. {model.__name__}(...)"
    return type(model).__name__
