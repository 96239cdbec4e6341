#!/usr/bin/env bash
# Side-by-side tokens/s of `dice engine bench` under several option sets, in one device call
# (issue 6: trying a kernel or launch option before it becomes a default), after
# bench/device_prepare.sh here (carry ".device"). Random bf16 weights in the SDAR shapes, the
# static schedule, 64-token prompts. The option sets run in turn, REPEATS rounds (ABAB...), so
# that drift in clocks or temperature falls on all of them alike.
#   VARIANTS='--no-pdl;--pdl'   option sets, separated by ';'; a set starting with
#                               'bin=PATH' runs that dice binary (relative to the repository
#                               root, e.g. bin=.device/dice_base: a build of the commit before a
#                               change, staged by hand; bin=.device/dice_base.xz is unpacked
#                               beside it first, which keeps extra binaries within the 64 MiB
#                               that a call carries) with the rest of the set; an empty set
#                               (';' at either end) is the plain defaults
#   MODELS=1.7b  SEQUENCES=1  NEW_TOKENS=1024  STORE=fused  REPEATS=2
#   VARIANTS_LIMIT=400          seconds after which nothing new starts
# Leaves $OUT/engine-variants.txt (one line per run, then per variant and configuration the
# mean tokens/s and its ratio to the first variant) and $OUT/engine-variants.jsonl.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
models=${MODELS:-1.7b}
variants=${VARIANTS:---no-pdl;--pdl}
limit=${VARIANTS_LIMIT:-400}
dir="$WORK/engine-variants"
rm -rf "$dir"
mkdir -p "$dir" "$WORK/models"
exec > >(tee "$OUT/engine-variants.txt") 2>&1
machine_header
echo "models $models; sequences ${SEQUENCES:-1}; new tokens ${NEW_TOKENS:-1024};" \
  "store ${STORE:-fused}; repeats ${REPEATS:-2}; variants: $variants"
# (one ';' more: `read` drops a trailing empty field, so 'bin=X;' keeps its empty second set)
IFS=';' read -r -a sets <<<"$variants;"
declare -A burst_flag=()  # per binary: burst_ceilings_only's option (tokens/s compared, no sustained floor)
for shape in ${models//,/ }; do
  m="$WORK/models/$shape"
  random_sdar_model "$shape" "$m" || { echo "SDAR-$shape: model random failed"; continue; }
  for round in $(seq 1 "${REPEATS:-2}"); do
    for i in "${!sets[@]}"; do
      [ "$SECONDS" -lt "$limit" ] || { echo "limit reached: SDAR-$shape round $round variant $i skipped"; continue; }
      options=${sets[$i]}
      binary=$DICE
      if [[ $options == bin=* ]]; then
        binary=${options%% *}
        binary="$root/${binary#bin=}"
        [[ $options == *" "* ]] && options=${options#* } || options=""
        if [[ $binary == *.xz ]]; then  # unpacked beside it, where its lib/ is (unpack_staged)
          unpack_staged "$(dirname "$binary")"
          binary=${binary%.xz}
        fi
      fi
      if [ -z "${burst_flag[$binary]+set}" ]; then burst_flag[$binary]=$(burst_ceilings_only "$binary"); fi
      # shellcheck disable=SC2086  # an option set is split into its words on purpose
      timeout -k 10 $((limit - SECONDS + 30)) "$binary" engine bench --model "$m" \
        --sequences "${SEQUENCES:-1}" --new-tokens "${NEW_TOKENS:-1024}" --store "${STORE:-fused}" \
        ${burst_flag[$binary]} $options --json "$dir/run.jsonl" >/dev/null 2>"$dir/err-$shape-$round-$i.txt" ||
        { echo "SDAR-$shape variant '${sets[$i]}' round $round: exit $?"; tail -3 "$dir/err-$shape-$round-$i.txt"; }
      "$DICE_PYTHON" - "$dir/run.jsonl" "$shape" "$i" "${sets[$i]}" "$dir/all.jsonl" <<'PY'
import json, sys
path, shape, index, options, out = sys.argv[1:]
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    lines = []
with open(out, "a") as f:
    for line in lines:
        r = json.loads(line)
        r.update(model=shape, variant=int(index), options=options)
        f.write(json.dumps(r) + "\n")
        print(f"SDAR-{shape} [{index}] {options}: {r['sequences']} x {r['new_tokens']}: "
              f"{r['tokens_per_second']:.1f} tok/s, {r.get('time_over_floor', 0):.3f}x floor")
open(path, "w").close()
PY
    done
  done
  rm -rf "$m"
done
cp "$dir/all.jsonl" "$OUT/engine-variants.jsonl" 2>/dev/null
"$DICE_PYTHON" - "$dir/all.jsonl" <<'PY'
import json, sys
from collections import defaultdict
runs = defaultdict(list)
names = {}
try:
    records = [json.loads(line) for line in open(sys.argv[1])]
except FileNotFoundError:
    records = []
for r in records:
    key = (r["model"], r["sequences"], r["new_tokens"])
    runs[key + (r["variant"],)].append(r["tokens_per_second"])
    names[r["variant"]] = r["options"]
print("\nmean tokens/s per variant (ratio to variant 0)")
for key in sorted({k[:3] for k in runs}):
    base = runs.get(key + (0,))
    for v in sorted(names):
        got = runs.get(key + (v,))
        if not got:
            continue
        mean = sum(got) / len(got)
        ratio = f"{mean / (sum(base) / len(base)):.3f}" if base else "-"
        print(f"SDAR-{key[0]} {key[1]} x {key[2]} [{v}] {names[v]}: {mean:.1f} tok/s "
              f"(n={len(got)}), ratio {ratio}")
PY
