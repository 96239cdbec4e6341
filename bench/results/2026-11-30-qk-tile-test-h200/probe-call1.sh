#!/usr/bin/env bash
# Call 1: CudaBackendTest.QkRopeEpilogueMatchesTheCpuReference, now at both q/k epilogue column
# tiles (64 and 128), and the q/k and wgmma ops tests beside it.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 400 'CudaBackendTest.QkRope*:CudaOps.WgmmaQk*:CudaOps.Qk*' || exit 1
