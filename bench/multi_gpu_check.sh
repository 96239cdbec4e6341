#!/usr/bin/env bash
# Multi-GPU check of issue 4 (device kind nvidia-h200-x2 or larger, after bench/device_prepare.sh):
# the first N KernelBench L1 problems (default 60), each with its own reference as candidate (no
# compilation: the GPU stage is all the work), once on one GPU and once on every GPU. Prints both
# wall times, their ratio, how many candidates each worker took (from results.db), and fails if a
# GPU took none or a verdict is not `correct`.
#   bench/multi_gpu_check.sh [N]
set -euo pipefail
source "$(dirname "$0")/common_device.sh"
n=${1:-60}
machine_header | tee "$OUT/multi_gpu.machine.txt"
ids=$($DICE_PYTHON -c "print(','.join(f'L1/{i}' for i in range(1, $n + 1)))")
run() {  # run NAME GPUS
  local start=$SECONDS
  timeout --kill-after=15 "${STEP_LIMIT:-270}" "$DICE" eval "kernelbench:$ids" \
    --kernelbench "$root/.device/shared/kernelbench.jsonl" --reference-as-candidate \
    --device cuda --gpus "$2" --out-dir "$WORK/$1" --progress lines >"$OUT/multi_gpu.$1.log" 2>&1
  local status=$?
  echo "$((SECONDS - start))" >"$WORK/$1.wall"
  echo "$1: exit $status in $((SECONDS - start)) s" | tee -a "$OUT/multi_gpu.machine.txt"
}
set +e
run one_gpu 1
run all_gpus 0
set -e
$DICE_PYTHON - "$WORK" <<'PY' | tee "$OUT/multi_gpu.report.txt"
import sqlite3, sys
from pathlib import Path
work = Path(sys.argv[1])
ok = True
walls = {n: int((work / f"{n}.wall").read_text()) for n in ("one_gpu", "all_gpus")}
for name in ("one_gpu", "all_gpus"):
    db = sqlite3.connect(work / name / "results.db")
    rows = db.execute("SELECT worker, verdict, COUNT(*) FROM items WHERE state = 'done' GROUP BY worker, verdict").fetchall()
    total = db.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    per_worker = {}
    for worker, verdict, count in rows:
        per_worker.setdefault(worker, {})[verdict] = count
        ok &= verdict == "correct"
    done = sum(c for _, _, c in rows)
    print(f"{name}: {done} of {total} done in {walls[name]} s; per worker {per_worker}")
    if name == "all_gpus" and len(per_worker) < 2:
        print("FAIL: fewer than two workers took work"); ok = False
    if done < total:
        print(f"FAIL: {total - done} candidates not finished"); ok = False
print(f"one GPU / all GPUs wall time: {walls['one_gpu'] / max(1, walls['all_gpus']):.2f}x")
print("ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
