"""bench/ncu_source_report.py: a kernel's warp stall samples by reason, opcode and instruction
from Nsight Compute's source page, and a named error for a file without a source table."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "ncu_source_report.py"
HEADER = (
    '"Address","Source","Warp Stall Sampling (All Samples)",'
    '"Warp Stall Sampling (Not-issued Samples)","Instructions Executed",'
    '"stall_barrier","stall_long_sb","stall_wait","stall_long_sb (Not Issued)"'
)


def run(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "source.csv"
    path.write_text(text)
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(path), "--top", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_samples_by_reason_opcode_and_instruction(tmp_path):
    rows = [
        '"0x10","@P1   LDG.E R194, desc[UR10][R68.64]","60","59","8,192","0","60","0","59"',
        '"0x20","      BAR.SYNC.DEFER_BLOCKING 0x0","30","30","1,024","30","0","0","0"',
        '"0x30","      IMAD.MOV.U32 R197, RZ, RZ, R194","10","9","8,192","0","6","4","5"',
    ]
    text = '"Kernel Name","void k<1>(int)"\n' + HEADER + "\n" + "\n".join(rows) + "\n"
    done = run(tmp_path, text)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "void k<1>(int)"
    assert lines[1] == "100 stall samples over 3 instructions"
    assert lines[2] == "by reason: long_sb 66.0%, barrier 30.0%, wait 4.0%"
    assert lines[3] == "by opcode: LDG 60.0%, BAR 30.0%, IMAD 10.0%"
    # the two instructions with the most samples, their reasons largest first
    assert "60.0%      8192  @P1   LDG.E" in lines[5] and lines[5].endswith("(long_sb 60)")
    assert "BAR.SYNC" in lines[6] and lines[6].endswith("(barrier 30)")
    assert len(lines) == 7


def test_a_file_without_a_source_table_is_named(tmp_path):
    done = run(tmp_path, '"ID","Kernel Name","Metric Name"\n"0","k","x"\n')
    assert done.returncode == 1
    assert "no source table" in done.stdout
