"""pipefill.compile_torch_schedule: a torch.distributed.pipelining action table
(CSV) compiled in process, as ``pipefill-translate --import-torch-schedule
TABLE --job JOB`` followed by ``pipefill-opt --pipefill-compile`` does.

Needs no torch: the table is text (docs/torch.md, "The action table").
"""

from __future__ import annotations

import os
import tempfile
from typing import Optional, Union

from ._errors import CompileError, with_path_hint
from ._native import Plan, native, native_name, native_path, profile_arg, require_compiler

__all__ = ["compile_torch_schedule"]

PathLike = Union[str, "os.PathLike[str]"]


def compile_torch_schedule(
    table: Union[str, bytes, "os.PathLike[str]"],
    *,
    job: Union[str, bytes, "os.PathLike[str]"],
    profile: Optional[PathLike] = None,
    name: Optional[str] = None,
) -> Plan:
    """Compiles torch's per-rank action table with a JobSpec's costs.

    ``table``: the CSV as text (``str``/``bytes``; what torch's
    ``_PipelineScheduleRuntime._dump_csv`` writes or ``_load_csv`` reads) or a
    path (any ``os.PathLike``, e.g. :class:`pathlib.Path`). ``job``: the
    JobSpec (stage costs, hardware, planner, fill jobs) as text or a path; its
    ``pipeline { stages microbatches }`` must equal the table's rank and
    micro-batch counts. ``profile``: a measured profile, as in
    :func:`pipefill.compile_file`. ``name``: the file name diagnostics print
    for table text (default ``<torch-schedule>``).

    The plan's stages are the table's ranks; the chunks of a rank are its torch
    stages in ascending order. Raises :class:`pipefill.CompileError` with
    ``file:line:col`` for a bad table (syntax, layout, a missing op, a
    deadlock) or a JobSpec that does not fit it, :class:`FileNotFoundError`
    for a path that cannot be read, :class:`ModuleNotFoundError` when this
    pipefill has the runtime only (no compiler module).
    """
    require_compiler("pipefill.compile_torch_schedule")
    try:
        return _compile(table, job, profile, name)
    except CompileError as e:
        if isinstance(table, str):
            e = with_path_hint(e, table, "schedule table", " (the CSV's path)")
        if isinstance(job, str):
            e = with_path_hint(e, job, "JobSpec", " as job=")
        raise e from None


def _compile(table, job, profile, name) -> Plan:
    if name is not None:
        name = native_name(name, "name")
    if isinstance(table, os.PathLike):
        if name is not None:
            raise ValueError("name is the file name printed for table text; a table read from a "
                             "path is named by its path")
        path = os.fspath(table)
        with open(path, "r", encoding="utf-8", newline="") as f:
            text, source = f.read(), path
    elif isinstance(table, (str, bytes)):
        text = table.decode("utf-8") if isinstance(table, bytes) else table
        source = name if name is not None else "<torch-schedule>"
    else:
        raise TypeError(
            f"compile_torch_schedule() takes the table as text (str/bytes) or a path "
            f"(os.PathLike), not {type(table).__name__}"
        )
    profile_path = profile_arg(profile)
    if isinstance(job, os.PathLike):
        job_path = native_path(job, "the JobSpec path")
        if not os.path.exists(job_path):
            raise FileNotFoundError(2, "cannot open JobSpec", job_path)
        return native.compile_torch_schedule(text, source, job_path, profile_path)
    if isinstance(job, bytes):
        job = job.decode("utf-8")
    if not isinstance(job, str):
        raise TypeError(
            f"job must be JobSpec text (str/bytes) or a path (os.PathLike), not {type(job).__name__}"
        )
    # The importer reads the JobSpec from a file: text goes through a temporary one. Its
    # diagnostics would name that file, deleted by the time they are read: they name the
    # JobSpec "<job>" instead.
    with tempfile.TemporaryDirectory(prefix="pipefill-job-") as tmp:
        job_path = os.path.join(tmp, "job.pbtxt")
        with open(job_path, "w", encoding="utf-8") as f:
            f.write(job)
        try:
            return native.compile_torch_schedule(text, source, job_path, profile_path)
        except CompileError as e:
            raise CompileError(
                str(e).replace(job_path, "<job>"),
                [d.replace(job_path, "<job>") for d in e.diagnostics],
            ) from None
