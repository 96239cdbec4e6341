"""Writes each DICE pair's C++ half as dice's builder compiles it with the slim header.

Usage: mains.py CAPTURES OUT; CAPTURES/ID.json is `dice_worker capture` of pair ID. Writes
OUT/ID_N.cpp (extension N of pair ID): `#include "slim_main.h"`, the C++ sources with their
umbrella includes commented out, then load_inline's pybind11 module of `functions`.
"""

import json
import re
import sys
from pathlib import Path

UMBRELLA = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/(extension|torch|all|types)\.h[>"][ \t]*(//.*)?$', re.M
)

captures, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
for capture in sorted(captures.glob("*.json")):
    record = json.loads(capture.read_text())
    for i, ext in enumerate(record.get("extensions", [])):
        functions = ext.get("functions") or []
        names = list(functions) if isinstance(functions, dict) else functions
        names = [names] if isinstance(names, str) else names
        body = UMBRELLA.sub("// umbrella include removed", ext["cpp_sources"])
        module = "".join(f'm.def("{n}", torch::wrap_pybind_function({n}), "{n}");\n' for n in names)
        text = f'#include "slim_main.h"\n{body}\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n'
        (out / f"{capture.stem}_{i}.cpp").write_text(text + module + "}\n")
