#!/usr/bin/env bash
# Where one forward of the CUDA engine spends its time (issue 6), on the device, after
# bench/device_prepare.sh here (carry ".device"):
#   1. `dice engine bench` at 1 and 16 sequences with and without CUDA graphs (tokens/s: the
#      difference is launch overhead that graphs remove);
#   2. Nsight Compute (--clock-control none, duration only) over the kernels of a short run
#      without graphs: per kernel name, launches and GPU time, summed per forward
#      (bench/engine_profile_report.py).
# KERNELS=new,baseline: both steps run once per kernel set, `new` (the default layouts and the
# GEMM autotune), `baseline` (`--cuda-baseline-kernels --no-gemm-autotune`: the first
# one-block-per-row vocabulary pass and norms, attention split down to 64 positions, cuBLASLt's
# heuristic GEMMs) and, if listed, `noautotune` (new kernels, heuristic GEMMs), so that one call
# shows before and after. NCU_SKIP=4000: kernels skipped before profiling (the load, the
# prefill and the GEMM autotune of the warm-up's first passes, ~500 launches per shape set).
# MODEL=1.7b (or 4b), PROFILE_SEQUENCES=1 (sequences in the profiled run), NCU_KERNELS=1200
# (kernels profiled after skipping the load and warm-up), NCU_CACHE=none|all, NCU=1 (0: skip
# Nsight Compute), GRAPHS=1 (0: skip the graphs on/off timing). PROFILE_SEQUENCES may be a list
# (1,16). PROMPT_LENGTH=64: prompt positions of the profiled run (its contexts are this plus up
# to ~110 decoded tokens; 1000 profiles attention at ~1,100 positions). Leaves
# $OUT/engine-profile.txt,
# $OUT/engine-profile.log and $OUT/engine-profile.tar.gz; each engine-profile-TAG.* with
# PROFILE_TAG=TAG, so that several runs in one device call (e.g. one per MODEL) keep theirs.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
shape=${MODEL:-1.7b}
seqs=${PROFILE_SEQUENCES:-1}
kernels=${NCU_KERNELS:-1200}
prof="$WORK/engine-profile"
out="$OUT/engine-profile${PROFILE_TAG:+-$PROFILE_TAG}"
rm -rf "$prof"
mkdir -p "$prof" "$WORK/models"
trap 'tar -C "$WORK" -czf "$out.tar.gz" engine-profile 2>/dev/null' EXIT
exec > >(tee "$out.log") 2>&1
machine_header | tee "$prof/machine.txt"
m="$WORK/models/$shape"
if [ ! -f "$m/config.json" ]; then
  random_sdar_model "$shape" "$m" || { echo "model random failed"; exit 1; }
fi
kernel_flag() {
  case "$1" in
    baseline) echo --cuda-baseline-kernels --no-gemm-autotune ;;
    noautotune) echo --no-gemm-autotune ;;
  esac
}
kernel_sets=${KERNELS:-new,baseline}
burst=$(burst_ceilings_only "$DICE")  # asked once: the speed readings need no sustained floor
[ "${GRAPHS:-1}" = 1 ] && for k in ${kernel_sets//,/ }; do
echo "## $k kernels: tokens/s with and without CUDA graphs (SDAR-$shape shape, 256 new tokens, unfused)"
for g in "" --no-cuda-graphs; do
  "$DICE" engine bench --model "$m" --sequences 1,16 --new-tokens 256 --store unfused $g \
    $(kernel_flag "$k") $burst --json "$prof/$k-graphs${g:+-off}.jsonl" >/dev/null 2>"$prof/$k-bench${g}.err"
  echo "$k kernels, graphs ${g:-on}:"
  "$DICE_PYTHON" - "$prof/$k-graphs${g:+-off}.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    keys = ("sequences", "new_tokens", "tokens_per_second", "forwards_per_second", "time_over_floor")
    print("  " + ", ".join(f"{k}={r.get(k)}" for k in keys))
EOF
done
done
[ "${NCU:-1}" = 1 ] || exit 0
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine"; exit 0; }
cache=${NCU_CACHE:-none}
for k in ${kernel_sets//,/ }; do
for seqs in ${seqs//,/ }; do
  echo "## Nsight Compute, $k kernels: $kernels kernels of a $seqs-sequence run without graphs, prompt ${PROMPT_LENGTH:-64} (cache control $cache)"
  # Skip the model load and the prompt's prefill: the warm-up run's kernels come first, then the
  # timed run's. --cache-control none: kernels see the L2 as the previous kernel left it (as in a
  # graph replay); all: L2 flushed before each kernel (cold, slower for small kernels).
  timeout 300 "$ncu" --clock-control none --cache-control "$cache" --metrics gpu__time_duration.sum \
    --csv --launch-skip "${NCU_SKIP:-4000}" --launch-count "$kernels" \
    "$DICE" engine bench --model "$m" --sequences "$seqs" --new-tokens 64 --store unfused \
    --prompt-length "${PROMPT_LENGTH:-64}" --no-cuda-graphs --no-ceilings --warmup-tokens 48 \
    $(kernel_flag "$k") \
    >"$prof/ncu-$k-$seqs.csv" 2>"$prof/ncu-$k-$seqs.err"
  echo "ncu exit $?"
  layers=$("$DICE_PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["num_hidden_layers"])' "$m/config.json")
  "$DICE_PYTHON" "$root/bench/engine_profile_report.py" "$prof/ncu-$k-$seqs.csv" --layers "$layers"
done
done 2>&1 | tee "$out.txt"
