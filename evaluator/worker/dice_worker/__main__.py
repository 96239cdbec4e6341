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
    cap = sub.add_parser("capture", help="extract a candidate's code and record its load_inline")
    cap.add_argument("raw", type=Path)
    cap.add_argument("code", type=Path)
    srv = sub.add_parser("serve", help="serve evaluation requests on stdin")
    srv.add_argument("--device", default="cuda:0")
    args = parser.parse_args(argv)
    if args.command == "toolchain":
        from .toolchain import toolchain

        print(json.dumps(toolchain()))
        return 0
    if args.command == "capture":
        from .capture import capture

        print(json.dumps(capture(args.raw, args.code)))
        return 0
    from .serve import serve

    return serve(args.device, sys.stdin)


if __name__ == "__main__":
    sys.exit(main())
