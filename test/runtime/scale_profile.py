"""Scales the measured duration of one instruction kind in a text MeasuredProfile."""
import re
import sys

path, kind, factor = sys.argv[1], sys.argv[2], float(sys.argv[3])
text = open(path).read()
def scale(block):
    body = block.group(0)
    if re.search(r"\bkind: %s\b" % kind, body):
        body = re.sub(r"measured_us: ([0-9.e+-]+)", lambda m: "measured_us: %r" % (float(m.group(1)) * factor), body)
    return body
text = re.sub(r"instructions \{[^}]*\}", scale, text)
field = {"FORWARD": "forward_us", "BACKWARD": "backward_us"}.get(kind)
if field:
    text = re.sub(r"^(  %s: )([0-9.e+-]+)" % field, lambda m: m.group(1) + repr(float(m.group(2)) * factor), text, flags=re.M)
print(text, end="")
