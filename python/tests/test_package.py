"""The package as shipped: public names, docstrings, and the type stub that
nanobind's stubgen generated for the compiled module."""

from __future__ import annotations

import ast
import pathlib

import pipefill
from pipefill import _core


def test_public_names_have_docstrings():
    for name in pipefill.__all__:
        obj = getattr(pipefill, name)
        if callable(obj):
            assert obj.__doc__ and len(obj.__doc__) > 20, name
    for cls in (pipefill.Plan, pipefill.RunReport):
        for attr in dir(cls):
            if not attr.startswith("_"):
                assert getattr(cls, attr).__doc__, f"{cls.__name__}.{attr}"


def test_stub_is_generated_and_typed():
    stub = pathlib.Path(_core.__file__).with_name("_core.pyi")
    assert stub.exists(), stub
    tree = ast.parse(stub.read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"Plan", "RunReport"} <= classes.keys()
    assert {"compile_text", "compile_file", "run_bytes", "run_file"} <= functions
    methods = {n.name: n for n in classes["Plan"].body if isinstance(n, ast.FunctionDef)}
    assert ast.unparse(methods["report"].returns) in ("dict[str, Any]", "dict[str, typing.Any]")
    assert ast.unparse(methods["bubbles"].returns) == "dict[str, numpy.ndarray]"
    assert (pathlib.Path(pipefill.__file__).parent / "py.typed").exists()


def test_exceptions_are_standard_subclasses():
    assert issubclass(pipefill.CompileError, ValueError)
    assert issubclass(pipefill.RunError, RuntimeError)
    e = pipefill.CompileError("x", ["a.pbtxt:1:2: error: y"])
    assert e.diagnostics == ["a.pbtxt:1:2: error: y"] and str(e) == "x"
