"""The ``auto`` GEMM kernel module: one row per backend that runs, for any (M, N, K, dtype), the registered kernel and
stage count suite.gemm_rule chooses from the shape, without timing. Each backend's module (suite/ptx/gemm_auto.py,
suite/triton/gemm_auto.py) hands it its candidates: the very kernel objects its registrations name.

Where the chosen kernel refuses the shape (``refuses``), cannot run here (``skip_reason``) or lacks the dtype, the
next candidate of the rule is taken; a shape every candidate refuses is refused with the first one's rule.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from suite import gemm_rule
from suite.info import KernelInfo
from suite.kernel import KernelModule, NvrtcModule
from suite.problems import BadInput, Inputs, gemm_dtype_of


def _device_facts() -> tuple[int, bool]:
    """(SMs, sm_90a-capable) of the current GPU; the rule's defaults without one (the Triton interpreter: no sm_90a
    kernel may run)."""
    if not torch.cuda.is_available():
        return gemm_rule.H200_SMS, False
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return props.multi_processor_count, (props.major, props.minor) == (9, 0)


class AutoGemm(KernelModule):
    """The rule's choice among ``candidates`` (registered name -> kernel module) of ``backend``."""

    stages = (None,)  # one row: the rule picks the depth

    def __init__(self, backend: str, candidates: dict[str, KernelModule]):
        self.backend, self.candidates = backend, candidates
        if any(isinstance(c, NvrtcModule) for c in candidates.values()):
            self.describe = self._describe  # without a GPU its row is built and described, like its candidates'
        self.dtypes = tuple(
            d for d in ("fp16", "bf16", "fp8e4m3") if any(d in (c.dtypes or ()) for c in candidates.values())
        )

    def build_for(self, size) -> tuple | None:
        """The shape itself, where a candidate is an NVRTC build: the rule picks the kernel a row runs from it, and
        ``describe(..., build=size)`` describes that kernel."""
        return tuple(size) if any(isinstance(c, NvrtcModule) for c in self.candidates.values()) else None

    def _describe(self, arch: str, dtype: str | None = None, build: tuple | None = None) -> dict[None, KernelInfo]:
        """Without a GPU: the kernel the rule picks for the shape ``build`` at ``dtype``, compiled for ``arch`` and
        described at the depth it picks, as the description of its one row; without a shape (or where the pick is
        not an NVRTC build), every candidate NVRTC builds, compiled."""
        dtype = dtype or self.dtypes[0]
        if build is not None:
            try:
                choice, kernel, stages = self.pick(build, dtype)
            except ValueError:
                kernel = None
            if isinstance(kernel, NvrtcModule):
                size = kernel.build_for(build)  # the shape picks the candidate's build too (the PTX mid-M tiles)
                described = kernel.describe(arch, dtype) if size is None else kernel.describe(arch, dtype, build=size)
                info = described[stages]
                return {None: replace(info, config=f"{choice.kernel} at {stages} stages; {info.config}")}
        built = [name for name, c in self.candidates.items() if isinstance(c, NvrtcModule) and c.build(arch)]
        return {None: KernelInfo(config=f"{arch} cubins of every candidate: {', '.join(built)}")}

    @property
    def fp8_accumulation(self) -> str | None:
        """How its fp8 rows accumulate: what every fp8 candidate says (each may be chosen), None where they differ
        or do not say."""
        said = {getattr(c, "fp8_accumulation", None) for c in self.candidates.values() if "fp8e4m3" in (c.dtypes or ())}
        return said.pop() if len(said) == 1 else None

    def stages_for(self, dtype: str) -> tuple:
        return (None,)

    def _usable(self, kernel: KernelModule, size, dtype: str) -> str | None:
        """Why ``kernel`` cannot run ``size`` at ``dtype`` here, or None."""
        if dtype not in (kernel.dtypes or ("fp16",)):
            return f"no {dtype} build"
        return kernel.refuses(size, dtype) or kernel.skip_reason(dtype)

    def pick(self, size, dtype: str) -> tuple[gemm_rule.Choice, KernelModule, int]:
        """The first candidate of the rule that takes ``size`` at ``dtype``: (choice, kernel, stages). Raises
        ValueError with the first candidate's rule when none does."""
        m, n, k = size
        sms, hopper = _device_facts()
        return self.pick_among(gemm_rule.choices(self.backend, m, n, k, dtype, sms, hopper), size, dtype)

    def pick_among(self, choices, size, dtype: str) -> tuple[gemm_rule.Choice, KernelModule, int]:
        """``pick`` over ``choices`` (the rule's, or some of them): the first whose kernel takes ``size`` at
        ``dtype``, at the kernel's depth nearest the choice's."""
        m, n, k = size
        refusals = []
        for choice in choices:
            kernel = self.candidates[choice.kernel]
            if why := self._usable(kernel, size, dtype):
                refusals.append(f"{choice.kernel}: {why}")
                continue
            depths = [s for s in kernel.stages_for(dtype) if s is not None]
            stages = min(depths, key=lambda s: (abs(s - choice.stages), -s)) if depths else None
            return choice, kernel, stages
        raise ValueError(f"{self.backend}:auto: no candidate takes {m}x{n}x{k} {dtype} ({refusals[0]})")

    def modules_for(self, size, dtype: str) -> tuple:
        """The NVRTC modules of the candidate the rule picks for ``size`` at ``dtype`` (none where none takes it)."""
        try:
            _, kernel, _ = self.pick(size, dtype)
        except ValueError:
            return ()
        return kernel.modules_for(size, dtype)

    def refuses(self, size, dtype: str) -> str | None:
        try:
            self.pick(size, dtype)
        except ValueError as e:
            return str(e)
        return None

    def choice(self, size, dtype: str) -> str | None:
        try:
            choice, _, stages = self.pick(size, dtype)
        except ValueError:
            return None
        return f"{choice.kernel} at {stages} stages: {choice.why}"

    def skip_reason(self, dtype: str) -> str | None:
        reasons = [c.skip_reason(dtype) for c in self.candidates.values() if dtype in (c.dtypes or ("fp16",))]
        return None if any(r is None for r in reasons) else (reasons[0] if reasons else f"no {dtype} build")

    def launch(self, inputs: Inputs, out: torch.Tensor, stages):
        if len(inputs) not in (2, 4):
            raise ValueError("a GEMM takes (a, b) or, for fp8, (a, b, scale_a, scale_b)")
        a, b = inputs[0], inputs[1]
        if a.dim() != 2 or b.dim() != 2:
            raise ValueError("a and b must be rank 2 (matrices)")
        dtype = gemm_dtype_of(inputs)
        size = (a.shape[0], b.shape[0] if len(inputs) == 4 else b.shape[1], a.shape[1])
        if dtype not in self.dtypes:
            raise ValueError(f"{self.backend}:auto: dtype {dtype} is not one of {', '.join(self.dtypes)}")
        _, kernel, depth = self.pick(size, dtype)  # ValueError naming the rule where no candidate takes the shape
        return kernel.launch(inputs, out, depth)

    def bad_inputs(self) -> list[BadInput]:
        """The rules every candidate adds (each refuses them all: whichever the rule picks, the input is refused)."""
        seen: dict[str, BadInput] = {}
        for kernel in self.candidates.values():
            for bad in kernel.bad_inputs():
                seen.setdefault(bad.why, bad)
        return list(seen.values())
