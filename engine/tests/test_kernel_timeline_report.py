"""bench/kernel_timeline_report.py: a pass's kernels split at the embedding, the steady passes
kept, a layer's steps, durations and leads from the kernels' GPU start and end, per-role sums,
the gaps between passes, and a clear message (exit 1) for a file without a complete pass."""

import gzip
import subprocess
from pathlib import Path

from bench_scripts import line_after, run_bench_script

ATTENTION = (
    "_ZN4dice6engine4cuda30attention_mma_pipelined_kernelILi128ELi1ELb0ELi4EEEvNS1_8AttnArgsE"
)
GEMM = "_ZN4dice6engine4cuda18stream_gemm_kernelILb0ELb0ELb1EEEvPKv"
NORM = "_ZN4dice6engine4cuda19rms_norm_vec_kernelEv"
EMBED = "_ZN4dice6engine4cuda16embedding_kernelEv"
VOCAB = "_ZN4dice6engine4cuda15vocab_pass_kernelEv"


def timeline(passes: int, layers: int, growth: int = 0) -> str:
    """Passes of embedding, `layers` x (attention 3 us + `growth` ns a pass index, GEMM 5 us
    starting 1 us before the attention ends, norm 1 us), then a cuBLASLt lm_head and the
    vocabulary pass; 10 us between passes."""
    rows = ["start_ns,end_ns,graph_node,stream,grid,block,shared,name"]
    t = 0
    for p in range(passes):
        rows.append(f"{t},{t + 2000},1,7,8,256,0,{EMBED}")
        t += 2000
        for _ in range(layers):
            a = 3000 + growth * p
            rows.append(f"{t},{t + a},2,7,132,128,0,{ATTENTION}")
            rows.append(f"{t + a - 1000},{t + a + 5000},3,7,132,288,0,{GEMM}")
            rows.append(f"{t + a + 5000},{t + a + 6000},4,7,4,256,0,{NORM}")
            t += a + 6000
        rows.append(f"{t},{t + 4000},5,7,132,256,0,nvjet_sm90_tss_64x64")
        rows.append(f"{t + 4000},{t + 5000},6,7,8,512,0,{VOCAB}")
        t += 5000 + 10000
    return "\n".join(rows) + "\n"


def run(path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return run_bench_script("kernel_timeline_report.py", str(path), *flags)


def numbers(stdout: str, start: str) -> list[float]:
    fields = line_after(stdout, start).split()
    return [float(x) for x in fields if x[0].isdigit() or x[0] == "-"]


def test_layer_steps_durations_and_leads(tmp_path: Path) -> None:
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(timeline(6, 5).encode()))
    got = run(path, "--passes", "4")
    assert got.returncode == 0, got.stderr
    out = got.stdout
    # 5 complete passes (the last one is cut), 4 kept; 5 layers, 3 middle ones averaged.
    assert "4 passes of 18 kernels, 5 layers" in out
    assert "mean of 3 middle layers" in out
    # The attention follows the norm's end (step 3, lead 0); the GEMM ends 5 us after it, having
    # started 1 us before (lead 1); the norm 1 us.
    assert numbers(out, "attention<128,1,0,4>") == [3.0, 3.0, 0.0]
    assert numbers(out, "stream_gemm<0,0,1>") == [5.0, 6.0, 1.0]
    assert numbers(out, "rms_norm") == [1.0, 1.0, 0.0]
    assert numbers(out, "layer ") == [9.0]
    # Per pass: 5 GEMMs of 5 us steps; the lm_head is cuBLASLt's; the span and the gap.
    assert "stream_gemm<0,0,1>" in out and "x5" in out
    assert numbers(out, "cublaslt") == [4.0]
    assert "pass span (first start to last end): 52.00 us" in out
    # The steps add up to the span: the embedding's is its duration.
    assert numbers(out, "embedding") == [2.0]
    assert "gap between passes: 10.00 us (median)" in out


def test_no_complete_pass_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("start_ns,end_ns,graph_node,stream,grid,block,shared,name\n1,2,0,7,1,1,0,x\n")
    got = run(path)
    assert got.returncode == 1
    assert "empty.csv: no complete pass" in got.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("start_ns,end_ns\n1,2\n")
    got = run(bad)
    assert got.returncode == 1
    assert "bad.csv: line 2 has 2 fields" in got.stderr


def test_by_pass_rows_and_the_attention_fit(tmp_path: Path) -> None:
    # The attention's launches grow by 0.5 us a pass: the fit over the 5 complete passes (all of
    # one kernel count and attention kernel) finds 3 us + 0.5 us a pass.
    path = tmp_path / "t.csv"
    path.write_text(timeline(6, 5, growth=500))
    out = tmp_path / "passes.csv"
    got = run(path, "--passes", "4", "--by-pass", str(out))
    assert got.returncode == 0, got.stderr
    assert (
        "attention fit over 5 passes of 18 kernels (attention<128,1,0,4>): "
        "us a launch = 3.00 + 0.5000 x pass" in got.stdout
    )
    lines = out.read_text().splitlines()
    assert lines[0].startswith("pass,kernels,span_us,attention,")
    assert len(lines) == 6
    # Pass 2: 5 launches of 4 us; GEMMs 5 x 6 us + the 4 us lm_head; span 2 + 5 x 10 + 5 us.
    assert lines[3] == '2,18,57.00,"attention<128,1,0,4>",5,4.00,20.00,34.00'
