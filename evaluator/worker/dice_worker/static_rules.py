"""Static rules: the candidate's Python through its syntax tree, its CUDA/C++ sources through a
small lexer that blanks comments and string literals (evaluator/RULES.md; system.md §4).

Nothing here executes candidate code: the orchestrator runs these before and after the capture,
in processes of their own, so that a candidate cannot edit its own findings.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One rule that fired: ``rule`` is a stable id of RULES.md, ``line`` is 1-based in ``where``
    (``python`` for the candidate's program, ``<extension>:cuda_sources`` or ``:cpp_sources``)."""

    rule: str
    message: str
    line: int
    where: str = "python"

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "line": self.line, "where": self.where}


# ---------------------------------------------------------------------------------------------
# Python

# Imported modules that are a finding wherever they appear.
_IMPORT_RULES: dict[str, tuple[str, str]] = {}
for _names, _rule, _what in (
    (
        "ctypes _ctypes cffi cupy pycuda numba cuda",
        "static.ctypes",
        "native code outside load_inline",
    ),
    (
        "threading _thread multiprocessing concurrent asyncio subprocess signal sched",
        "static.concurrency",
        "threads, processes or signals",
    ),
    (
        "socket ssl http urllib urllib3 requests ftplib smtplib telnetlib xmlrpc socketserver "
        "shutil tempfile pickle marshal shelve dbm sqlite3 mmap glob fcntl pty webbrowser zipfile "
        "tarfile",
        "static.io",
        "file or network access",
    ),
    (
        "inspect gc importlib builtins code codeop pdb atexit __main__",
        "static.introspection",
        "introspection of the running harness",
    ),
):
    for _n in _names.split():
        _IMPORT_RULES[_n] = (_rule, _what)

# torch functions that are always allowed in the forward path: allocation, views and shape ops,
# dtype/device queries (RULES.md, static.torch_compute).
_TORCH_ALLOWED = set(
    """empty empty_like empty_strided zeros zeros_like ones ones_like full full_like tensor
    as_tensor as_strided from_numpy arange scalar_tensor Size device dtype finfo iinfo is_tensor
    is_floating_point is_complex numel get_default_dtype result_type promote_types
    broadcast_shapes no_grad inference_mode enable_grad set_grad_enabled is_grad_enabled Tensor
    reshape flatten unflatten squeeze unsqueeze permute transpose swapaxes swapdims movedim
    moveaxis t narrow select split split_with_sizes tensor_split chunk unbind view_as_real
    view_as_complex broadcast_to broadcast_tensors atleast_1d atleast_2d atleast_3d cat concat
    concatenate stack hstack vstack dstack real imag""".split()
)
# Of those, the ones that return tensors.
_TORCH_TENSOR_MAKERS = _TORCH_ALLOWED - set(
    """Size device dtype finfo iinfo is_tensor is_floating_point is_complex numel get_default_dtype
    result_type promote_types broadcast_shapes no_grad inference_mode enable_grad
    set_grad_enabled is_grad_enabled Tensor""".split()
)
_TORCH_CUDA_ALLOWED = set(
    """current_stream default_stream synchronize current_device get_device_properties device
    is_available device_count get_device_name get_device_capability set_device""".split()
)
# Tensor methods that compute (in place with a trailing underscore as well).
_COMPUTE_METHODS = set(
    """abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all allclose amax amin
    aminmax angle any arccos arcsin arctan argmax argmin argsort asin asinh atan atan2 atanh
    baddbmm bincount bitwise_and bitwise_not bitwise_or bitwise_xor bmm ceil cholesky clamp
    clamp_max clamp_min clip cos cosh count_nonzero cross cummax cummin cumprod cumsum deg2rad
    det diag diag_embed diff digamma dist div divide dot eig einsum eq equal erf erfc erfinv exp
    exp2 expm1 fix flip fliplr flipud float_power floor floor_divide fmax fmin fmod frac gather ge
    gelu ger greater greater_equal gt hardshrink hardtanh heaviside histc hypot i0 index_add
    index_copy index_fill index_put index_reduce index_select inner inverse isclose isfinite isinf
    isnan isneginf isposinf kron kthvalue lcm ldexp le leaky_relu lerp less less_equal lgamma log
    log10 log1p log2 log_softmax logaddexp logaddexp2 logcumsumexp logdet logical_and logical_not
    logical_or logical_xor logit logsumexp lt lu masked_fill masked_scatter masked_select matmul
    matrix_exp matrix_power max maximum mean median min minimum mm mode moveaxis msort mul
    multinomial multiply mv mvlgamma nan_to_num nanmean nanmedian nanquantile nansum ne neg
    negative nextafter nonzero norm normal not_equal outer pinverse polygamma pow prod qr
    quantile rad2deg reciprocal relu remainder renorm repeat_interleave roll rot90 round rsqrt
    scatter scatter_add scatter_reduce sgn sigmoid sign signbit silu sin sinc sinh slogdet softmax
    sort sqrt square std sub subtract sum svd take take_along_dim tan tanh topk trace trapz
    triangular_solve tril triu true_divide trunc unique unique_consecutive var vdot where xlogy
    softplus hardsigmoid hardswish mish elu selu celu threshold uniform exponential
    geometric cauchy log_normal bernoulli random""".split()
)
_LOW_PRECISION = re.compile(r"\b(float16|half|bfloat16)\b")
_ESCAPE_ATTRS = set(
    """__globals__ __code__ __closure__ __subclasses__ __mro__ __bases__ __builtins__ f_back
    f_locals f_globals f_code tb_frame gi_frame cr_frame __loader__ __spec__""".split()
)
_INTROSPECTION_CALLS = {"globals", "vars", "__import__", "eval", "exec", "compile", "breakpoint"}
_OS_IO = set(
    """system popen open remove unlink rename replace mkdir makedirs rmdir removedirs write read
    listdir scandir walk chdir chmod chown link symlink truncate putenv unsetenv dup dup2 pipe
    fdopen sendfile execv execve execvp execvpe execl execle execlp execlpe spawnl spawnle spawnv
    spawnve posix_spawn posix_spawnp""".split()
)
_OS_CONCURRENCY = {"fork", "forkpty", "kill", "killpg", "register_at_fork", "setsid"}
_PATH_IO_METHODS = set(
    "write_text write_bytes read_text read_bytes unlink mkdir touch rmdir symlink_to hardlink_to "
    "tofile".split()
)
_NUMPY_IO = set(
    "load save savez savez_compressed fromfile memmap loadtxt savetxt genfromtxt".split()
)
_HARDCODED_MIN = 256  # numeric literals in one literal before static.hardcoded_values fires


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _PythonRules:
    """One pass over a module: imports and aliases, the call graph of ModelNew.forward, then the
    rules of RULES.md (forward-path rules only in the forward path)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> module path or imported object path
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.extension_names: set[str] = set()
        self._seen: set[tuple[str, int, str]] = set()

    # -- helpers ---------------------------------------------------------------------------
    def add(self, rule: str, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 0)
        key = (rule, line, message)
        if key not in self._seen:
            self._seen.add(key)
            self.findings.append(Finding(rule, message, line))

    def resolve(self, node: ast.AST) -> str | None:
        """The full path of a Name/Attribute chain whose root is an import (``F.relu`` ->
        ``torch.nn.functional.relu``); None when the root is not an import."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        if root not in self.aliases:
            return None
        base = self.aliases[root]
        return f"{base}.{rest}" if rest else base

    # -- collection ------------------------------------------------------------------------
    def collect(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    local = a.asname or a.name.partition(".")[0]
                    self.aliases[local] = a.name if a.asname else a.name.partition(".")[0]
                    self._import_rule(a.name, node)
            elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    self._import_rule(f"{node.module}.{a.name}", node)
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                path = self.resolve(node.value.func) or ""
                if path.startswith("torch.utils.cpp_extension.load"):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            self.extension_names.add(t.id)

    def _import_rule(self, module: str, node: ast.AST) -> None:
        top = module.partition(".")[0]
        if top in _IMPORT_RULES:
            rule, what = _IMPORT_RULES[top]
            self.add(rule, node, f"imports {module}: {what}")
        for prefix, rule in (
            ("torch._dynamo", "static.torch_compile"),
            ("torch._inductor", "static.torch_compile"),
            ("torch.library", "static.monkeypatch"),
            ("torch.multiprocessing", "static.concurrency"),
            ("torch.overrides", "static.tensor_subclass"),
            ("torch.utils._python_dispatch", "static.tensor_subclass"),
        ):
            if module.startswith(prefix):
                self.add(rule, node, f"imports {module}")

    # -- the forward path ------------------------------------------------------------------
    def _class_methods(
        self, cls: ast.ClassDef
    ) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self.classes and base.id != cls.name:
                methods.update(self._class_methods(self.classes[base.id]))
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[node.name] = node
        return methods

    def _init_attributes(self, cls: ast.ClassDef) -> dict[str, ast.expr]:
        """``self.X = value`` assignments in the class's methods (last one wins)."""
        attrs: dict[str, ast.expr] = {}
        for method in self._class_methods(cls).values():
            for node in ast.walk(method):
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if (
                            isinstance(t, ast.Attribute)
                            and isinstance(t.value, ast.Name)
                            and t.value.id == "self"
                        ):
                            attrs[t.attr] = node.value
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("register_buffer", "register_parameter")
                    and len(node.args) >= 2
                    and isinstance(node.args[0], ast.Constant)
                ):
                    attrs[str(node.args[0].value)] = node.args[1]
        return attrs

    def forward_path(self) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]]:
        """Functions reachable from ModelNew.forward (and __call__), each with its class."""
        if "ModelNew" not in self.classes:
            return []
        todo: list[tuple[str | None, str]] = [("ModelNew", "forward"), ("ModelNew", "__call__")]
        done: set[tuple[str | None, str]] = set()
        out: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]] = []
        while todo:
            cls_name, fn_name = todo.pop()
            if (cls_name, fn_name) in done:
                continue
            done.add((cls_name, fn_name))
            if cls_name is None:
                fn = self.functions.get(fn_name)
            else:
                cls = self.classes.get(cls_name)
                fn = self._class_methods(cls).get(fn_name) if cls else None
            if fn is None:
                continue
            out.append((fn, cls_name))
            attrs = self._init_attributes(self.classes[cls_name]) if cls_name else {}
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                if isinstance(f, ast.Name):
                    if f.id in self.functions:
                        todo.append((None, f.id))
                    elif f.id in self.classes:
                        todo += [(f.id, "__init__"), (f.id, "forward")]
                elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                    if f.value.id == "self" and cls_name is not None:
                        todo.append((cls_name, f.attr))
                        value = attrs.get(f.attr)
                        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                            if value.func.id in self.classes:
                                todo += [(value.func.id, "forward"), (value.func.id, "__call__")]
                    elif f.value.id in self.classes:
                        todo.append((f.value.id, f.attr))
                elif (
                    isinstance(f, ast.Attribute)
                    and f.attr == "forward"
                    and isinstance(f.value, ast.Attribute)
                    and isinstance(f.value.value, ast.Name)
                    and f.value.value.id == "self"
                    and cls_name is not None
                ):
                    value = attrs.get(f.value.attr)
                    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                        todo.append((value.func.id, "forward"))
        return out

    # -- rules -----------------------------------------------------------------------------
    def run(self) -> list[Finding]:
        self.collect()
        self._module_wide()
        for fn, cls_name in self.forward_path():
            self._forward_rules(fn, cls_name)
        return capped(sorted(self.findings, key=lambda f: (f.line, f.rule)))

    def _module_wide(self) -> None:
        model_class = self.classes.get("Model")
        inside_model: set[int] = set()
        if model_class is not None:
            inside_model = {id(n) for n in ast.walk(model_class)}
        for node in self.tree.body:  # `if __name__ == "__main__":` blocks never run in the harness
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                inside_model |= {id(n) for n in ast.walk(node)}
        nested: set[int] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                self._class_rules(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name in ("__torch_function__", "__torch_dispatch__"):
                    self.add("static.tensor_subclass", node, f"defines {node.name}")
            elif isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    if node.id == "Model" and id(node) not in inside_model:
                        self.add(
                            "static.reference_model",
                            node,
                            "uses the reference Model in the candidate",
                        )
                    elif node.id in _INTROSPECTION_CALLS or node.id == "__builtins__":
                        self.add("static.introspection", node, f"uses {node.id}")
            elif isinstance(node, ast.Attribute):
                self._attribute_rules(node)
            elif isinstance(node, ast.Call):
                self._call_rules(node)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                self._assignment_rules(node)
            elif isinstance(node, (ast.Try, ast.TryStar)) and node.handlers:
                if any(
                    isinstance(n, ast.Call)
                    and (self.resolve(n.func) or "").startswith("torch.utils.cpp_extension.load")
                    for stmt in node.body
                    for n in ast.walk(stmt)
                ):
                    self.add(
                        "static.try_except",
                        node,
                        "try/except around the extension's build: a fallback when it fails",
                    )
            elif isinstance(node, (ast.List, ast.Tuple, ast.Set)) and id(node) not in nested:
                literals = [
                    n for n in ast.walk(node) if isinstance(n, (ast.List, ast.Tuple, ast.Set))
                ]
                count = sum(
                    1
                    for n in ast.walk(node)
                    if isinstance(n, ast.Constant) and isinstance(n.value, (int, float))
                )
                if count >= _HARDCODED_MIN:
                    nested.update(id(n) for n in literals)
                    self.add(
                        "static.hardcoded_values",
                        node,
                        f"a literal of {count} numbers (hard-coded results or statistics?)",
                    )

    def _class_rules(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            path = self.resolve(base) or _dotted(base) or ""
            if path == "Model" or path.endswith(".Model"):
                self.add(
                    "static.reference_model",
                    node,
                    f"class {node.name} inherits the reference Model",
                )
            if path in (
                "torch.Tensor",
                "torch._C.TensorBase",
                "torch._C._TensorBase",
                "torch.nn.Parameter",
                "torch.nn.parameter.Parameter",
            ):
                self.add("static.tensor_subclass", node, f"class {node.name} subclasses {path}")

    def _attribute_rules(self, node: ast.Attribute) -> None:
        if node.attr in _ESCAPE_ATTRS:
            self.add("static.introspection", node, f"reads .{node.attr}")
        if node.attr in ("_make_subclass", "_make_wrapper_subclass", "as_subclass"):
            self.add("static.tensor_subclass", node, f"uses .{node.attr}")
        path = self.resolve(node)
        if path is None:
            return
        if path in ("sys.modules", "sys.meta_path", "sys.path_hooks") or path.startswith(
            ("sys._getframe", "sys.settrace", "sys.setprofile", "sys._current_frames")
        ):
            self.add("static.introspection", node, f"uses {path}")
        if path.startswith(("torch.compile", "torch.jit.", "torch._dynamo", "torch._inductor")) or (
            path in ("torch.jit", "torch.export")
        ):
            self.add("static.torch_compile", node, f"uses {path}")
        if path.startswith(
            ("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables")
        ):
            self.add("static.cuda_graph", node, f"uses {path}")
        if path.startswith(
            (
                "torch.cuda.Stream",
                "torch.cuda.stream",
                "torch.cuda.Event",
                "torch.cuda.ExternalStream",
                "torch.cuda.set_stream",
                "torch.multiprocessing",
            )
        ):
            self.add("static.concurrency", node, f"uses {path}: work outside the current stream")
        if path.startswith(("torch.ops.load_library", "torch.classes.load_library")):
            self.add("static.ctypes", node, f"uses {path}")
        if path.startswith("torch.library"):
            self.add("static.monkeypatch", node, f"uses {path}: registers kernels of torch ops")
        if path.startswith(("torch.autocast", "torch.cuda.amp", "torch.amp", "torch.cpu.amp")):
            self.add("static.reduced_precision", node, f"uses {path}")

    def _call_rules(self, node: ast.Call) -> None:
        f = node.func
        path = self.resolve(f) or ""
        name = f.id if isinstance(f, ast.Name) else None
        if name in ("getattr", "setattr", "delattr") and (
            len(node.args) < 2
            or not (isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str))
        ):
            self.add("static.introspection", node, f"{name} with a computed attribute name")
        if name == "setattr" and node.args and self.resolve(node.args[0]) is not None:
            self.add("static.monkeypatch", node, f"setattr on {self.resolve(node.args[0])}")
        if name in ("open", "input"):
            self.add("static.io", node, f"calls {name}()")
        if path.startswith("os."):
            leaf = path.split(".")[1]
            if leaf in _OS_IO:
                self.add("static.io", node, f"calls {path}")
            elif leaf in _OS_CONCURRENCY:
                self.add("static.concurrency", node, f"calls {path}")
            elif leaf == "environ" and path.split(".")[-1] in (
                "update",
                "setdefault",
                "pop",
                "clear",
            ):
                self.add("static.io", node, f"changes the environment ({path})")
        if path.startswith(("numpy.", "np.")) and path.split(".")[-1] in _NUMPY_IO:
            self.add("static.io", node, f"calls {path}")
        if path in ("torch.load", "torch.save"):
            self.add("static.io", node, f"calls {path}")
        if path == "torch.utils.cpp_extension.load":
            self.add("static.io", node, "builds an extension from files (not captured)")
        if path.startswith(
            (
                "torch.manual_seed",
                "torch.seed",
                "torch.cuda.manual_seed",
                "torch.random.",
                "torch.set_rng_state",
                "torch.cuda.set_rng_state",
                "random.seed",
                "numpy.random.seed",
                "torch.set_default_dtype",
                "torch.set_default_tensor_type",
                "torch.set_float32_matmul_precision",
            )
        ) or (
            path.startswith("torch.backends.") and path.split(".")[-1].startswith(("set", "flags"))
        ):
            self.add("static.monkeypatch", node, f"calls {path}: changes the harness's state")
        if isinstance(f, ast.Attribute):
            if f.attr in _PATH_IO_METHODS:
                self.add("static.io", node, f"calls .{f.attr}()")
            if f.attr in ("half", "bfloat16") or (
                f.attr in ("to", "type")
                and any(_LOW_PRECISION.search(ast.unparse(a)) for a in [*node.args, *node.keywords])
            ):
                self.add(
                    "static.reduced_precision",
                    node,
                    f"casts to lower precision ({ast.unparse(f)[:60]})",
                )

    def _assignment_rules(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            targets = node.targets
            if isinstance(node.value, ast.Name) and node.value.id == "Model":
                self.add("static.reference_model", node, "assigns the reference Model")
        elif isinstance(node, ast.Delete):
            targets = node.targets
        else:
            targets = [node.target]  # type: ignore[attr-defined]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and sub.attr == "__class__":
                    self.add("static.tensor_subclass", node, "assigns __class__")
            base = t
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Call) and isinstance(base.func, ast.Name):
                if base.func.id in ("globals", "vars"):
                    self.add("static.introspection", node, f"writes {base.func.id}()")
                continue
            if not isinstance(base, ast.Attribute) and base is t:
                continue
            path = self.resolve(base)
            if path is None:
                continue
            if "allow_tf32" in path or "allow_fp16" in path or "allow_bf16" in path:
                self.add("static.monkeypatch", node, f"sets {path}: lower matmul/conv precision")
            elif path.startswith("os.environ"):
                self.add("static.io", node, "changes the environment")
            else:
                self.add("static.monkeypatch", node, f"replaces {path}")

    # -- forward-path rules ----------------------------------------------------------------
    def _tensor_names(
        self, fn: ast.FunctionDef | ast.AsyncFunctionDef, attrs: dict[str, ast.expr]
    ) -> set[str]:
        """Names in ``fn`` that hold tensors, as far as a syntax tree can tell: parameters not
        annotated as numbers, and names assigned from tensor expressions."""
        names: set[str] = set()
        scalars = {"int", "float", "bool", "str"}
        for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
            if a.arg == "self":
                continue
            if a.annotation is not None and ast.unparse(a.annotation) in scalars:
                continue
            names.add(a.arg)
        if fn.args.vararg is not None:
            names.add(fn.args.vararg.arg)
        changed = True
        while changed:
            changed = False
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and self._is_tensor(node.value, names, attrs):
                    for t in node.targets:
                        for sub in ast.walk(t):
                            if isinstance(sub, ast.Name) and sub.id not in names:
                                names.add(sub.id)
                                changed = True
        return names

    def _is_tensor(self, node: ast.AST, names: set[str], attrs: dict[str, ast.expr]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.Starred):
            return self._is_tensor(node.value, names, attrs)
        if isinstance(node, ast.Subscript):
            return self._is_tensor(node.value, names, attrs)
        if isinstance(node, ast.BinOp):
            return self._is_tensor(node.left, names, attrs) or self._is_tensor(
                node.right, names, attrs
            )
        if isinstance(node, ast.Attribute):
            if node.attr in ("T", "mT", "H", "mH", "data", "real", "imag"):
                return self._is_tensor(node.value, names, attrs)
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                value = attrs.get(node.attr)
                path = self.resolve(value.func) if isinstance(value, ast.Call) else None
                return bool(
                    path
                    and path.startswith("torch.")
                    and (not path.startswith("torch.nn.") or path.endswith(".Parameter"))
                )
            if node.attr in ("weight", "bias"):
                return True
            return False
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                if f.value.id in self.extension_names:
                    return True
            path = self.resolve(f)
            if path is not None:
                return path.startswith("torch.") and path.split(".")[-1] in _TORCH_TENSOR_MAKERS
            if isinstance(f, ast.Attribute):
                if f.attr in (
                    "contiguous",
                    "clone",
                    "view",
                    "reshape",
                    "permute",
                    "transpose",
                    "unsqueeze",
                    "squeeze",
                    "flatten",
                    "expand",
                    "expand_as",
                    "float",
                    "to",
                    "narrow",
                    "t",
                    "detach",
                    "cuda",
                    "view_as",
                    "reshape_as",
                ):
                    return self._is_tensor(f.value, names, attrs)
        return False

    def _forward_rules(
        self, fn: ast.FunctionDef | ast.AsyncFunctionDef, cls_name: str | None
    ) -> None:
        attrs = self._init_attributes(self.classes[cls_name]) if cls_name else {}
        tensors = self._tensor_names(fn, attrs)
        where = f"{cls_name}.{fn.name}" if cls_name else fn.name
        for node in ast.walk(fn):
            if isinstance(node, (ast.Try, ast.TryStar)) and node.handlers:
                self.add("static.try_except", node, f"try/except in {where}: a fallback path")
            elif isinstance(node, ast.withitem):
                path = (
                    self.resolve(node.context_expr.func)
                    if isinstance(node.context_expr, ast.Call)
                    else None
                )
                if path and path.endswith("suppress"):
                    self.add(
                        "static.try_except", node.context_expr, f"contextlib.suppress in {where}"
                    )
            elif isinstance(node, ast.BinOp):
                if isinstance(node.op, ast.MatMult):
                    self.add("static.torch_compute", node, f"the @ operator in {where}")
                elif self._is_tensor(node.left, tensors, attrs) or self._is_tensor(
                    node.right, tensors, attrs
                ):
                    self.add(
                        "static.torch_compute",
                        node,
                        f"tensor arithmetic in {where}: {ast.unparse(node)[:60]}",
                    )
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert)):
                if self._is_tensor(node.operand, tensors, attrs):
                    self.add(
                        "static.torch_compute",
                        node,
                        f"tensor arithmetic in {where}: {ast.unparse(node)[:60]}",
                    )
            elif isinstance(node, ast.Compare) and not any(
                isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops
            ):
                if any(self._is_tensor(x, tensors, attrs) for x in [node.left, *node.comparators]):
                    self.add(
                        "static.torch_compute",
                        node,
                        f"tensor comparison in {where}: {ast.unparse(node)[:60]}",
                    )
            elif isinstance(node, ast.AugAssign) and self._is_tensor(node.target, tensors, attrs):
                self.add(
                    "static.torch_compute",
                    node,
                    f"tensor arithmetic in {where}: {ast.unparse(node)[:60]}",
                )
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and self._is_tensor(t.value, tensors, attrs):
                        self.add("static.torch_compute", node, f"indexed assignment in {where}")
            elif isinstance(node, ast.Call):
                self._forward_call(node, attrs, tensors, where)

    def _forward_call(
        self, node: ast.Call, attrs: dict[str, ast.expr], tensors: set[str], where: str
    ) -> None:
        f = node.func
        if isinstance(f, ast.Call):  # nn.ReLU()(x)
            inner = self.resolve(f.func) or ""
            if inner.startswith("torch.nn.") and inner.split(".")[2][:1].isupper():
                self.add("static.nn_forward", node, f"calls an {inner} layer in {where}")
            return
        path = self.resolve(f)
        if path is not None:
            if path.startswith("torch."):
                self._forward_torch_call(node, path, where)
            return
        if not isinstance(f, ast.Attribute):
            return
        receiver = f.value
        if isinstance(receiver, ast.Name) and receiver.id in self.extension_names:
            return  # the candidate's own extension
        layer = receiver if f.attr == "forward" else f
        if (
            isinstance(layer, ast.Attribute)
            and isinstance(layer.value, ast.Name)
            and layer.value.id == "self"
        ):
            value = attrs.get(layer.attr)
            if isinstance(value, ast.Call):
                vpath = self.resolve(value.func) or ""
                if vpath.startswith("torch.nn.") and vpath.split(".")[-1][:1].isupper():
                    if vpath.split(".")[-1] not in ("Parameter", "ParameterList", "ParameterDict"):
                        self.add(
                            "static.nn_forward",
                            node,
                            f"calls self.{layer.attr} ({vpath}) in {where}",
                        )
                        return
        method = f.attr[:-1] if f.attr.endswith("_") and not f.attr.endswith("__") else f.attr
        if method in _COMPUTE_METHODS and not (
            isinstance(receiver, ast.Name) and receiver.id == "self"
        ):
            self.add("static.torch_compute", node, f"calls .{f.attr}() in {where}")

    def _forward_torch_call(self, node: ast.Call, path: str, where: str) -> None:
        parts = path.split(".")
        leaf = parts[-1]
        if path.startswith("torch.utils.cpp_extension"):
            return
        if len(parts) == 2 and leaf in _TORCH_ALLOWED:
            return
        if len(parts) == 3 and parts[1] == "cuda" and leaf in _TORCH_CUDA_ALLOWED:
            return
        if path.startswith(
            (
                "torch.compile",
                "torch.jit",
                "torch.cuda.",
                "torch._",
                "torch.backends",
                "torch.library",
                "torch.autocast",
                "torch.amp",
                "torch.manual_seed",
                "torch.set_",
                "torch.random",
                "torch.ops.load_library",
            )
        ):
            return  # module-wide rules report these
        if (
            len(parts) >= 3
            and parts[1] == "nn"
            and parts[2] not in ("functional", "init")
            and leaf[:1].isupper()
        ):
            return  # constructing a layer; calling it is static.nn_forward
        if path.startswith("torch.Tensor.") and leaf in (
            "contiguous",
            "view",
            "size",
            "dim",
            "numel",
            "data_ptr",
        ):
            return
        self.add("static.torch_compute", node, f"calls {path} in {where}")


def analyze_python(code: str) -> list[Finding]:
    """Findings of the Python rules over ``code``. Raises SyntaxError if it does not parse."""
    return _PythonRules(ast.parse(code)).run()


# ---------------------------------------------------------------------------------------------
# CUDA / C++

_STRING_OR_COMMENT = re.compile(
    r"""//[^\n]*|/\*.*?\*/|R"(?P<d>[^()\s\\]{0,16})\(.*?\)(?P=d)"|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""",
    re.DOTALL,
)


def blank_comments_and_strings(src: str) -> tuple[str, list[tuple[int, str]]]:
    """``src`` with comments blanked and string/char literal contents blanked (quotes kept), same
    length and line breaks; and the string literals' (offset, contents) for the PTX checks."""
    out: list[str] = []
    strings: list[tuple[int, str]] = []
    last = 0
    for m in _STRING_OR_COMMENT.finditer(src):
        out.append(src[last : m.start()])
        text = m.group(0)
        if text.startswith(("//", "/*")):
            out.append(re.sub(r"[^\n]", " ", text))
        else:
            strings.append((m.start(), text))
            quote = text.index('"') if '"' in text[:3] or text.startswith("R") else 0
            body = re.sub(r"[^\n]", " ", text[quote + 1 : -1])
            out.append(text[: quote + 1] + body + text[-1])
        last = m.end()
    out.append(src[last:])
    return "".join(out), strings


_CPP_RULES: list[tuple[str, re.Pattern[str], str]] = [
    (
        "static.blas_handle",
        re.compile(
            r"\b(getCurrentCUDABlasHandle|getCurrentCUDABlasLtHandle|getCudnnHandle|"
            r"at::cuda::blas::\w+)\b|\b(cublas\w*|cudnn\w*|cusparse\w*|cusolver\w*|cufft\w*)\s*\("
        ),
        "a vendor library (cuBLAS/cuDNN/...) does the work",
    ),
    (
        "static.concurrency",
        re.compile(
            r"\b(std::thread|std::jthread|std::async|pthread_create|cudaStreamCreate\w*|"
            r"cudaEventCreate\w*|cudaStreamPerThread|cudaLaunchHostFunc|cudaStreamAddCallback|"
            r"getStreamFromPool|setCurrentCUDAStream|CUDAStreamGuard|CUDAEvent)\b|"
            r"(?<![\w.>:])(fork|vfork|posix_spawnp?)\s*\("
        ),
        "threads, processes, streams or events",
    ),
    (
        "static.cuda_graph",
        re.compile(r"\b(cudaStreamBeginCapture\w*|cudaGraph\w+|CUDAGraph)\b"),
        "CUDA graphs",
    ),
    (
        "static.io",
        re.compile(
            r"\b(std::ofstream|std::ifstream|std::fstream|std::filesystem|FILE\s*\*)|"
            r"(?<![\w.>:])(fopen|freopen|fwrite|fputs|open|openat|creat|unlink|remove|rename|mkdir|"
            r"rmdir|truncate|socket|connect|system|popen|execve|execv|execvp|execl|mmap|ptrace|"
            r"syscall|setenv|putenv|chdir|chmod)\s*\("
        ),
        "file, network or process access",
    ),
    (
        "static.ctypes",
        re.compile(r"(?<![\w.>:])(dlopen|dlsym|dlmopen)\s*\("),
        "loads native code at run time",
    ),
    (
        "static.monkeypatch",
        re.compile(
            r"\b(TORCH_LIBRARY\w*|c10::Dispatcher|globalContext\s*\(\s*\)\s*\.\s*set\w*|"
            r"PyRun_\w+|PyImport_\w+|PyObject_SetAttr\w*)\b"
        ),
        "changes torch or the Python harness from C++",
    ),
    (
        "static.introspection",
        re.compile(
            r"\b(py::module_?::import|pybind11::module_?::import|py::exec|py::eval|py::globals)\b"
        ),
        "calls back into Python",
    ),
    (
        "static.l2_persist",
        re.compile(
            r"\b(accessPolicyWindow|cudaAccessPolicyWindow|cudaStreamAttributeAccessPolicyWindow|"
            r"cudaLimitPersistingL2CacheSize|cudaCtxResetPersistingL2Cache|cudaAccessPropertyPersisting|"
            r"cudaStreamSetAttribute|cudaKernelNodeAttributeAccessPolicyWindow)\b"
        ),
        "keeps data resident in L2 (defeats the L2 flush between timed calls)",
    ),
    (
        "static.reduced_precision",
        re.compile(
            r"\b(__float2half\w*|__floats2half2\w*|__float2bfloat16\w*|__float_to_tf32|"
            r"precision::tf32|CUBLAS_COMPUTE_32F_FAST_\w+|CUBLAS_TF32_TENSOR_OP_MATH|"
            r"CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)\b"
        ),
        "computes in lower precision than the inputs",
    ),
]
_PTX_RULES: list[tuple[str, re.Pattern[str], str]] = [
    (
        "static.l2_persist",
        re.compile(r"evict_last|createpolicy|L2::cache_hint"),
        "PTX L2 residency hints",
    ),
    ("static.reduced_precision", re.compile(r"\.tf32|\.f16\b|\.bf16\b"), "PTX in lower precision"),
]
# torch::/at:: calls allowed in host code: allocation, views, shape, dtype, device, streams.
_CPP_TORCH_ALLOWED = set(
    """empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob
    tensor scalar_tensor arange TensorOptions dtype device layout requires_grad Device Tensor
    IntArrayRef ArrayRef Scalar ScalarType optional nullopt make_optional Slice None Ellipsis
    getCurrentCUDAStream getDefaultCUDAStream CUDAGuard OptionalCUDAGuard DeviceGuard
    OptionalDeviceGuard device_of getCurrentDeviceProperties getDeviceProperties current_device
    get raw_alloc raw_delete elementSize toString typeMetaToScalarType MemoryFormat ceil_div
    acc_type opmath_type Half BFloat16 kFloat kHalf kBFloat16 kInt kLong kBool kDouble
    PackedTensorAccessor32 PackedTensorAccessor64 RestrictPtrTraits DefaultPtrTraits
    TensorAccessor GenericPackedTensorAccessor irange CUDAStream check_size_nonnegative
    globalContext OptionalArrayRef SymInt zero_ fill_ copy_""".split()
)
_CPP_QUALIFIED_CALL = re.compile(r"\b((?:torch|at|ATen)(?:::\w+)+)\s*(?:<[^<>;{}()]*>)?\s*\(")
_CPP_COMPUTE_METHOD = re.compile(r"(?:\.|->)\s*([a-z_][a-z0-9_]*)\s*\(")
_GLOBAL = re.compile(r"\b__global__\b")
_LAUNCH = re.compile(r"\b(\w+)\s*(?:<[^<>;{}]*>)?\s*<<<")
_NUMBERS = re.compile(r"(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fFuUlL]*\s*,\s*){255,}")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def kernel_names(code: str) -> list[str]:
    """Names of the ``__global__`` functions of blanked CUDA ``code``, in order."""
    names: list[str] = []
    for m in _GLOBAL.finditer(code):
        rest = code[m.end() : m.end() + 600]
        i = 0
        while i < len(rest):
            word = re.match(r"\s*([A-Za-z_]\w*)", rest[i:])
            if word is None:
                i += 1
                continue
            i += word.end()
            after = rest[i:].lstrip()
            if word.group(1) in (
                "__launch_bounds__",
                "__maxnreg__",
                "__cluster_dims__",
            ) and after.startswith("("):
                depth, j = 0, rest.index("(", i)
                while j < len(rest):
                    depth += {"(": 1, ")": -1}.get(rest[j], 0)
                    j += 1
                    if depth == 0:
                        break
                i = j
                continue
            if after.startswith("("):
                names.append(word.group(1))
                break
        # unparsable declarations are skipped: the dynamic check still sees what ran
    return list(dict.fromkeys(names))


def analyze_cuda(source: str, where: str) -> tuple[list[Finding], list[str]]:
    """Findings of the CUDA/C++ rules over one source string, and its ``__global__`` names."""
    code, strings = blank_comments_and_strings(source)
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()

    def add(rule: str, offset: int, message: str) -> None:
        line = _line_of(code, offset)
        if (rule, line) not in seen:
            seen.add((rule, line))
            findings.append(Finding(rule, message, line, where))

    for rule, pattern, what in _CPP_RULES:
        for m in pattern.finditer(code):
            add(rule, m.start(), f"{m.group(0).strip()}: {what}")
    for offset, literal in strings:
        for rule, pattern, what in _PTX_RULES:
            m = pattern.search(literal)
            if m and ("asm" in code[max(0, offset - 40) : offset]):
                add(rule, offset, f"inline PTX {m.group(0)}: {what}")
    for m in _CPP_QUALIFIED_CALL.finditer(code):
        qualified = m.group(1)
        parts = qualified.split("::")
        if parts[1] in ("cuda", "detail") or "Blas" in qualified or "Cudnn" in qualified:
            continue  # stream and device helpers; BLAS/cuDNN getters are static.blas_handle
        if (
            parts[-1] in _CPP_TORCH_ALLOWED
            or parts[1] in ("indexing", "nn")
            and parts[-1][:1].isupper()
        ):
            continue
        add(
            "static.torch_compute",
            m.start(),
            f"{qualified}(...) in host code: a torch op does the work",
        )
    for m in _CPP_COMPUTE_METHOD.finditer(code):
        method = m.group(1)
        if (method[:-1] if method.endswith("_") else method) in _COMPUTE_METHODS:
            add(
                "static.torch_compute",
                m.start(),
                f".{method}() in host code: a torch op does the work",
            )
    for m in _NUMBERS.finditer(code):
        add(
            "static.hardcoded_values",
            m.start(),
            "an initializer of 256+ numbers (hard-coded results?)",
        )
    return capped(sorted(findings, key=lambda f: f.line)), kernel_names(code)


def capped(findings: list[Finding], keep: int = 3) -> list[Finding]:
    """At most ``keep`` findings per (rule, where); the last kept one says how many were left."""
    count: dict[tuple[str, str], int] = {}
    for f in findings:
        count[(f.rule, f.where)] = count.get((f.rule, f.where), 0) + 1
    out: list[Finding] = []
    seen: dict[tuple[str, str], int] = {}
    for f in findings:
        key = (f.rule, f.where)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] < keep or (seen[key] == keep and count[key] == keep):
            out.append(f)
        elif seen[key] == keep:
            more = count[key] - keep + 1
            out.append(Finding(f.rule, f"{f.message} (and {more} more lines)", f.line, f.where))
    return out


def analyze_extensions(extensions: list[dict[str, Any]]) -> tuple[list[Finding], list[str]]:
    """Findings over every captured ``load_inline`` call's sources, and all ``__global__``
    names (RULES.md)."""
    findings: list[Finding] = []
    kernels: list[str] = []
    for ext in extensions:
        for key in ("cpp_sources", "cuda_sources"):
            src = ext.get(key) or ""
            if src:
                f, k = analyze_cuda(src, f"{ext.get('name', '?')}:{key}")
                findings += f
                kernels += k
    return findings, list(dict.fromkeys(kernels))
