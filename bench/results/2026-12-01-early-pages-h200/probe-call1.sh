#!/usr/bin/env bash
# Call 1: the attention's early pages (K/V pages before the pass's written positions requested
# before its PDL wait) and the q/k kernel's trigger before its wait: the attention op tests (every
# merging kernel's bits with early pages) and the backend's PDL bit test, then tokens/s at
# 1 x 1,024 on SDAR-4B and SDAR-1.7B: defaults, early pages, early pages + q/k trigger.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call1
probe_checks 120 'CudaOps.Attention*:CudaOps.DeepPaired*:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.LogitsMatchTheCpuReference' || exit 1
V=' ;--attention-early-pages;--attention-early-pages --qk-trigger-before-wait'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=190 probe_variants early-4b "$V"
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=190 probe_variants early-1.7b "$V"
