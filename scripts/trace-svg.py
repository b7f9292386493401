#!/usr/bin/env python3
"""Draws one device of a `pipefill-run --trace` file as an SVG picture.

usage: trace-svg.py TRACE OUT.svg [--device D] [--iteration K] [--count N] [--width PX]

Rows, top to bottom: the plan's main stream ("main (planned)"), the run's main stream (computes,
with the bubbles it measured shaded behind), and each fill stream (one box per chunk run; the part
of a chunk that ran on after main resumed is drawn red). The time axis is the trace's: modelled
microseconds from the run's start (real / time scale), shown in ms. Standard library only.
"""
import argparse
import html
import json
import sys

COLORS = {"F": "#4e79a7", "B": "#2c5d8a", "W": "#76a5cf", "other": "#9c755f",
          "planned": "#c9d6e8", "bubble": "#eeeeee", "fill": "#59a14f", "overrun": "#e15759"}


def load(path, device, iterations):
    trace = json.load(open(path))
    events = trace["traceEvents"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    if (device, None) not in names:
        sys.exit(f"trace-svg: {path}: no device {device} in the trace")
    slices = [e for e in events if e["ph"] == "X" and e["pid"] == device and
              e["args"].get("iteration") in iterations]
    if not slices:
        sys.exit(f"trace-svg: {path}: device {device} has nothing in iterations "
                 f"{iterations.start}-{iterations.stop - 1}")
    return trace, names, slices


def draw(trace, names, slices, device, iterations, width):
    other = trace["otherData"]
    t0 = min(e["ts"] for e in slices)
    t1 = max(e["ts"] + e["dur"] for e in slices)
    span = max(t1 - t0, 1.0)
    # Rows: planned first, then the run's main stream, then fill streams.
    tids = sorted({e["tid"] for e in slices})
    planned_tid = [t for t in tids if names.get((device, t)) == "main (planned)"]
    main_tid = [t for t in tids if (names.get((device, t)) or "").endswith("(main)")]
    fill_tids = [t for t in tids if t not in planned_tid + main_tid]
    rows = planned_tid + main_tid + fill_tids
    left, top, row_h, gap = 150, 46, 26, 10
    height = top + len(rows) * (row_h + gap) + 46
    x = lambda t: left + (t - t0) / span * (width - left - 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    shown = (f"iteration {iterations.start}" if len(iterations) == 1 else
             f"iterations {iterations.start}-{iterations.stop - 1}")
    title = (f"{other['program']}: {html.escape(names[(device, None)])}, {shown}"
             f" (time scale {other['time_scale']}, fill policy {other['fill_policy']})")
    out.append(f'<text x="10" y="18" font-size="13">{title}</text>')
    for r, tid in enumerate(rows):
        y = top + r * (row_h + gap)
        out.append(f'<text x="10" y="{y + row_h * 0.65:.1f}">'
                   f'{html.escape(names.get((device, tid), str(tid)))}</text>')
        for e in sorted((e for e in slices if e["tid"] == tid),
                        key=lambda e: (e["cat"] != "bubble", e["ts"])):
            x0, x1 = x(e["ts"]), x(e["ts"] + e["dur"])
            w = max(x1 - x0, 0.6)
            cat = e["cat"]
            if cat == "bubble":
                fill, yy, hh = COLORS["bubble"], y - 3, row_h + 6
            elif cat == "planned":
                fill = COLORS["bubble"] if e["name"].startswith("bubble") else COLORS["planned"]
                yy, hh = y, row_h
            elif cat == "compute":
                fill, yy, hh = COLORS.get(e["name"][:1], COLORS["other"]), y, row_h
            elif cat == "fill":
                fill, yy, hh = COLORS["fill"], y + 3, row_h - 6
            else:
                continue  # transfers and waits: not drawn
            tip = html.escape(f"{e['name']} [{cat}] {e['dur']:.0f} us ({e['args'].get('time')})")
            out.append(f'<rect x="{x0:.2f}" y="{yy}" width="{w:.2f}" height="{hh}" '
                       f'fill="{fill}" stroke="white" stroke-width="0.3"><title>{tip}</title></rect>')
            over = e["args"].get("overrun_us", 0)
            if cat == "fill" and over > 0:
                xo = x(e["ts"] + e["dur"] - over)
                out.append(f'<rect x="{xo:.2f}" y="{yy}" width="{max(x1 - xo, 0.6):.2f}" '
                           f'height="{hh}" fill="{COLORS["overrun"]}"/>')
    # Axis in ms.
    axis_y = top + len(rows) * (row_h + gap) + 4
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{width - 20}" y2="{axis_y}" stroke="#333"/>')
    step = 10 ** max(0, len(str(int(span / 1000 / 5))) - 1) * 1000
    while span / step > 10:
        step *= 2
    t = (t0 // step + 1) * step
    while t < t1:
        out.append(f'<line x1="{x(t):.1f}" y1="{axis_y}" x2="{x(t):.1f}" y2="{axis_y + 4}" '
                   f'stroke="#333"/><text x="{x(t):.1f}" y="{axis_y + 16}" text-anchor="middle">'
                   f'{t / 1000:.0f} ms</text>')
        t += step
    legend = [("forward", COLORS["F"]), ("backward", COLORS["B"]), ("planned compute",
              COLORS["planned"]), ("bubble (measured gap)", COLORS["bubble"]),
              ("fill chunk (measured)", COLORS["fill"]), ("fill after main resumed",
              COLORS["overrun"])]
    lx = left
    for label, color in legend:
        out.append(f'<rect x="{lx}" y="{axis_y + 24}" width="10" height="10" fill="{color}" '
                   f'stroke="#999" stroke-width="0.5"/><text x="{lx + 14}" y="{axis_y + 33}">'
                   f'{label}</text>')
        lx += 14 + 7 * len(label) + 16
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--iteration", type=int, default=None,
                    help="the first iteration drawn (default: the last --count of the run)")
    ap.add_argument("--count", type=int, default=1, help="iterations drawn (default 1)")
    ap.add_argument("--width", type=int, default=1400)
    a = ap.parse_args()
    trace = json.load(open(a.trace))
    other = trace["otherData"]
    first = a.iteration if a.iteration is not None else \
        other["first_iteration"] + other["iterations"] - max(a.count, 1)
    iterations = range(first, first + max(a.count, 1))
    trace, names, slices = load(a.trace, a.device, iterations)
    with open(a.out, "w") as f:
        f.write(draw(trace, names, slices, a.device, iterations, a.width))


if __name__ == "__main__":
    main()
