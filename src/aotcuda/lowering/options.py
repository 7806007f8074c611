"""lower()'s options checked before any work: a value of the wrong kind was taken as it came (allow_fallbacks="False"
is true), or failed minutes later in torch's words (an Inductor option name with a typo, at the compile)."""

from __future__ import annotations

import difflib
import torch

from aotcuda.errors import quoted


def check_options(allow_fallbacks, inductor_configs, progress) -> None:
    """Raise TypeError (ValueError for an Inductor option torch does not have) naming the option and the fix."""
    if not isinstance(allow_fallbacks, bool):
        raise TypeError(f"allow_fallbacks must be True or False, got {quoted(allow_fallbacks)} "
                        f"({type(allow_fallbacks).__name__}), which would be taken for "
                        f"{bool(_truth(allow_fallbacks))}; pass allow_fallbacks=True or allow_fallbacks=False")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a function called as progress(step, seconds), or None; got "
                        f"{quoted(progress)} ({type(progress).__name__})")
    if inductor_configs is not None:
        check_inductor_configs(inductor_configs)


def _truth(value) -> bool:
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - an object whose __bool__ raises is taken for nothing
        return False


def check_inductor_configs(configs) -> None:
    """``configs`` as Inductor reads them: a dict of option names it has (``torch._inductor.config``, dotted for
    nested ones, e.g. "cpp.weight_prepack"), each switch (an option whose default is True or False) given a bool,
    an int or None (some are tristate), and no ``aot_inductor.output_path`` (torch refuses it at the compile:
    package_path says where the package goes)."""
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
        if isinstance(defaults[name], bool) and value is not None and not isinstance(value, (bool, int)):
            raise TypeError(f"inductor_configs[{name!r}] is a switch (True or False), got {quoted(value)} "
                            f"({type(value).__name__}), which Inductor would take for {_truth(value)}; "
                            f"pass True or False")

