#!/usr/bin/env bash
# Call 2: the streaming GEMM's blocks take runs of n8 units (8 output columns) instead of whole
# 16-column tiles (a run's last tile 8 wide when it is odd; the same bits): the checks of this and
# of the session's mends (RMSNorm early weight with PDL only, run_wgmma's order, wgmma_max_splits,
# the wgmma SwiGLU test on GemmCase), per-launch times at 4 rows, then tokens/s at 1 x 1,024:
# SDAR-4B against the build before (dice_base), and with o and down streamed too (fill 0.81 >=
# 0.8); SDAR-1.7B (no fill changes) against the base.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 240 'CudaOps.StreamGemm*:CudaOps.RmsNorm*:CudaOps.Wgmma*:StreamGemmRule*:WgmmaGemmRule*:CudaBackendTest.StreamGemm*:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.Fp32Decoding*:CudaBackendTest.SeededSampling*:CudaBackendTest.WgmmaGemmLogits*:CudaBackendTest.FoldedNorms*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings n8 '4b gate_up' '4b o' '4b down' '1.7b gate_up'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=230 \
  probe_variants n8-4b 'bin=.device/dice_base.xz; ;--stream-gemm-min-fill 0.8'
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=100 \
  probe_variants n8-1.7b 'bin=.device/dice_base.xz; '
