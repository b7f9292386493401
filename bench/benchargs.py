"""Arguments the compile benchmarks share, checked as usage errors.

A job size is STAGES:MICROBATCHES:JOBS[:SCHEDULE[:V]]. SCHEDULE is a
JobSpec schedule name (proto/pipefill.proto); it defaults to ONE_F_ONE_B.
V (virtual stages per device) defaults to 2 for INTERLEAVED_1F1B and 1
otherwise. `parse` and `positive_int` are argparse types and `tools` checks
a build directory: a bad argument is a usage error that names what was
expected, never a traceback.
"""
import argparse
import os

SCHEDULES = ("GPIPE", "ONE_F_ONE_B", "INTERLEAVED_1F1B", "ZB_H1")
FORM = "STAGES:MICROBATCHES:JOBS[:SCHEDULE[:V]]"


def parse(spec):
    """(stages, microbatches, jobs, schedule, virtual) from a size string."""
    parts = spec.split(":")
    if not 3 <= len(parts) <= 5:
        raise argparse.ArgumentTypeError(
            f"'{spec}' is not a size: expected {FORM}, e.g. 64:512:100:ONE_F_ONE_B")
    numbers = []
    for name, text in zip(("STAGES", "MICROBATCHES", "JOBS"), parts[:3]):
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"'{spec}': {name} must be a positive integer (got '{text}')")
        numbers.append(value)
    schedule = parts[3] if len(parts) > 3 else "ONE_F_ONE_B"
    if schedule not in SCHEDULES:
        raise argparse.ArgumentTypeError(
            f"'{spec}': unknown schedule '{schedule}' (one of {', '.join(SCHEDULES)})")
    default_v = 2 if schedule == "INTERLEAVED_1F1B" else 1
    try:
        v = int(parts[4]) if len(parts) > 4 else default_v
    except ValueError:
        v = 0
    if v < 1 or (v > 1 and schedule != "INTERLEAVED_1F1B"):
        raise argparse.ArgumentTypeError(
            f"'{spec}': V must be a positive integer, and above 1 only with "
            f"INTERLEAVED_1F1B (got '{parts[4]}')")
    return numbers[0], numbers[1], numbers[2], schedule, v


def name(size):
    """The canonical spelling of a parsed size."""
    p, m, j, schedule, v = size
    return f"{p}:{m}:{j}:{schedule}" + (f":{v}" if v > 1 else "")


def positive_int(text):
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return value


def tools(parser, build, names):
    """The paths of `names` in BUILD/bin; a usage error (through `parser`)
    naming the first that is missing or not executable."""
    paths = {}
    for name in names:
        path = os.path.join(build, "bin", name)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            parser.error(f"no executable {path} (build first: scripts/build.sh, "
                         f"or pass the build directory that has it)")
        paths[name] = path
    return paths

