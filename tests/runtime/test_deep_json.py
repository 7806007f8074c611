"""Deeply nested JSON in a package (issue 26, item 4): a 200 KB ``[[[...]]]`` in any JSON entry used to
raise a raw RecursionError from load, inspect and serve. Every JSON a package holds is now bounded in depth
before it is parsed (``package_format.load_json``), and refused with a PackageError naming the package and
the entry."""

import json
import zipfile

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from aotcuda.cli import main
from aotcuda.errors import PackageError
from aotcuda.package_format import MAX_JSON_DEPTH, json_depth, load_json
from aotcuda.runtime.program import load
from aotcuda.runtime.pytree_types import load_spec
from least_time import least_cpu_seconds

DEEP = b"[" * 100_000 + b"]" * 100_000  # 200 KB


def _signature(data: bytes) -> bytes:
    signature = json.loads(data)
    signature["pytree_types"] = "PLACEHOLDER"
    return json.dumps(signature).encode().replace(b'"PLACEHOLDER"', DEEP)


def _metadata(data: bytes) -> bytes:
    return data.rstrip()[:-1] + b', "extra": ' + DEEP + b"}"


# entry kind → (how to change the package's entries {name: data}, the entry the error names)
ENTRIES = {
    "signature": (lambda entries: {n: DEEP if n.endswith("signature.json") else d for n, d in entries.items()},
                  r"aotcuda/signature\.json nests more than the 64 levels"),
    "a deep value inside the signature": (
        lambda entries: {n: _signature(d) if n.endswith("signature.json") else d for n, d in entries.items()},
        r"aotcuda/signature\.json nests more than the 64 levels"),
    "wrapper metadata": (
        lambda entries: {n: _metadata(d) if n.endswith("wrapper_metadata.json") else d for n, d in entries.items()},
        r"the model's metadata .*wrapper_metadata\.json nests more than the 64 levels"),
    "op table": (
        lambda entries: {**entries, **{n[: -len(".so")] + ".json": b'{"nodes": ' + DEEP + b"}"
                                       for n in entries if n.endswith("wrapper.so")}},
        r"the model's op list .*wrapper\.json nests more than the 64 levels"),
}


def deep_package(source, target, kind) -> str:
    with zipfile.ZipFile(source) as zin:
        entries = {info.filename: zin.read(info) for info in zin.infolist()}
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in ENTRIES[kind][0](entries).items():
            zout.writestr(name, data)
    return str(target)


@pytest.mark.parametrize("kind", list(ENTRIES))
def test_load_refuses_deep_json_naming_the_entry(twice_pt2, tmp_path, kind):
    path = deep_package(twice_pt2, tmp_path / "deep.pt2", kind)
    with pytest.raises(PackageError, match=r"deep\.pt2': (twice/)?" + ENTRIES[kind][1]):
        load(path)


@pytest.mark.parametrize("kind", list(ENTRIES))
def test_inspect_refuses_deep_json_naming_the_entry(twice_pt2, tmp_path, kind):
    path = deep_package(twice_pt2, tmp_path / "deep.pt2", kind)
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert "nests more than the 64 levels" in result.output and "RecursionError" not in result.output


@pytest.mark.parametrize("kind", ["signature", "a deep value inside the signature"])
def test_serve_refuses_deep_json_naming_the_entry(twice_pt2, tmp_path, kind):
    from aotcuda.serving.server import ServeOptions, check_package

    path = deep_package(twice_pt2, tmp_path / "deep.pt2", kind)
    with pytest.raises(PackageError, match=ENTRIES[kind][1]):
        check_package(path, ServeOptions())


def test_a_deep_call_spec_is_refused():
    """The pytree call specs come from the model library; torch's treespec_loads would recurse too."""
    with pytest.raises(PackageError, match=r"'pkg.pt2': the outputs call spec nests more than the 64 levels"):
        load_spec("[1, " + "[" * 50_000 + "]" * 50_000 + "]", None, "pkg.pt2", "outputs")


def test_real_package_json_is_far_inside_the_bound(twice_pt2):
    with zipfile.ZipFile(twice_pt2) as archive:
        depths = {n: json_depth(archive.read(n)) for n in archive.namelist() if n.endswith(".json")}
    with load(twice_pt2) as program:
        depths.update(dict(zip(("in spec", "out spec"), map(json_depth, program._container.call_spec()))))
    assert depths and max(depths.values()) <= 10 < MAX_JSON_DEPTH, depths


# --- the depth scan against json itself ------------------------------------------------------------------

NASTY_STRINGS = st.text(alphabet='[]{}"\\ab\n\u00e9', max_size=8)
VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), NASTY_STRINGS),
                      lambda inner: st.one_of(st.lists(inner, max_size=3),
                                              st.dictionaries(NASTY_STRINGS, inner, max_size=3)), max_leaves=30)


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(VALUES, st.booleans())
def test_the_depth_scan_matches_the_structure(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert json_depth(text) == json_depth(text.encode()) == _depth(value)
    assert load_json(text.encode(), "p.pt2", "x.json") == value


@pytest.mark.parametrize("text, depth", [
    ('"[[[["', 0), ('["\\"[[", 1]', 1), ('{"a": "]]]]", "b": [[{}]]}', 4), ("", 0), ("[" * 65 + "]" * 65, 65),
    ('["\\\\", [1]]', 2), ('["\\\\\\"]", [1]]', 2), ('"\\"\\"[[[', 0), ('[["unterminated [[', 2),
])
def test_the_depth_scan_table(text, depth):
    assert json_depth(text) == depth


@pytest.mark.parametrize("data", [b"[" * (MAX_JSON_DEPTH + 1), b'{"a": ' * 70, DEEP, b"[" * 10_000_000])
def test_too_deep_is_refused_before_parsing(data):
    with pytest.raises(PackageError, match=r"'p.pt2': x.json nests more than the 64 levels"):
        load_json(data, "p.pt2", "x.json")


def test_bad_json_names_the_package_and_the_entry():
    with pytest.raises(PackageError, match=r"'p.pt2': x.json is not valid JSON \("):
        load_json(b"[1, 2", "p.pt2", "x.json")


# Shapes against the scan's string removal. `"(?:[^"\\]|\\.)*"` (the scan before) failed from every quote of an
# unterminated string to the end: quadratic, 32 KB took 1.9 s, 1 MiB ~45 min (a 64 KB signature.json: `aotcuda
# inspect` 9 s; serve's header check the same).
HOSTILE = {
    "escaped quotes, unterminated": b'"' + b'\\"' * (1 << 19),
    "quote and backslash pairs": b'"\\' * (1 << 19),
    "quotes only": b'"' * ((1 << 20) + 1),
    "an unterminated string of brackets": b'["' + b"[" * (1 << 20),
    "backslashes only": b"\\" * (1 << 20),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_the_depth_scan_is_linear_on_hostile_strings(kind):
    """1 MiB in well under a second (each takes ~0.05-0.13 s here; the quadratic scan needed minutes to an hour): CPU
    time, least of three, the collector off (least_time.py), so that another process's load is not the scan's."""
    data = HOSTILE[kind]
    took, depth = least_cpu_seconds(lambda: json_depth(data))
    assert took < 1.0, f"{kind}: {took:.2f} s"
    assert depth <= 1
    with pytest.raises(PackageError, match=r"'p.pt2': x.json is not valid JSON"):
        load_json(data, "p.pt2", "x.json")


def test_real_package_json_holds_few_containers(twice_pt2):
    """Far inside MAX_JSON_CONTAINERS: a real package's JSON, and a signature at the counts' bounds (10,000 tensors
    of 64 dims, 10,000 shape expressions)."""
    from aotcuda.package_format import MAX_JSON_CONTAINERS, json_containers, signature_bytes

    with zipfile.ZipFile(twice_pt2) as archive:
        counts = {n: json_containers(archive.read(n)) for n in archive.namelist() if n.endswith(".json")}
    assert counts and max(counts.values()) < 1000, counts
    spec = {"name": "x", "dtype": "float32", "device": "cuda", "contiguous": True, "complex": None, "mutated": False}
    inputs = [dict(spec, shape=[{"expr": f"s{i}", "min": 1, "max": 64}] + [2] * 63, strides=[1] * 64)
              for i in range(10_000)]
    largest = signature_bytes({"format": "aotcuda.signature", "version": 2, "inputs": inputs, "outputs": []})
    assert len(largest) < 8 << 20 and 10 * json_containers(largest) < MAX_JSON_CONTAINERS


@settings(max_examples=300, deadline=None)
@given(VALUES, st.sampled_from([1, 2, 3, 7]))
def test_the_scan_in_chunks_matches_the_scan_whole(value, chunk):
    """Escape pairs and strings that span chunks are carried over."""
    from aotcuda.package_format import _json_steps

    text = json.dumps(value, ensure_ascii=False)
    assert _json_steps(text, chunk) == _json_steps(text, len(text.encode()) + 1)
    hostile = text + '"\\' * 3 + "[" + text
    assert _json_steps(hostile, chunk) == _json_steps(hostile, len(hostile.encode()) + 1)


def test_the_scan_of_many_strings_stays_small():
    """re.sub gathers one fragment per match: on a whole 8 MiB text of ``"ab",`` the scan alone took 284 MiB
    (review 6); in 64 KiB chunks it takes a few times the text."""
    import tracemalloc

    from aotcuda.package_format import check_json_bounds

    data = b"[" + b'"ab",' * ((8 << 20) // 5) + b'"a"]'
    tracemalloc.start()
    try:
        check_json_bounds(data, "p.pt2", "x.json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(data), peak


def test_package_json_is_read_as_utf8_only_and_the_scan_and_parse_read_the_same_text():
    """(review 7) json.loads(bytes) decodes UTF-16/32 where the bounds scan read UTF-8: a UTF-16 entry hid its
    containers and its depth from the scan. Bytes are decoded strictly as UTF-8 once; anything else is refused."""
    from aotcuda.package_format import check_json_bounds, json_text

    deep = '["\u2200",' + "[" * 100_000 + "]" * 100_000 + "]"
    for encoding in ("utf-16-le", "utf-16", "utf-32"):
        for read in (check_json_bounds, load_json):
            with pytest.raises(PackageError, match=r"'p': the entry is not UTF-8 text"):
                read(deep.encode(encoding), "p", "the entry")
    with pytest.raises(PackageError, match="nests more than"):
        load_json(deep.encode(), "p", "the entry")
    text = json.dumps({"name": "\u5b5b" * 10, "caf\u00e9": [1]}, ensure_ascii=False)  # non-ASCII UTF-8 still reads
    assert load_json(text.encode(), "p", "x") == json.loads(text) and json_text(text.encode(), "p", "x") == text
    with pytest.raises(PackageError, match="not valid JSON"):
        load_json(b"\xef\xbb\xbf{}", "p", "x")  # a BOM: json.loads(bytes) skipped it, a str parse refuses it


def test_a_deep_context_string_of_an_unknown_call_spec_type_is_read_as_no_field_names():
    """(review 7) A context is a JSON string inside the call spec, which the bounds scan does not look into:
    the plain reading of an unknown type parsed it with json.loads, unbounded (a RecursionError). It goes
    through load_json, and a context it refuses (or one that is no string) means: no field names, a tuple."""
    from aotcuda.runtime.pytree_types import _plain

    for context in ("[" * 100_000 + "]" * 100_000, 5, '["a"]'):
        leaf = {"type": None, "context": None, "children_spec": []}
        document = [1, {"type": "unknown.Type", "context": context, "children_spec": [leaf]}]
        node = _plain(document, {"unknown.Type"}, "p.pt2")[1]
        assert node["type"] == ("builtins.dict" if context == '["a"]' else "builtins.tuple"), node
