#!/usr/bin/env bash
# Does the L2 prefetch (--l2-prefetch) make GEMMs faster? After bench/device_prepare.sh here
# (carry ".device"), the steps named in $1 (default timings,ncu):
# - timings: CudaOps.L2PrefetchTimings (GEMMs after an idle window, with and without a
#   prefetch of their weights on a side stream; DICE_PREFETCH_* variables pass through);
#   leaves $OUT/l2-prefetch-timings.txt;
# - ncu: Nsight Compute over a window of a 1-sequence SDAR-1.7B run without graphs (kernels
#   serialized): per kernel name, duration, L2 hit rate and DRAM bytes read, without and with
#   the prefetch; leaves $OUT/l2-prefetch-ncu.txt.
#   PREFETCH=32MiB  NCU_SKIP=6000  NCU_KERNELS=250  MODEL=1.7b  SEQUENCES=1
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
steps=${1:-timings,ncu}
if [[ ",$steps," == *,timings,* ]]; then
  begin_test_report l2-prefetch-timings.txt
  DICE_PREFETCH_TIMINGS=1 tests_cmd --gtest_filter=CudaOps.L2PrefetchTimings
fi
[[ ",$steps," == *,ncu,* ]] || exit 0
shape=${MODEL:-1.7b}
dir="$WORK/l2-prefetch-ncu"
rm -rf "$dir"
mkdir -p "$dir" "$WORK/models"
exec > >(tee "$OUT/l2-prefetch-ncu.txt") 2>&1
machine_header
m="$WORK/models/$shape"
"$DICE" model random --config "$root/.device/shared/configs/sdar-$shape-chat.json" --dtype bf16 \
  --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null || { echo "model random failed"; exit 1; }
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine"; exit 0; }
for p in 0 "${PREFETCH:-32MiB}"; do
  echo "## --l2-prefetch $p"
  # --gpu-memory: a replayed kernel's writable memory is saved and restored per metric pass, so
  # the backend must not hold the whole card.
  timeout "${NCU_TIMEOUT:-150}" "$ncu" --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum --csv \
    --launch-skip "${NCU_SKIP:-6000}" --launch-count "${NCU_KERNELS:-250}" \
    "$DICE" engine bench --model "$m" --sequences "${SEQUENCES:-1}" --new-tokens 64 --store fused \
    --no-cuda-graphs --no-ceilings --warmup-tokens 48 --l2-prefetch "$p" --gpu-memory 8GiB \
    >"$dir/ncu-$p.csv" 2>"$dir/ncu-$p.err"
  echo "ncu exit $?"
  "$DICE_PYTHON" - "$dir/ncu-$p.csv" <<'PY'
import collections, csv, io, sys
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
per = collections.defaultdict(lambda: collections.defaultdict(list))
for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
    name = r["Kernel Name"].split("(")[0].split("<")[0][-40:]
    key = (name, r["Grid Size"])
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1,
             "usecond": 1e3, "msecond": 1e6}.get(r["Metric Unit"], 1)
    per[key][r["Metric Name"]].append(float(r["Metric Value"].replace(",", "")) * scale)
print(f"{'kernel':40} {'grid':>14} {'n':>4} {'us':>8} {'L2 hit %':>9} {'DRAM MB':>8}")
for (name, grid), m in sorted(per.items(), key=lambda kv: -sum(kv[1]["gpu__time_duration.sum"])):
    t = m["gpu__time_duration.sum"]
    n = len(t)
    mean = lambda k: sum(m[k]) / max(1, len(m[k]))
    print(f"{name:40} {grid:>14} {n:4d} {mean('gpu__time_duration.sum') / 1e3:8.2f} "
          f"{mean('lts__t_sector_hit_rate.pct'):9.1f} {mean('dram__bytes_read.sum') / 1e6:8.2f}")
PY
done
