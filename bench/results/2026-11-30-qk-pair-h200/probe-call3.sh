#!/usr/bin/env bash
# Call 3: every GPU test of the CUDA tests binary on the session's last code (c156402: the
# kernels of 41f7d99, the experiment of call 2 reverted), within 540 s.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
probe_checks 540 '*'
