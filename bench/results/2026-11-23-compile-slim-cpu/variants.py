"""Writes the CUDA half of DICE pairs three ways, as dice's builder compiles them.

Usage: variants.py CAPTURES OUT ID...; CAPTURES/ID.json is `dice_worker capture` of pair ID.
  OUT/ID_full.cu   torch load_inline's preamble + the sources (what torch compiles)
  OUT/ID_types.cu  the same without the sources' own umbrella includes (torch/types.h only)
  OUT/ID_slim.cu   dice_torch_cuda.h + the sources without umbrella includes (dice's slim path)
"""

import json
import re
import sys
from pathlib import Path

PREAMBLE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
UMBRELLA = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/(extension|torch|all|types)\.h[>"][ \t]*(//.*)?$', re.M
)

captures, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
for pair_id in sys.argv[3:]:
    record = json.loads((captures / f"{pair_id}.json").read_text())
    source = record["extensions"][0]["cuda_sources"]
    stripped = UMBRELLA.sub("// dice: umbrella include removed", source)
    (out / f"{pair_id}_full.cu").write_text(PREAMBLE + source + "\n")
    (out / f"{pair_id}_types.cu").write_text(PREAMBLE + stripped + "\n")
    (out / f"{pair_id}_slim.cu").write_text("#include <dice_torch_cuda.h>\n" + stripped + "\n")
