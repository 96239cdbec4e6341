"""Loading problems and candidates from files, and the prebuilt extensions of candidates."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any


def exec_module(path: Path, name: str) -> types.ModuleType:
    """Executes the Python file ``path`` as a fresh module called ``name`` (registered in
    sys.modules while it runs, so that dataclasses and pickling work). Raises whatever the
    module raises."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_extension(so_path: Path) -> types.ModuleType:
    """Imports a prebuilt extension. Its init function is named after the file stem (the builder
    compiles ``TORCH_EXTENSION_NAME`` to it); it is registered as ``dice_ext_<hash of path>.<stem>``
    because several candidates may share a stem (the same main.cpp, another CUDA file). Raises
    ImportError if the library cannot be loaded."""
    digest = hashlib.sha256(str(so_path.resolve()).encode()).hexdigest()[:16]
    name = f"dice_ext_{digest}.{so_path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    loader = importlib.machinery.ExtensionFileLoader(name, str(so_path))
    spec = importlib.util.spec_from_file_location(name, so_path, loader=loader)
    if spec is None:
        raise ImportError(f"cannot load extension {so_path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    return module


class PrebuiltLoadInline:
    """A ``load_inline`` replacement that returns the orchestrator's prebuilt module for a call
    (matched by the capture digest). A call that was not captured is compiled by torch's own
    ``load_inline`` (or refused, with ``refuse``) and noted in ``notes``."""

    def __init__(self, extensions: dict[str, str], real: Any, refuse: bool = False) -> None:
        self._extensions = extensions
        self._real = real
        self._refuse = refuse
        self.notes: list[str] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .capture import normalize_call

        record = normalize_call(*args, **kwargs)
        so = self._extensions.get(record["digest"])
        if so is not None:
            return load_extension(Path(so))
        self.notes.append(
            f"load_inline({record['name']!r}) was not seen at the compile stage; "
            + (
                "refused (its sources were never checked)"
                if self._refuse
                else "compiled at run time by torch"
            )
        )
        if self._refuse:
            raise RuntimeError(self.notes[-1])
        return self._real(*args, **kwargs)
