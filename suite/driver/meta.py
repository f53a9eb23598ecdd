"""Where and with what a run happened: GPU, driver, CUDA, library versions, date, clocks and temperature."""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
from importlib import metadata


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


_SMI_FIELDS = ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", "clocks_throttle_reasons.active")


def gpu_state() -> dict:
    """SM / memory clocks (MHz), temperature (C), power (W) and active throttle-reason bitmask, from nvidia-smi.
    Read-only: the suite never changes clocks. Empty when nvidia-smi is not there."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return {}
    state = {}
    for key, value in zip(("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "throttle_reasons"),
                          (v.strip() for v in out.split(","))):
        try:
            state[key] = int(value, 16) if key == "throttle_reasons" else float(value)
        except ValueError:
            state[key] = value
    return state


def collect(on_gpu: bool) -> dict:
    import torch

    meta = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "cuda_core": _version("cuda-core"),
        "cuda_bindings": _version("cuda-bindings"),
        "cuda_python": _version("cuda-python"),
        "mode": "gpu" if on_gpu else "cpu (Triton interpreter; PTX compiled, not run)",
    }
    try:
        from suite.ptx.loader import nvrtc_version

        meta["nvrtc"] = "%d.%d" % nvrtc_version()
    except Exception as e:  # noqa: BLE001 - report, don't fail the run over a version string
        meta["nvrtc"] = f"unavailable ({e})"
    if on_gpu:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        meta.update(
            gpu=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sms=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
            memory_bytes=props.total_memory,
            cuda_runtime=torch.version.cuda,
        )
        try:
            meta["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            meta["driver"] = None
    else:
        meta.update(gpu=None, driver=None, cuda_runtime=torch.version.cuda)
    return meta
