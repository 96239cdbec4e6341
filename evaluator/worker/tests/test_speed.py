"""Worker features for throughput: stored reference timing, the versions a timing depends on, and
prebuilt modules that share a name."""

import shutil
import subprocess
import sysconfig

import pytest
from conftest import RELU_PROBLEM
from dice_worker.loader import load_extension

COUNTING_PROBLEM = RELU_PROBLEM.replace(
    "        return torch.relu(x)",
    "        with open(CALLS, 'a') as f:\n            f.write('call\\n')\n        return torch.relu(x)",
)


def test_ready_reports_the_software_versions(worker):
    assert worker.ready["torch"]
    assert worker.ready["cuda"]
    assert worker.ready["driver"] == "none"  # a CPU worker has no GPU driver


def test_stored_reference_samples_time_only_the_candidate(worker, tmp_path):
    calls = tmp_path / "reference_calls.txt"
    problem = COUNTING_PROBLEM.replace("CALLS", repr(str(calls)))
    candidate = RELU_PROBLEM + "\nModelNew = Model\n"
    r = worker.evaluate(
        candidate, problem, correct_trials=1, timing_trials=3, warmup=2, reference_ms=[5.0, 6.0]
    )
    assert r["verdict"] == "correct", r
    assert r["timing"]["reference_ms"] == [5.0, 6.0]
    assert len(r["timing"]["candidate_ms"]) == 3
    assert calls.read_text().count("call") == 1  # the correctness trial only, no timing calls

    calls.unlink()
    r = worker.evaluate(candidate, problem, correct_trials=1, timing_trials=3, warmup=2)
    assert len(r["timing"]["reference_ms"]) == 3
    assert calls.read_text().count("call") == 1 + 2 + 3  # interleaved: warm-up and trials too


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_modules_sharing_a_stem_load_as_distinct_modules(tmp_path):
    # Rollouts of one problem share main.cpp, so their modules share a name; each must load.
    include = sysconfig.get_paths()["include"]
    modules = []
    for value in (1, 2):
        folder = tmp_path / f"build{value}"
        folder.mkdir()
        source = folder / "same.c"
        source.write_text(
            "#include <Python.h>\n"
            'static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "same", NULL, -1, NULL};\n'
            "PyMODINIT_FUNC PyInit_same(void) {\n"
            "  PyObject* m = PyModule_Create(&def);\n"
            f'  PyModule_AddIntConstant(m, "value", {value});\n'
            "  return m;\n"
            "}\n"
        )
        subprocess.run(
            ["cc", "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(folder / "same.so")],
            check=True,
        )
        modules.append(load_extension(folder / "same.so"))
    assert [m.value for m in modules] == [1, 2]
    assert load_extension(tmp_path / "build1" / "same.so") is modules[0]
