from dice_worker.extract import extract_code


def test_last_complete_python_block_wins():
    text = "intro\n```python\nfirst = 1\n```\nmore\n```python\nsecond = 2\n```\nbye"
    got = extract_code(text)
    assert got.code == "second = 2\n"
    assert not got.truncated


def test_python_block_preferred_over_other_languages():
    text = "```python\nkeep = 1\n```\n```cpp\nint x;\n```\n"
    assert extract_code(text).code == "keep = 1\n"


def test_unlabeled_block_when_no_python_block():
    assert extract_code("```\nx = 1\n```").code == "x = 1\n"


def test_text_without_fence_is_taken_whole():
    text = "import torch\nclass ModelNew: pass\n"
    got = extract_code(text)
    assert got.code == text
    assert not got.from_block


def test_unclosed_block_is_truncated():
    got = extract_code("Here:\n```python\nimport torch\nclass ModelNew(")
    assert got.truncated
    assert got.code == ""


def test_truncated_after_a_complete_block_keeps_that_block():
    got = extract_code("```python\na = 1\n```\n```python\nb = ")
    assert got.truncated
    assert got.code == "a = 1\n"
