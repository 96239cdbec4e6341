#!/usr/bin/env bash
# EXPERIMENT: dice with the streaming GEMM on 1,024-k ring stages (two blocks a SM)
DICE_STREAM_STAGE_K=1024 exec "$(dirname "$0")/dice" "$@"
