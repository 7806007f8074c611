"""`aotcuda serve PACKAGE`: the command-line front of aotcuda.serving (registered by aotcuda.cli)."""

from __future__ import annotations

import os
import re
import sys

import click

from aotcuda.cli_paths import ExistingFile
from aotcuda.package_tags import KEY_FILE_HELP
from aotcuda.serving.deadline import check_run_timeout
from aotcuda.serving.server import OptionsError, ServeOptions


class RunTimeout(click.ParamType):
    """--run-timeout-s: seconds (deadline.check_run_timeout), or 0 for no deadline (None). A number that reads as
    zero but is not written as one (1e-400) is refused, not taken as "no deadline"."""

    name = "seconds"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, float):
            return value
        try:
            seconds = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if seconds == 0:
            if re.fullmatch(r"[+-]?0*\.?0*", value.strip()):
                return None
            self.fail(f"{value!r} rounds to 0; write 0 for no deadline", param, ctx)
        try:
            check_run_timeout(seconds)
        except ValueError as error:
            self.fail(str(error), param, ctx)
        return seconds


@click.command("serve")
@click.argument("package", type=ExistingFile())
@click.option("--replicas", default=1, show_default=True, type=click.IntRange(min=1),
              help="replicas, each loading the package (one GPU each for a CUDA package).")
@click.option("--host", default="127.0.0.1", show_default=True, help="address the HTTP proxy listens on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--max-batch-size", default=1, show_default=True, type=click.IntRange(min=1),
              help="most requests per batch (needs a dynamic batch dim 0; 1: no batching).")
@click.option("--batch-wait-ms", default=5.0, show_default=True, type=click.FloatRange(min=0),
              help="how long a batch waits for more requests after its first.")
@click.option("--cuda-graphs", is_flag=True, help="capture the program in CUDA graphs on each GPU replica.")
@click.option("--max-request-bytes", default=256 << 20, show_default=True, type=click.IntRange(min=1),
              help="larger request bodies get HTTP 400 (refused by Content-Length before reading).")
@click.option("--max-response-bytes", default=1 << 30, show_default=True, type=click.IntRange(min=1),
              help="a request whose outputs would be larger gets HTTP 400 before the program runs (their sizes "
                   "follow from the request's shapes).")
@click.option("--max-tensor-bytes", default=1 << 30, show_default=True, type=click.IntRange(min=1),
              help="a request for which the program would make a larger tensor, an output or an intermediate "
                   "(their sizes follow from the request's shapes), gets HTTP 400 before the program runs.")
@click.option("--body-timeout-s", default=30.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="a request head or body still arriving after this many seconds gets HTTP 408; a client that "
                   "reads no byte of its answer for as long is disconnected.")
@click.option("--run-timeout-s", default="30", show_default=True, type=RunTimeout(),
              help="a request whose run takes longer gets HTTP 503 and its replica is replaced (its process ends: a "
                   "run cannot be stopped otherwise); less than --request-timeout-s; 0: no deadline.")
@click.option("--request-timeout-s", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="the HTTP proxy answers a request still unanswered this many seconds after it arrived with "
                   "HTTP 408 (the request may still run).")
@click.option("--max-pending-bytes", default=None, type=click.IntRange(min=1),
              help="bytes of request bodies and unread answers the HTTP proxy holds at once, over all clients; "
                   "more get HTTP 503 with Retry-After [default: 1 GiB, or the request limit if larger].")
@click.option("--allow-unbounded-outputs", is_flag=True,
              help="serve a program with an output size computed from an input's values (n = x.max().item()) and "
                   "no upper bound, which is refused otherwise: any client can then make a replica allocate as "
                   "much memory as its values say (bound it instead: torch._check(n <= N) in the model).")
@click.option("--allow-unchecked-indices", is_flag=True,
              help="serve a program with an input whose values reach an index that lowering could not bound "
                   "(aotcuda inspect: 'index values not checked'), which is refused otherwise: any client can then "
                   "end a replica's process, or its CUDA context, with one out-of-range value.")
@click.option("--dashboard", is_flag=True,
              help="start Ray's dashboard on 127.0.0.1:8265 with the local Ray (off: no dashboard).")
@click.option("--signing-key-file", type=click.Path(dir_okay=False), default=None,
              help=f"serve the package only if it is signed with the key in this file (checked before Ray starts, and "
                   f"by each replica, which reads the file at this path on its node). {KEY_FILE_HELP}")
def serve_command(package, replicas, host, port, max_batch_size, batch_wait_ms, cuda_graphs, max_request_bytes,
                  max_response_bytes, max_tensor_bytes, body_timeout_s, run_timeout_s, request_timeout_s,
                  max_pending_bytes, allow_unbounded_outputs, allow_unchecked_indices, dashboard, signing_key_file):
    """Serve PACKAGE over HTTP with Ray Serve until Ctrl-C or SIGTERM: POST /predict (safetensors in and
    out), GET /healthz. Starts Ray locally (its own servers on loopback only, whatever --host), or joins the
    cluster in RAY_ADDRESS. Exits 0 once Serve and Ray are down (Ctrl-C lets Serve finish the requests in
    flight; SIGTERM, SIGHUP (a closed terminal), SIGQUIT, SIGUSR1, SIGUSR2 or SIGALRM stops at once).
    Needs pip install 'aotcuda[serve]'."""
    import signal

    from aotcuda.serving.server import STOP_AT_ONCE, StopRequested, serve_package

    try:
        options = ServeOptions(replicas=replicas, host=host, port=port, max_batch_size=max_batch_size,
                               batch_wait_ms=batch_wait_ms, cuda_graphs=cuda_graphs, max_request_bytes=max_request_bytes,
                               max_response_bytes=max_response_bytes, max_tensor_bytes=max_tensor_bytes,
                               body_timeout_s=body_timeout_s, run_timeout_s=run_timeout_s,
                               request_timeout_s=request_timeout_s,
                               max_pending_bytes=max_pending_bytes, dashboard=dashboard,
                               allow_unbounded_outputs=allow_unbounded_outputs,
                               allow_unchecked_indices=allow_unchecked_indices, signing_key_file=signing_key_file)
    except OptionsError as error:  # options that do not fit each other (a run deadline past the request's): usage
        raise click.UsageError(error.worded(_flag_of)) from None
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    try:
        server = serve_package(package, options)
    except (KeyboardInterrupt, StopRequested) as stop:  # while the replicas start: all is shut down already
        # "while starting", not "before serving": the replicas answer requests once they run, which is up to ~1 s
        # before Serve's own wait (it polls every second) lets serve_package return
        name = signal.Signals(stop.signal).name if isinstance(stop, StopRequested) else "SIGINT"
        _say(f"stopped ({name}) while starting: Serve and Ray are down")
        return
    try:
        from aotcuda.cli import terminal_safe  # a package's name is anyone's text (the CLI's other success lines)

        _say(f"serving {terminal_safe(package)} at {server.url}: POST {server.url}/predict, GET {server.url}/healthz "
             f"({replicas} replica(s)); Ctrl-C or SIGTERM stops")
        received = server.wait(say_start_failure=_warn)
    except (KeyboardInterrupt, StopRequested) as stop:  # before wait() took the signals over
        received = stop.signal if isinstance(stop, StopRequested) else signal.SIGINT
        server.shutdown(drain=received not in STOP_AT_ONCE)
    _say(f"stopped ({signal.Signals(received).name}): Serve and Ray are down")


def _flag_of(field: str) -> str:
    """The flag of `aotcuda serve` that gives ServeOptions' ``field`` (the field itself where no flag does)."""
    flags = {param.name: param.opts[0] for param in serve_command.params if isinstance(param, click.Option)}
    return flags.get(field, field)


def _say(line: str) -> None:
    """A status line on stdout, which may be a pipe whose reader is gone (a log collector that died or restarted,
    `| true`): the server goes on without its lines. A broken pipe ended `aotcuda serve` right after it had started
    (review 12: `error: BrokenPipeError`, Ray shut down at exit); later lines go to the null device, so that
    Python's flush at exit finds nothing to write either. Unlike the other commands, whose output is their
    result (`aotcuda` exits 1 where it cannot be written), serve's product is the HTTP service, which its clients
    use: it says once on stderr that its status lines are lost, and serves on. (A stdout closed at the start is
    refused before anything starts, as for every command.)"""
    try:
        click.echo(line)
    except OSError as error:  # EPIPE, EIO (a terminal hung up), ENOSPC (a full disk under a redirect)
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):  # no stdout to replace
            pass
        try:  # stderr may be the same broken pipe (2>&1): then nothing can say it
            click.echo(f"warning: the status lines cannot be written to stdout ({error.strerror or error}); "
                       "serving goes on without them", err=True)
        except OSError:
            pass


def _warn(message: str, hint: str) -> None:
    """A warning and its hint on stderr while serving (a replica that fails to start: start_failures.py), with the
    control characters of the error's text shown escaped (cli.terminal_safe: it quotes the replica's exception). A
    stderr that cannot take them is no reason to stop serving, nor to end with another status (cli.to_stderr)."""
    from aotcuda.cli import terminal_safe, to_stderr

    to_stderr(f"warning: {terminal_safe(message)}\nhint: {terminal_safe(hint)}\n")
