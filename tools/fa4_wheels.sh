#!/usr/bin/env bash
# The flash-attn-4 wheels for the H200 machine (which has no package index), in two halves under .whl/a and .whl/b
# (ignored), each under the device tool's 64 MiB a call: the CUTLASS DSL's CUDA libraries are one wheel of about
# 92 MB, split in two parts here and joined there (tools/device_batch.sh fa4-a, then fa4-b on the same machine).
# Python 3.12 wheels for linux x86_64, the machine's; torch, cuda-bindings and protobuf are already there.
set -eu
rm -rf .whl/a .whl/b /tmp/fa4-dl && mkdir -p .whl/a .whl/b /tmp/fa4-dl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 -d /tmp/fa4-dl \
  flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
  nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu12==4.8.1 quack-kernels==0.6.5 \
  "apache-tvm-ffi>=0.1.11,<0.2" torch-c-dlpack-ext einops
big=$(ls /tmp/fa4-dl/nvidia_cutlass_dsl_libs_cu12-*.whl)
split -b 48M "$big" "$big.part-" && rm "$big"
mv /tmp/fa4-dl/*.part-aa /tmp/fa4-dl/flash_attn_4-*.whl /tmp/fa4-dl/nvidia_cutlass_dsl-*.whl .whl/a/
mv /tmp/fa4-dl/* .whl/b/
du -sh .whl/a .whl/b
