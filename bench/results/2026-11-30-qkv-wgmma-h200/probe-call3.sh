#!/usr/bin/env bash
# Call 3 (run twice: the first handed ncu a shell function): why the q/k epilogue loses (call 2: 0.979 SDAR-1.7B). Nsight Compute, kernels
# serialised, SDAR-1.7B 16 sequences, 64-token prompts, no graphs: the durations of the qkv
# GEMM with the epilogue against cuBLASLt's qkv + the q/k norm + RoPE kernel (this build with
# --no-fused-qk-norm-rope), at the same point of the decoding; then the stall samples by
# instruction of one epilogue launch.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
source bench/engine_device.sh
PROBE=call3
m="$WORK/models/1.7b"
mkdir -p "$WORK/models"
random_sdar_model 1.7b "$m" || echo "random model: exit $?"; ls "$m" | head -3
run="$WORK/run-bench.sh"  # (ncu runs an executable, not a shell function)
cat >"$run" <<RUN
#!/usr/bin/env bash
exec "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \\
  --prompt-length 64 --no-cuda-graphs --no-ceilings --warmup-tokens 16 --gpu-memory 40GiB "\$@"
RUN
chmod +x "$run"
PROBE_NCU_LIMIT=150 probe_stalls qk-on 'ILi128ELb0ELi2ELb1E|attention_mma' 24 600 -- "$run"
PROBE_NCU_LIMIT=150 probe_stalls qk-off 'nvjet|qk_norm_rope|attention_mma' 36 900 -- "$run" --no-fused-qk-norm-rope
PROBE_NCU_LIMIT=150 probe_source qk-on 'ILi128ELb0ELi2ELb1E' 305 -- "$run"
