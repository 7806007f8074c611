"""Every AOTCUDA_* environment variable, in one table, and the one place that reads them.

A switch is read where it takes effect (``flag(name)`` / ``number(name)``), never by ``os.environ`` elsewhere:
the table below is then the complete list, docs/usage.md's table is generated from it (``markdown_table``,
checked by tests/test_switches.py), and a value that is
not one of the switch's spellings is an error that names the variable and what it takes, instead of a
silent default (``AOTCUDA_DEBUG=0`` used to turn debugging on).

Flags take 1/true/yes/on or 0/false/no/off (any case); unset or empty is the default. Numbers take an
integer or a decimal number; 0 lifts a limit. Paths (``path(name)``) take a file's path; unset or empty: none.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from aotcuda.errors import SwitchError, clipped

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class Switch:
    """name: the environment variable. default: its value when unset (a bool for a flag, a number, or None for
    a path). what: what it changes, in one line. read: when it is read (so when setting it takes effect)."""

    name: str
    default: bool | int | float | None
    what: str
    read: str


SWITCHES: dict[str, Switch] = {s.name: s for s in (
    Switch("AOTCUDA_DEBUG", False, "the CLI shows the traceback of an error instead of its 'error:' lines (a value "
           "that is no flag is not refused here: a 'warning:' line says so, then the error as usual)",
           "at each error"),
    Switch("AOTCUDA_PASS_SPEEDUPS", True, "ReplaceComplexWithRealPass replays fake-tensor metadata and copies "
           "unchanged nodes (passes/complex_to_real/torch_internals.py); off: every node traced with make_fx",
           "each time the pass is built"),
    Switch("AOTCUDA_FOREIGN_WRITES", False, "the runtime writes into other libraries' memory: PyCapsule pointer "
           "fields in place (tensors <-> handles without a ctypes.pythonapi call per handle) and libstdc++'s "
           "std::cerr state (the generated code's C++ error lines muted during a run; the message still "
           "reaches the RuntimeCallError). Off: public APIs only (docs/performance.md has the gain)",
           "at the first run in a process"),
    Switch("AOTCUDA_GRAPHS_IN_PLACE", True, "a Program loaded with cuda_graphs=True replays a capture made on the "
           "caller's own input addresses when a call's inputs lie where the previous call's did (no copy in or back; "
           "runtime/graphs.py; up to two more memory pools a shape); off: every graph call copies its inputs into the "
           "graph's static buffers",
           "at each load"),
    Switch("AOTCUDA_CHECK_INDEX_RANGES", True, "a Program checks, before each call, that integer inputs reaching an "
           "index hold values eager accepts (runtime/index_ranges.py); off, for trusted callers only: an out-of-range "
           "value reaches the generated code's own check, a RuntimeCallError where its kernel runs on one thread but "
           "the end of the process (SIGABRT: a C++ exception cannot leave an OpenMP parallel region) where it is split "
           "over threads (a kernel with 512 elements or more a thread, Inductor's cpp.min_chunk_size); on CUDA a device-side assert, after "
           "which every CUDA call of the process fails. aotcuda.load(check_index_ranges=) overrides it; serving's "
           "replicas check whatever it says (--allow-unchecked-indices is the deployer's choice there)",
           "at each load"),
    Switch("AOTCUDA_BATCH_ROWS_PROBE", True, "lower() runs the program in eager on its example inputs, with rows of "
           "them changed (up to 16 forwards on the CPU, 8 on CUDA), to record whether an output row depends on other "
           "rows of the batch dim (lowering/batch_rows.py; serving refuses batching where it does); off: not probed, lower() warns, and "
           "serving batches the program unchecked (serve one that may mix rows with --max-batch-size 1)",
           "at each lower()"),
    # The H200's decode step (torch 2.11, decode.py, bound graph): the sibling products at batch 8 1186.3 µs
    # against 1406.4 without (2026-12-03), at batch 1 987.8 against 978.4 (2026-12-02), so the pass fuses
    # products of 8 rows or more only. Row products off: at batch 1, with the sibling products and the decode
    # attention, 1164.9 µs against 939.0 with the decode attention alone (2026-12-03; the 33 row_product
    # kernels took 658.9 µs for the products Inductor's fused reductions make in about 440); at batch 8 (up to
    # 8 rows, weights of 1M elements or more) 1208.9 against 1186.3 with the sibling products alone.
    Switch("AOTCUDA_SIBLING_PRODUCTS", True, "CUDA lowering runs ConcatSiblingProductsPass: matrix products of 8 "
           "rows or more that read one activation (q/k/v, w1/w3) become one product over their stacked weights "
           "(passes/sibling_products.py); off: each product on its own", "at each lower() for CUDA"),
    # ConcatSiblingProductsPass's row limit, to try the pass at fewer rows without editing code (the default is
    # the pass's own: passes/sibling_products.py says what the H200 measured).
    Switch("AOTCUDA_SIBLING_PRODUCTS_MIN_ROWS", 8, "ConcatSiblingProductsPass (AOTCUDA_SIBLING_PRODUCTS) fuses "
           "products of at least this many rows on the left (1: every product)", "each time the pass is built"),
    Switch("AOTCUDA_ROW_PRODUCTS", False, "CUDA lowering runs RowProductsPass: matrix products with at most 4 "
           "rows on the left and a weight of 8M elements or more (a decode step's projections and LM head) become "
           "the aotcuda::row_product Triton op (passes/row_products.py, kernels/row_product.py); off: Inductor's "
           "own kernels", "at each lower() for CUDA"),
    # RowProductsPass's limits, to try the op at 8 rows or on smaller weights without editing code; the
    # defaults are the pass's own (passes/row_products.py says what the H200 measured for them).
    Switch("AOTCUDA_ROW_PRODUCTS_MAX_ROWS", 4, "RowProductsPass (AOTCUDA_ROW_PRODUCTS) rewrites products of at most "
           "this many rows on the left (0: no limit)", "each time the pass is built"),
    Switch("AOTCUDA_ROW_PRODUCTS_MIN_WEIGHT", 1 << 23, "RowProductsPass (AOTCUDA_ROW_PRODUCTS) rewrites products whose "
           "weight has at least this many elements (0: any)", "each time the pass is built"),
    # On by default: on the H200 (torch 2.11, decode.py batch 1, bound graph, 2026-12-03) the step took 939.0 µs
    # with it against 1051.1 µs without (54% of the bound against 48%); benchmarks/decode_attention.py: the
    # op 11.6 µs against Inductor's 21.3 at batch 1, 20.4 against 87.0 at batch 8 (position 1024).
    Switch("AOTCUDA_DECODE_ATTENTION", True, "CUDA lowering runs SplitCacheAttentionPass: attention of a few query "
           "rows over a long KV cache in one pass over the cache, as the aotcuda::decode_attention Triton op "
           "(kernels/decode_attention.py) where Triton is installed, else in split-cache form in generated "
           "kernels (passes/decode_attention.py); off: Inductor's own attention", "at each lower() for CUDA"),
    # On by default: on the H200 (torch 2.11, benchmarks/prefill.py, batch 1, 2048 tokens, bf16, session 14) our
    # decoder's prefill took 9.64 ms with it against 14.96 without (45% of peak against 29%; torch.compile
    # max-autotune 14.76); benchmarks/scripts/prompt_attention_ab.py (2 layers): 1.35 against 1.99 ms.
    Switch("AOTCUDA_PROMPT_ATTENTION", True, "CUDA lowering runs PromptAttentionPass: attention of many query "
           "rows written out as matmul, scale, mask, softmax, matmul (a prefill) becomes one "
           "scaled_dot_product_attention call (passes/prompt_attention.py); off: Inductor's own products and "
           "softmax", "at each lower() for CUDA"),
    # Off by default: it loses. On the H200 (torch 2.11, 2026-12-04, decode_variants.sh, batch-1 bound graph) the
    # step took 1052.5 us against 936.3 without it: the norm kernels went, but Inductor's w1/w3 product with the
    # sum of squares in its loop took 29.9 us against 17.3, w2 14.5 against 9.3 (docs/performance.md).
    Switch("AOTCUDA_NORM_PRODUCTS", False, "CUDA lowering runs FoldRMSNormIntoProductPass: a one-row matrix product of "
           "an RMSNorm's output runs on the unnormalized row and scales its outputs by the row's rsqrt factor, "
           "computed in the product's own loop (passes/norm_products.py); off: the norm before the product",
           "at each lower() for CUDA"),
    # Off by default: it saves no kernel. On the H200 (torch 2.11, 2026-12-04) it merged 153 nodes of the batch-1
    # step (the mask each layer builds) and the CUDA decode tests passed with it on, but the step still ran 200
    # kernels (Inductor inlines a pointwise producer into each consumer's kernel, so the merged mask is
    # recomputed in every layer's RoPE kernel as before): 840.0 us against 850.9, within two builds' spread.
    Switch("AOTCUDA_COMMON_SUBEXPRESSIONS", False, "CUDA lowering runs EliminateCommonSubexpressionsPass last: a pure "
           "computation written several times (a mask built in every layer) is computed once "
           "(passes/common_subexpressions.py); off: every copy kept", "at each lower() for CUDA"),
    # On by default: on the H200 (torch 2.11) the decode step's bound graph took 865.7 against 907.2 us at batch 1
    # and 1072.4 against 1083.6 at batch 8 (session 21), 840.3 against 1019.9 at batch 1 (session 23: the graph's
    # idle time 47.6 against 95.7 us, the rest the two builds' picks), and the CUDA tests of the runtime, the
    # lowering, the passes and the library models passed under it (75 passed; docs/performance.md,
    # "Programmatic dependent launch"). Kernels run as before on GPUs older than sm_90 (Inductor marks none).
    Switch("AOTCUDA_DEPENDENT_LAUNCH", True, "CUDA lowering compiles Inductor's Triton kernels for programmatic "
           "dependent launch (Inductor's triton.enable_pdl; sm_90 and later) and the package launches them so: "
           "a kernel's start overlaps the end of the kernel ahead (lowering/dependent_launch.py); off: each "
           "kernel starts when the one ahead has ended", "at each lower() for CUDA"),
    # On by default: on the H200 (torch 2.11, benchmarks/fft.py --device cuda, 2026-12-03) the kernel form took
    # 0.45-0.87x cuFFT's time on the filter at n = 64, 128, 400, 1024, 2048 and 4096 and 0.55x on the Whisper
    # front end, 1.05x at n = 512, where the GEMM form took 0.98-1.92x (docs/performance.md).
    Switch("AOTCUDA_FFT_KERNEL", True, "ReplaceComplexWithRealPass computes an FFT of a covered static length "
           "(kernels/fft_plan.py: n at most 4096: every prime factor at most 61 as a tiling, any other n as "
           "Bluestein inside the kernel) on a non-CPU device as one "
           "aotcuda::fft_rows Triton kernel per transform (kernels/fft_rows.py) where Triton is installed; off: "
           "the GEMM form (DFT products, passes/complex_to_real/spectral/transform.py)",
           "at each FFT the pass rewrites"),
    # On by default: on the shared 2-core CPU (torch 2.13, benchmarks/fft.py, 2026-12-04) the kernel took
    # 0.5-1.1x pocketfft's time a transform where the Stockham ATen form took 1.7-2.8x (docs/performance.md).
    # On by default: on an H100 (session 32, benchmarks/fft.py --programs filter_bluestein) a 512-row filter took
    # 0.57-0.59x cuFFT's time at 1009, 2039 and 4093 with it, 0.68x, 0.78x and 1.57x without (docs/performance.md).
    Switch("AOTCUDA_FFT_FILTER_CONVOLUTION", True, "ReplaceComplexWithRealPass computes a spectral filter "
           "irfft(rfft(x)·w) whose w is a constant shared by every row, at a length the kernel form runs as "
           "Bluestein (a prime factor above 61), as one aotcuda::fft_rows convolution kernel (the circular "
           "convolution with irfft(w), its tables computed at lowering: two m-point DFTs a pair of rows where the "
           "r2c and the c2r take four; passes/complex_to_real/spectral/filter.py); off: the r2c and c2r kernels",
           "at each FFT the pass rewrites"),
    Switch("AOTCUDA_FFT_CPU_KERNEL", True, "ReplaceComplexWithRealPass computes a CPU FFT of a covered static "
           "length (kernels/fft_cpu.py: n at most 32768; a prime factor above 13 in the complex length runs as "
           "Bluestein inside the kernel) as one "
           "aotcuda::fft_rows_cpu op, which Inductor compiles as a C++ template kernel keeping blocks of 8 rows in "
           "cache through all stages (kernels/fft_cpu_template.py; where this torch lacks the template machinery "
           "it stays off); off: the Stockham form (pointwise stages, passes/complex_to_real/spectral/stockham.py)",
           "at each FFT the pass rewrites"),
    Switch("AOTCUDA_MAX_EXTRACT_BYTES", 64 << 30, "bytes extracted from one package, all entries together; "
           "bytes the tensors of an `aotcuda run --inputs` file take dense", "at each load"),
    Switch("AOTCUDA_MAX_COMPRESSION_RATIO", 200.0, "uncompressed / compressed size of a package entry; dense size "
           "of an `aotcuda run --inputs` file's tensors / the file's size (above 64 MiB)", "at each load"),
    # 8 MiB (64 before review 6): real op tables take ~300 bytes a proxy-executor node (a few KiB in all), and a
    # package with any is refused; a stored 64 MiB table of [{},...] took load to 1.96 GiB before dlopen.
    Switch("AOTCUDA_MAX_JSON_BYTES", 8 << 20, "another JSON entry of a package read into memory (the op table of "
           "ops run through AOTInductor's proxy executor: ~300 bytes an op), and the op tables `aotcuda inspect` reads, "
           "together", "at each load"),
    # 8 MiB: a program of 1,000 inputs and 1,000 outputs of rank 6 writes 0.6 MiB, the count limits allow about 6;
    # json.loads of 8 MiB of the worst shape ([{},{},...]) makes about 200 MB of objects, for a moment.
    Switch("AOTCUDA_MAX_SIGNATURE_BYTES", 8 << 20, "the aotcuda signature, the model's metadata JSON and the signing "
           "key's tag of a package (about 1 KiB for most programs; 0.6 MiB for 2,000 inputs and outputs; a tag ~110 "
           "bytes an entry)", "at each load"),
    Switch("AOTCUDA_MAX_SOURCE_BYTES", 256 << 20, "the generated C++ sources of a package read into memory "
           "(by `aotcuda inspect`), together",
           "at each load"),
    Switch("AOTCUDA_MAX_ENTRIES", 100_000, "entries in a package archive", "at each load"),
    # Off by default: another user who may write a folder aotcuda compiles or extracts in (or rename its folders away)
    # can put code into a package or the process (shared_folders.py). On for a folder shared only with users you trust
    # where no other place is writable: a Kubernetes emptyDir is 0777 without the sticky bit.
    Switch("AOTCUDA_LIBRARY_INPUT_CHECKS", False, "load turns on AOTInductor's own input checks (dtype, sizes, "
           "strides, in the generated code) for packages with an aotcuda signature too, as it does for those without: "
           "the signature is JSON that may be edited without the library (its library_sha256 stays true), and an "
           "edited one lets inputs of other shapes reach code that reads past them (a segmentation fault). For "
           "packages from elsewhere; the cost: AOTInductor's ranges refuse a size of 1 where the program was "
           "exported with Dim(min=1) (torch traces such a dim for 2 and more), which aotcuda's own checks take",
           "at each load"),
    Switch("AOTCUDA_TRUST_SHARED_FOLDERS", False, "lower() compiles in an Inductor cache folder, lower() without a "
           "package_path and the demo write the package in a temporary folder, load extracts in one, `aotcuda sign` "
           "(or lower() with a key) signs in a package's folder, a key file is read from its folder, and `aotcuda "
           "serve` keeps the files of the Ray it starts in a folder of RAY_TMPDIR (or TMPDIR), that other users may "
           "write into (or whose folders they may rename away), where otherwise each refuses (shared_folders.py); for "
           "folders shared only with users you trust", "at each lower(), load and sign, at each key file read, and "
           "when serve starts Ray"),
    # A path, never the key: a variable's value shows in /proc/<pid>/environ to the same user and in many process
    # listings and crash reports, a file's bytes only to whom its mode lets read them (package_tags.py).
    Switch("AOTCUDA_SIGNING_KEY_FILE", None, "the file of the key lower() signs packages with and load() takes "
           "only packages signed with (an HMAC-SHA256 tag over the signature, the metadata and every file load "
           "extracts: package_tags.py); at least 32 bytes, readable by its owner alone (chmod 600). A signing_key= "
           "or --signing-key-file given takes its place", "at each lower() and load"),
    # Set by `aotcuda serve` for the Ray it starts, from its options; its HTTP proxy reads them (serving/proxy.py).
    Switch("AOTCUDA_SERVE_BODY_TIMEOUT_S", 30.0, "seconds Ray Serve's HTTP proxy gives a client to send a request "
           "body before answering 408 (`aotcuda serve --body-timeout-s` sets it for the Ray it starts)",
           "when the proxy starts"),
    Switch("AOTCUDA_SERVE_MAX_REQUEST_BYTES", 256 << 20, "bytes of a request body Ray Serve's HTTP proxy reads before "
           "answering 400 (`aotcuda serve --max-request-bytes` sets it for the Ray it starts)",
           "when the proxy starts"),
    Switch("AOTCUDA_SERVE_MAX_PENDING_BYTES", 1 << 30, "bytes of request bodies Ray Serve's HTTP proxy holds at once, "
           "read or being read, before answering 503 with Retry-After (`aotcuda serve --max-pending-bytes` sets it "
           "for the Ray it starts)", "when the proxy starts"),
    Switch("AOTCUDA_SERVE_MIN_SEND_RATE", 256 << 10, "bytes a second at which a client must take an answer that "
           "waits in Ray Serve's HTTP proxy, on average, once it has waited 5 s (or --body-timeout-s, if shorter): "
           "a slower reader's connection is closed and its answer dropped, so that slow readers cannot hold the "
           "pending room (serving/heads.py); 0: no minimum, only the send timeout. `aotcuda serve` passes it on "
           "to the Ray it starts", "when the proxy starts"),
    Switch("AOTCUDA_SERVE_REQUESTS_IN_FLIGHT", 0, "requests Ray Serve's HTTP proxy hands on to the replicas at "
           "once (`aotcuda serve` sets it for the Ray it starts: its replicas times the requests each takes); past "
           "it, requests wait in the proxy and are let in by client address, the one with the fewest requests in "
           "flight first, so that one client's flood cannot starve the others (serving/proxy.py, FairAdmission); a "
           "request held AOTCUDA_SERVE_HOLD_TIMEOUT_S gets 503 with Retry-After; 0: none held, Ray's own queue, "
           "first come first served", "when the proxy starts"),
    Switch("AOTCUDA_SERVE_HOLD_TIMEOUT_S", 30.0, "seconds from a request's arrival (its body's time included) until "
           "which it may be held in Ray Serve's HTTP proxy for a replica's slot (AOTCUDA_SERVE_REQUESTS_IN_FLIGHT) before "
           "it gets 503 with Retry-After, nothing of it run "
           "(`aotcuda serve` sets it for the Ray it starts to --request-timeout-s less --run-timeout-s and the batch "
           "wait: a request let in last still has its run's time, and Client's default timeout_s, 75 s, sees the "
           "503)", "when the proxy starts"),
    Switch("AOTCUDA_SERVE_REQUEST_TIMEOUT_S", 0.0, "seconds a request may take in Ray Serve's HTTP proxy from its "
           "arrival, its body and its hold for a replica's slot included: the proxy hands Ray what is left as the "
           "request's timeout (Ray's x-request-timeout-seconds), and a request held until none is left gets 503 with "
           "Retry-After; at least 0.1 (a smaller one is refused when the proxy starts); 0: Ray's own request_timeout_s, "
           "counted from when the proxy hands the request on "
           "(`aotcuda serve --request-timeout-s` sets it for the Ray it starts)", "when the proxy starts"),
    Switch("AOTCUDA_SERVE_ALLOWED_HOSTS", None, "host names, comma-separated, that a request arriving over a "
           "loopback address may name in its Host header besides localhost, the loopback addresses and this "
           "machine's name (a page's DNS rebinding names its own: refused 421, serving/web_pages.py); `*`: any name "
           "(a reverse proxy on the same host that forwards the client's Host). `aotcuda serve` passes it on to the "
           "Ray it starts", "when the proxy starts"),
    Switch("AOTCUDA_SERVE_ALLOWED_ORIGINS", None, "web origins, comma-separated (`scheme://host[:port]`), whose "
           "pages may send requests to `aotcuda serve`: a request with any other `Origin` header (a browser adds it "
           "to every cross-origin request and every POST) is refused 403 (serving/web_pages.py); `*`: any origin; "
           "an entry that is no origin stops serve, named. `aotcuda serve` passes it on to the Ray it starts", "when the proxy starts"),
)}


def _declared(name: str) -> Switch:
    try:
        return SWITCHES[name]
    except KeyError:
        raise KeyError(f"{name} is not an aotcuda switch; add it to aotcuda.switches.SWITCHES") from None


def flag(name: str) -> bool:
    """The flag's value: its default when unset or empty.

    Raises SwitchError (a ValueError) naming the variable and its spellings for any other value."""
    switch = _declared(name)
    text = os.environ.get(name, "").strip().lower()
    if not text:
        return bool(switch.default)
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise SwitchError(f"{name}={clipped(repr(os.environ[name]), 80)} is not a flag; set it to 1 (on) or 0 (off), "
                      "or unset it")


def number(name: str) -> int | float:
    """The number's value (an int unless the default is a float): its default when unset or empty.

    Raises SwitchError (a ValueError) naming the variable for a value that is not a number, or is negative."""
    switch = _declared(name)
    text = os.environ.get(name, "").strip()
    if not text:
        return switch.default
    try:
        # ASCII alone, as --dynamic reads its sizes: int() and float() read any script's digits ("١" is 1, and "٠" is
        # 0, which lifts a limit) and "1_000" (the process breaker, 2026-12-06)
        if not text.isascii() or "_" in text or not (isinstance(switch.default, float) or text.isdigit()):
            raise ValueError(text)
        value = float(text) if isinstance(switch.default, float) else int(text)
    except ValueError:
        value = None
    if value is None or value < 0 or value != value:
        raise SwitchError(f"{name}={clipped(repr(text), 80)} is not a number of at least 0 in ASCII digits; set it to "
                          f"a number (0: no limit), or unset it for the default ({switch.default})")
    if value == float("inf") or (value == 0 and _written_nonzero(text)):  # "1e-400" is 0.0: no limit, not a strict one
        raise SwitchError(f"{name}={clipped(repr(text), 80)} is not a finite number that a float holds (it reads as "
                          f"{value!r}, and {'0 lifts the limit' if value == 0 else 'a limit must end'}); set it to "
                          f"a number such as {switch.default} (0: no limit), or unset it for the default")
    # An integer past what a float holds (310 digits or more) reads, but every product with a float raises: the proxy's
    # minimum send rate (rate * seconds) raised OverflowError in each connection's send watch, which then stopped,
    # so a slow reader was never cut off
    if value > sys.float_info.max:
        raise SwitchError(f"{name}={clipped(repr(text), 80)} is not a finite number that a float holds (it has "
                          f"{len(str(value))} digits, past {sys.float_info.max:g}); set it to a number such as "
                          f"{switch.default} (0: no limit), or unset it for the default")
    return value


def path(name: str) -> str | None:
    """The path a path switch holds (a leading "~" expanded, as the shell would), or None when unset or empty."""
    _declared(name)
    text = os.environ.get(name, "").strip()
    return os.path.expanduser(text) if text else None


def names(name: str) -> frozenset[str]:
    """The names a list switch holds, comma-separated (lower case, blanks dropped); empty when unset."""
    _declared(name)
    return frozenset(part.strip().lower() for part in os.environ.get(name, "").split(",") if part.strip())


def _written_nonzero(text: str) -> bool:
    """Whether ``text``, which float() read as 0.0, writes a number that is not 0 (it underflowed)."""
    import decimal  # here: loading a package imports the runtime alone (tests/test_imports.py)

    try:
        return decimal.Decimal(text) != 0
    except decimal.InvalidOperation:
        return False


def markdown_table() -> str:
    """The table of docs/usage.md, "Environment switches": one row per switch."""
    def shown(value) -> str:
        if value is None:
            return "unset"
        if isinstance(value, bool):
            return "1" if value else "0"
        return f"{value:g}" if isinstance(value, float) else str(value)

    rows = ["| variable | default | what it changes | read |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {shown(s.default)} | {s.what} | {s.read} |" for s in SWITCHES.values()]
    return "\n".join(rows)
