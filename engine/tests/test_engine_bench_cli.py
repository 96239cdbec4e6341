"""`dice engine bench` (issue 6's benchmark) on the CPU backend: greedy by default, sampling with
--temperature / --top-k / --top-p recorded in each record, bad sampling options refused with the
engine's own check (GenerationOptions::validate), each record's timed span. Then the scripts
around it: bench/engine_bench_report.py's table and targets, and engine_device.sh's
burst_ceilings_only."""

import json
import os
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DICE = ROOT / "build" / "dice"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    if not DICE.exists():
        pytest.skip("build/dice is not built")
    path = tmp_path_factory.mktemp("engine-bench") / "tiny"
    args = ["model", "random", "--config", "tiny", "--out", str(path), "--no-tokenizer"]
    done = subprocess.run([str(DICE), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return path


def bench(model: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["engine", "bench", "--model", str(model), "--backend", "cpu", "--threads", "1",
            "--sequences", "2", "--new-tokens", "8", "--store", "fused", "--warmup-tokens", "4",
            *extra]  # fmt: skip
    return subprocess.run([str(DICE), *args], capture_output=True, text=True, timeout=300)


def run_report(tmp_path: Path, dice: list[dict], torch: list[dict], *args: str) -> str:
    """bench/engine_bench_report.py over these dice and PyTorch records (JSON Lines files in
    tmp_path) with `args`; its output (the run must succeed)."""
    dice_path, torch_path = tmp_path / "dice.jsonl", tmp_path / "torch.jsonl"
    dice_path.write_text("".join(json.dumps(r) + "\n" for r in dice))
    torch_path.write_text("".join(json.dumps(r) + "\n" for r in torch))
    script = ROOT / "bench" / "engine_bench_report.py"
    done = subprocess.run(["python3", str(script), str(dice_path), str(torch_path), *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def markdown_rows(report: str, count: int) -> list[dict[str, str]]:
    """The first `count` rows of a --markdown report's table, each by column head."""
    lines = report.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, [c.strip() for c in line.strip("|").split("|")], strict=True))
            for line in lines[2 : 2 + count]]  # fmt: skip


def test_greedy_by_default_and_sampling_recorded(model):
    greedy = bench(model)
    assert greedy.returncode == 0, greedy.stderr
    record = json.loads(greedy.stdout.splitlines()[-1])
    assert (record["temperature"], record["top_k"], record["top_p"]) == (0, 0, 1)
    assert record["output_tokens"] == 16
    sampled = bench(model, "--temperature", "0.7", "--top-k", "5", "--top-p", "0.9")
    assert sampled.returncode == 0, sampled.stderr
    record = json.loads(sampled.stdout.splitlines()[-1])
    assert (record["temperature"], record["top_k"], record["top_p"]) == (0.7, 5, 0.9)
    assert record["output_tokens"] == 16


def test_the_timed_runs_wall_clock_span_is_recorded(model):
    """Each record gives its timed run's span in Unix seconds (for matching the card's clock
    samples to it): as long as the run, and now. The CPU backend measures no ceilings, so a
    sustained GEMM time is accepted and ignored."""
    done = bench(model, "--sustained-gemm-seconds", "2")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout.splitlines()[-1])
    span = record["timed_to_unix"] - record["timed_from_unix"]
    assert span == pytest.approx(record["seconds"], abs=0.05)
    assert abs(record["timed_to_unix"] - datetime.now(UTC).timestamp()) < 300
    assert record["ceilings"] is None


@pytest.mark.parametrize(("bad", "message"), [
    (["--top-p", "0"], "generation option top_p: must be in (0, 1], got 0"),
    (["--top-p", "1.5"], "generation option top_p: must be in (0, 1], got 1.5"),
    (["--temperature", "-1"], "generation option temperature: must be >= 0, got -1"),
    (["--top-k", "-3"], "generation option top_k: must be >= 0, got -3"),
    (["--sustained-gemm-seconds", "-1"], "--sustained-gemm-seconds: Value -1 not in range 0"),
])  # fmt: skip
def test_bad_sampling_options_are_refused(model, bad, message):
    done = bench(model, *bad)
    assert done.returncode != 0
    assert message in done.stderr


def test_report_gives_the_serial_bound_beside_the_floor(tmp_path):
    """bench/engine_bench_report.py: serial bound over floor and time over the serial bound from
    the records' seconds, '-' for records from before the bound, joined with PyTorch's rate."""
    base = {"model": "/m/4b", "sequences": 128, "new_tokens": 1024, "fused_store": True,
            "tokens_per_second": 9000.0, "forwards_per_second": 70.0}  # fmt: skip
    new = dict(base, floor_seconds=2.0, time_over_floor=2.2, serial_bound_seconds=3.1,
               time_over_serial_bound=1.42)  # fmt: skip
    old = dict(base, sequences=16, floor_seconds=2.0, time_over_floor=1.5)
    report = run_report(tmp_path, [new, old], [dict(base, tokens_per_second=900.0)], "--markdown")
    row, before = markdown_rows(report, 2)
    assert (row["x floor"], row["serial/floor"], row["x serial"]) == ("2.200", "1.55", "1.420")
    assert row["dice/torch"] == "10.0"
    assert (before["serial/floor"], before["x serial"]) == ("-", "-")
    assert "PyTorch stopped at its time limit" not in report  # no rate is marked "*"


def test_report_marks_a_pytorch_rate_cut_by_its_time_limit(tmp_path):
    """bench/engine_bench_report.py: a PyTorch record with complete false gets "*" after its rate
    and the footnote that says what the mark means; a complete one gets neither."""
    base = {"model": "/m/4b", "sequences": 1, "new_tokens": 1024, "fused_store": True,
            "tokens_per_second": 300.0}  # fmt: skip
    dice = [base, dict(base, new_tokens=4096)]
    torch = [dict(base, tokens_per_second=20.0, complete=False),
             dict(base, new_tokens=4096, tokens_per_second=20.0, complete=True)]  # fmt: skip
    report = run_report(tmp_path, dice, torch, "--markdown")
    cut, whole = markdown_rows(report, 2)
    assert (cut["torch tok/s"], whole["torch tok/s"]) == ("20.0*", "20.0")
    assert "* PyTorch stopped at its time limit; its rate covers the blocks it ran." in report


def test_report_sums_up_issue_6s_targets(tmp_path):
    """bench/engine_bench_report.py: after the table, the rows within 1.5x of the floor (1.5004
    rounds to the table's 1.500 and counts as within) and those outside, each 1-sequence row's
    ratio to PyTorch against the 10x target, and SDAR-4B at 128 sequences over JetEngine's 5,000
    tokens/s."""
    base = {"model": "/m/4b", "new_tokens": 1024, "fused_store": True}
    dice = [
        dict(base, sequences=1, tokens_per_second=300.0, time_over_floor=1.5004),
        dict(base, sequences=16, tokens_per_second=4000.0, time_over_floor=1.66),
        dict(base, sequences=128, tokens_per_second=9800.0, time_over_floor=1.9),
        dict(base, model="/m/1.7b", sequences=1, tokens_per_second=600.0, time_over_floor=1.2),
    ]
    torch = [
        dict(base, sequences=1, tokens_per_second=20.0),
        dict(base, model="/m/1.7b", sequences=1, tokens_per_second=80.0),
    ]
    summary = run_report(tmp_path, dice, torch).split("issue 6's targets:\n")[1].splitlines()
    assert summary == [
        "- within 1.5x of the floor: 2 of 4 rows; outside: 4b 16 x 1024 fused (1.660), "
        "4b 128 x 1024 fused (1.900)",
        "- 4b 1 x 1024 fused: 15.0x PyTorch (meets the 10x target)",
        "- 1.7b 1 x 1024 fused: 7.5x PyTorch (misses the 10x target)",
        "- 4b 128 x 1024 fused: 1.96x JetEngine's 5,000 tokens/s (goal: 2x)",
    ]


def test_report_gives_the_sustained_floor_and_the_clocks_of_each_run(tmp_path):
    """bench/engine_bench_report.py: time over the floor at the sustained GEMM rate ("x sust."),
    the GPU's idle share of the timed run ("GPU idle", the record's host_share) and, with
    --clocks, the median SM clock and the power-capped share of the nvidia-smi samples within
    each record's timed run (samples outside it, the header and unparsable lines ignored); the
    targets count the rows within 1.5x of either floor."""
    base = {"model": "/m/4b", "new_tokens": 1024, "fused_store": True}
    start = 1796000000.0  # 2026-11-29 ~17:33 UTC
    dice = [
        dict(base, sequences=128, tokens_per_second=9800.0, time_over_floor=1.9,
             time_over_sustained_floor=1.49, timed_from_unix=start, timed_to_unix=start + 2,
             host_share=0.0201),
        dict(base, sequences=1, tokens_per_second=300.0, time_over_floor=1.7,
             timed_from_unix=start + 10, timed_to_unix=start + 11),
        dict(base, sequences=16, tokens_per_second=4000.0, time_over_floor=1.6),
    ]  # fmt: skip

    def sample(offset: float, mhz: int, reasons: str) -> str:
        when = datetime.fromtimestamp(start + offset, UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        return f"{when}, {mhz} MHz, 690.00 W, 700.00 W, 57, {reasons}\n"

    clocks = tmp_path / "clocks.csv"
    clocks.write_text(
        "timestamp, clocks.current.sm [MHz], power.draw [W], power.limit [W], temperature.gpu, "
        "clocks_event_reasons.active\n"
        + sample(-1.0, 1980, "0x0000000000000000")  # before the first run: not counted
        + sample(0.5, 1500, "0x0000000000000004")
        + sample(1.0, 1600, "0x0000000000000004")
        + sample(1.5, 1980, "0x0000000000000000")
        + "No devices were found\n"
        + sample(10.5, 1980, "0x0000000000000000")
    )
    report = run_report(tmp_path, dice, [], "--markdown", "--clocks", str(clocks))
    rows = markdown_rows(report, 3)
    assert [(r["x sust."], r["SM MHz"], r["capped"], r["GPU idle"]) for r in rows] == [
        ("1.490", "1600", "67%", "2.0%"),
        ("-", "1980", "0%", "-"),
        ("-", "-", "-", "-"),
    ]
    summary = report.split("issue 6's targets:\n")[1].splitlines()
    assert summary[:2] == [
        "- within 1.5x of the floor: 0 of 3 rows; outside: 4b 128 x 1024 fused (1.900), "
        "4b 1 x 1024 fused (1.700), 4b 16 x 1024 fused (1.600)",
        "- within 1.5x of the floor at the sustained GEMM rate: 1 of 1 rows",
    ]


def test_tokens_per_second_scripts_skip_the_sustained_rate_where_the_binary_has_it(tmp_path):
    """bench/engine_device.sh's burst_ceilings_only: `--sustained-gemm-seconds 0` for a dice that
    has the option (the variants, check and profile scripts compare tokens/s and need no
    sustained floor), nothing for an older build whose `engine bench` lacks it."""
    if not DICE.exists():
        pytest.skip("build/dice is not built")
    old = tmp_path / "dice_old"
    old.write_text("#!/bin/sh\necho 'Options:'\necho '  --no-ceilings  no floor'\n")
    old.chmod(0o755)
    script = ROOT / "bench" / "engine_device.sh"
    answers = []
    for binary in (DICE, old):
        done = subprocess.run(["bash", "-c", f'source "{script}"; burst_ceilings_only "{binary}"'],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        answers.append(done.stdout.strip())
    assert answers == ["--sustained-gemm-seconds 0", ""]


def test_report_rows_where_only_pytorch_ran(tmp_path):
    """bench/engine_bench_report.py: a configuration dice did not finish gets a row with its
    configuration and PyTorch's rate (or "oom") under "torch tok/s", "-" everywhere else."""
    base = {"model": "/m/4b", "new_tokens": 1024, "fused_store": False}
    torch = [
        dict(base, sequences=128, tokens_per_second=900.0),
        dict(base, sequences=16, error="out of memory"),
    ]
    rows = markdown_rows(run_report(tmp_path, [], torch, "--markdown"), 2)
    shown = ["model", "seqs", "new tokens", "store", "torch tok/s"]
    assert [[r[h] for h in shown] for r in rows] == [
        ["4b", "128", "1024", "unfused", "900.0"],
        ["4b", "16", "1024", "unfused", "oom"],
    ]
    assert all(v == "-" for r in rows for h, v in r.items() if h not in shown)


def test_report_gives_a_repeated_row_its_median_round_and_the_rounds_range(tmp_path):
    """bench/engine_bench_report.py over a run with REPEATS: the records of one row (configuration,
    skinny and pdl) become the record of the median tokens/s (the lower middle one for an even
    count), its "runs" cell the rounds and their least and most time over floor; the targets
    count the median round; a row of one record reads "1"."""
    base = {"model": "/m/4b", "sequences": 1, "new_tokens": 4096, "fused_store": True}
    rounds = [(336.0, 1.503), (339.0, 1.490), (338.5, 1.492)]
    dice = [dict(base, tokens_per_second=t, time_over_floor=x) for t, x in rounds]
    dice += [dict(base, sequences=16, tokens_per_second=t, time_over_floor=x)
             for t, x in ((3500.0, 1.49), (3400.0, 1.52))]  # fmt: skip
    dice.append(dict(base, new_tokens=1024, tokens_per_second=350.0, time_over_floor=1.47))
    report = run_report(tmp_path, dice, [], "--markdown")
    rows = markdown_rows(report, 3)
    shown = ["seqs", "new tokens", "dice tok/s", "x floor", "runs"]
    assert [[r[h] for h in shown] for r in rows] == [
        ["1", "4096", "338.5", "1.492", "3: 1.490-1.503"],
        ["16", "4096", "3400.0", "1.520", "2: 1.490-1.520"],
        ["1", "1024", "350.0", "1.470", "1"],
    ]
    summary = report.split("issue 6's targets:\n")[1].splitlines()
    assert summary[0] == (
        "- within 1.5x of the floor: 2 of 3 rows; outside: 4b 16 x 4096 fused (1.520)"
    )


def test_bench_script_repeats_every_configuration_in_rounds(tmp_path):
    """bench/device_engine_bench.sh on the tiny shape without a GPU: REPEATS=2 runs dice's call
    twice over both configurations and the table has a row each with 2 runs; a REPEATS that is
    not a positive integer is refused before anything runs (exit 2)."""
    if not DICE.exists():
        pytest.skip("build/dice is not built")
    env = {"DICE": str(DICE), "DICE_PYTHON": sys.executable, "OUT": str(tmp_path / "out"),
           "WORK": str(tmp_path / "work"), "MODELS": "tiny", "SEQUENCES": "1,2",
           "NEW_TOKENS": "8", "STORE": "fused", "TORCH": "0", "PATH": os.environ["PATH"]}  # fmt: skip
    (tmp_path / "out").mkdir()
    script = str(ROOT / "bench" / "device_engine_bench.sh")
    done = subprocess.run(["bash", script], env=dict(env, REPEATS="2"), capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "round 2 of 2) exit 0" in done.stdout
    records = (tmp_path / "work" / "engine-bench" / "dice.jsonl").read_text().splitlines()
    assert len(records) == 4
    table = (tmp_path / "out" / "engine-bench.md").read_text()
    rows = markdown_rows(table[table.index("| model") :], 2)
    assert [(r["seqs"], r["runs"]) for r in rows] == [("1", "2"), ("2", "2")]
    refused = subprocess.run(["bash", script], env=dict(env, REPEATS="0"), capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 2
    assert "REPEATS=0: expected a positive integer" in refused.stdout


def write_run(folder: Path, dice: list[dict], torch: list[dict]) -> None:
    """A run of bench/device_engine_bench.sh as its folder leaves it: engine-bench/dice.jsonl and
    torch.jsonl under `folder`."""
    (folder / "engine-bench").mkdir(parents=True)
    for name, items in (("dice.jsonl", dice), ("torch.jsonl", torch)):
        (folder / "engine-bench" / name).write_text("".join(json.dumps(r) + "\n" for r in items))


def run_merge(*runs: str) -> subprocess.CompletedProcess[str]:
    script = ROOT / "bench" / "engine_bench_merge.py"
    return subprocess.run(["python3", str(script), *runs, "--markdown"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_merge_takes_each_configuration_from_the_last_run_with_dices_record(tmp_path):
    """bench/engine_bench_merge.py over an older run (a folder) and a newer one (a tarball): each
    configuration from the last run that has dice's record of it, beside that run's PyTorch rate;
    where the newer run has only PyTorch's record (dice stopped at its limit), the older run's
    dice and PyTorch records; a "run" column; each used run's ceilings; the targets over the
    merged rows."""
    base = {"model": "/m/1.7b", "new_tokens": 4096, "fused_store": False}
    ceilings = {"device": "GPU X", "copy_bytes_per_second": 4.2e12,
                "bf16_gemm_flops_per_second": 7.8e14}  # fmt: skip
    old, new = tmp_path / "old", tmp_path / "new"
    write_run(old, [
        dict(base, sequences=1, tokens_per_second=500.0, time_over_floor=1.8, ceilings=ceilings),
        dict(base, sequences=128, tokens_per_second=8750.0, time_over_floor=1.438),
        dict(base, sequences=16, tokens_per_second=4800.0, time_over_floor=1.56),
    ], [dict(base, sequences=1, tokens_per_second=20.0),
        dict(base, sequences=128, tokens_per_second=540.0),
        dict(base, sequences=16, tokens_per_second=300.0)])  # fmt: skip
    write_run(new, [
        dict(base, sequences=1, tokens_per_second=510.0, time_over_floor=1.85),
        dict(base, sequences=16, tokens_per_second=4900.0, time_over_floor=1.517),
    ], [dict(base, sequences=1, tokens_per_second=21.0),
        dict(base, sequences=16, tokens_per_second=297.0),
        dict(base, sequences=128, tokens_per_second=545.0)])  # fmt: skip
    tarball = tmp_path / "new.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(new / "engine-bench", arcname="engine-bench")
    done = run_merge(str(old), str(tarball))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == [f"- {old}: GPU X: copy 4200 GB/s, bf16 GEMM 780 TFLOP/s",
                         f"- {tarball}: no ceilings"]  # fmt: skip
    table_at = next(i for i, line in enumerate(lines) if line.startswith("| model"))
    rows = markdown_rows("\n".join(lines[table_at:]), 3)
    shown = ["seqs", "dice tok/s", "x floor", "torch tok/s", "dice/torch", "run"]
    assert [[r[h] for h in shown] for r in rows] == [
        ["1", "510.0", "1.850", "21.0", "24.3", str(tarball)],
        ["128", "8750.0", "1.438", "540.0", "16.2", str(old)],
        ["16", "4900.0", "1.517", "297.0", "16.5", str(tarball)],
    ]
    summary = done.stdout.split("issue 6's targets:\n")[1].splitlines()
    assert summary[0] == (
        "- within 1.5x of the floor: 1 of 3 rows; outside: 1.7b 1 x 4096 unfused (1.850), "
        "1.7b 16 x 4096 unfused (1.517)"
    )


def test_merge_collapses_a_runs_repeated_rows_first(tmp_path):
    """bench/engine_bench_merge.py over a run with REPEATS: the configuration's row is that run's
    median round with its "runs" cell, not its last round."""
    base = {"model": "/m/4b", "sequences": 1, "new_tokens": 1024, "fused_store": True}
    run = tmp_path / "run"
    write_run(run, [dict(base, tokens_per_second=t, time_over_floor=x)
                    for t, x in ((351.0, 1.47), (345.0, 1.50), (349.0, 1.48))], [])  # fmt: skip
    done = run_merge(str(run))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    table_at = next(i for i, line in enumerate(lines) if line.startswith("| model"))
    (row,) = markdown_rows("\n".join(lines[table_at:]), 1)
    assert (row["dice tok/s"], row["x floor"], row["runs"]) == ("349.0", "1.480", "3: 1.470-1.500")


def truncated_tarball(folder: Path) -> Path:
    """A run tarball cut in half, as a copy stopped midway leaves it."""
    record = {"model": "/m/4b", "sequences": 1, "new_tokens": 1024, "fused_store": True}
    write_run(folder / "run", [dict(record, tokens_per_second=300.0 + i) for i in range(2000)], [])
    whole = folder / "whole.tar.gz"
    with tarfile.open(whole, "w:gz") as tar:
        tar.add(folder / "run" / "engine-bench", arcname="engine-bench")
    cut = folder / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    return cut


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p / "absent", "no such file or folder"),
    (lambda p: p, "holds no dice.jsonl"),
    (lambda p: (p / "x.tar.gz").write_text("not a tarball") and p / "x.tar.gz",
     "not a readable run tarball"),
    (lambda p: truncated_tarball(p), "not a readable run tarball"),
])  # fmt: skip
def test_merge_names_a_run_it_cannot_read(tmp_path, make, message):
    """bench/engine_bench_merge.py: a RUN that is missing, holds no dice.jsonl, or is not a
    tarball or a whole one is an error naming it (exit status 2), not a table without its rows
    nor a traceback."""
    run = make(tmp_path)
    done = run_merge(str(run))
    assert done.returncode == 2
    assert f"{run}: {message}" in done.stderr
