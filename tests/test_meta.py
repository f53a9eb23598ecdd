"""Run metadata: nvidia-smi is asked about the GPU torch actually uses (CUDA_VISIBLE_DEVICES honoured), on fakes."""

import subprocess
from types import SimpleNamespace

import pytest
import torch

from suite.driver import meta


@pytest.mark.parametrize(
    "uuid, visible, ordinal, target",
    [
        ("8a3c2f1e-0b6d-4e2a-9c1f-77aa00bb11cc", None, 0, "GPU-8a3c2f1e-0b6d-4e2a-9c1f-77aa00bb11cc"),
        ("8a3c2f1e-0b6d-4e2a-9c1f-77aa00bb11cc", "3,1", 1, "GPU-8a3c2f1e-0b6d-4e2a-9c1f-77aa00bb11cc"),  # UUID first
        ("GPU-8a3c2f1e", None, 0, "GPU-8a3c2f1e"),
        ("MIG-0e2c", "MIG-0e2c", 0, "MIG-0e2c"),
        (None, "3,1", 0, "3"),  # torch's GPU 0 is physical GPU 3
        (None, "3,1", 1, "1"),
        (None, " 5 , 6 ", 1, "6"),
        (None, "GPU-aaaa,GPU-bbbb", 1, "GPU-bbbb"),
        (None, None, 2, "2"),  # nothing hidden: CUDA's numbering is nvidia-smi's
        (None, "", 0, "0"),
        ("", "7", 0, "7"),
    ],
)
def test_smi_target(uuid, visible, ordinal, target):
    assert meta.smi_target(uuid, visible, ordinal) == target


def _fake_gpu(monkeypatch, ordinal, uuid):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: ordinal)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: SimpleNamespace(uuid=uuid if i == ordinal else "?")
    )


def test_gpu_target_maps_torchs_current_device(monkeypatch):
    _fake_gpu(monkeypatch, 1, None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert meta.gpu_target() == "6"
    _fake_gpu(monkeypatch, 1, "1234-5678")
    assert meta.gpu_target() == "GPU-1234-5678"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert meta.gpu_target() is None


def test_gpu_state_queries_the_gpu_in_use(monkeypatch):
    monkeypatch.setattr(meta, "_NVML", {"lib": False})  # no pynvml: nvidia-smi answers
    _fake_gpu(monkeypatch, 1, None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        query = cmd[1]
        out = "0x0000000000000004" if "reasons" in query else "1980, 3201, 45, 612.5"
        return subprocess.CompletedProcess(cmd, 0, stdout=out + "\n", stderr="")

    monkeypatch.setattr(meta.subprocess, "run", fake_run)
    state = meta.gpu_state()
    assert state == {
        "sm_clock_mhz": 1980.0,
        "mem_clock_mhz": 3201.0,
        "temperature_c": 45.0,
        "power_w": 612.5,
        "throttle_reasons": 4,
        "throttled": True,
    }
    assert calls and all(cmd[cmd.index("-i") + 1] == "5" for cmd in calls)  # physical GPU 5, not "0"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    calls.clear()
    assert meta.gpu_state() == {} and not calls  # no GPU: nvidia-smi is not asked about some other one


def test_gpu_state_reads_nvml_when_pynvml_is_there_and_falls_back_to_nvidia_smi(monkeypatch):
    """With pynvml: the same fields from NVML, for the GPU torch uses (by UUID), and no nvidia-smi process; when NVML
    fails, nvidia-smi answers."""
    import sys
    import types

    _fake_gpu(monkeypatch, 0, "1234-5678")
    asked = []
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda uuid: asked.append(uuid) or "handle",
        nvmlDeviceGetHandleByIndex=lambda i: pytest.fail("asked by index"),
        nvmlDeviceGetClockInfo=lambda h, which: {1: 1755, 2: 3201}[which],
        nvmlDeviceGetTemperature=lambda h, which: 51,
        nvmlDeviceGetPowerUsage=lambda h: 612500,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x20,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(meta, "_NVML", {})
    smi = []
    monkeypatch.setattr(meta.subprocess, "run", lambda cmd, **kw: smi.append(cmd) or pytest.fail("nvidia-smi ran"))
    state = meta.gpu_state()
    fields = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "throttle_reasons", "throttled")
    assert set(state) == set(fields) and [state[f] for f in fields] == [1755.0, 3201.0, 51.0, 612.5, 0x20, True]
    assert asked == ["GPU-1234-5678"] and not smi
    meta.gpu_state()
    assert asked == ["GPU-1234-5678"]  # the handle is kept

    def broken(h):
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    fake.nvmlDeviceGetCurrentClocksEventReasons = broken
    monkeypatch.setattr(
        meta.subprocess,
        "run",
        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, stdout="1980, 3201, 45, 612.5, 0x0\n", stderr=""),
    )
    assert meta.gpu_state()["sm_clock_mhz"] == 1980.0  # nvidia-smi's answer
