#!/usr/bin/env python3
"""Checks that the policy tables of docs/cluster.md are the ones pipefill-sim prints.

usage: check_doc_tables.py CLUSTER_MD HEADING_START POLICIES_TXT [HEADING_START POLICIES_TXT ...]

For each pair, the first markdown table after the first line of CLUSTER_MD that
starts with HEADING_START must hold, row by row, the policy rows of
POLICIES_TXT (pipefill-sim --policy all's text table: the rows after the
dashed line). Prints each difference and exits 1 on any.
"""
import sys


def text_rows(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("policy ") and i + 1 < len(lines) and set(lines[i + 1]) == {"-"}:
            header = line.split()
            rows = []
            for row in lines[i + 2:]:
                if not row.strip():
                    break
                rows.append(row.split())
            return header, rows
    sys.exit(f"{path}: no policy table")


def md_rows(path, start):
    lines = open(path, encoding="utf-8").read().splitlines()
    try:
        at = next(i for i, line in enumerate(lines) if line.startswith(start))
    except StopIteration:
        sys.exit(f"{path}: no line starts with {start!r}")
    rows = []
    for line in lines[at:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif rows:
            break
    if not rows:
        sys.exit(f"{path}: no table after {start!r}")
    return rows[1:]  # without the header row


def main(argv):
    if len(argv) < 4 or len(argv) % 2:
        sys.exit(__doc__)
    md, pairs = argv[1], argv[2:]
    bad = 0
    for start, txt in zip(pairs[::2], pairs[1::2]):
        _, want = text_rows(txt)
        got = md_rows(md, start)
        # "0.63 h" is one markdown cell but two words in the text table.
        got_words = [" ".join(cells).split() for cells in got]
        if len(got_words) != len(want):
            print(f"{md} ({start}): {len(got_words)} rows, {txt} has {len(want)}")
            bad += 1
        for g, w in zip(got_words, want):
            if g != w:
                print(f"{md} ({start}): row {' '.join(g)}\n  {txt}: {' '.join(w)}")
                bad += 1
    print(f"doc tables: {bad} difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
