#!/bin/bash
# nvcc_time.sh FILE.cu: compiles FILE.cu with the flags of dice's builder (torch 2.11 toolchain of
# this machine, sm_90); writes FILE.time (user, system, wall s of nvcc and its children) and
# FILE.nvtime (nvcc --time: wall ms per phase).
f=$1
T=${TORCH_INCLUDE:-$(pwd)/../../../.venv/lib/python3.11/site-packages/torch/include}
SHARE=$(cd "$(dirname "$0")/../../../evaluator/share" && pwd)
b=${f%.cu}
/usr/bin/time -f "%U %S %e" -o "$b.time" nvcc -c "$f" -o "$b.o" --compiler-options -fPIC \
  -std=c++17 -gencode=arch=compute_90,code=sm_90 -DTORCH_EXTENSION_NAME=ext \
  -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ \
  -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr -DTORCH_API_INCLUDE_EXTENSION_H \
  -D_GLIBCXX_USE_CXX11_ABI=1 -I"$SHARE" -isystem "$T" -isystem "$T/torch/csrc/api/include" \
  -isystem /usr/local/cuda/include -isystem "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
  --time "$b.nvtime" > "$b.log" 2>&1
echo "$f rc=$? cpu_user_sys_wall=$(tail -1 "$b.time")"
