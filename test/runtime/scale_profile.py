"""Writes a synthetic measured profile from a MeasuredProfile in text format:
every instruction gets measured_us = planned_us (times FACTOR for instructions of
kind KIND) and measured: true, and the stage means follow. Exact numbers, so the
recompiled plan can be compared with a JobSpec that says the same costs."""
import re
import sys

path, kind, factor = sys.argv[1], sys.argv[2], float(sys.argv[3])
text = open(path).read()
means = {}


def rewrite(block):
    body = block.group(0)
    k = re.search(r"\bkind: (\w+)", body).group(1)
    planned = float(re.search(r"planned_us: ([0-9.e+-]+)", body).group(1))
    value = planned * (factor if k == kind else 1.0)
    means.setdefault(k, value)
    body = re.sub(r"\n\s*(measured_us|modelled_us|measured): [^\n]*", "", body)
    return body[:-1] + "  measured_us: %r\n    measured: true\n  }" % value


text = re.sub(r"instructions \{[^}]*\}", rewrite, text)
for k, field in (("FORWARD", "forward_us"), ("BACKWARD", "backward_us")):
    if k in means:
        text = re.sub(r"^(  %s: )[0-9.e+-]+" % field, lambda m: m.group(1) + repr(means[k]), text, flags=re.M)
        if not re.search(r"^  %s: " % field, text, flags=re.M):
            text = text.replace("stages {\n", "stages {\n  %s: %r\n" % (field, means[k]))
print(text, end="")
