"""numpy's CPU dispatch, set before numpy is imported (the command line does it first thing).

On AMD Zen 4 (family 19h with AVX-512), numpy's AVX-512 sort (x86-simd-sort) is several times
slower than its AVX2 sort, because the instruction it is built on (``vpcompressq`` to memory) is
microcoded there: a known problem (numpy/x86-simd-sort issue 6; OpenJDK turns its AVX-512 sort
off on that family). Sorting is most of the phrase index's build, so on that CPU the command
line starts numpy without its AVX-512 (``X86_V4``) dispatch, which numpy reads from
``NPY_DISABLE_CPU_FEATURES`` once, when it is imported. Results are the same either way; only
speed changes (benchmarks/README.md, "Scale-out on Ray"). A value the user set is kept.

This module must not import numpy.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from importlib import metadata
from pathlib import Path

#: What numpy (2.4 and later, where AVX-512 is the ``X86_V4`` group) leaves out on Zen 4.
ZEN4_DISABLE = "X86_V4"


def cpu_info(path: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """The first processor's ``key: value`` lines of ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def is_zen4(info: dict[str, str]) -> bool:
    """AMD family 19h with AVX-512: Zen 4 (Zen 3, the same family, has no AVX-512; Zen 5 is 1Ah)."""
    return (info.get("vendor_id") == "AuthenticAMD" and info.get("cpu family") == "25"
            and "avx512f" in info.get("flags", "").split())


def _numpy_version() -> tuple[int, int] | None:
    try:
        major, minor = metadata.version("numpy").split(".")[:2]
        return int(major), int(minor)
    except (metadata.PackageNotFoundError, ValueError):
        return None


def _slow_avx512_sort(info: dict[str, str] | None, numpy_version: tuple[int, int] | None) -> bool:
    """Whether this is a Zen 4 with a numpy whose AVX-512 dispatch can be left out by name (2.4+)."""
    version = numpy_version or _numpy_version()
    return version is not None and version >= (2, 4) and is_zen4(cpu_info() if info is None else info)


def numpy_dispatch_setting(environ: Mapping[str, str], info: dict[str, str] | None = None,
                           numpy_version: tuple[int, int] | None = None, *, here: bool = True) -> str | None:
    """The ``NPY_DISABLE_CPU_FEATURES`` value this machine should start numpy with, or None:
    none when the user chose numpy's features already, numpy is imported (too late; ``here``:
    for this process, not for one it starts), numpy is older than 2.4 (other feature names;
    left as it is) or the CPU is not a Zen 4."""
    if "NPY_DISABLE_CPU_FEATURES" in environ or "NPY_ENABLE_CPU_FEATURES" in environ:
        return None
    if here and "numpy" in sys.modules:
        return None
    return ZEN4_DISABLE if _slow_avx512_sort(info, numpy_version) else None


def tune_numpy(environ: MutableMapping[str, str], *, here: bool = True) -> None:
    """Set ``NPY_DISABLE_CPU_FEATURES`` in ``environ`` where :func:`numpy_dispatch_setting` says
    so: this process's before numpy is imported (processes started from here, a local Ray's,
    inherit it), or with ``here=False`` the environment of a process about to be started."""
    value = numpy_dispatch_setting(environ, here=here)
    if value is not None:
        environ["NPY_DISABLE_CPU_FEATURES"] = value


def slow_sort_hint(environ: Mapping[str, str] = os.environ, info: dict[str, str] | None = None,
                   numpy_version: tuple[int, int] | None = None) -> str | None:
    """What to tell a user whose numpy, already running, sorts with AVX-512 on a Zen 4 (a
    program of their own that imported numpy before anonaudit could set it), or None."""
    if "NPY_ENABLE_CPU_FEATURES" in environ or ZEN4_DISABLE in environ.get("NPY_DISABLE_CPU_FEATURES", "").split():
        return None
    if not _slow_avx512_sort(info, numpy_version):
        return None
    return (f"numpy sorts with AVX-512 on this AMD Zen 4, several times slower than with AVX2: start Python with "
            f"NPY_DISABLE_CPU_FEATURES={ZEN4_DISABLE} for a faster phrase index (the anonaudit command does it)")


def native_bf16(device: str) -> bool:
    """Whether ``device`` computes bfloat16 natively: a GPU that supports it, or a CPU with
    AVX-512 BF16 or AMX, as torch reports them (elsewhere oneDNN emulates bfloat16, slower than
    float32). What TRIR's and the information content's ``auto`` precisions decide on."""
    import torch

    if str(device).startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    probes = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(bool(p()) for p in probes if callable(p))
