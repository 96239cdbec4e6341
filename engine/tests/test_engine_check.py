"""bench/engine_check.py outputs (the device checks' comparison of `dice generate` records): equal
records pass, different ones fail, and a run that wrote an error message or nothing fails with
the file named instead of passing on zero records or ending in a traceback."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "engine_check.py"


def outputs(tmp_path: Path, a: str, b: str, *flags: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "a.jsonl").write_text(a)
    (tmp_path / "b.jsonl").write_text(b)
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "outputs",
            str(tmp_path / "a.jsonl"),
            str(tmp_path / "b.jsonl"),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def record(ids: list[int]) -> str:
    return json.dumps({"id": 0, "output_ids": ids, "trace": [[0, 1]]}) + "\n"


def test_equal_records_pass(tmp_path):
    done = outputs(tmp_path, record([1, 2, 3]), record([1, 2, 3]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1/1 records identical" in done.stdout and "PASS" in done.stdout


def test_different_records_fail(tmp_path):
    done = outputs(tmp_path, record([1, 2, 3]), record([1, 2, 4]))
    assert done.returncode == 1
    assert "0/1 records identical" in done.stdout and "2/3 tokens equal" in done.stdout


def test_a_failed_run_fails_naming_its_file(tmp_path):
    done = outputs(tmp_path, "dice generate failed: dice: error: tokenizer folder x\n", record([1]))
    assert done.returncode == 1
    assert "a.jsonl line 1 is not a JSON record" in done.stdout and "FAIL" in done.stdout
    assert "Traceback" not in done.stderr


def test_no_records_on_either_side_fail(tmp_path):
    done = outputs(tmp_path, "", "\n")
    assert done.returncode == 1
    assert "a.jsonl holds no records" in done.stdout


def test_report_mode_still_says_what_went_wrong(tmp_path):
    done = outputs(tmp_path, record([1]), "", "--report")
    assert "b.jsonl holds no records" in done.stdout
