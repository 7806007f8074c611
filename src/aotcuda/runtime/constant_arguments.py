"""The non-tensor arguments a package was lowered with (``scale=2.0``, ``use_cache=False``), against a call's.

torch.export specializes a Python scalar argument into the program: the package computes with the exported
value whatever a call passes. Eager computes with what the call passes, or with forward's default when the
call leaves the argument out. So a call is run only where eager would compute the same thing:

- an argument passed with the exported value runs (by keyword, or by position as ``inspect.Signature.bind``
  binds it: ``p(x, 2.0, True)`` for ``forward(x, scale=1.0, use_relu=False)``);
- one left out runs where the exported value is forward's default, and is refused where it is not (or
  where forward has no default): eager would compute with the default, the package with the exported value;
- one the example call left out (so the package computes with forward's default) runs when passed with
  the default, and is refused with another value.

Every refusal is an InputError naming the argument, the value the program computes with, forward's
default and the fix. The defaults come from the signature's "forward_parameters", which aotcuda.lower
records since this check; a package without it (an older aotcuda, or a signature written without the
module) behaves as before: a left-out keyword is filled with the exported value, a left-out positional
constant or an argument the package does not take is refused as a count or unknown-keyword error.

Both fields are package content, read at load: one that is present but malformed (a leaf that is no int
leaf of the input spec, or names a tensor input; a default or value that is no plain JSON scalar,
``package_format.plain_value``, the same test the lowering records them by; a parameter without a name, or
named twice) is refused with a PackageError naming the field, never read in part: the program would check
calls against values it was not exported with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from aotcuda.errors import InputError, PackageError, clipped, quoted
from aotcuda.package_format import plain_value
from aotcuda.runtime.keywords import _args_and_kwargs_specs, _children, _shown as _name_shown, leaf_names

_NO_DEFAULT = object()
_LEFT_OUT = object()  # bind's mark of a constant left out where eager computes with another value


@dataclass(frozen=True)
class Parameter:
    """One of forward's named parameters, as the signature records it."""

    name: str
    positional: bool
    default: object = _NO_DEFAULT  # _NO_DEFAULT: none, or one the package could not record (has_default)
    has_default: bool = False


@dataclass(frozen=True)
class ConstantInput:
    """A non-tensor input fixed at lowering: its flat leaf, value and name as the caller writes it
    (``scale``, ``extra['scale']``); ``parameter``/``position``: forward's parameter and its place among
    the exported positional arguments, for a constant that is a whole argument (else None)."""

    leaf: int
    value: object
    name: str
    parameter: str | None = None
    position: int | None = None


def same_value(given, value) -> bool:
    """The check a passed constant must pass: the same plain type (``plain_value``) and value (``0`` is not
    ``False``; nan is nan; ``-0.0`` is not ``0.0``). Anything else is not the same: a list's ``==`` would compare what
    it holds (tensors).

    Why the sign of zero: ``-0.0 == 0.0``, so a program lowered with ``scale=0.0`` ran a call with ``scale=-0.0``,
    computing with ``0.0`` where eager computes with ``-0.0``: ``x * scale`` gave ``+0`` for a positive x where eager
    gives ``-0``, and ``1 / (x * scale)`` ``inf`` where eager gives ``-inf`` (a silent wrong answer)."""
    if type(given) is not type(value) or not plain_value(value):
        return False
    if given != given and value != value:  # nan
        return True
    return given == value and (type(value) is not float or value != 0 or
                               math.copysign(1.0, given) == math.copysign(1.0, value))


class ConstantArguments:
    """A package's constant inputs and forward's parameters, read once from its signature (both checked
    for their types here: the signature is package content)."""

    def __init__(self, signature: dict | None, in_spec, positional_names: list[str | None], path: str = "the package",
                 tensor_inputs: list[str] | None = None):
        """tensor_inputs: the names of the program's tensor inputs (the signature's inputs, in order), when known:
        a constant at one of their leaves is refused. Raises PackageError for malformed fields (module docstring)."""
        self._in_spec, self._names = in_spec, positional_names
        self.parameters = _parameters((signature or {}).get("forward_parameters"), path)
        self.constants = _constants((signature or {}).get("constant_inputs"), in_spec, positional_names, path,
                                    tensor_inputs)
        self.values = {c.leaf: c.value for c in self.constants}
        self._by_name = {p.name: p for p in self.parameters or ()}

    def unknown_keyword_hint(self) -> str:
        """What bind_keywords adds to its unknown-keyword message: a package that does not record forward's
        parameters cannot tell an argument left at its default at lowering from a misspelt one."""
        if self.parameters is not None:
            return ""
        return ("; this package does not record forward's parameters (lowered by an older aotcuda, or not by "
                "aotcuda.lower), so an argument the example call left out cannot be passed, even with its default: "
                "leave it out, or lower the model again to accept it")

    def shown(self) -> dict[str, object]:
        """{argument as the caller writes it: value} of every constant input (``Program.constant_inputs``)."""
        return {c.name: c.value for c in self.constants}

    def bind(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """(args, kwargs) with forward's parameters bound as eager binds them: positional arguments past
        the exported ones moved to their parameter's keyword, arguments the program has no input for (left
        at forward's default at lowering) checked against that default and dropped, and left-out
        constants filled with the exported value where that is forward's default (else marked, for
        ``check`` to refuse). Raises InputError."""
        args_spec, kwargs_spec = _args_and_kwargs_specs(self._in_spec)
        if args_spec is None:
            return args, kwargs
        kwargs = dict(kwargs)
        if self.parameters is not None:
            args = self._positional_to_keywords(args, kwargs, args_spec.num_children)
            self._drop_defaults_left_at_lowering(kwargs, set(kwargs_spec.context))
        for constant in self.constants:
            if constant.parameter is None or self._given(constant, args, kwargs):
                continue
            keyword = constant.parameter if constant.position is None else self._names[constant.position]
            parameter = self._by_name.get(constant.parameter)
            if self.parameters is None:  # an older package: keywords filled with the exported value, as before
                if constant.position is None:
                    kwargs[keyword] = constant.value
            elif keyword is not None:  # check() refuses a left-out one after bind_keywords named missing tensors
                left_out = parameter is None or not same_value(constant.value, parameter.default)
                kwargs[keyword] = _LEFT_OUT if left_out else constant.value
        return args, kwargs

    def check(self, flat: list) -> None:
        """Refuse a call that passes another value where the program was exported with a constant: the
        package computes with the exported value, so ``use_cache=True`` on a ``use_cache=False`` package
        would silently answer for False; and one that ``bind`` found left out where eager would compute
        with another value. ``flat``: the call's leaves, already checked to have the spec."""
        left_out = [(c, self._by_name.get(c.parameter)) for c in self.constants if flat[c.leaf] is _LEFT_OUT]
        if left_out:
            raise InputError(_left_out_message(left_out))
        for constant in self.constants:
            self._check_value(constant, flat[constant.leaf])

    def check_named(self, given: dict) -> None:
        """Refuse another value for a constant given by the name ``shown`` lists it under (an inputs file of
        `aotcuda run` that names the tensors as `aotcuda inspect` lists them, and the arguments fixed at lowering as
        it shows them), as ``check`` refuses a call's; one left out is the exported value (serve's form)."""
        for constant in self.constants:
            if constant.name in given:
                self._check_value(constant, given[constant.name], may_leave_out=True)

    def _check_value(self, constant: ConstantInput, given, may_leave_out: bool = False) -> None:
        """InputError when ``given`` is not the value the program was exported with at ``constant``."""
        if same_value(given, constant.value):
            return
        parameter = self._by_name.get(constant.parameter) if constant.parameter else None
        may_leave_out = may_leave_out or (self.parameters is None and constant.parameter and constant.position is None) \
            or (parameter is not None and same_value(constant.value, parameter.default))
        fix = f"pass {_assignment(constant)}" + (" or leave it out" if may_leave_out else "")
        # where the types differ, say so: "is 2.0, but the program was exported with 2.0" (a float subclass); by module
        # too where the names are alike: NumPy 2's bool is named "bool" ("is True (type bool, not bool)")
        given_type = type(given).__name__
        if given_type == type(constant.value).__name__:
            given_type = f"{type(given).__module__}.{type(given).__qualname__}"
        kinds = "" if type(given) is type(constant.value) or given is None or _is_tensor(given) else \
            f" (type {clipped(given_type, 80)}, not {type(constant.value).__name__})"
        # an int exported as a constant is often a position that changes every call (Llama-2's start_pos): one package
        # per value is no fix for it, a tensor read with .item() is (the new user's trial, nu40)
        per_call = (f". A value that changes from call to call (a decode position) must reach forward as a 0-d tensor, "
                    f"read there with .item() and bounded with torch._check (sp = {constant.name}.item(); "
                    "torch._check(sp >= 0); torch._check(sp + seq <= max_len)), and be lowered that way"
                    ) if type(constant.value) is int else ""
        raise InputError(f"argument {constant.name!r} is {_value_text(given)}{kinds}, but the program was exported "
                         f"with {constant.value!r} there and computes with that value whatever is passed; {fix}, "
                         f"or lower the model again with the value you need{per_call}")

    def _given(self, constant: ConstantInput, args: tuple, kwargs: dict) -> bool:
        if constant.position is None:
            return constant.parameter in kwargs
        return constant.position < len(args) or self._names[constant.position] in kwargs

    def _positional_to_keywords(self, args: tuple, kwargs: dict, count: int) -> tuple:
        """Positional arguments past the ``count`` exported ones, bound by forward's parameter order."""
        positional = [p for p in self.parameters if p.positional]
        if len(args) > len(positional) > count:  # forward takes more than the program's inputs: those are fixed
            raise InputError(self._too_many_message(positional, count, len(args)))
        if len(args) <= count or len(args) > len(positional):
            return args  # bind_keywords names a count problem
        for position in range(count, len(args)):
            name = positional[position].name
            if name in kwargs:
                raise InputError(f"argument {name!r} given twice, as positional #{position} and by keyword")
            kwargs[name] = args[position]
        return args[:count]

    def _too_many_message(self, positional: list[Parameter], count: int, given: int) -> str:
        """Too many positional arguments where forward's positional parameters past the program's inputs are
        arguments fixed at lowering: "takes 2 to 3 (x, pos, scale; scale is fixed at 0.5)", not "takes 2"."""
        fixed = {c.parameter: c.value for c in self.constants if c.parameter is not None}
        described = []
        for parameter in positional[count:]:  # names escaped: load refuses unprintable ones, this holds without it
            name = _name_shown(parameter.name)
            if parameter.name in fixed:
                described.append(f"{name} is fixed at {fixed[parameter.name]!r}")
            elif parameter.has_default and parameter.default is not _NO_DEFAULT:
                described.append(f"{name} is fixed at forward's default {parameter.default!r}")
            else:
                described.append(f"{name} is fixed at lowering")
        names = ", ".join(_name_shown(p.name) for p in positional)
        return (f"the program takes {count} to {len(positional)} positional argument(s) ({names}; "
                f"{'; '.join(described)}), got {given}; call it as the exported module was called")

    def _drop_defaults_left_at_lowering(self, kwargs: dict, keywords: set[str]) -> None:
        """Keywords the program has no input for but forward has as a parameter: the example call left them
        out, so the program computes with forward's default. That value runs; another is refused."""
        taken = keywords | set(filter(None, self._names))
        for key in [k for k in kwargs if k not in taken and k in self._by_name]:
            parameter, value = self._by_name[key], kwargs[key]
            if parameter.has_default and same_value(value, parameter.default):
                del kwargs[key]
                continue
            if not parameter.has_default:
                continue  # forward needs it, yet the program does not take it: bind_keywords refuses it
            default = "" if parameter.default is _NO_DEFAULT else f" {parameter.default!r}"
            leave = f"leave it out (or pass{default})" if default else "leave it out"
            again = (f"an example {key} in kwargs (a tensor like this one), to take it as an input"
                     if _is_tensor(value) else f"{key}={quoted(value)} in kwargs")
            raise InputError(f"argument {key!r} is {_value_text(value)}, but the program was exported with {key}'s "
                             f"default{default} (the example call left it out) and computes with that value whatever "
                             f"is passed; {leave}, or lower the model again with {again}")


def _left_out_message(refused: list[tuple[ConstantInput, Parameter | None]]) -> str:
    described = []
    for constant, parameter in refused:
        if parameter is None or not parameter.has_default:
            eager = "the module's forward has no default for it, so eager needs it passed"
        elif parameter.default is _NO_DEFAULT:
            eager = "eager with the module's default, which the package does not record"
        else:
            eager = f"eager with the module's default {parameter.default!r}"
        described.append(f"{constant.name!r} (the program computes with {constant.value!r}; {eager})")
    several = len(refused) > 1
    return (f"argument{'s' if several else ''} left out where the program was exported with another value than "
            f"the module's default: {', '.join(described)}; pass {', '.join(_assignment(c) for c, _ in refused)}, "
            f"or lower the model again with the value{'s' if several else ''} you want")


def _value_text(value) -> str:
    """A call's value as a refusal names it: a tensor by its shape and dtype (its repr is lines of numbers), any
    other value ``quoted``."""
    if _is_tensor(value):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return quoted(value)


def _is_tensor(value) -> bool:
    """Whether ``value`` is a tensor by its real type: ``isinstance`` reads a ``__class__`` an object may fake, and a
    refusal then read its ``.shape`` (a raw AttributeError for an object claiming to be a tensor; breakcall,
    2026-12-07)."""
    return issubclass(type(value), torch.Tensor)


def _assignment(constant: ConstantInput) -> str:
    return f"{constant.parameter}={constant.value!r}" if constant.parameter else repr(constant.value)


def _refuse(path: str, field: str, what: str):
    raise PackageError(f"{path!r}: its aotcuda signature's {field} {what}; the package is damaged or hostile "
                       "(aotcuda.lower writes none such), lower the model again")


def _shown(value) -> str:
    return clipped(repr(value), 60)


def _parameters(recorded, path: str) -> list[Parameter] | None:
    if recorded is None:
        return None  # not recorded: an older package
    if not isinstance(recorded, list):
        _refuse(path, "forward_parameters", f"is a {type(recorded).__name__}, not a list")
    parameters, names = [], set()
    for index, entry in enumerate(recorded):
        field = f"forward_parameters[{index}]"
        if not (isinstance(entry, dict) and type(entry.get("name")) is str):
            _refuse(path, field, "has no name (a string)")
        if entry["name"] in names:
            _refuse(path, field, f"names {_shown(entry['name'])} a second time")
        names.add(entry["name"])
        if "default" in entry and not plain_value(entry["default"]):
            _refuse(path, f"{field} default", f"is {_shown(entry['default'])}, not a plain JSON scalar (null, a bool, "
                    "a number or a string: the defaults lowering records)")
        has_default = entry.get("has_default") is True or "default" in entry
        parameters.append(Parameter(entry["name"], entry.get("positional") is True,
                                    entry["default"] if "default" in entry else _NO_DEFAULT, has_default))
    return parameters


def _constants(recorded, in_spec, names: list[str | None], path: str,
               tensor_inputs: list[str] | None = None) -> tuple[ConstantInput, ...]:
    """The signature's "constant_inputs" ({"leaf", "value"}), each named and placed from the input spec."""
    if recorded is None or in_spec is None:
        return ()
    if not isinstance(recorded, list):
        _refuse(path, "constant_inputs", f"is a {type(recorded).__name__}, not a list")
    values = {}
    for index, entry in enumerate(recorded):
        field = f"constant_inputs[{index}]"
        leaf = entry.get("leaf") if isinstance(entry, dict) else None
        if type(leaf) is not int or not 0 <= leaf < in_spec.num_leaves:
            _refuse(path, f"{field} leaf", f"is {_shown(leaf)}, not a leaf of the input spec (an int from 0 to "
                    f"{in_spec.num_leaves - 1})")
        if leaf in values:
            _refuse(path, f"{field} leaf", f"{leaf} is given a second time")
        if "value" not in entry or not plain_value(entry["value"]):
            _refuse(path, f"{field} value", f"is {_shown(entry.get('value'))}, not a plain JSON scalar (null, a bool, "
                    "a number or a string: the constants lowering records)")
        values[leaf] = entry["value"]
    whole = _whole_arguments(in_spec, names)
    try:
        shown = leaf_names(in_spec)
    except ValueError:  # a container type registered with torch's pytree without key paths
        shown = [f"#{leaf}" for leaf in range(in_spec.num_leaves)]
    constants = []
    for leaf, value in sorted(values.items()):
        parameter, position = whole.get(leaf, (None, None))
        name = parameter or (names[position] if position is not None and position < len(names) else None)
        if name is not None and name in (tensor_inputs or ()):
            _refuse(path, "constant_inputs", f"gives a value at leaf {leaf}, the tensor input {_shown(name)}")
        constants.append(ConstantInput(leaf, value, name or argument_name(shown[leaf]), parameter or name, position))
    if tensor_inputs is not None and len(values) > in_spec.num_leaves - len(tensor_inputs):
        _refuse(path, "constant_inputs", f"lists {len(values)} constants, but {len(tensor_inputs)} of the input "
                f"spec's {in_spec.num_leaves} leaves are tensor inputs: a constant names a tensor input")
    return tuple(constants)


def _whole_arguments(in_spec, names: list[str | None]) -> dict[int, tuple[str | None, int | None]]:
    """{flat leaf: (keyword, None) or (None, position)} of the arguments that are one leaf each."""
    args_spec, kwargs_spec = _args_and_kwargs_specs(in_spec)
    if args_spec is None:
        return {}
    whole, leaf = {}, 0
    for position, child in enumerate(_children(args_spec)):
        if child.is_leaf():
            whole[leaf] = (None, position)
        leaf += child.num_leaves
    for key, child in zip(kwargs_spec.context, _children(kwargs_spec)):
        if child.is_leaf():
            whole[leaf] = (key, None)
        leaf += child.num_leaves
    return whole


def argument_name(name: str, arg_names: list | None = None) -> str:
    """A leaf name of ``keywords.leaf_names`` (what the signature's "constant_inputs" record) as the caller
    writes the argument: ``'scale'`` → scale, ``'extra'['scale']`` → extra['scale'], ``#1`` → forward's
    second argument name where ``arg_names`` (its "forward_arg_names") has it."""
    # a leaf's number in ASCII digits, at most 18 (a leaf count is far below): str.isdigit() is true of '²' and of
    # 5,000 digits, where int() raised a raw ValueError for `aotcuda inspect` of a package naming a constant so
    position = name[1:]
    if name.startswith("#") and position.isascii() and position.isdigit() and len(position) <= 18 and arg_names \
            and int(position) < len(arg_names):
        return str(arg_names[int(position)])
    if name.startswith("'"):
        key, _, rest = name[1:].partition("'")
        return key + rest
    return name
