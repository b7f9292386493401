"""pipefill: fill pipeline-parallel training bubbles with other jobs.

The compiler runs in this process through pipefill's MLIR libraries (no
subprocess): :func:`compile` imports a JobSpec, runs the whole
``--pipefill-compile`` pipeline (optionally with a measured profile) and
returns a :class:`Plan` whose report, summary, IR, bubble tables (numpy) and
lowered stream program can be read. :func:`run` executes a stream program with
the runtime's C API (``pfrt_run``) and returns a :class:`RunReport`.

Example::

    import pipefill
    plan = pipefill.compile_file("examples/gpt40b-1f1b.pbtxt")
    print(plan.report()["bubble_fraction"])
    run = pipefill.run(plan, iterations=2, time_scale=0.1)
    print(run.summary())

:func:`compile_torch_schedule` compiles a torch.distributed.pipelining action
table (CSV) with a JobSpec's costs; :mod:`pipefill.torch` wraps a torch
pipelining schedule so that its ``step()`` fills the rank's bubbles.

:class:`Session` hands one rank's bubbles to pipefill from a training loop
that owns its schedule (``with session.bubble(k): ...``); :class:`FillTask`
is the user's own work that a session runs in those bubbles, step by step,
where a step fits.

Numbers from :class:`Plan` are planned; numbers from :class:`RunReport` are
measured (keys that say ``planned`` excepted).

Where only the runtime module is installed (``pipefill._rt``: no compiler
libraries, e.g. on a GPU machine that runs plans compiled elsewhere), the
package is the same except that :func:`compile`, :func:`compile_file` and
:func:`compile_torch_schedule` raise :class:`ModuleNotFoundError`; sessions and
runs take the compiled StreamProgram (a file or its bytes, :meth:`Plan.save`).
"""

from __future__ import annotations

import os
from typing import Optional, Union

from ._errors import CompileError, RunError
from ._errors import with_path_hint as _with_path_hint
from ._native import Plan, native as _ext, native_option as _native_option
from ._native import native_name as _native_name
from ._native import native_path as _native_path
from ._native import profile_arg as _profile_arg
from ._native import require_compiler as _require_compiler
from ._session import BubbleScope, Session
from ._tasks import FillTask
from ._torch_schedule import compile_torch_schedule

__all__ = [
    "BubbleScope",
    "CompileError",
    "FillTask",
    "PFRT_API_VERSION",
    "Plan",
    "RunError",
    "RunReport",
    "Session",
    "backend_compiled",
    "compile",
    "compile_file",
    "compare",
    "compile_torch_schedule",
    "cuda_device_count",
    "run",
]

__version__ = "0.1.0"

PFRT_API_VERSION: int = _ext.PFRT_API_VERSION
RunReport = _ext.RunReport
backend_compiled = _ext.backend_compiled
cuda_device_count = _ext.cuda_device_count

PathLike = Union[str, "os.PathLike[str]"]


def compile_file(path: PathLike, *, profile: Optional[PathLike] = None) -> Plan:
    """Compiles the JobSpec file at ``path`` (protobuf text format).

    ``profile``: a measured profile (``pipefill-run --profile-out`` or
    :meth:`RunReport.save_profile`) whose instruction times replace the
    JobSpec's, as ``--pipefill-compile=profile=...`` does.

    Raises :class:`FileNotFoundError` (an :class:`OSError`) when the file cannot
    be read and :class:`CompileError` with ``file:line:col`` diagnostics when
    the compiler rejects the JobSpec or the profile, :class:`ModuleNotFoundError`
    when this pipefill has the runtime only (no compiler module).
    """
    _require_compiler("pipefill.compile_file")
    return _ext.compile_file(os.fsdecode(_native_path(path, "the JobSpec path")),
                             _profile_arg(profile))


def compile(
    job: Union[str, bytes, "os.PathLike[str]"],
    *,
    profile: Optional[PathLike] = None,
    name: str = "<string>",
) -> Plan:
    """Compiles a JobSpec given as text (``str`` or ``bytes``) or as a path.

    A ``str`` is always JobSpec *text*; pass a :class:`pathlib.Path` (any
    ``os.PathLike``) or use :func:`compile_file` for a file. ``name`` is the
    file name that diagnostics print for text input. See :func:`compile_file`
    for ``profile`` and the exceptions raised.
    """
    _require_compiler("pipefill.compile")
    if isinstance(job, os.PathLike):
        return compile_file(job, profile=profile)
    if isinstance(job, bytes):
        job = job.decode("utf-8")
    if not isinstance(job, str):
        raise TypeError(
            f"compile() takes JobSpec text (str/bytes) or a path (os.PathLike), "
            f"not {type(job).__name__}"
        )
    try:
        return _ext.compile_text(job, _native_name(name, "name"), _profile_arg(profile))
    except CompileError as e:
        raise _with_path_hint(e, job, "JobSpec", " or use pipefill.compile_file") from None


def run(
    program: Union[Plan, bytes, "os.PathLike[str]", str],
    *,
    backend: str = "host",
    iterations: int = 0,
    time_scale: float = 1.0,
    fill: bool = True,
    profile: bool = False,
    stage: int = -1,
    max_dim: int = 0,
    checkpoint: Optional[PathLike] = None,
    on_bad_checkpoint: str = "fail",
    verbose: bool = False,
) -> RunReport:
    """Runs a stream program with the runtime (``pfrt_run``) and returns its report.

    ``program`` is a :class:`Plan` (lowered with ``iterations`` loops, at least
    one), the bytes of a StreamProgram (binary or text), or the path of a
    StreamProgram file (``str`` or ``os.PathLike``).

    ``backend``: ``"host"`` (threads as streams; the default, runs anywhere),
    ``"cuda"`` or ``"auto"``. ``iterations``: 0 keeps the program's own count.
    ``time_scale``: host backend, real microseconds per modelled microsecond.
    ``fill=False`` runs the main job alone; ``profile=True`` is profile mode
    (main job only; :meth:`RunReport.save_profile` writes the measured profile).
    ``stage``: K runs device K for real and emulates the others (replay); -1
    runs every device for real, except on the host (measured time) when the
    program has more devices than the machine has cores: then device 0 runs and
    the others are emulated, as the report's ``replay_device`` says. ``max_dim`` caps the
    fill workloads' dimensions (0: backend default). ``checkpoint``: a fill
    progress file written after every iteration and resumed from.
    ``on_bad_checkpoint`` (``pfrt_options.checkpoint_recovery``, pipefill-run's
    ``--on-bad-checkpoint``): when that file exists but is truncated, corrupted, of
    another program or of the wrong shape, ``"fail"`` (the default) raises
    :class:`RunError` naming the problem, ``"previous"`` resumes from
    ``CHECKPOINT.prev`` (the last good one; :class:`RunError` if it is bad too) and
    ``"restart"`` moves the bad file to ``CHECKPOINT.bad`` and starts clean. Both
    print a warning on stderr; states are never mixed.

    Raises :class:`ValueError` for bad option values, :class:`TypeError` naming the
    option for one of the wrong type (numpy scalars are fine), :class:`OSError` for files that
    cannot be read and :class:`RunError` when the runtime refuses the program or
    fails while running it. The GIL is released while the program runs. Ctrl-C
    (a signal whose handler raises) stops the run at its next iteration boundary
    (``pfrt_stop_request``, which stops every run of the process) and then
    raises :class:`KeyboardInterrupt`.
    """
    args = dict(
        backend=_native_option(backend, "str", "backend"),
        iterations=_native_option(iterations, "int", "iterations"),
        time_scale=_native_option(time_scale, "number", "time_scale"),
        fill=_native_option(fill, "bool", "fill"),
        profile=_native_option(profile, "bool", "profile"),
        stage=_native_option(stage, "int", "stage"),
        max_dim=_native_option(max_dim, "int", "max_dim"),
        checkpoint="" if checkpoint is None else _native_path(checkpoint, "the checkpoint path"),
        on_bad_checkpoint=_native_option(on_bad_checkpoint, "str", "on_bad_checkpoint"),
        verbose=_native_option(verbose, "bool", "verbose"),
    )
    if args["on_bad_checkpoint"] in ("previous", "restart") and checkpoint is None:
        raise ValueError(f"on_bad_checkpoint={on_bad_checkpoint!r} says what to do with a bad "
                         f"checkpoint; no checkpoint= was given")
    if isinstance(program, Plan):
        data = program.stream_program(iterations=max(args["iterations"], 1))
        return _ext.run_bytes(data, f"<plan {program.name}>", **args)
    if isinstance(program, (bytes, bytearray, memoryview)):
        return _ext.run_bytes(bytes(program), "<memory>", **args)
    if isinstance(program, (str, os.PathLike)):
        return _ext.run_file(_native_path(program, "the program path"), **args)
    raise TypeError(
        f"run() takes a Plan, StreamProgram bytes or a path, not {type(program).__name__}"
    )


def compare(
    program: Union[Plan, bytes, "os.PathLike[str]", str],
    *,
    repetitions: int = 3,
    backend: str = "host",
    iterations: int = 0,
    time_scale: float = 1.0,
    stage: int = -1,
    max_dim: int = 0,
    verbose: bool = False,
) -> dict:
    """The main job's slowdown from fill, measured (``pfrt_compare``, ``pipefill-run --compare``).

    Runs ``program`` (as :func:`run` takes it) 2 + 4 x ``repetitions`` times: an
    A/A pair, then ``repetitions`` blocks A B B A (A: main only, B: main + fill,
    the other options as given). Returns the comparison as a dict with the keys
    of ``pipefill-run --compare-json``: ``slowdown`` (median over blocks of
    (B1 + B2) / (A1 + A2) - 1), ``noise_floor`` (median |A/A - 1|),
    ``slowdown_min`` / ``slowdown_max``, ``switch_latency_idle_fill`` (p50_us,
    p99_us, count), ``fill_samples_per_s`` measured and ``_planned``, chunk
    counts, ``overrun_us``, ``time_model`` ("measured" only when the runs timed
    real main compute; in the modelled one the slowdown is 0 by construction and
    ``slowdown_measured`` is False) and ``time_scale`` (times are plan us: real us /
    time_scale); ``summary`` holds the text table. On the host backend with
    measured time, main and fill of the real device share one CPU (fill at the
    lowest priority), so the figure is a contention measurement
    (docs/runtime.md §4c). Errors as for :func:`run`; ``repetitions`` from 1 to
    1000. Ctrl-C stops the current run at its next iteration and raises
    :class:`KeyboardInterrupt`.
    """
    reps = _native_option(repetitions, "int", "repetitions")
    args = dict(
        backend=_native_option(backend, "str", "backend"),
        iterations=_native_option(iterations, "int", "iterations"),
        time_scale=_native_option(time_scale, "number", "time_scale"),
        stage=_native_option(stage, "int", "stage"),
        max_dim=_native_option(max_dim, "int", "max_dim"),
        verbose=_native_option(verbose, "bool", "verbose"),
    )
    if isinstance(program, Plan):
        data = program.stream_program(iterations=max(args["iterations"], 1))
        return _ext.compare_bytes(data, f"<plan {program.name}>", reps, **args)
    if isinstance(program, (bytes, bytearray, memoryview)):
        return _ext.compare_bytes(bytes(program), "<memory>", reps, **args)
    if isinstance(program, (str, os.PathLike)):
        path = _native_path(program, "the program path")
        with open(path, "rb") as f:
            return _ext.compare_bytes(f.read(), os.fsdecode(path), reps, **args)
    raise TypeError(
        f"compare() takes a Plan, StreamProgram bytes or a path, not {type(program).__name__}"
    )
