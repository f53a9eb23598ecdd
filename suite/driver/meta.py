"""Where and with what a run happened: GPU, driver, CUDA, library versions, the suite's own source, date, clocks and
temperature. (What the run did: its plan, shard, timer, GPUs and phase_seconds come from suite.driver.sweep.)"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


_STATE_FIELDS = ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw")
_REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")  # new name, then the old one
# Reasons that mean the clocks were pulled down (power cap, thermal or hardware slowdown), not idle or app settings.
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def smi_target(uuid, visible_devices: str | None, ordinal: int) -> str:
    """The ``nvidia-smi -i`` argument naming the GPU that CUDA (torch) calls ``ordinal``.

    CUDA numbers only the GPUs CUDA_VISIBLE_DEVICES lets it see, nvidia-smi numbers all of them, so ``-i <ordinal>``
    can name another GPU. Best: the device's UUID (nvidia-smi takes ``GPU-<uuid>``). Without one, the
    CUDA_VISIBLE_DEVICES entry at ``ordinal`` (a physical index or a UUID, both of which nvidia-smi takes; an index is
    right when CUDA orders GPUs as nvidia-smi does, by PCI bus, as on a machine of identical GPUs). Without that
    variable, the ordinal itself."""
    text = str(uuid).strip() if uuid else ""
    if text:
        return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
    if visible_devices is not None and visible_devices.strip():
        entries = [e.strip() for e in visible_devices.split(",")]
        if ordinal < len(entries) and entries[ordinal]:
            return entries[ordinal]
    return str(ordinal)


def gpu_target() -> str | None:
    """``nvidia-smi -i`` argument for torch's current GPU (see smi_target); None without a CUDA GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    ordinal = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(ordinal)
    return smi_target(getattr(props, "uuid", None), os.environ.get("CUDA_VISIBLE_DEVICES"), ordinal)


def _smi(fields: tuple[str, ...]) -> list[str] | None:
    """Query ``fields`` of the GPU torch uses; None when there is none or nvidia-smi cannot answer."""
    target = gpu_target()
    if target is None:
        return None
    try:
        out = (
            subprocess.run(
                ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", target],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            )
            .stdout.strip()
            .splitlines()[0]
        )
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return [v.strip() for v in out.split(",")]


_ONE_QUERY: list[str] = []  # the reasons field nvidia-smi answered in one query with the state; [] untried, [""] none


_NVML: dict = {}  # "lib": the pynvml module once initialized (False: not usable here); target -> device handle


def _nvml_state(target: str) -> dict | None:
    """gpu_state through NVML (the nvidia-ml-py package's pynvml: the library nvidia-smi itself reads, without a
    process per query); None when pynvml is not installed or NVML does not answer, and nvidia-smi is asked."""
    try:
        if "lib" not in _NVML:
            _NVML["lib"] = False
            import pynvml

            pynvml.nvmlInit()
            _NVML["lib"] = pynvml
        nvml = _NVML["lib"]
        if not nvml:
            return None
        if target not in _NVML:
            by_uuid = target.startswith(("GPU-", "MIG-"))
            get = nvml.nvmlDeviceGetHandleByUUID if by_uuid else nvml.nvmlDeviceGetHandleByIndex
            _NVML[target] = get(target if by_uuid else int(target))
        handle = _NVML[target]
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)  # the new name, then the old
        reasons = reasons or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        values = [
            nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,  # mW
        ]
        return _state([str(v) for v in values], hex(int(reasons(handle))))
    except Exception:  # noqa: BLE001 - no pynvml, no NVML, an older driver: nvidia-smi answers instead
        return None


def gpu_state() -> dict:
    """SM / memory clocks (MHz), temperature (C), power (W), the active clock-event (throttle) reasons bitmask and
    whether any of them is a slowdown. Read-only: the suite never changes clocks. Empty without nvidia-smi.

    It is read after every timed row: through NVML where pynvml is installed (microseconds), else one nvidia-smi
    call asks for all of it; when this nvidia-smi does not answer that (an older one, or another reasons field
    name), the state and the reasons are asked separately."""
    target = gpu_target()
    if target is not None and (state := _nvml_state(target)) is not None:
        return state
    fields = [_ONE_QUERY[0]] if _ONE_QUERY else list(_REASON_FIELDS)
    for field in fields if fields != [""] else []:
        values = _smi(_STATE_FIELDS + (field,))
        if values is not None and len(values) == len(_STATE_FIELDS) + 1 and _parse_reasons(values[-1]) is not None:
            _ONE_QUERY[:] = [field]
            return _state(values[:-1], values[-1])
    if not _ONE_QUERY:
        _ONE_QUERY[:] = [""]
    values = _smi(_STATE_FIELDS)
    if values is None:
        return {}
    reasons = None
    for field in _REASON_FIELDS:
        answer = _smi((field,))
        if answer is not None:
            reasons = answer[0]
            break
    return _state(values, reasons)


def _parse_reasons(text: str) -> int | None:
    try:
        return int(text, 16)
    except ValueError:
        return None


def _state(values: list[str], reasons: str | None) -> dict:
    state: dict = {}
    for key, value in zip(("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w"), values):
        try:
            state[key] = float(value)
        except ValueError:
            state[key] = value
    if reasons is not None and (mask := _parse_reasons(reasons)) is not None:
        state["throttle_reasons"] = mask
        state["throttled"] = bool(mask & THROTTLE_MASK)
    return state


def memory_latency_ns() -> float | str:
    """The GPU's idle global-memory latency in ns, by the suite's own pointer chase (suite.probes.latency); a message
    instead when it could not be measured."""
    try:
        from suite.probes import latency

        return round(latency.measure_ns(), 1)
    except Exception as e:  # noqa: BLE001 - report, don't fail the run over one probe
        return f"unavailable ({type(e).__name__}: {e})"


def suite_source() -> str:
    """A hash of the suite's own source (every .py, .cu and .cuh file under suite/, by path and content): two runs of
    different code have different hashes (suite.merge refuses to combine them)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".cu", ".cuh") and p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def collect(on_gpu: bool) -> dict:
    import torch

    meta = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "suite_source": suite_source(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "cuda_core": _version("cuda-core"),
        "cuda_bindings": _version("cuda-bindings"),
        "cuda_python": _version("cuda-python"),
        "mode": "gpu" if on_gpu else "cpu (Triton interpreter; PTX compiled, not run)",
    }
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        meta["nvrtc"] = f"{major}.{minor}"
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
        meta["gpu_id"] = gpu_target()
        driver = _smi(("driver_version",))
        meta["driver"] = driver[0] if driver else None
        meta["memory_latency_ns"] = memory_latency_ns()  # Little's law in suite.driver.depth_plot
    else:
        meta.update(gpu=None, driver=None, cuda_runtime=torch.version.cuda)
    return meta
