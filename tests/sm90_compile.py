"""Compile Triton and Gluon kernels for sm_90 on a machine without a GPU, for the tests that check their SASS.

Compiled in a subprocess: TRITON_INTERPRET=1 (set for the test process when there is no GPU) makes triton.jit
interpret, and the interpreter's patches of triton.language break compilation in the same process. One subprocess per
test process, started on the first call and kept: each request is a line of JSON on its stdin, each answer a line on
its stdout (a process per call cost two seconds of imports each, eight times a run).

A spec names the kernel ("package.module:function"), its signature (argument -> Triton type string, "constexpr" for
meta-parameters), the constexpr values, the arguments to specialize as 16-divisible (pointers aligned to 16 bytes,
pitches a multiple of 16 elements, as a launch would see them), and the compile options. Constexpr values given as
"tl.NAME" are Triton dtypes. A signature entry {"gluon_desc": [type, box, "gl.NAME"]} is a Gluon tensor descriptor
with the default NVMMA shared layout for that box (2 or 3 extents). "ones" names integer arguments given as 1,
specialized as Triton's launcher would (a constexpr unless the kernel marks it do_not_specialize). Returns, per spec:
SASS instruction classes (suite.sass.INSTRUCTION_CLASSES), shared memory bytes, the wgmma chain
(suite.sass.wgmma_chain: the HGMMA / QGMMA instructions and how many of them close a group), the pending-group counts
of its wgmma waits in program order, the mbarrier try-waits issued while a wgmma group runs (between the group's
closing instruction and its wait), the PTX's line count of a few instructions, and the SASS's sha256 (two builds'
machine code told apart)."""

from __future__ import annotations

import atexit
import functools
import json
import os
import subprocess
import sys
import tempfile

_SCRIPT = r"""
import hashlib, importlib, json, re, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from suite.sass import disassemble, instruction_classes, wgmma_chain

def value(v):
    if isinstance(v, str) and v.startswith("tl."):
        return getattr(tl, v[3:])
    return v

def compile_one(spec):
    module, _, name = spec["fn"].partition(":")
    fn = getattr(importlib.import_module(module), name)
    signature = {}
    for arg, ty in spec["signature"].items():
        if isinstance(ty, dict):
            from triton.experimental.gluon import language as gl
            dtype, box, element = ty["gluon_desc"]
            layout = gl.NVMMASharedLayout.get_default_for(box, getattr(gl, element[3:]))
            ty = f"tensordesc<{dtype}[{','.join(map(str, box))}],{layout!r}>"
        signature[arg] = ty
    constexprs = {k: value(v) for k, v in spec["constexprs"].items()}
    # arguments a launch passes as 1: Triton's launcher makes an integer 1 a constexpr unless the kernel says
    # do_not_specialize for it; mirrored here, so a kernel that breaks on that specialization fails to compile
    for arg in spec.get("ones", ()):
        if next(p for p in fn.params if p.name == arg).do_not_specialize:
            signature[arg] = "i32"
        else:
            signature[arg], constexprs[arg] = "constexpr", 1
    # attributes are keyed by the argument's position in the kernel's own parameter list (not the spec's order)
    names = [p.name for p in fn.params]
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in spec.get("aligned", ())}
    if spec.get("gluon"):
        from triton.experimental.gluon._runtime import GluonASTSource
        src = GluonASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    else:
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=spec["options"])
    ptx = k.asm["ptx"]
    sass = disassemble(k.asm["cubin"])
    return {"classes": instruction_classes(sass), "shared": k.metadata.shared, "wgmma_chain": wgmma_chain(sass),
            "wgmma_waits": re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d)", sass),
            "ptx": {w: ptx.count(w) for w in ("tensormap.replace", "atom.global", "red.global", "setmaxnreg")},
            "sass_sha256": hashlib.sha256(sass.encode()).hexdigest(), "waits_under_wgmma": waits_under_wgmma(sass)}

def waits_under_wgmma(sass):
    # mbarrier try-waits issued while a wgmma group runs: after a group's closing GMMA (gsb0), before its DEPBAR
    count, running = 0, False
    for line in sass.splitlines():
        if "GMMA" in line and "gsb0" in line and "DEPBAR" not in line:
            running = True
        elif "WARPGROUP.DEPBAR" in line:
            running = False
        elif running and "SYNCS.PHASECHK" in line:
            count += 1
    return count

import traceback
for line in sys.stdin:
    try:
        answer = {"results": [compile_one(spec) for spec in json.loads(line)]}
    except Exception:
        answer = {"error": traceback.format_exc()}
    print(RESULT + json.dumps(answer), flush=True)
"""
_RESULT = "SM90-RESULT "  # what starts an answer line (anything else the compiler prints to stdout is not one)


@functools.cache
def _server() -> tuple[subprocess.Popen, object]:
    """The compiling subprocess of this test process, and the file its stderr goes to (a file, not a pipe: a pipe
    nobody reads fills and stalls it)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        [sys.executable, "-c", f"RESULT = {_RESULT!r}\n" + _SCRIPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
    )
    atexit.register(_stop, proc)
    return proc, log


def _stop(proc: subprocess.Popen) -> None:
    proc.stdin.close()  # its loop ends, and it exits
    proc.wait(timeout=60)


def compile_sm90(specs: list[dict]) -> list[dict]:
    proc, log = _server()
    proc.stdin.write(json.dumps(specs) + "\n")
    proc.stdin.flush()
    for line in proc.stdout:
        if line.startswith(_RESULT):
            answer = json.loads(line[len(_RESULT) :])
            if "error" in answer:
                raise RuntimeError(f"compiling for sm_90 failed:\n{answer['error'][-4000:]}")
            return answer["results"]
    log.seek(0)
    raise RuntimeError(f"the sm_90 compiling process exited ({proc.wait()}):\n{log.read()[-4000:]}")


TRITON_TYPES = {"fp16": "fp16", "bf16": "bf16", "fp8e4m3": "fp8e4nv"}
OUT_TYPES = {"fp16": "fp16", "bf16": "bf16", "fp8e4m3": "bf16"}


def desc(dtype: str, box) -> str:
    """A host-built tensor descriptor's type string."""
    return f"tensordesc<{TRITON_TYPES[dtype]}[{box[0]},{box[1]}]>"


def scales(dtype: str) -> tuple[dict, dict]:
    """(signature, constexprs) of the scale_a / scale_b arguments: fp32 pointers for fp8, None otherwise."""
    if dtype == "fp8e4m3":
        return {"scale_a": "*fp32", "scale_b": "*fp32"}, {}
    return {"scale_a": "constexpr", "scale_b": "constexpr"}, {"scale_a": None, "scale_b": None}


SMEM_LIMIT = 227 * 1024  # the most shared memory one block may have on sm_90


def assert_fits_sm90(got: dict, required: dict[str, int], where) -> None:
    """The rules every sm_90 build answers to, whatever its design: no local memory (spills), wgmma not serialized by
    ptxas (a serialized chain closes a group at every wgmma: C7510 / C7514), shared memory within what a block may
    have, and at least the SASS classes its module declares (``KernelModule.sass_minimums``)."""
    classes = got["classes"]
    assert classes["local_memory"] == 0, (where, "local memory", classes)
    total, closing = got["wgmma_chain"]
    assert not total or closing < total, (where, "serialized wgmma", got["wgmma_chain"])
    assert got["shared"] <= SMEM_LIMIT, (where, got["shared"])
    short = {cls: classes[cls] for cls, least in required.items() if classes[cls] < least}
    assert not short, (where, "SASS short of the module's sass_requires", short, required)
