#!/usr/bin/env bash
# Call 1: the o projection's staging counter (staged_o_gemms): the new backend test at SDAR-4B's
# widths (staged in batches, all at once, unstaged, without PDL: the same bits; the counter
# positive only where staged), the PDL bit test (these widths stage nothing), and the skinny
# kernel's staging op tests.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call1
probe_checks 150 'CudaBackendTest.StagedOWeightsChangeNoBits:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaOps.SkinnyGemmStaged*:SkinnyGemmRule.*'
