"""The compiled module under the package.

``pipefill._core`` holds the compiler (in process, through the MLIR libraries)
and the runtime; ``pipefill._rt`` holds the runtime alone (sessions, fill
tasks, ``pfrt_run``), built from the same binding sources for machines that
run compiled plans but cannot carry or load the compiler's libraries (the GPU
machines, ``scripts/gpu-bundle.sh``). The package uses ``_core`` wherever it
is installed, exactly as before ``_rt`` existed; only without it does it fall
back to ``_rt``, where the compiler's entry points raise
:class:`ModuleNotFoundError` saying so (:func:`require_compiler`).
"""

from __future__ import annotations

import importlib.util
import numbers
import operator
import os
import sys
from typing import Any

__all__ = [
    "HAVE_COMPILER",
    "Plan",
    "native",
    "native_name",
    "native_option",
    "native_path",
    "require_compiler",
]

_PACKAGE = __name__.rpartition(".")[0]


def require_compiler(what: str) -> None:
    """Raises :class:`ModuleNotFoundError` naming ``what`` when the compiler module is absent."""
    if HAVE_COMPILER:
        return
    raise ModuleNotFoundError(
        f"{what} needs pipefill's compiler module ({_PACKAGE}._core), which is not installed: "
        f"this pipefill has the runtime only ({_PACKAGE}._rt). Compile the plan where the "
        "compiler is installed (pipefill.compile(...).save(path), or pipefill-translate and "
        "pipefill-opt) and give the StreamProgram file or its bytes to pipefill.Session or "
        "pipefill.run.",
        name=f"{_PACKAGE}._core",
    )


def native_path(path: Any, what: str) -> Any:
    """``os.fspath(path)`` for the native module, which hands it to C as a C string: a NUL
    would cut it short there (``a\\0b`` would be ``a``), so it raises :class:`ValueError`."""
    path = os.fspath(path)
    if ("\0" if isinstance(path, str) else b"\0") in path:
        raise ValueError(f"{what} contains a NUL character: {path!r}")
    return path


def profile_arg(profile: Any) -> str:
    """A ``profile=`` argument as the native compile calls take it: ``""`` for None, else
    a non-empty path (:class:`ValueError` for ``""``, as for a NUL: see :func:`native_path`)."""
    if profile is None:
        return ""
    path = os.fsdecode(native_path(profile, "the profile path"))
    if not path:
        raise ValueError("profile must be a non-empty path (or None)")
    return path


def native_name(value: Any, what: str) -> str:
    """A name the native module prints in diagnostics (``name=`` of the compile calls): a
    ``str`` (else :class:`TypeError` naming ``what``; nanobind's own refusal only lists the
    call's overloads), without NUL (C would print it cut short there) and encodable as
    UTF-8 (a lone surrogate is not), else :class:`ValueError`."""
    value = native_option(value, "str", what)
    if "\0" in value:
        raise ValueError(f"{what} contains a NUL character: {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{what} is not valid text ({e.reason}): {value!r}") from None
    return value


def native_option(value: Any, kind: str, what: str) -> Any:
    """``value`` as the plain Python type the native module takes for an option of ``kind``
    (``"int"``, ``"number"``, ``"bool"`` or ``"str"``; numpy scalars are fine), or
    :class:`TypeError` naming the option ``what``: nanobind's own refusal only says that
    the whole call's arguments are incompatible."""
    if kind == "int":
        if isinstance(value, numbers.Integral) and not _is_bool(value):
            value = operator.index(value)
            # The native module takes 64-bit integers; nanobind's refusal of a bigger one is a
            # TypeError listing the call's signature.
            if not -(2**63) <= value < 2**63:
                raise ValueError(f"{what} is out of range: {value}")
            return value
    elif kind == "number":
        if isinstance(value, numbers.Real) and not _is_bool(value):
            try:
                return float(value)
            except OverflowError:  # an int past the largest double: "int too large to convert"
                raise ValueError(f"{what} is out of range: its magnitude is past the largest "
                                 f"float, {sys.float_info.max:.3e}") from None
    elif kind == "bool":
        if _is_bool(value):
            return bool(value)
    elif kind == "str":
        if isinstance(value, str):
            return value
    else:
        raise AssertionError(f"native_option: unknown kind {kind!r}")
    article = "an" if kind == "int" else "a"
    raise TypeError(f"{what} must be {article} {kind}, not {type(value).__name__}")


def _is_bool(value: Any) -> bool:
    t = type(value)  # numpy.bool_ (named numpy.bool since numpy 2) is not a bool subclass
    return isinstance(value, bool) or (t.__module__ == "numpy" and t.__name__ in ("bool_", "bool"))


# find_spec, not try/except ImportError: a _core that is installed but fails to load (a missing
# shared library) raises its own error, as it always did, instead of hiding behind _rt.
if importlib.util.find_spec(f"{_PACKAGE}._core") is not None:
    from . import _core as native

    HAVE_COMPILER = True
    Plan: Any = native.Plan
elif importlib.util.find_spec(f"{_PACKAGE}._rt") is not None:
    from . import _rt as native  # type: ignore[no-redef]

    HAVE_COMPILER = False

    class Plan:  # type: ignore[no-redef]
        """A compiled plan (``pipefill._core.Plan``). This pipefill has the runtime only, so
        no plan can be compiled here: sessions and runs take compiled StreamPrograms."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            require_compiler("pipefill.Plan")

else:
    raise ModuleNotFoundError(
        f"{_PACKAGE}: neither the compiler module {_PACKAGE}._core nor the runtime module "
        f"{_PACKAGE}._rt is installed in {os.path.dirname(__file__)} (in a source checkout, "
        "import the package that the build stages in build/python/site)",
        name=f"{_PACKAGE}._core",
    )
