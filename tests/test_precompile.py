"""Compiling up front: on a GPU, suite.driver.precompile builds exactly the cubins the launches then load (from
the cubin cache, nothing compiled again), for the streaming kernels (whose launch builds every depth of the
configuration in one cubin) and for a plain NVRTC module alike. On a CPU the GPU is faked: its arch, and gates that
let every variant run."""

import pytest

from suite.driver import bench, jobs
from suite.driver import plan as planning
from suite.driver import precompile as precompile_module
from suite.driver.rows import Row, add_info, settle_sass, variants_of
from suite.nvrtc import loader
from suite.registry import Variant


@pytest.fixture
def fake_sm90(monkeypatch):
    """The GPU faked as sm_90, every compile recorded, and the in-memory builds of the two kernels forgotten (an
    earlier test in this process may have built them; the cubin cache on disk still serves them)."""
    for v in variants_of("vector").values():
        if v.label in ("ptx:cp.async ring", "cuda:cuda::pipeline ring"):
            v.kernel.__dict__.pop("_builds", None)
            ring_build = getattr(getattr(v.kernel, "module", None), "build", None)
            if hasattr(ring_build, "cache_clear"):
                ring_build.cache_clear()
    monkeypatch.setattr(loader, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(Variant, "skip_reason", lambda self: None)
    compiled = []
    real = loader.compile_cu

    def compile_cu(path, name_expressions, arch=None, *args, **kwargs):
        module = real(path, name_expressions, arch, *args, **kwargs)
        compiled.append((path, tuple(name_expressions), module.from_cache))
        return module

    monkeypatch.setattr(loader, "compile_cu", compile_cu)
    return compiled


def test_the_cubins_compiled_up_front_are_those_the_launches_load(fake_sm90):
    opts = bench.Options(problems=("vector",), variants=("ptx:cp.async ring", "cuda:cuda::pipeline ring"))
    jobs = planning.build(opts, on_gpu=True).jobs
    kernels = {
        v.label: v.kernel
        for v in variants_of("vector").values()
        if v.label in ("ptx:cp.async ring", "cuda:cuda::pipeline ring")
    }
    assert bench.precompile(jobs, on_gpu=True) == {}  # on a GPU nothing is described
    built = list(fake_sm90)
    assert len(built) == 2
    fake_sm90.clear()
    stream = kernels["ptx:cp.async ring"]
    launched = stream.module.build(None, stream.stream_config)  # what Scale2 loads: arch None, the GPU's
    assert launched.from_cache and fake_sm90[0][1] in [names for _, names, _ in built]
    plain = kernels["cuda:cuda::pipeline ring"]
    assert plain.build() is plain.build("sm_90")  # the launch's build(): the one compiled up front, in memory


def test_without_a_gpu_the_gated_kernels_are_described_in_parallel(monkeypatch):
    # gated out here as on a machine without the GPU it needs (on a GPU machine it would run, not be described)
    monkeypatch.setattr(Variant, "skip_reason", lambda self: "needs a GPU this test pretends is absent")
    opts = bench.Options(problems=("vector",), variants=("ptx:cp.async ring",))
    jobs = planning.build(opts, on_gpu=False).jobs
    started, done = [], []

    def on_start(total):  # the progress line of a cold run: one step per module as it finishes
        started.append(total)
        return done.append

    described = bench.precompile(jobs, on_gpu=False, on_start=on_start)
    assert set(described) == {("ptx:cp.async ring", "fp32", None)}  # (variant, dtype, the build its sizes pick)
    assert started == [1] and done == ["ptx:cp.async ring fp32 for sm_90"]
    info = described[("ptx:cp.async ring", "fp32", None)]
    assert set(info) == set(variants_of("vector")["ptx:cp.async ring"].stages)
    assert bench.precompile(jobs, on_gpu=False, known=described, on_start=on_start) == {}  # reused: no step
    assert started == [1]


def test_the_listings_are_read_up_front_too(fake_sm90, monkeypatch):
    """precompile's threads also read what each launch's KernelInfo needs from the cubin (the SASS listing, split and
    counted, and the resource usage), so no row waits for a cuobjdump one after another."""
    read = []
    for name in ("instruction_classes", "resources"):
        real = getattr(loader.CompiledModule, name)
        monkeypatch.setattr(
            loader.CompiledModule, name, lambda self, _n=name, _r=real: read.append((_n, self.path.name)) or _r(self)
        )
    opts = bench.Options(problems=("vector",), variants=("cuda:cuda::pipeline ring",))
    bench.precompile(planning.build(opts, on_gpu=True).jobs, on_gpu=True)
    assert sorted(read) == [("instruction_classes", "vector.cu"), ("resources", "vector.cu")]


def test_sass_listed_in_the_background_is_filled_in_after_the_rows_validate():
    """A Triton kernel's SASS classes (suite.sass.PendingClasses), listed in the background, are left for later when
    its row validates; once listed, the row gets them as any other; a listing that failed fails its row then."""
    from concurrent.futures import Future

    from suite.info import KernelInfo
    from suite.sass import PendingClasses

    future = Future()
    row = Row()
    add_info(row, KernelInfo(registers=90, sass=PendingClasses(future)))
    assert row.registers == 90 and "sass" not in row.to_dict() and isinstance(row.pending_sass, PendingClasses)
    future.set_result({"wgmma": 4, "tma": 2, "local_memory": 0})
    settle_sass(row)
    assert row.sass == "HGMMA UTMALDG" and row.sass_counts == {"wgmma": 4, "tma": 2, "local_memory": 0}
    failed = Future()
    failed.set_exception(RuntimeError("cuobjdump: not a cubin"))
    broken = Row(valid=True)
    add_info(broken, KernelInfo(sass=PendingClasses(failed)))  # listed already, and failed: still left
    assert broken.pending_sass is not None
    settle_sass(broken)  # the row fails, the job goes on
    assert broken.valid is False and "SASS listing" in broken.note and broken.pending_sass is None
    assert KernelInfo(sass=PendingClasses(future)).as_dict()["sass"] == {"wgmma": 4, "tma": 2, "local_memory": 0}


def test_background_listings_can_be_waited_for(monkeypatch):
    """suite.sass.wait_for_listings returns once every listing started in the background has been made."""
    import threading

    from suite.nvrtc import sass

    release, made = threading.Event(), []

    def slow_classes(cubin):
        release.wait(5)
        made.append(cubin)
        return {"tma": 1}

    monkeypatch.setattr(sass, "cubin_instruction_classes", slow_classes)
    pending = sass.pending_classes(b"\x7fELF-fake")
    assert not pending.done() and not made
    threading.Timer(0.05, release.set).start()
    sass.wait_for_listings()
    assert made == [b"\x7fELF-fake"] and pending.done() and dict(pending) == {"tma": 1}


def test_a_lost_gpu_sends_rows_back_without_pending_listings(monkeypatch):
    """When the GPU stops answering, the rows finished so far go back whole (to the parent of a --gpus worker, or
    into results.json): a listing still pending in the background is waited for and filled in, never sent as is
    (a Future neither pickles nor serializes)."""
    import types
    from concurrent.futures import Future

    from suite.driver.workers import DeviceFailed
    from suite.sass import PendingClasses

    listed = Future()
    listed.set_result({"tma": 2})
    failed = Future()
    failed.set_exception(RuntimeError("cuobjdump: not a cubin"))
    rows = [
        Row(final=True, pending_sass=PendingClasses(listed), valid=False),
        Row(final=True, pending_sass=PendingClasses(failed), valid=True),
        Row(valid=True),  # not finished: not sent
    ]

    def gone(device=None):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(jobs.torch.cuda, "synchronize", gone)
    with pytest.raises(DeviceFailed) as lost:
        jobs._check_device(types.SimpleNamespace(type="cuda"), rows)
    sent = lost.value.rows
    assert len(sent) == 2 and not any("_sass" in r or "_final" in r for r in sent)
    assert sent[0]["sass"] == "UTMALDG" and sent[1]["valid"] is False and "SASS listing" in sent[1]["note"]


def test_the_mid_m_kernels_tiles_are_compiled_up_front_as_their_launches_load_them(fake_sm90, monkeypatch):
    """The PTX mid-M kernel builds one module per tile, on demand: up front, precompile builds the tile the plan takes
    at each depth of a size (here one: 341 x 6144 x 11008 takes 192 x 88 at 4, 5 and 6 stages), and a launch's
    build_of loads that very module's build, not the registered module's describe tile."""
    from suite.ptx import gemm_decode

    monkeypatch.setattr(loader, "num_sms", lambda: 132)
    monkeypatch.delitem(gemm_decode.MID.__dict__, "_tiles", raising=False)  # tiles built in memory by earlier tests
    size = (341, 6144, 11008)
    opts = bench.Options(problems=("gemm",), variants=("ptx:mid-m swap-ab tma+wgmma",), sizes={"gemm": (size,)})
    jobs = planning.build(opts, on_gpu=True).jobs
    assert gemm_decode.MID.modules_for(size, "fp16") == (gemm_decode.MID.tile_module(88, 3),)
    assert bench.precompile(jobs, on_gpu=True) == {}
    built = [names for _, names, _ in fake_sm90]
    assert any("gemm_tma_decode<5, 88, 3, 1, F16, true>" in names for names in built), built
    assert not any("gemm_tma_decode<5, 144, 2, 1, F16, true>" in names for names in built)  # the describe tile's
    plans = {s: gemm_decode.mid_plan(*size, 132, s) for s in gemm_decode.MID_STAGES}
    for plan in plans.values():
        assert gemm_decode.MID.build_of(plan) is gemm_decode.MID.tile_module(88, 3).build("sm_90")


def test_the_auto_rows_pick_is_compiled_up_front(fake_sm90, monkeypatch):
    """ptx:auto alone in a run: its pick's modules are built up front (at 341 x 6144 x 11008, the mid-M kernel's 192 x
    88 tile), as they would be for the picked variant's own row."""
    from suite.ptx import gemm_decode

    monkeypatch.setattr(loader, "num_sms", lambda: 132)
    monkeypatch.delitem(gemm_decode.MID.__dict__, "_tiles", raising=False)
    size = (341, 6144, 11008)
    opts = bench.Options(problems=("gemm",), variants=("ptx:auto",), sizes={"gemm": (size,)}, dtypes=("fp16",))
    jobs = planning.build(opts, on_gpu=True).jobs
    assert bench.precompile(jobs, on_gpu=True) == {}
    built = [names for _, names, _ in fake_sm90]
    assert any("gemm_tma_decode<5, 88, 3, 1, F16, true>" in names for names in built), built


def test_a_size_a_module_cannot_plan_leaves_the_rest_compiled_and_the_run_to_go_on(fake_sm90, monkeypatch):
    """A kernel module whose ``modules_for`` raises at a size (a planning bug, or a rule it states only at launch)
    does not stop the run before anything is timed: the other variants' modules are still compiled up front, and the
    row itself raises the error at its launch, where the driver records it in that row."""
    from suite.ptx import gemm_decode

    monkeypatch.setattr(loader, "num_sms", lambda: 132)
    monkeypatch.delitem(gemm_decode.MID.__dict__, "_tiles", raising=False)

    def unplannable(size, dtype):
        raise ValueError(f"no plan for {size} at {dtype}")

    monkeypatch.setattr(gemm_decode.MID, "modules_for", unplannable)
    size = (341, 6144, 11008)
    variants = ("ptx:mid-m swap-ab tma+wgmma", "ptx:128x256 split-tail tma-store tma+wgmma")
    opts = bench.Options(problems=("gemm",), variants=variants, sizes={"gemm": (size,)}, dtypes=("fp16",))
    jobs = planning.build(opts, on_gpu=True).jobs
    asked = []  # the builds precompile asks for (whether or not an earlier test left them built in memory)
    monkeypatch.setattr(precompile_module, "_build_and_list", lambda build, arch: asked.append(build))
    assert bench.precompile(jobs, on_gpu=True) == {}
    tail = variants_of("gemm")["ptx:128x256 split-tail tma-store tma+wgmma"].kernel
    assert asked and asked == [module.build for module in tail.modules_for(size, "fp16")], asked
