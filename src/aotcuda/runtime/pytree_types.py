"""The container types of a package's input/output pytree specs, in a process that has not imported them.

An AOTI package stores its call spec as torch pytree JSON, which names each container by its serialized
type name (``"transformers.modeling_outputs.CausalLMOutputWithPast"``). ``treespec_loads`` finds the type
only where the module that registers it with torch's pytree has been imported: for transformers' output
classes that is ``transformers.modeling_outputs`` (``import transformers`` alone is not enough), so a
fresh process that loads a package lowered from LlamaForCausalLM raises ``NotImplementedError:
Deserializing ... in pytree is not registered``.

So, at lowering time, the signature records every container type of the specs that is not one of torch's
own, with the module that defines it (``pytree_types``, see package_format.py); at load time,
``load_spec`` imports those modules where they are importable and reads the spec. Where a module cannot be
imported, the structure comes back plain, with one UserWarning naming the type and the module:

- a container whose context is its field names (transformers' ModelOutput, NamedTuple-like dict types)
  becomes a ``dict`` {field name: value}, in the same order;
- any other container becomes a ``tuple`` of its children, in order.

Importing a module runs that module's code; so does loading the package's model library, which is compiled
code. So only a module the library's own type names lie in is imported (``home_module``): the signature, which
may be edited without the library, can name which of those modules holds a type, not another module.
"""

from __future__ import annotations

import enum
import importlib
import json
import warnings

import torch.utils._pytree as pytree

from aotcuda.errors import PackageError, terminal_clipped
from aotcuda.runtime import named_tuples  # noqa: F401 - registers the stored namedtuple node type before a spec is read
from aotcuda.package_format import check_json_bounds, load_json

# The most characters of the unregistered types' description a warning quotes (before escaping).
MAX_QUOTED_TYPES = 1_000

# torch's own container types (builtins.tuple, collections.OrderedDict, ...): always registered, never recorded.
_BUILTIN_TYPES = frozenset(pytree.SUPPORTED_SERIALIZED_TYPES[cls].serialized_type_name
                           for cls in pytree.BUILTIN_TYPES if cls in pytree.SUPPORTED_SERIALIZED_TYPES)


def recorded_types(spec: pytree.TreeSpec | None) -> list[dict[str, str]]:
    """[{"type": serialized type name, "module": the module defining it}, ...] for each container type in
    `spec` that torch's pytree does not register itself, in first-seen order (empty for plain specs)."""
    found: dict[str, str] = {}
    stack = [spec] if spec is not None else []
    while stack:
        node = stack.pop()
        if node.is_leaf():
            continue
        cls = node.type
        entry = pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
        name = getattr(entry, "serialized_type_name", None)
        if isinstance(name, str) and name not in _BUILTIN_TYPES and name not in found:
            found[name] = cls.__module__
        children = node.children() if hasattr(node, "children") else node.children_specs  # torch 2.13 / 2.11
        stack.extend(reversed(list(children)))
    return [{"type": name, "module": module} for name, module in found.items()]


def load_spec(text: str, recorded: list[dict] | None, package_path: str, what: str) -> pytree.TreeSpec | None:
    """The pytree spec serialized in `text` ("" → None), importing the modules that register its types.

    `recorded` is the signature's ``pytree_types`` (may be None for packages without it: then each type's
    module is guessed from its name, the part before the last dot). Where a type stays unknown, its node
    is read as a plain dict or tuple (module docstring) and one UserWarning says so; `what` ("outputs",
    "inputs") names the spec in it.
    """
    if not text:
        return None
    check_json_bounds(text, package_path, f"the {what} call spec")  # json recurses once per level
    text = _unfound_enums_plain(text, package_path, what)
    try:
        return pytree.treespec_loads(text)
    except NotImplementedError:
        pass
    missing = _unregistered_types(text)
    recorded_modules = {entry.get("type"): entry.get("module") for entry in recorded or () if isinstance(entry, dict)}
    modules = {name: home_module(name, recorded_modules.get(name)) for name in missing}
    failures = {}
    for name, module in modules.items():
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure means: read the structure plain
            failures[name] = f"{module} ({type(exc).__name__}: {exc})"
    still_missing = _unregistered_types(text)
    if not still_missing:
        return pytree.treespec_loads(text)
    described = "; ".join(f"{name}: cannot import {failures[name]}" if name in failures else
                          f"{name}: {modules[name]} was imported but registers no type of that name with torch's "
                          f"pytree (a registration without serialized_type_name={name!r}, or with another)"
                          for name in still_missing)
    # the library's type names are outside text (a forged spec's name held ESC sequences and 100,000 characters):
    # escaped and cut, as other quoted package text
    described = terminal_clipped(described, MAX_QUOTED_TYPES)
    warnings.warn(
        f"{package_path}: its {what} use container types this process has not registered with torch's pytree "
        f"({described}). They come back plain: a container with named fields as a dict {{field: value}}, any other "
        f"as a tuple. Install the module (or import it before aotcuda.load) to get the original types.",
        UserWarning, stacklevel=4)
    return pytree.treespec_loads(json.dumps(_plain(json.loads(text), set(still_missing), package_path)))


def _unfound_enums_plain(text: str, package_path: str, what: str) -> str:
    """``text`` with each Enum member of its contexts that this process cannot find written as the string
    "Class.member", and one UserWarning naming each such Enum; ``text`` itself where every Enum is found.

    A dict keyed by Enum members stores each key as its module, class and member name; torch's
    ``enum_object_hook`` imports the module and looks the class up, and raises (ImportError, AttributeError,
    KeyError, TypeError) where that fails: an Enum defined in ``__main__`` of the lowering script, made with the
    functional API (``enum.Enum("Key", ...)``), or in a module this process cannot import."""
    if "__enum__" not in text:  # in the spec's text, the context's quotes are escaped
        return text
    unfound: dict[str, str] = {}

    def plain(value):
        if isinstance(value, list):
            return [plain(item) for item in value]
        if not isinstance(value, dict):
            return value
        if "__enum__" not in value:
            return {key: plain(item) for key, item in value.items()}
        fqn, name = str(value.get("fqn")), str(value.get("name"))
        try:
            member = pytree.enum_object_hook(value)
            if isinstance(member, enum.Enum):
                return value
            reason = f"{fqn} names no Enum: [{name!r}] of it is a {type(member).__name__}"
        except Exception as exc:  # noqa: BLE001 - whatever the lookup raises means: this process lacks the class
            reason = f"{type(exc).__name__}: {exc}"
        unfound.setdefault(fqn, reason)
        return f"{fqn.partition(':')[2]}.{name}"

    def convert(node: dict) -> dict:
        node = {**node, "children_spec": [convert(child) for child in node.get("children_spec", [])]}
        context = node.get("context")
        if not (isinstance(context, str) and '"__enum__"' in context):
            return node
        try:  # a string inside the spec, which the bounds scan did not look into: bounded on its own
            value = plain(load_json(context, package_path, "a call spec's context"))
        except PackageError:
            return node
        keys = value if isinstance(value, list) else []
        if len({json.dumps(key) for key in keys}) < len(keys):  # two members now one string: keys would merge
            return {"type": "builtins.tuple", "context": "null", "children_spec": node["children_spec"]}
        return {**node, "context": json.dumps(value)}

    protocol, root = json.loads(text)
    converted = json.dumps([protocol, convert(root)])
    if unfound:
        described = "; ".join(
            f"{terminal_clipped(fqn.partition(':')[2], 200)} of module "
            f"{terminal_clipped(fqn.partition(':')[0], 200)} ({terminal_clipped(reason, 300)})"
            for fqn, reason in unfound.items())
        warnings.warn(
            f"{terminal_clipped(package_path, 300)}: its {what} use Enum members as keys whose class this "
            f"process cannot find ({described}). Those keys come back as strings 'Class.member'. To get the members, "
            f"make each class importable under that module name before aotcuda.load (define it at the top level of "
            f"an importable module, not with enum.Enum(...) in a script's __main__), and lower the model again if "
            f"the module name changed.", UserWarning, stacklevel=5)
    return converted


def home_module(name: str, recorded) -> str:
    """The module imported to register the type ``name`` (a serialized type name of the model library's call spec):
    the signature's ``recorded`` module where ``name`` lies in it (a type's serialized name is its module's path and
    its own: ``transformers.modeling_outputs`` of ``transformers.modeling_outputs.CausalLMOutputWithPast``), else
    the part of ``name`` before its last dot, as for packages without the record.

    The signature is JSON, which anyone may edit without touching the library: a record taken as it was made load
    import any module it named, and a module's import runs its code (``unittest.__main__`` runs unittest's main and
    exits the process, ``antigravity`` opens a browser). A module the library's own type name lies in is one the
    library names, which is code anyway."""
    if isinstance(recorded, str) and name.startswith(f"{recorded}."):
        return recorded
    return name.rpartition(".")[0]


def _unregistered_types(text: str) -> list[str]:
    names: dict[str, None] = {}
    stack = [json.loads(text)[1]]
    while stack:
        node = stack.pop()
        name = node.get("type")
        if name is not None and name not in pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE:
            names[name] = None
        stack.extend(node.get("children_spec", []))
    return list(names)


def _plain(document: list, unknown: set[str], package_path: str) -> list:
    """The serialized spec with each node of an unknown type turned into a dict (when its context is the
    list of its children's field names) or a tuple."""

    def convert(node: dict) -> dict:
        children = [convert(child) for child in node.get("children_spec", [])]
        if node.get("type") not in unknown:
            return {**node, "children_spec": children}
        context = node.get("context") or "null"
        try:  # a string inside the spec, which the bounds scan did not look into: bounded on its own
            fields = load_json(context, package_path, "a call spec's context") if isinstance(context, str) else None
        except PackageError:
            fields = None
        if (isinstance(fields, list) and len(fields) == 2 and all(isinstance(part, list) for part in fields)
                and len(fields[0]) == len(children)):
            fields = fields[0]  # register_dataclass's context: [the fields holding values, the fields left None]
        named = isinstance(fields, list) and len(fields) == len(children) and all(isinstance(f, str) for f in fields)
        if named:
            return {"type": "builtins.dict", "context": json.dumps(fields), "children_spec": children}
        return {"type": "builtins.tuple", "context": "null", "children_spec": children}

    protocol, root = document
    return [protocol, convert(root)]
