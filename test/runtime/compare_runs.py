import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
ja = {j["name"]: (j["samples_completed"], j["checksum"]) for j in a["fill"]["jobs"]}
jb = {j["name"]: (j["samples_completed"], j["checksum"]) for j in b["fill"]["jobs"]}
print("jobs agree:", ja == jb, ja, jb)
print("samples completed > 0:", all(v[0] > 0 for v in ja.values()))
