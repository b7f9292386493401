"""Checks that every non-integer number in a report JSON is written exactly
as printf("%.17g") writes it (llvm::json's spelling of a double), so the
report's fast number formatting changes no byte. Python's % operator is C's
printf, an independent implementation of the same spelling.

Usage: check_report_numbers.py REPORT.json MIN_NUMBERS
Prints the number of doubles checked; exits 1 on the first mismatch."""
import json
import re
import sys

text = open(sys.argv[1]).read()
json.loads(text)  # still valid JSON
# Number tokens outside strings: the report's strings hold no digits after
# ': ' or in a list, so a token is a value if it follows ':' or '[' / ','.
tokens = re.findall(r'(?<=[:\[,]) ?(-?[0-9][0-9eE.+-]*|-?nan|-?inf)(?=[,\n\]}])', text)
checked = 0
for tok in tokens:
    if re.fullmatch(r'-?[0-9]+', tok):
        continue  # an integer field (or an integral double printed by %g)
    want = '%.17g' % float(tok)
    if tok != want:
        print(f"mismatch: report has {tok}, printf %.17g gives {want}")
        sys.exit(1)
    checked += 1
# Integral doubles (for example 2000) also print without a point under %g;
# those are covered by the integer branch and by the byte comparison with
# the multi-tool path in driver.test.
if checked < int(sys.argv[2]):
    print(f"only {checked} doubles checked, expected at least {sys.argv[2]}")
    sys.exit(1)
print(f"doubles checked: {checked}")
