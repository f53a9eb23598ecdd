"""Compile Triton and Gluon kernels for sm_90 on a machine without a GPU, for the tests that check their SASS.

Compiled in a subprocess: TRITON_INTERPRET=1 (set for the test process when there is no GPU) makes triton.jit
interpret, and the interpreter's patches of triton.language break compilation in the same process.

A spec names the kernel ("package.module:function"), its signature (argument -> Triton type string, "constexpr" for
meta-parameters), the constexpr values, the arguments to specialize as 16-divisible (pointers aligned to 16 bytes,
pitches a multiple of 16 elements, as a launch would see them), and the compile options. Constexpr values given as
"tl.NAME" are Triton dtypes. A signature entry {"gluon_desc": [type, [rows, cols], "gl.NAME"]} is a Gluon tensor
descriptor with the default NVMMA shared layout for that box. Returns, per spec: SASS instruction classes
(suite.sass.INSTRUCTION_CLASSES), shared memory bytes, the wgmma chain (suite.sass.wgmma_chain: the HGMMA / QGMMA
instructions and how many of them close a group), and the PTX's line count of a few instructions."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_SCRIPT = r"""
import importlib, json, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from suite.sass import disassemble, instruction_classes, wgmma_chain

def value(v):
    if isinstance(v, str) and v.startswith("tl."):
        return getattr(tl, v[3:])
    return v

out = []
for spec in json.loads(sys.stdin.read()):
    module, _, name = spec["fn"].partition(":")
    fn = getattr(importlib.import_module(module), name)
    signature = {}
    for arg, ty in spec["signature"].items():
        if isinstance(ty, dict):
            from triton.experimental.gluon import language as gl
            dtype, box, element = ty["gluon_desc"]
            layout = gl.NVMMASharedLayout.get_default_for(box, getattr(gl, element[3:]))
            ty = f"tensordesc<{dtype}[{box[0]},{box[1]}],{layout!r}>"
        signature[arg] = ty
    constexprs = {k: value(v) for k, v in spec["constexprs"].items()}
    names = list(signature)
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in spec.get("aligned", ())}
    if spec.get("gluon"):
        from triton.experimental.gluon._runtime import GluonASTSource
        src = GluonASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    else:
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=spec["options"])
    ptx = k.asm["ptx"]
    sass = disassemble(k.asm["cubin"])
    out.append({"classes": instruction_classes(sass), "shared": k.metadata.shared, "wgmma_chain": wgmma_chain(sass),
                "ptx": {w: ptx.count(w) for w in ("tensormap.replace", "atom.global", "red.global", "setmaxnreg")}})
print(json.dumps(out))
"""


def compile_sm90(specs: list[dict]) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT], input=json.dumps(specs), capture_output=True, text=True, check=False, env=env
    )
    if proc.returncode:
        raise RuntimeError(f"compiling for sm_90 failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


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
