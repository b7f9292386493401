"""Writes one Chrome trace in another JSON layout, for trace-layouts.test: the streaming import
must read every layout of the same events to the same profile.

usage: relayout_trace.py LAYOUT IN.json OUT.json
  minified   one line, no spaces
  sorted     indent 2, keys sorted (traceEvents after distributedInfo and schemaVersion)
  first      traceEvents the first key, CRLF line ends and tabs between tokens
  escaped    every string written with \\u escapes for its letters, '/' as '\\/'
  array      the JSON Array Format: the document is the event array (loses distributedInfo)
  padded     each event followed by a non-event with brackets, quotes and escapes in strings
"""
import json
import sys


def escaped(value):
    """JSON text of `value` whose strings escape every ASCII letter as \\u00XX."""
    if isinstance(value, str):
        body = json.dumps(value)[1:-1].replace("/", "\\/")
        return '"' + "".join(f"\\u{ord(c):04x}" if c.isalpha() else c for c in body) + '"'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{escaped(k)}: {escaped(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(escaped(v) for v in value) + "]"
    return json.dumps(value)


def main(layout, src, dst):
    with open(src) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    if layout == "minified":
        text = json.dumps(trace, separators=(",", ":"))
    elif layout == "sorted":
        text = json.dumps(trace, indent=2, sort_keys=True)
    elif layout == "first":
        rest = {k: v for k, v in trace.items() if k != "traceEvents"}
        body = "\t,\r\n".join("\t" + json.dumps(e) for e in events)
        text = '{\t"traceEvents"\t:\r\n[\r\n' + body + "\r\n]\t,\r\n" + json.dumps(rest)[1:]
    elif layout == "escaped":
        text = escaped(trace)
    elif layout == "array":
        text = "[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n"
    elif layout == "padded":
        noise = {"ph": "i", "name": "]}[{\"\\", "args": {"s": "\\u005d\"}", "n": [[], {}]}}
        trace["traceEvents"] = [x for e in events for x in (e, noise)]
        text = json.dumps(trace, indent=1)
    else:
        sys.exit(f"unknown layout {layout}")
    with open(dst, "w", newline="") as f:
        f.write(text)


if __name__ == "__main__":
    main(*sys.argv[1:])
