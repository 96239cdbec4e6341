"""The Python side of ``dice eval``: runs PyTorch problems and candidates (evaluator/PROTOCOL.md)."""
