"""bench/engine_profile_report.py: per-kernel time from an Nsight Compute CSV, template arguments
kept or dropped, other metrics averaged per kernel, and a clear message (exit 1) for a metric
the CSV lacks."""

import subprocess
import sys
from pathlib import Path

from bench_scripts import BENCH, line_after, run_bench_script

DEEP = "void dice::<unnamed>::attention_mma_pipelined_kernel<128, 3, true, 8>(int *, float)"
PAIRED = "void dice::<unnamed>::attention_mma_pipelined_kernel<128, 1, true, 4>(int *, float)"
# (ncu spells the anonymous namespace either way; the parameter list is cut after it)
QK = "void dice::(anonymous namespace)::qk_norm_rope_kernel<__nv_bfloat16>(float *)"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"


def csv_text() -> str:
    rows = ['"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
    launches = [(DEEP, 40.0, 50.0), (DEEP, 42.0, 40.0), (PAIRED, 30.0, 60.0), (QK, 4.0, 20.0)]
    for i, (kernel, us, dram) in enumerate(launches):
        rows.append(f'"{i}","{kernel}","gpu__time_duration.sum","usecond","{us}"')
        rows.append(f'"{i}","{kernel}","{DRAM}","%","{dram}"')
    return "==PROF== Connected to process\n" + "\n".join(rows) + "\n"


def report(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "ncu.csv"
    path.write_text(csv_text())
    return run_bench_script("engine_profile_report.py", str(path), *flags)


def kernel_line(stdout: str, start: str) -> list[str]:
    return line_after(stdout, start).split()


def test_template_arguments_are_dropped_by_default(tmp_path):
    done = report(tmp_path, "--layers", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    # Both instantiations in one row: 3 launches, 112 us in all.
    assert kernel_line(done.stdout, "attention_mma_pipelined_kernel ")[:2] == ["3", "37.33"]
    assert "4 kernels, 0.116 ms of GPU time, 1.00 forwards" in done.stdout
    assert kernel_line(done.stdout, "qk_norm_rope_kernel ")[:2] == ["1", "4.00"]


def test_kept_template_arguments_tell_instantiations_apart_with_metric_means(tmp_path):
    done = report(tmp_path, "--keep-templates", "--metric", DRAM)
    assert done.returncode == 0, done.stdout + done.stderr
    deep = kernel_line(done.stdout, "attention_mma_pipelined_kernel<128, 3, true, 8> ")
    paired = kernel_line(done.stdout, "attention_mma_pipelined_kernel<128, 1, true, 4> ")
    assert deep[:2] == ["2", "41.00"] and deep[-1] == "45.00"
    assert paired[:2] == ["1", "30.00"] and paired[-1] == "60.00"


def test_a_metric_the_csv_lacks_is_named(tmp_path):
    done = report(tmp_path, "--metric", "sm__cycles_elapsed.avg.per_second")
    assert done.returncode == 1
    assert "metric not in the CSV: sm__cycles_elapsed.avg.per_second" in done.stdout


def test_metric_columns_are_labelled_by_what_tells_them_apart():
    sys.path.insert(0, str(BENCH))
    from engine_profile_report import metric_labels

    stalls = [
        f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"
        for r in ("barrier", "long_scoreboard", "not_selected", "selected")
    ]
    labels = metric_labels([*stalls, DRAM, "smsp__inst_executed.sum"])
    assert [label.strip() for label in labels] == [
        "barrier",
        "long_scoreboard",
        "not_selected",
        "selected",
        DRAM[:24],
        "inst_executed.sum",
    ]
    assert metric_labels([DRAM]) == [DRAM[:24]]
