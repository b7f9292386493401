"""The job sizes the compile benchmarks take: STAGES:MICROBATCHES:JOBS[:SCHEDULE[:V]].

SCHEDULE is a JobSpec schedule name (proto/pipefill.proto); it defaults to
ONE_F_ONE_B. V (virtual stages per device) defaults to 2 for
INTERLEAVED_1F1B and 1 otherwise. `parse` is an argparse type: a bad size
is a usage error that names what was expected, not a traceback.
"""
import argparse

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
