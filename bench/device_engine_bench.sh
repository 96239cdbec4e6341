#!/usr/bin/env bash
# Issue 6's benchmark on the device, in one call, after bench/device_prepare.sh here (carry
# ".device"): SDAR-shaped checkpoints with random bf16 weights (`dice model random`), the static
# schedule (4 denoising steps per block of 4: one token per forward), greedy, random 64-token
# prompts; per configuration `dice engine bench` (committed tokens/s, forwards/s, and the floor
# from a device-to-device copy bandwidth and a bf16 GEMM rate it measures first), then the PyTorch
# decoding (bench/engine_torch_decode.py: transformers Qwen3, SDPA, static KV cache) of the same
# configurations, and a table with the ratio.
# Subsets, by environment variable (lists are comma-separated):
#   MODELS=1.7b,4b            SDAR shapes (default 1.7b; tiny: a dry run, also without a GPU)
#   SEQUENCES=1,16,128        sequences decoded together
#   NEW_TOKENS=1024,4096      new tokens per sequence
#   STORE=fused,unfused       the store pass fused with the next block's first step, or alone
#   SKINNY=16                 --skinny-gemm-rows values, one dice engine bench call each (e.g.
#                             SKINNY=16,0: dice's small-row GEMM kernel, then cuBLASLt only;
#                             the table's "skinny" column tells the rows apart)
#   PDL=few                   programmatic dependent launch, one dice engine bench call per
#                             value and SKINNY value: 1 --pdl (every pass), 0 --no-pdl, few
#                             neither (the default: passes of at most the skinny GEMM rows);
#                             the table's "pdl" column (on, off, few) tells the rows apart
#   REPEATS=1                 rounds of dice's calls, each over every configuration (so drift
#                             in the card's clocks falls on all of them alike); the table's row
#                             is a configuration's round of median tokens/s, its "runs" column
#                             the rounds and their least and most time over floor
#   TORCH=1                   0: dice only
#   TORCH_TIME_LIMIT=10       seconds of PyTorch decoding per configuration (its rate is steady:
#                             a static cache costs the same at every position)
#   BENCH_LIMIT=540           seconds after which nothing new starts; a run in flight is stopped
#                             then (dice's records are written per configuration as they finish)
#   BENCH_TAG=                a name for this run's files (engine-bench-TAG.*), so that several
#                             runs in one device call keep theirs
# The card's SM clock, power and clock event reasons are sampled every 200 ms (nvidia-smi, UTC)
# into the records' folder; the table gives each row's median SM clock and the share of samples
# held down by the power cap over its timed run.
# Leaves $OUT/engine-bench.txt (the table), $OUT/engine-bench.md (the same in Markdown, for
# bench/results), $OUT/engine-bench.log and $OUT/engine-bench.tar.gz (records, clock samples and
# logs), each engine-bench-TAG.* with BENCH_TAG.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
models=${MODELS:-1.7b}
sequences=${SEQUENCES:-1,16,128}
new_tokens=${NEW_TOKENS:-1024,4096}
store=${STORE:-fused,unfused}
skinny=${SKINNY:-16}
pdl=${PDL:-few}
repeats=${REPEATS:-1}
torch_on=${TORCH:-1}
torch_limit=${TORCH_TIME_LIMIT:-10}
limit=${BENCH_LIMIT:-540}
out="$OUT/engine-bench${BENCH_TAG:+-$BENCH_TAG}"
bench="$WORK/engine-bench"
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "REPEATS=$repeats: expected a positive integer"; exit 2; }
rm -rf "$bench"
mkdir -p "$bench" "$WORK/models"
sampler=""
if command -v nvidia-smi >/dev/null; then
  TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 200 >"$bench/clocks.csv" 2>&1 &
  sampler=$!
fi
report() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  sampler=""
  "$DICE_PYTHON" "$root/bench/engine_bench_report.py" "$bench/dice.jsonl" "$bench/torch.jsonl" \
    --clocks "$bench/clocks.csv" >"$bench/table.txt" 2>&1
  "$DICE_PYTHON" "$root/bench/engine_bench_report.py" "$bench/dice.jsonl" "$bench/torch.jsonl" \
    --clocks "$bench/clocks.csv" --markdown >"$bench/table.md" 2>&1
  { cat "$bench/machine.txt"; echo; cat "$bench/table.txt"; } >"$out.txt"
  { cat "$bench/machine.txt"; echo; cat "$bench/table.md"; } >"$out.md"
  tar -C "$WORK" -czf "$out.tar.gz" engine-bench 2>/dev/null
}
trap report EXIT
exec > >(tee "$out.log") 2>&1
{
  machine_header
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "models $models; sequences $sequences; new tokens $new_tokens; store $store;" \
    "skinny GEMM rows $skinny; pdl $pdl; rounds $repeats; torch $torch_on" \
    "(${torch_limit} s per configuration); limit ${limit} s"
} | tee "$bench/machine.txt"
missing=$(missing_libraries "$DICE")  # the benchmark runs dice only (STAGE=engine stages no tests)
if [ -n "$missing" ]; then
  echo "FAIL: the staged binaries cannot resolve: $missing" | tee -a "$bench/machine.txt"
  exit 1
fi
count() { tr ',' '\n' <<<"$1" | grep -c .; }
configs=$(($(count "$sequences") * $(count "$new_tokens") * $(count "$store")))
left() { echo $((limit - SECONDS)); }
for shape in ${models//,/ }; do
  config=$(sdar_config "$shape")
  [ "$config" = tiny ] || [ -f "$config" ] || { echo "no config $config (MODELS: 1.7b, 4b, 8b, tiny)"; continue; }
  [ "$(left)" -gt 60 ] || { echo "SDAR-$shape: skipped, $(left) s left"; continue; }
  m="$WORK/models/$shape"
  start=$SECONDS
  RANDOM_MODEL_TIMEOUT=$(left) random_sdar_model "$shape" "$m" ||
    { echo "SDAR-$shape: model random failed"; continue; }
  echo "SDAR-$shape: random checkpoint written in $((SECONDS - start)) s"
  # PyTorch's share of what is left: its configurations, a warm-up each, and loading the model.
  reserve=0
  [ "$torch_on" = 1 ] && reserve=$((configs * (torch_limit + 6) + 30))
  budget=$(($(left) - reserve))
  [ "$budget" -lt 60 ] && budget=$(($(left) * 2 / 3))
  # The budget shared by the rounds of SKINNY x PDL calls (each call gets its share of what is
  # left).
  runs=$(($(count "$skinny") * $(count "$pdl") * repeats))
  for round in $(seq 1 "$repeats"); do
    for rows in ${skinny//,/ }; do
      for p in ${pdl//,/ }; do
        pdl_flags=()  # "few": the default
        [ "$p" = 0 ] && pdl_flags=(--no-pdl)
        [ "$p" = 1 ] && pdl_flags=(--pdl)
        share=$((budget / runs))
        runs=$((runs - 1))
        start=$SECONDS
        timeout -k 10 "$share" "$DICE" engine bench --model "$m" --sequences "$sequences" \
          --new-tokens "$new_tokens" --store "$store" --skinny-gemm-rows "$rows" "${pdl_flags[@]}" \
          --json "$bench/dice.jsonl" >/dev/null
        rc=$?
        elapsed=$((SECONDS - start))
        budget=$((budget - elapsed))
        echo "SDAR-$shape: dice engine bench (skinny GEMM rows $rows, PDL $p, round $round of" \
          "$repeats) exit $rc after $elapsed s (share $share s)"
      done
    done
  done
  if [ "$torch_on" = 1 ] && [ "$(left)" -gt 30 ]; then
    start=$SECONDS
    PYTHONUNBUFFERED=1 timeout -k 10 "$(left)" "$DICE_PYTHON" "$root/bench/engine_torch_decode.py" \
      --model "$m" --sequences "$sequences" --new-tokens "$new_tokens" --store "$store" \
      --time-limit "$torch_limit" --json "$bench/torch.jsonl" >/dev/null
    echo "SDAR-$shape: pytorch exit $? after $((SECONDS - start)) s"
  fi
  rm -rf "$m"
done
report
trap - EXIT
cat "$bench/table.txt"
echo "engine bench done in $SECONDS s"
