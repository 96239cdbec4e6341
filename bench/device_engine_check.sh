#!/usr/bin/env bash
# The CUDA backend's checks on the device (issue 6), in one call, after bench/device_prepare.sh
# here (carry ".device"). Steps (a comma-separated list as $1; default tests,cli,smoke):
#   tests     dice_engine_cuda_tests, one process per test so that a fault cannot hide the rest:
#             the host planner, every CUDA op against its CPU reference on random inputs, the
#             backend against CpuBackend (logits, fp32 greedy and sampled tokens, seeded sampling,
#             graphs, chunked prefill, paged-cache admission, programmatic dependent launch on
#             and off giving the same bits, bad input)                          ~1-2 min
#   cli       dice engine logits --backend cuda vs cpu on SDAR-1.7B- and SDAR-4B-shaped random
#             bf16 checkpoints cut to 2 layers: per-row rel. L2 <= 1e-2; greedy decoding of a tiny
#             fp32 checkpoint (--batch of 6 prompts and a single --json prompt): cuda in fp32 gives
#             the cpu backend's tokens and traces (bf16 agreement reported); seeded sampling
#             through --batch twice: identical; the same with --pdl (programmatic dependent
#             launch): fp32 greedy with and without graphs = cpu, bf16 sampling = without --pdl
#                                                                                ~1-2 min
#   smoke     first speed reading on a full SDAR-1.7B-shaped random checkpoint: dice engine bench
#             1 and 16 sequences x 256 tokens (fused) with floors, and the PyTorch decoding at 1
#             sequence for at most 20 s; dice again with --pdl                   ~1-2 min
#   sanitize  compute-sanitizer memcheck over the op tests (slow: its own call)  ~3-5 min
# Leaves $OUT/engine-check.txt (one PASS/FAIL/SKIP/INFO line per check), $OUT/engine-check.log
# and $OUT/engine-check.tar.gz (per-test logs and gtest JSON, logits metadata, records).
# Exit status 1 if any check failed. Stops itself: a step that would start after CHECK_LIMIT
# seconds (default 540) is skipped and reported, and each test process has at most 120 s.
# CHECK_BACKEND=cpu (a dry run without a GPU) runs the "cuda" side on the cpu backend.
# CHECK_TESTS: a gtest filter for the tests step (default every test).
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
steps=",${1:-tests,cli,smoke},"
check="$WORK/engine-check"
rm -rf "$check"
mkdir -p "$check/gtest" "$check/cli" "$WORK/models"
summary="$check/summary.txt"
failed=0
record() {  # record STATUS NAME DETAIL (on one line)
  printf '%-5s %s: %s\n' "$1" "$2" "$(echo "$3" | tr '\n' ' ' | cut -c1-1200)" | tee -a "$summary"
  [ "$1" = FAIL ] && failed=1
  return 0
}
finish() {
  cp "$summary" "$OUT/engine-check.txt" 2>/dev/null
  tar -C "$WORK" -czf "$OUT/engine-check.tar.gz" engine-check 2>/dev/null
}
trap finish EXIT
exec > >(tee "$OUT/engine-check.log") 2>&1
{ machine_header; echo "steps: $steps"; echo "cuBLASLt: $(ldd "$DICE" | grep -m1 cublasLt)"; } | tee "$summary"
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.max.sm --format=csv | tee -a "$summary"
missing=$(missing_libraries)
if [ -n "$missing" ]; then
  record FAIL libraries "the staged binaries cannot resolve: $missing"
  exit 1
fi
threads=$(nproc)
limit=${CHECK_LIMIT:-540}
# Every dice run ends by the limit (plus a margin for what a step does after it).
dice_cmd() { timeout -k 5 $((limit + 30 - SECONDS > 5 ? limit + 30 - SECONDS : 5)) "$DICE" "$@"; }
cuda=${CHECK_BACKEND:-cuda}
# time_for STEP SECONDS: true when SECONDS are left before the limit, else the step is skipped.
time_for() {
  if [ $((limit - SECONDS)) -ge "$2" ]; then return 0; fi
  record SKIP "$1" "only $((limit - SECONDS)) s left of CHECK_LIMIT=$limit (needs about $2 s)"
  return 1
}

if [[ $steps == *,tests,* ]]; then
  start=$SECONDS
  mapfile -t names < <(tests_cmd --gtest_list_tests --gtest_filter="${CHECK_TESTS:-*}" | awk '/^[^ ]/{suite=$1} /^  /{print suite $1}')
  for name in "${names[@]}"; do
    time_for "$name" 10 || continue
    log="$check/gtest/$name.log"
    timeout $((limit - SECONDS < 120 ? limit - SECONDS : 120)) "$TESTS" --gtest_filter="$name" \
      --gtest_output="json:$check/gtest/$name.json" >"$log" 2>&1
    rc=$?
    if grep -q '\[  SKIPPED \]' "$log"; then
      record SKIP "$name" "$(grep -m1 -A1 Skipped "$log" | tail -1)"
    elif [ $rc -eq 0 ]; then
      record PASS "$name" "$(grep -m1 -oE '\([0-9]+ ms\)' "$log")"
    else
      record FAIL "$name" "exit $rc; $(grep -E 'Failure|Expected|Which is|error|Error|exception' "$log" | head -12 | tr '\n' ' ' | cut -c1-900)"
    fi
  done
  echo "tests: $((SECONDS - start)) s"
fi

if [[ $steps == *,cli,* ]] && time_for cli 90; then
  start=$SECONDS
  "$DICE_PYTHON" "$root/bench/engine_check.py" ids 61 --seed 1 >"$check/cli/ids.txt"
  for shape in 1.7b 4b; do
    m="$WORK/models/$shape-2layers"
    RANDOM_MODEL_TIMEOUT=$((limit + 30 - SECONDS)) random_sdar_model "$shape" "$m" --layers 2
    for store in fused unfused; do
      flag=(); [ $store = unfused ] && flag=(--no-fused-store)
      for side in cuda:$cuda cpu:cpu; do  # name:backend (the names stay in a dry run)
        name=${side%%:*}
        dice_cmd engine logits --model "$m" --out "$check/cli/$shape-$store-$name.f32" \
          --prompt-length 29 --backend "${side#*:}" --threads "$threads" "${flag[@]}" \
          <"$check/cli/ids.txt" >"$check/cli/$shape-$store-$name.json" 2>"$check/cli/$shape-$store-$name.err"
      done
      out=$("$DICE_PYTHON" "$root/bench/engine_check.py" logits "$check/cli/$shape-$store-cuda.f32" \
        "$check/cli/$shape-$store-cpu.f32" "$check/cli/$shape-$store-cuda.json" --tolerance 1e-2 2>&1)
      rc=$?
      [ -s "$check/cli/$shape-$store-cuda.err" ] && out="$out; $(tail -2 "$check/cli/$shape-$store-cuda.err" | tr '\n' ' ')"
      record "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "logits SDAR-$shape shape, 2 layers, bf16, $store store, cuda vs cpu" "$out"
      rm -f "$check/cli/$shape-$store-"*.f32
    done
  done
  # The generate checks read the SDAR tokenizer, which STAGE=engine does not stage: one clear
  # FAIL instead of each dice generate failing and its comparison failing on no records.
  if [ ! -d "$root/.device/shared/tokenizer" ]; then
    record FAIL "cli: generate checks" "the SDAR tokenizer is not staged (.device/shared/tokenizer; STAGE=engine leaves it out): stage with bash bench/device_prepare.sh"
  else
    tiny="$WORK/models/tiny-fp32"
    dice_cmd model random --config tiny --dtype f32 --init-std 2.0 --out "$tiny" --no-tokenizer --force >/dev/null
    tok=(--tokenizer "$root/.device/shared/tokenizer")
    "$DICE_PYTHON" - "$check/cli" <<'PY'
import json, random, sys
out = sys.argv[1]
rng = random.Random(5)
strategies = ["low_confidence_dynamic", "sequential", "low_confidence_static", "entropy_bounded"]
with open(f"{out}/greedy.jsonl", "w") as g, open(f"{out}/sampled.jsonl", "w") as s:
    for i in range(6):
        ids = [rng.randrange(0, 151669) for _ in range(rng.choice([1, 4, 9, 30, 63]))]
        rec = {"id": i, "prompt_ids": ids, "max_new_tokens": 40 + 11 * i, "stop_ids": [],
               "strategy": strategies[i % 4], "temperature": 0}
        g.write(json.dumps(rec) + "\n")
        s.write(json.dumps({**rec, "temperature": 1.0, "seed": 100 + i, "samples": 3,
                            "top_k": [0, 50][i % 2], "top_p": [1.0, 0.9][i % 2]}) + "\n")
PY
    run_batch() {  # run_batch NAME BATCH ARGS...
      local name=$1 batch=$2; shift 2
      dice_cmd generate --model "$tiny" "${tok[@]}" --batch "$check/cli/$batch.jsonl" \
        --out "$check/cli/$name.jsonl" "$@" 2>"$check/cli/$name.err" \
        || echo "dice generate failed: $(tail -3 "$check/cli/$name.err" | tr '\n' ' ')" >"$check/cli/$name.jsonl"
    }
    compare() {  # compare NAME A B [--report]
      local name=$1 a=$2 b=$3; shift 3
      out=$("$DICE_PYTHON" "$root/bench/engine_check.py" outputs "$check/cli/$a.jsonl" "$check/cli/$b.jsonl" "$@" 2>&1)
      rc=$?
      if [ "${1:-}" = --report ]; then record INFO "$name" "$out"; else
        record "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "$name" "$out"; fi
    }
    run_batch greedy-cpu greedy --backend cpu --threads "$threads"
    run_batch greedy-cuda-fp32 greedy --backend $cuda --cuda-dtype fp32
    run_batch greedy-cuda-bf16 greedy --backend $cuda
    run_batch greedy-cuda-fp32-eager greedy --backend $cuda --cuda-dtype fp32 --no-cuda-graphs
    compare "greedy tiny fp32 checkpoint, --batch of 6, cuda fp32 vs cpu" greedy-cuda-fp32 greedy-cpu
    compare "greedy tiny fp32 checkpoint, cuda fp32 without graphs vs cpu" greedy-cuda-fp32-eager greedy-cpu
    compare "greedy tiny fp32 checkpoint, cuda bf16 vs cpu (agreement)" greedy-cuda-bf16 greedy-cpu --report
    ids=$("$DICE_PYTHON" "$root/bench/engine_check.py" ids 13 --seed 9 | tr ' ' ',')
    for side in cpu:cpu cuda:$cuda; do
      name=${side%%:*}
      dice_cmd generate --model "$tiny" "${tok[@]}" --prompt-ids "$ids" --json --backend "${side#*:}" \
        --temperature 0 --max-new-tokens 64 --stop-ids "" --threads "$threads" --cuda-dtype fp32 \
        >"$check/cli/single-$name.jsonl" 2>"$check/cli/single-$name.err"
    done
    compare "greedy tiny fp32 checkpoint, single --json prompt, cuda fp32 vs cpu" single-cuda single-cpu
    run_batch sampled-cuda-1 sampled --backend $cuda
    run_batch sampled-cuda-2 sampled --backend $cuda
    run_batch sampled-cuda-fp32 sampled --backend $cuda --cuda-dtype fp32
    run_batch sampled-cpu sampled --backend cpu --threads "$threads"
    compare "seeded sampling (T=1, top-k/top-p), 6 prompts x 3 samples, cuda bf16 run twice" sampled-cuda-1 sampled-cuda-2
    # Sampling draws at T=1 can flip where fp32 sums differ in their last bits: reported only.
    compare "seeded sampling, cuda fp32 vs cpu (agreement)" sampled-cuda-fp32 sampled-cpu --report
    # Programmatic dependent launch changes no arithmetic: the same tokens and traces.
    run_batch greedy-cuda-fp32-pdl greedy --backend $cuda --cuda-dtype fp32 --pdl
    run_batch greedy-cuda-fp32-eager-pdl greedy --backend $cuda --cuda-dtype fp32 --no-cuda-graphs --pdl
    run_batch sampled-cuda-pdl sampled --backend $cuda --pdl
    compare "greedy tiny fp32 checkpoint, cuda fp32 --pdl vs cpu" greedy-cuda-fp32-pdl greedy-cpu
    compare "greedy tiny fp32 checkpoint, cuda fp32 --pdl without graphs vs cpu" greedy-cuda-fp32-eager-pdl greedy-cpu
    compare "seeded sampling, cuda bf16 --pdl vs without" sampled-cuda-pdl sampled-cuda-1
  fi
  echo "cli: $((SECONDS - start)) s"
fi

if [[ $steps == *,smoke,* ]] && time_for smoke 100; then
  start=$SECONDS
  m="$WORK/models/1.7b"
  RANDOM_MODEL_TIMEOUT=$((limit + 30 - SECONDS)) random_sdar_model 1.7b "$m"
  echo "smoke: checkpoint written in $((SECONDS - start)) s"
  burst=$(burst_ceilings_only "$DICE")  # asked once for both runs: no sustained floor needed
  # shellcheck disable=SC2086  # the option's words
  dice_cmd engine bench --model "$m" --sequences 1,16 --new-tokens 256 --store fused \
    $burst --json "$check/smoke-dice.jsonl" >/dev/null 2>"$check/smoke-dice.err"
  rc=$?
  if [ $rc -ne 0 ]; then
    record FAIL "smoke: dice engine bench SDAR-1.7B shape" "$(tail -3 "$check/smoke-dice.err" | tr '\n' ' ')"
  else
    while read -r line; do record INFO "smoke: dice SDAR-1.7B shape" "$line"; done \
      < <(grep "sequences x" "$check/smoke-dice.err")
  fi
  if time_for "smoke --pdl" 40; then
    # shellcheck disable=SC2086  # the option's words
    dice_cmd engine bench --model "$m" --sequences 1,16 --new-tokens 256 --store fused --pdl \
      $burst --json "$check/smoke-dice-pdl.jsonl" >/dev/null 2>"$check/smoke-dice-pdl.err"
    rc=$?
    if [ $rc -ne 0 ]; then
      record FAIL "smoke: dice engine bench --pdl SDAR-1.7B shape" "$(tail -3 "$check/smoke-dice-pdl.err" | tr '\n' ' ')"
    else
      while read -r line; do record INFO "smoke: dice --pdl SDAR-1.7B shape" "$line"; done \
        < <(grep "sequences x" "$check/smoke-dice-pdl.err")
    fi
  fi
  timeout 120 "$DICE_PYTHON" "$root/bench/engine_torch_decode.py" --model "$m" --sequences 1 \
    --new-tokens 256 --store fused --time-limit 20 --json "$check/smoke-torch.jsonl" \
    >/dev/null 2>"$check/smoke-torch.err"
  record INFO "smoke: pytorch SDAR-1.7B shape" "$(grep pytorch: "$check/smoke-torch.err" | tail -1) $(grep -m1 -i error "$check/smoke-torch.err")"
  echo "smoke: $((SECONDS - start)) s"
fi

if [[ $steps == *,sanitize,* ]]; then
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
  if [ -z "$sanitizer" ]; then
    record INFO sanitize "compute-sanitizer not found"
  else
    timeout 540 "$sanitizer" --tool memcheck --error-exitcode 9 \
      "$TESTS" --gtest_filter='CudaOps.*:-CudaOps.MeasuredCeilingsArePositive' >"$check/sanitize.log" 2>&1
    rc=$?
    record "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "compute-sanitizer memcheck, CudaOps" \
      "exit $rc; $(grep -E 'ERROR SUMMARY|Invalid|out of bounds' "$check/sanitize.log" | head -5 | tr '\n' ' ')"
  fi
fi
echo "engine check done; failed=$failed"
exit $failed
