"""EXPERIMENT (removed with kernel_trace.cuh): summarise a DICE_KERNEL_TRACE file.

Each line: replay rows rows_pad kind a b smid entry waited exit (ns, %globaltimer), one per
block of an instrumented kernel. A launch is the blocks of one kernel key (kind, a, b) whose
entries follow each other without a gap after the launch's last exit. For each launch:
release = the earliest wait to return (its predecessor completed), end = its last block's exit.
Per kernel role, means over the pass's launches of: blocks, resident-before-release
(release - first entry), boundary (release - the previous launch's end) and after-release
(end - release).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from statistics import mean

KINDS = {
    1: "rms_norm",
    2: "qk_norm_rope",
    3: "attention",
    4: "skinny",
    5: "vocab_max",
    6: "vocab_sum",
}


def launches(recs: list[tuple[int, ...]]) -> list[dict[str, float]]:
    by_key: dict[tuple[int, int, int], list[tuple[int, ...]]] = defaultdict(list)
    for r in recs:
        by_key[(r[0], r[1], r[2])].append(r)
    out = []
    for key, rs in by_key.items():
        rs.sort(key=lambda r: r[4])
        cur: list[tuple[int, ...]] = []
        for r in rs:
            if cur and r[4] > max(x[6] for x in cur):
                out.append(summary(key, cur))
                cur = []
            cur.append(r)
        if cur:
            out.append(summary(key, cur))
    out.sort(key=lambda launch: launch["release"])
    return out


def summary(key: tuple[int, int, int], rs: list[tuple[int, ...]]) -> dict[str, float]:
    waited = [r[5] for r in rs if r[5] > 0]
    return {
        "key": key,
        "blocks": len(rs),
        "sms": len({r[3] for r in rs}),
        "first": min(r[4] for r in rs),
        "release": min(waited) if waited else min(r[4] for r in rs),
        "end": max(r[6] for r in rs),
    }


def role(key: tuple[int, int, int]) -> str:
    kind, a, b = key
    name = KINDS.get(kind, str(kind))
    if kind == 4:
        return f"gemm out {a} in {b}"
    if kind == 1:
        return f"rms_norm{' gathered' if b else ''}"
    return name


def main() -> None:
    by_replay: dict[int, list[tuple[int, ...]]] = defaultdict(list)
    for line in open(sys.argv[1]):
        f = line.split()
        if len(f) != 10:
            continue
        by_replay[int(f[0])].append(tuple(int(x) for x in f[3:]))
    # A replay number traced by several backends of one run (dice engine bench's fused and
    # unfused store runs) holds several passes: split them where no block runs for 1 ms.
    passes: list[tuple[str, list[tuple[int, ...]]]] = []
    for replay, recs in sorted(by_replay.items()):
        recs.sort(key=lambda r: r[4])
        start, end, n = 0, recs[0][6], 0
        for i in range(1, len(recs) + 1):
            if i == len(recs) or recs[i][4] > end + 1_000_000:
                passes.append((f"{replay}.{n}", recs[start:i]))
                start, n = i, n + 1
            if i < len(recs):
                end = max(end, recs[i][6])
    for replay, recs in passes:
        ls = launches(recs)
        span = max(x["end"] for x in ls) - min(x["first"] for x in ls)
        print(
            f"## replay {replay}: {len(recs)} block records, {len(ls)} launches, span {span / 1e3:.1f} us"
        )
        stats: dict[str, list[tuple[float, float, float, float, float]]] = defaultdict(list)
        prev_end = None
        for x in ls:
            boundary = (x["release"] - prev_end) / 1e3 if prev_end is not None else float("nan")
            stats[role(x["key"])].append(
                (
                    x["blocks"],
                    (x["release"] - x["first"]) / 1e3,
                    boundary,
                    (x["end"] - x["release"]) / 1e3,
                    x["sms"],
                )
            )
            prev_end = x["end"]
        print(
            f"{'kernel':28s} {'n':>4s} {'blocks':>7s} {'SMs':>5s} {'resident us':>12s} {'boundary us':>12s} {'after us':>9s} {'sum after':>10s}"
        )
        total_after = 0.0
        total_boundary = 0.0
        for name, v in sorted(stats.items(), key=lambda kv: -sum(e[3] for e in kv[1])):
            b = [e[2] for e in v if e[2] == e[2]]
            after = sum(e[3] for e in v)
            total_after += after
            total_boundary += sum(b)
            print(
                f"{name:28s} {len(v):4d} {mean(e[0] for e in v):7.0f} {mean(e[4] for e in v):5.0f} "
                f"{mean(e[1] for e in v):12.2f} {mean(b) if b else float('nan'):12.2f} {mean(e[3] for e in v):9.2f} {after:10.1f}"
            )
        print(
            f"sum of after-release times {total_after:.1f} us, of boundaries {total_boundary:.1f} us (negative: overlap)"
        )
        if len(sys.argv) > 2:
            print("first layers' timeline (us from the first entry):")
            t0 = min(x["first"] for x in ls)
            for x in ls[: int(sys.argv[2])]:
                print(
                    f"  {role(x['key']):28s} first {(x['first'] - t0) / 1e3:8.2f} release {(x['release'] - t0) / 1e3:8.2f} "
                    f"end {(x['end'] - t0) / 1e3:8.2f} blocks {x['blocks']}"
                )


if __name__ == "__main__":
    main()
