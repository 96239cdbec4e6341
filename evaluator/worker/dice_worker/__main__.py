"""Command line of the worker package: ``toolchain``, ``capture``, ``serve`` (PROTOCOL.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Runs one subcommand; returns the exit status."""
    parser = argparse.ArgumentParser(prog="dice_worker")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("toolchain", help="print the toolchain record")
    cap = sub.add_parser(
        "capture",
        help="record a candidate's load_inline calls: capture CODE (extracted code), or "
        "capture RAW OUT_CODE (extract first)",
    )
    cap.add_argument("raw", type=Path)
    cap.add_argument("code", type=Path, nargs="?")
    ana = sub.add_parser("analyze", help="extract a candidate's code and run the Python rules")
    ana.add_argument("raw", type=Path)
    ana.add_argument("code", type=Path)
    scn = sub.add_parser("scan", help="run the CUDA/C++ rules over a capture record's sources")
    scn.add_argument("capture", type=Path)
    srv = sub.add_parser("serve", help="serve evaluation requests on stdin")
    srv.add_argument("--device", default="cuda:0")
    args = parser.parse_args(argv)
    if args.command == "toolchain":
        from .toolchain import toolchain

        print(json.dumps(toolchain()))
        return 0
    if args.command == "capture":
        from .capture import capture, capture_code

        record = capture(args.raw, args.code) if args.code else capture_code(args.raw)
        print(json.dumps(record))
        return 0
    if args.command in ("analyze", "scan"):
        from .analyze import analyze, scan

        print(
            json.dumps(
                analyze(args.raw, args.code) if args.command == "analyze" else scan(args.capture)
            )
        )
        return 0
    from .serve import serve

    return serve(args.device, sys.stdin)


if __name__ == "__main__":
    sys.exit(main())
