"""Where the benchmark ran: the device, the versions, the commit, and the memory-bandwidth floor
(bytes a copy moves per second, measured: weight bytes over it is the least a memory-bound step
can take)."""

import os
import platform
import re
import subprocess
from importlib import metadata

import numpy as np

import course.gpt2  # noqa: F401  first: it starts tinygrad on the course's CPU runtime, read once
from benchmarks import ROOT
from course.timing import cpu_fields, cpu_model, seconds

from tinygrad import Device, Tensor

HOST_DEVICES = ("CPU", "CLANG", "LLVM")  # tinygrad's devices that run on the CPU


def on_host():
    return Device.DEFAULT in HOST_DEVICES


def device_info():
    return {
        "tinygrad_device": Device.DEFAULT,
        "cpu": cpu_model(),
        "cpu_id": cpu_id(),
        "gpu": None if on_host() else gpu_name(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
    }


def cpu_id():
    """The CPU's vendor, family and model numbers and whether it has AVX-512, from /proc/cpuinfo
    (x86 Linux; None elsewhere): "AMD EPYC" names several generations (AuthenticAMD family 25,
    model 1: Zen 3; model 17: Zen 4), whose steps and pass costs differ."""
    fields = cpu_fields()
    if "cpu family" not in fields:  # not an x86 CPU
        return None
    vendor, family, model = fields.get("vendor_id"), fields["cpu family"], fields.get("model")
    avx512 = ", AVX-512" if "avx512f" in fields.get("flags", "").split() else ""
    return f"{vendor} family {family}, model {model}{avx512}"


def device_tag(info):
    """A file-name-safe name for the device that made the results: cpu-amd-epyc, cuda-..."""
    name = info["gpu"] or info["cpu"]
    return re.sub(r"[^a-z0-9]+", "-", f"{info['tinygrad_device']}-{name}".lower()).strip("-")


def gpu_name():
    try:
        query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def versions(with_torch):
    names = ("numpy", "tinygrad") + (("torch", "transformers") if with_torch else ())
    return {"python": platform.python_version()} | {n: metadata.version(n) for n in names}


def git_commit():
    try:
        cmd = ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def bandwidth(fast):
    """Copy bandwidth in GB/s by numpy and on tinygrad's device; the floor's is the larger that
    the model's weights are read at (numpy's only when tinygrad runs on the CPU too)."""
    megabytes, tries = (32, 2) if fast else (256, 5)  # fast: a smoke test, not a number
    out = {"numpy_copy_GBps": numpy_copy_bandwidth(megabytes, tries) / 1e9, "array_MB": megabytes}
    try:
        out["tinygrad_copy_GBps"] = tinygrad_copy_bandwidth(megabytes, tries) / 1e9
    except Exception as e:  # a floor from numpy alone still says something
        out["tinygrad_error"] = repr(e)
    numpy = [out["numpy_copy_GBps"]] if on_host() else []
    out["floor_GBps"] = max([out.get("tinygrad_copy_GBps", 0), *numpy]) or out["numpy_copy_GBps"]
    return out


def numpy_copy_bandwidth(megabytes, tries):
    """Bytes moved per second (read + write, as STREAM's copy counts them) by np.copyto."""
    src = np.ones(megabytes * 2**20 // 8)
    dst = np.zeros_like(src)
    best = min(seconds(lambda: np.copyto(dst, src)) for _ in range(tries))
    return 2 * src.nbytes / best


def tinygrad_copy_bandwidth(megabytes, tries):
    """The same on tinygrad's device, with its threads: the memory the model's kernels read."""
    n = megabytes * 2**20 // 4
    src = Tensor.ones(n).contiguous().realize()
    dst = Tensor.zeros(n).contiguous().realize()

    def copy():
        dst.assign(src + 1).realize()  # + 1: a real kernel that reads and writes every element
        Device[Device.DEFAULT].synchronize()

    copy()
    best = min(seconds(copy) for _ in range(tries))
    return 2 * n * 4 / best
