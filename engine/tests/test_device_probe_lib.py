"""bench/device_probe_lib.sh's Nsight Compute helpers, run against a stand-in `ncu` on PATH (no
GPU): probe_stalls asks for the stall metrics of the named kernels by their mangled names and
reports them labelled; probe_source exports one launch's source page and reports its samples.
"""

import gzip
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

# The stand-in: records its arguments, then answers --metrics runs with a long-format CSV of
# every metric asked (one launch of one kernel) and -i ... --page source with a source page.
FAKE_NCU = r"""#!/usr/bin/env python3
import sys
args = sys.argv[1:]
with open(sys.argv[0] + ".calls", "a") as log:
    log.write(" ".join(args) + "\n")
kernel = "void dice::(anonymous namespace)::attention_kernel<128, 1, true, 8>(Args)"
if "--metrics" in args:
    metrics = args[args.index("--metrics") + 1].split(",")
    print('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"')
    for i, m in enumerate(metrics):
        unit, value = ("nsecond", "30,000") if m == "gpu__time_duration.sum" else ("", str(i))
        print(f'"0","{kernel}","{m}","{unit}","{value}"')
elif "-o" in args:
    open(args[args.index("-o") + 1] + ".ncu-rep", "w").write("report")
elif "--page" in args:
    print(f'"Kernel Name","{kernel}"')
    print('"Address","Source","Warp Stall Sampling (All Samples)","stall_barrier","stall_wait"')
    print('"0x10","  BAR.SYNC 0x0","3","3","0"')
    print('"0x20","  FMUL R1, R2, R3","1","0","1"')
"""


def run_probe(tmp_path: Path, commands: str) -> subprocess.CompletedProcess[str]:
    """`commands` after sourcing a copy of bench/'s scripts under tmp_path/repo (so that the
    common_device.sh it sources unpacks and writes nothing in this checkout's .device/)."""
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    for script in [*(ROOT / "bench").glob("*.sh"), *(ROOT / "bench").glob("*.py")]:
        (repo / "bench" / script.name).write_text(script.read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    ncu.write_text(FAKE_NCU)
    ncu.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "OUT": str(out),
        "WORK": str(tmp_path / "work"),
    }
    script = f"source bench/device_probe_lib.sh; PROBE=callX; {commands}"
    return subprocess.run(
        ["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )


def test_probe_stalls_asks_for_the_stall_ratios_and_labels_them(tmp_path):
    done = run_probe(
        tmp_path,
        "probe_stalls pairs 'pipelined_kernelILi128' 5 40 -- /bin/echo dice --gpu-memory 16GiB",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    call = (tmp_path / "bin" / "ncu.calls").read_text().split()
    metrics = call[call.index("--metrics") + 1].split(",")
    assert STALL.format("barrier") in metrics and STALL.format("long_scoreboard") in metrics
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" in metrics
    assert call[call.index("--kernel-name-base") + 1] == "mangled"
    assert call[call.index("--kernel-name") + 1] == "regex:pipelined_kernelILi128"
    assert call[call.index("--launch-skip") + 1] == "40"
    assert call[call.index("--launch-count") + 1] == "5"
    assert call[-4:] == ["/bin/echo", "dice", "--gpu-memory", "16GiB"]
    table = (tmp_path / "out" / "callX-stalls-pairs.txt").read_text()
    header = next(line for line in table.splitlines() if line.startswith("kernel"))
    assert "barrier" in header.split() and "not_selected" in header.split()
    assert "attention_kernel<128, 1, true, 8>" in table and "30.00" in table
    with gzip.open(tmp_path / "out" / "callX-stalls-pairs.csv.gz", "rt") as f:
        assert STALL.format("membar") in f.read()


def test_probe_source_reports_one_launchs_samples(tmp_path):
    done = run_probe(tmp_path, "probe_source pairs 'ILi8E' 12 -- /bin/true")
    assert done.returncode == 0, done.stdout + done.stderr
    calls = (tmp_path / "bin" / "ncu.calls").read_text().splitlines()
    assert "--section SourceCounters" in calls[0] and "--launch-skip 12" in calls[0]
    assert "--launch-count 1" in calls[0] and calls[0].endswith("/bin/true")
    assert "--page source" in calls[1]
    report = (tmp_path / "out" / "callX-source-pairs.txt").read_text()
    assert "4 stall samples over 2 instructions" in report
    assert "by reason: barrier 75.0%, wait 25.0%" in report
    assert not (tmp_path / "out" / "callX-source-pairs.ncu-rep").exists()
    assert (tmp_path / "out" / "callX-source-pairs.csv.gz").exists()


def test_staged_binaries_unpack_beside_their_archives(tmp_path):
    """bench/common_device.sh's unpack_staged: every .device/NAME.xz (and one folder down) that
    bench/device_prepare.sh staged becomes an executable NAME when sourced; an archive that does
    not unpack is named on stderr, leaves no partial file and stops nothing else."""
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "common_device.sh").write_text(
        (ROOT / "bench" / "common_device.sh").read_text()
    )
    device = tmp_path / ".device"
    (device / "sub").mkdir(parents=True)
    program = b"#!/bin/sh\necho staged\n"
    for packed in (device / "dice.xz", device / "sub" / "tests.xz"):
        packed.write_bytes(subprocess.run(["xz", "-c"], input=program, capture_output=True).stdout)
    (device / "broken.xz").write_bytes(b"not xz")
    env = {**os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work")}
    script = f"source '{tmp_path}/bench/common_device.sh'; '{device}/dice'; '{device}/sub/tests'"
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == ["staged", "staged"]
    assert "broken.xz does not unpack" in done.stderr
    assert not (device / "broken").exists() and not (device / "broken.part").exists()
