"""The table of bench/device_engine_bench.sh: `dice engine bench` records beside the PyTorch
decoding's (bench/engine_torch_decode.py), joined on model, sequences, new tokens and store pass.

    engine_bench_report.py DICE.jsonl TORCH.jsonl [--markdown] [--clocks CLOCKS.csv]

Per configuration: dice's committed tokens/s and forwards/s, its floor (the larger of the bytes a
forward must move over the measured copy bandwidth and its FLOPs over the measured bf16 GEMM rate,
summed over the run's forwards) and time over floor (target <= 1.5), its serial bound over the
floor (GEMMs and attention one after the other, each at its ceiling: where this is above 1.5, no
forward that runs them in turn meets the target) and time over that bound, PyTorch's tokens/s and
the ratio dice / PyTorch (target >= 10 at 1 sequence). Where the records have it, time over the
floor at the GEMM rate the card sustains under its power limit ("x sust."; `dice engine bench
--sustained-gemm-seconds`). With --clocks (nvidia-smi samples in UTC: timestamp, SM clock, power,
clock event reasons), each row's median SM clock over its timed run and the share of samples in
which the software power cap held the clock down. "GPU idle": the share of the timed run in which
no pass ran on the GPU (the record's host_share: the host's time between passes). After the
table, issue 6's targets: the rows within 1.5x of their floor (and of the sustained floor), those
outside it, the 1-sequence rows' ratio to PyTorch, and SDAR-4B at 128 sequences over JetEngine's
published 5,000 tokens/s (goal: 2x).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path

JETENGINE_TOKENS_PER_SECOND = 5000.0
JETENGINE = (
    f"JetEngine's published figure: {JETENGINE_TOKENS_PER_SECOND:,.0f} tokens/s "
    "(SDAR-4B, 128 sequences, H200)"
)
JETENGINE_GOAL = 2.0  # dice / JetEngine's figure, SDAR-4B at 128 sequences
FLOOR_TARGET = 1.5  # time over floor, at most
TORCH_TARGET = 10.0  # dice / PyTorch at 1 sequence, at least
SW_POWER_CAP = 0x4  # nvidia-smi clocks_event_reasons bit: the software power cap


def clock_samples(path: Path) -> list[tuple[float, float, bool]]:
    """nvidia-smi samples (--query-gpu=timestamp,clocks.sm,...,clocks_event_reasons.active
    --format=csv[,noheader], run with TZ=UTC) as (Unix seconds, SM MHz, power-capped): the first
    column a "YYYY/MM/DD HH:MM:SS.mmm" UTC time, the second the SM clock ("1980 MHz"), the last
    the event reasons' hex mask. Lines that do not parse (the header, an error) are skipped."""
    return clock_samples_of(path.read_text()) if path.exists() else []


def clock_samples_of(text: str) -> list[tuple[float, float, bool]]:
    """clock_samples() of a clocks file's text."""
    out = []
    for row in csv.reader(text.splitlines()):
        try:
            when = datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
            mhz = float(row[1].split()[0])
            reasons = int(row[-1].strip(), 16)
        except (IndexError, ValueError):
            continue
        out.append((when.replace(tzinfo=UTC).timestamp(), mhz, bool(reasons & SW_POWER_CAP)))
    return out


def clocks_during(r: dict, samples: list[tuple[float, float, bool]]) -> tuple[float, float] | None:
    """The median SM MHz and the power-capped share of the samples within the record's timed run
    (timed_from_unix to timed_to_unix); None without those fields or without samples in it."""
    start, end = r.get("timed_from_unix"), r.get("timed_to_unix")
    if start is None or end is None:
        return None
    inside = [(mhz, capped) for t, mhz, capped in samples if start <= t <= end]
    if not inside:
        return None
    capped = sum(1 for _, c in inside if c) / len(inside)
    return statistics.median(mhz for mhz, _ in inside), capped


def records(path: Path) -> list[dict]:
    """The JSON records of a JSON Lines file ([] when it is absent)."""
    return records_of(path.read_text()) if path.exists() else []


def records_of(text: str) -> list[dict]:
    """The JSON records of JSON Lines text; lines that do not parse are skipped."""
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a time limit
    return out


def run_ceilings(dice: list[dict]) -> dict | None:
    """The ceilings a run measured: the first of its dice records that carries them (every record
    of one `dice engine bench` call carries the same), None when none does (the CPU backend)."""
    return next((r["ceilings"] for r in dice if r.get("ceilings")), None)


def ceiling_rates(ceilings: dict) -> tuple[float, float, float | None]:
    """A record's ceilings as (copy GB/s, bf16 GEMM TFLOP/s, sustained bf16 GEMM TFLOP/s or None
    for records from before `--sustained-gemm-seconds` or with it off)."""
    sustained = ceilings.get("bf16_gemm_sustained_flops_per_second")
    return (
        ceilings["copy_bytes_per_second"] / 1e9,
        ceilings["bf16_gemm_flops_per_second"] / 1e12,
        sustained / 1e12 if sustained else None,
    )


def key(r: dict) -> tuple:
    return (Path(r["model"]).name, r["sequences"], r["new_tokens"], bool(r["fused_store"]))


def skinny(r: dict) -> str:
    """The record's --skinny-gemm-rows ("-" for records from before the option)."""
    value = r.get("cuda_kernels", {}).get("skinny_gemm_rows")
    return "-" if value is None else str(value)


def row_id(r: dict) -> tuple:
    """A table row's identity: the configuration (key()) and its skinny and pdl settings."""
    return (*key(r), skinny(r), pdl(r))


def collapse_repeats(dice: list[dict]) -> list[dict]:
    """One record per table row (row_id) of records that repeat configurations
    (device_engine_bench.sh's REPEATS): a copy of the record of the median tokens/s (the lower
    middle one for an even count) with "runs" (the records) and, where they have it,
    "floor_range" (their least and most time over floor). A row of one record is that record.
    Rows keep the order of their first record."""
    groups: dict[tuple, list[dict]] = {}
    for r in dice:
        groups.setdefault(row_id(r), []).append(r)
    out = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        ranked = sorted(group, key=lambda r: r["tokens_per_second"])
        median = dict(ranked[(len(ranked) - 1) // 2], runs=len(group))
        floors = [r["time_over_floor"] for r in group if r.get("time_over_floor") is not None]
        if floors:
            median["floor_range"] = [min(floors), max(floors)]
        out.append(median)
    return out


def runs_cell(r: dict) -> str:
    """The "runs" column: 1, or the rounds and their range of time over floor ("3: 1.478-1.493")."""
    runs = r.get("runs", 1)
    spread = r.get("floor_range")
    return f"{runs}: {spread[0]:.3f}-{spread[1]:.3f}" if spread else str(runs)


def pdl(r: dict) -> str:
    """The record's programmatic dependent launch: early (every pass, and early after cuBLASLt),
    on (every pass), few (passes of at most the skinny GEMM rows), off ("-" for records from
    before it)."""
    kernels = r.get("cuda_kernels", {})
    value = kernels.get("programmatic_launch")
    if value is None:
        return "-"
    if kernels.get("early_start_after_cublas"):
        return "early"
    return "on" if value else "few" if kernels.get("programmatic_launch_few_rows") else "off"


def serial_over_floor(r: dict) -> float | None:
    """The record's serial bound over its floor (None for records from before the bound)."""
    serial, floor = r.get("serial_bound_seconds"), r.get("floor_seconds")
    return serial / floor if serial and floor else None


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def jetengine_row(r: dict) -> bool:
    """Whether the record is one JetEngine's published figure stands beside: SDAR-4B, 128
    sequences."""
    return key(r)[0].startswith("4b") and r["sequences"] == 128


def configuration(r: dict) -> str:
    """A record's configuration in words: model, sequences x new tokens, store pass."""
    model, seqs, new_tokens, fused = key(r)
    return f"{model} {seqs} x {new_tokens} {'fused' if fused else 'unfused'}"


def targets(dice: list[dict], torch_by_key: dict[tuple, dict]) -> list[str]:
    """Issue 6's targets over the dice records: within FLOOR_TARGET of the floor, at 1 sequence
    at least TORCH_TARGET x PyTorch (the PyTorch records by key()), SDAR-4B at 128 sequences over
    JetEngine's figure. Records without a floor are left out of the floor count."""
    lines = []
    for field, what in (
        ("time_over_floor", "the floor"),
        ("time_over_sustained_floor", "the floor at the sustained GEMM rate"),
    ):
        floored = [r for r in dice if r.get(field) is not None]
        if not floored:
            continue
        outside = [r for r in floored if round(r[field], 3) > FLOOR_TARGET]
        lines.append(
            f"within {FLOOR_TARGET}x of {what}: {len(floored) - len(outside)} of "
            f"{len(floored)} rows"
            + (
                "; outside: " + ", ".join(f"{configuration(r)} ({r[field]:.3f})" for r in outside)
                if outside
                else ""
            )
        )
    for r in dice:
        t = torch_by_key.get(key(r))
        if r["sequences"] != 1 or t is None or "error" in t or not t.get("tokens_per_second"):
            continue
        ratio = r["tokens_per_second"] / t["tokens_per_second"]
        verdict = "meets" if ratio >= TORCH_TARGET else "misses"
        lines.append(
            f"{configuration(r)}: {ratio:.1f}x PyTorch ({verdict} the {TORCH_TARGET:.0f}x target)"
        )
    for r in filter(jetengine_row, dice):
        ratio = r["tokens_per_second"] / JETENGINE_TOKENS_PER_SECOND
        lines.append(
            f"{configuration(r)}: {ratio:.2f}x JetEngine's "
            f"{JETENGINE_TOKENS_PER_SECOND:,.0f} tokens/s (goal: {JETENGINE_GOAL:.0f}x)"
        )
    return lines


def table(
    dice: list[dict],
    torch: list[dict],
    markdown: bool,
    samples: list[tuple[float, float, bool]] | None = None,
    sources: dict[tuple, str] | None = None,
) -> str:
    """The report's text: the table (Markdown with `markdown`), the ceilings, the notes and
    issue 6's targets. `samples`: clock_samples() of the run, for the SM MHz and power-cap
    columns ("-" without them). `sources`: a last column "run" naming each row's run, by key()
    (engine_bench_merge.py); the ceilings line is then left out, as each run measured its own.
    Repeated rows are collapsed first (collapse_repeats)."""
    dice = collapse_repeats(dice)
    by_key = {key(r): r for r in torch}
    head = [
        "model",
        "seqs",
        "new tokens",
        "store",
        "skinny",
        "pdl",
        "dice tok/s",
        "dice fwd/s",
        "floor s",
        "x floor",
        "runs",
        "serial/floor",
        "x serial",
        "x sust.",
        "SM MHz",
        "capped",
        "GPU idle",
        "torch tok/s",
        "dice/torch",
        "concurrent",
    ]
    if sources is not None:
        head.append("run")
    rows = []
    joined = set()
    stopped = False  # a PyTorch rate marked "*": the footnote says what the mark means
    for r in dice:
        t = by_key.get(key(r))  # several dice rows (skinny, pdl values) share one PyTorch row
        joined.add(key(r))
        torch_rate = None if t is None or "error" in t else t["tokens_per_second"]
        torch_note = "" if t is None or "complete" not in t or t["complete"] else "*"
        stopped = stopped or bool(torch_note)
        clocks = clocks_during(r, samples or [])
        rows.append(
            [
                key(r)[0],
                str(r["sequences"]),
                str(r["new_tokens"]),
                "fused" if r["fused_store"] else "unfused",
                skinny(r),
                pdl(r),
                fmt(r["tokens_per_second"], ".1f"),
                fmt(r.get("forwards_per_second"), ".1f"),
                fmt(r.get("floor_seconds"), ".3f"),
                # (three decimals: the target is <= 1.5, and 1.495 is not 1.504)
                fmt(r.get("time_over_floor"), ".3f"),
                runs_cell(r),
                fmt(serial_over_floor(r), ".2f"),
                fmt(r.get("time_over_serial_bound"), ".3f"),
                fmt(r.get("time_over_sustained_floor"), ".3f"),
                fmt(None if clocks is None else clocks[0], ".0f"),
                "-" if clocks is None else f"{100 * clocks[1]:.0f}%",
                # the share of the timed run with no pass on the GPU: the host's time between them
                "-" if r.get("host_share") is None else f"{100 * r['host_share']:.1f}%",
                ("oom" if t is not None and "error" in t else fmt(torch_rate, ".1f")) + torch_note,
                fmt(r["tokens_per_second"] / torch_rate if torch_rate else None, ".1f"),
                str(r.get("concurrent_sequences", "-")),
            ]
            + ([sources.get(key(r), "-")] if sources is not None else [])
        )
    for k, t in by_key.items():  # PyTorch ran where dice did not finish
        if k in joined:
            continue
        rate = None if "error" in t else t["tokens_per_second"]
        row = dict.fromkeys(head, "-")  # only the configuration and PyTorch's rate
        row.update(model=k[0], seqs=str(k[1]), store="fused" if k[3] else "unfused")
        row["new tokens"] = str(k[2])
        row["torch tok/s"] = "oom" if rate is None else f"{rate:.1f}"
        if sources is not None:
            row["run"] = sources.get(k, "-")
        rows.append(list(row.values()))
    lines = []
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
        for row in [head, *rows]:
            lines.append("  ".join(x.rjust(w) for x, w in zip(row, widths, strict=True)))
    ceilings = run_ceilings(dice)
    if ceilings and sources is None:
        copy, gemm, sustained = ceiling_rates(ceilings)
        lines.append(
            f"\nceilings measured in the same run on {ceilings['device']}: device-to-device copy "
            f"{copy:.0f} GB/s (read + write), bf16 GEMM {gemm:.0f} TFLOP/s"
            + (
                f" ({sustained:.0f} sustained over {ceilings['sustained_gemm_seconds']:g} s of "
                "back-to-back GEMMs)"
                if sustained
                else ""
            )
        )
    if stopped:
        lines.append("* PyTorch stopped at its time limit; its rate covers the blocks it ran.")
    if any(map(jetengine_row, dice)):
        lines.append(JETENGINE)
    summary = targets(dice, by_key)
    if summary:
        lines.append("\nissue 6's targets:")
        lines += [f"- {line}" for line in summary]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dice", type=Path)
    parser.add_argument("torch", type=Path)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--clocks", type=Path, help="nvidia-smi samples of the run (UTC)")
    args = parser.parse_args()
    samples = clock_samples(args.clocks) if args.clocks else None
    print(table(records(args.dice), records(args.torch), args.markdown, samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
