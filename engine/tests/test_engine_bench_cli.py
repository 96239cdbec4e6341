"""`dice engine bench` (issue 6's benchmark) on the CPU backend: greedy by default, sampling with
--temperature / --top-k / --top-p recorded in each record, bad sampling options refused with the
engine's own check (GenerationOptions::validate)."""

import json
import subprocess
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
    dice_path, torch_path = tmp_path / "dice.jsonl", tmp_path / "torch.jsonl"
    dice_path.write_text(json.dumps(new) + "\n" + json.dumps(old) + "\n")
    torch_path.write_text(json.dumps(dict(base, tokens_per_second=900.0)) + "\n")
    script = ROOT / "bench" / "engine_bench_report.py"
    done = subprocess.run(["python3", str(script), str(dice_path), str(torch_path), "--markdown"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:4]]
    row = {h: c for h, c in zip(head, cells[0], strict=True)}
    assert (row["x floor"], row["serial/floor"], row["x serial"]) == ("2.200", "1.55", "1.420")
    assert row["dice/torch"] == "10.0"
    before = {h: c for h, c in zip(head, cells[1], strict=True)}
    assert (before["serial/floor"], before["x serial"]) == ("-", "-")


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
    dice_path, torch_path = tmp_path / "dice.jsonl", tmp_path / "torch.jsonl"
    dice_path.write_text("".join(json.dumps(r) + "\n" for r in dice))
    torch_path.write_text("".join(json.dumps(r) + "\n" for r in torch))
    script = ROOT / "bench" / "engine_bench_report.py"
    done = subprocess.run(["python3", str(script), str(dice_path), str(torch_path)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = done.stdout.split("issue 6's targets:\n")[1].splitlines()
    assert summary == [
        "- within 1.5x of the floor: 2 of 4 rows; outside: 4b 16 x 1024 fused (1.660), "
        "4b 128 x 1024 fused (1.900)",
        "- 4b 1 x 1024 fused: 15.0x PyTorch (meets the 10x target)",
        "- 1.7b 1 x 1024 fused: 7.5x PyTorch (misses the 10x target)",
        "- 4b 128 x 1024 fused: 1.96x JetEngine's 5,000 tokens/s (goal: 2x)",
    ]


def test_report_gives_the_sustained_floor_and_the_clocks_of_each_run(tmp_path):
    """bench/engine_bench_report.py: time over the floor at the sustained GEMM rate ("x sust.")
    and, with --clocks, the median SM clock and the power-capped share of the nvidia-smi samples
    within each record's timed run (samples outside it, the header and unparsable lines
    ignored); the targets count the rows within 1.5x of either floor."""
    base = {"model": "/m/4b", "new_tokens": 1024, "fused_store": True}
    start = 1796000000.0  # 2026-11-29 ~17:33 UTC
    dice = [
        dict(base, sequences=128, tokens_per_second=9800.0, time_over_floor=1.9,
             time_over_sustained_floor=1.49, timed_from_unix=start, timed_to_unix=start + 2),
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
    dice_path, torch_path = tmp_path / "dice.jsonl", tmp_path / "torch.jsonl"
    dice_path.write_text("".join(json.dumps(r) + "\n" for r in dice))
    torch_path.write_text("")
    script = ROOT / "bench" / "engine_bench_report.py"
    done = subprocess.run(["python3", str(script), str(dice_path), str(torch_path), "--markdown",
                           "--clocks", str(clocks)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(head, [c.strip() for c in line.strip("|").split("|")], strict=True))
            for line in lines[2:5]]  # fmt: skip
    assert [(r["x sust."], r["SM MHz"], r["capped"]) for r in rows] == [
        ("1.490", "1600", "67%"),
        ("-", "1980", "0%"),
        ("-", "-", "-"),
    ]
    summary = done.stdout.split("issue 6's targets:\n")[1].splitlines()
    assert summary[:2] == [
        "- within 1.5x of the floor: 0 of 3 rows; outside: 4b 128 x 1024 fused (1.900), "
        "4b 1 x 1024 fused (1.700), 4b 16 x 1024 fused (1.600)",
        "- within 1.5x of the floor at the sustained GEMM rate: 1 of 1 rows",
    ]
