# Sourced by the device scripts: where dice, the worker and the staged data are, and a header that
# records the machine.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DICE=${DICE:-$root/.device/dice}
export DICE_WORKER_PATH=$root/evaluator/worker
export DICE_PYTHON=${DICE_PYTHON:-python3}
export DICE_CACHE=${DICE_CACHE:-/tmp/dice-cache}
OUT=${OUT:-$root/out}
mkdir -p "$OUT"
machine_header() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  echo "cpu cores: $(nproc)"
  $DICE_PYTHON -c 'import torch,sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  nvcc --version | tail -1
  c++ --version | head -1
}
