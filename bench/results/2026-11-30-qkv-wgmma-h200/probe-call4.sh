#!/usr/bin/env bash
# Call 4: the q/k epilogue with its square sums added in the epilogue (loaded before the k loop,
# not added there) and its metadata reads after the first weight copies: checks, the epilogue
# launch's serialised duration (Nsight Compute, as call 3), then 16 x 1,024 tokens/s against
# the base (3c9c511).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
source bench/engine_device.sh
PROBE=call4
probe_unpack_tests
probe_checks 120 'CudaOps.WgmmaQkRope*:CudaOps.QkNormRope*:CudaBackendTest.QkRope*' || exit 1
m="$WORK/models/1.7b"
mkdir -p "$WORK/models"
random_sdar_model 1.7b "$m" || echo "random model: exit $?"
run="$WORK/run-bench.sh"  # (ncu runs an executable, not a shell function)
cat >"$run" <<RUN
#!/usr/bin/env bash
exec "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \\
  --prompt-length 64 --no-cuda-graphs --no-ceilings --warmup-tokens 16 --gpu-memory 40GiB "\$@"
RUN
chmod +x "$run"
PROBE_NCU_LIMIT=100 probe_stalls qk-on 'ILi128ELb0ELi2ELb1E|attention_mma' 24 600 -- "$run"
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=250 \
  probe_variants qk-16 'bin=.device/dice_base;'
