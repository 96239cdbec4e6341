#!/usr/bin/env bash
# Call 7: the review mend's GPU checks (the ceilings' GEMM in one class; GemmNorm's limits
# renamed), then where a 1-sequence forward's GPU time goes on the H200 (Nsight Compute,
# durations at the card's own clocks, kernels serialized, no graphs) for both shapes.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call7
probe_unpack_tests
probe_checks 100 'CudaOps.MeasuredCeilingsArePositive:CudaBackendTest.FloorsAreSummedOverPassesWithTheCeilings:CudaOps.SkinnyGemmFusedNorm*:CudaOps.SkinnyGemmSwiglu*:CudaOps.StreamGemm*:SkinnyGemmRule*:StreamGemmRule*'
for m in 1.7b 4b; do
  MODEL=$m KERNELS=new PROFILE_SEQUENCES=1 GRAPHS=0 NCU_KERNELS=600 timeout 120 bash bench/device_engine_profile.sh >/dev/null 2>&1
  cp "$OUT/engine-profile.txt" "$OUT/$PROBE-profile-$m-1.txt" 2>/dev/null
  head -25 "$OUT/$PROBE-profile-$m-1.txt"
done
