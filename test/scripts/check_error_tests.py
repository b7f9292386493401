#!/usr/bin/env python3
"""Fails if a user-facing error message has no test that names it.

Every error a user can meet has a test that expects it (STYLE.md). This reads the
error sites of the sources (C++: Error(...), usageError(...), fail(...), error(...),
errorAt(...), emitError(...) << ..., emitOpError(...), std::runtime_error(...),
std::invalid_argument(...), llvm::createStringError(...), and lines printed to stderr
that say "error" or "cannot"; Python: raise XError(...)),
takes the message's literal text between its variable parts, and looks for it in the
test sources (folders named tests, test/, python/tests). A site counts as tested when
one literal part of at least MIN_PART characters and two words appears there (case and spacing
ignored, backslashes of regex escapes dropped, adjacent string literals joined).

Sites listed in the baseline file (lines "path<TAB>text", # comments) are errors known
to have no test yet, or that no test can reach (each section says why); the check
fails on an untested site that the baseline does not list, and on a baseline line that
no longer names an untested site (tested now, or gone): the list only shrinks.

usage: check_error_tests.py ROOT BASELINE DIR [DIR ...]
"""
import os
import re
import subprocess
import sys

MIN_PART = 14
CPP = (".cpp", ".h", ".cu", ".cc")
CALL = re.compile(
    r"\b(?:usageError|emitError|emitOpError|createStringError|runtime_error|"
    r"invalid_argument|fail|errorAt|error|Error)\s*\(")
# Errors printed directly (a tool's own "error:" or "cannot ..." line).
PRINT = re.compile(r"\bfprintf\s*\(\s*stderr\b|\berrs\(\)\s*<<|\bstd::cerr\s*<<")
PRINTED_ERROR = re.compile(r"error|cannot", re.IGNORECASE)
TOOL_PREFIX = re.compile(r"^[\w.%-]+:\s*(?:error|warning):\s*")
PY_RAISE = re.compile(r"\braise\s+\w*(?:Error|Exception)\s*\(")
LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
PY_LITERAL = re.compile(r"""[rbf]{0,2}("|')((?:(?!\1)[^\\\n]|\\.)*)\1""")
FORMAT = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]+|\{[^{}]*\}")


def is_test_path(rel):
    parts = rel.split("/")
    return "tests" in parts or parts[0] == "test"


def normalize(text):
    text = text.replace("\\n", " ").replace("\\t", " ").replace("\\", "")
    return " ".join(text.lower().split())


def statement(src, start, python):
    """The text from an error call to the end of its statement."""
    end = start
    depth = 0
    in_str = None
    limit = min(len(src), start + 1200)
    while end < limit:
        c = src[end]
        if in_str:
            if c == "\\":
                end += 2
                continue
            if c == in_str:
                in_str = None
        elif c in "\"'" and not (c == "'" and not python and src[end - 1].isalnum()):
            in_str = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if python and depth == 0:
                return src[start:end + 1]
        elif c == ";" and not python:
            return src[start:end]
        end += 1
    return src[start:end]


def message_parts(stmt, python):
    """The literal parts of a message, split at its variable parts."""
    if python:
        literals = [m.group(2) for m in PY_LITERAL.finditer(stmt)]
    else:
        literals = [m.group(1) for m in LITERAL.finditer(stmt)]
    parts = []
    for lit in literals:
        for piece in FORMAT.split(TOOL_PREFIX.sub("", lit)):
            piece = normalize(piece).strip(" .,:;'`()")
            # Two words at least (one, or a file name and dots, match too much).
            words = [w for w in piece.split() if sum(c.isalpha() for c in w) >= 2]
            if len(piece) >= MIN_PART and len(words) >= 2:
                parts.append(piece)
    return parts


def quoted_spans(src, python):
    """Where string literals and comments are: a call named there ("fail (default)" in a help
    text) is no call."""
    comment = r"#[^\n]*" if python else r"//[^\n]*|/\*.*?\*/"
    pattern = re.compile(comment + r"""|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'""", re.S)
    return [(m.start(), m.end()) for m in pattern.finditer(src)]


def within(spans, pos):
    lo, hi = 0, len(spans)
    while lo < hi:  # the last span starting at or before pos
        mid = (lo + hi) // 2
        if spans[mid][0] <= pos:
            lo = mid + 1
        else:
            hi = mid
    return lo > 0 and pos < spans[lo - 1][1]


def error_sites(files, root, folders):
    for folder in folders:
        if not os.path.isdir(os.path.join(root, folder)):
            raise SystemExit(f"error: {os.path.join(root, folder)}: no such folder")
    for path in files:
        rel = os.path.relpath(path, root)
        name = os.path.basename(rel)
        python = name.endswith(".py")
        inside = any(rel.startswith(folder.rstrip("/") + "/") for folder in folders)
        if not inside or is_test_path(rel) or not (python or name.endswith(CPP)):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            src = f.read()
        quoted = quoted_spans(src, python)
        calls = [(m, False) for m in (PY_RAISE if python else CALL).finditer(src)]
        if not python:
            calls += [(m, True) for m in PRINT.finditer(src)]
        calls = [c for c in calls if not within(quoted, c[0].start())]
        for m, printed in sorted(calls, key=lambda c: c[0].start()):
            stmt = statement(src, m.start(), python)
            if printed and not PRINTED_ERROR.search(" ".join(LITERAL.findall(stmt))):
                continue  # a warning, progress or a report line
            parts = message_parts(stmt, python)
            if parts:
                line = src.count("\n", 0, m.start()) + 1
                yield rel, line, parts


def tracked_files(root):
    """In a git checkout, the files git tracks or would track (build folders hold copies and
    generated text); elsewhere every file not in a hidden or build* folder."""
    if os.path.isdir(os.path.join(root, ".git")):
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True,
                             check=True).stdout.decode("utf-8", "replace")
        paths = (os.path.join(root, rel) for rel in out.split("\0") if rel)
        return [p for p in paths if os.path.isfile(p)]  # not one deleted in the work tree
    found = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build")))
        found += [os.path.join(dirpath, name) for name in sorted(files)]
    return found


def test_corpus(files, root, skip):
    text = []
    for path in files:
        rel = os.path.relpath(path, root)
        if not is_test_path(rel) or os.path.abspath(path) in skip:
            continue
        try:
            with open(path, encoding="utf-8", errors="strict") as f:
                src = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        # Adjacent string literals ("abc "\n  "def") are one string.
        src = re.sub(r"""(["'])\s*\n\s*[rbf]{0,2}\1""", "", src)
        text.append(normalize(src))
    return "\n".join(text)


def read_baseline(path):
    entries = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if "\t" not in line:
                raise SystemExit(f"{path}:{lineno}: expected 'path<TAB>text', got '{line}'")
            rel, text = line.split("\t", 1)
            entries[(rel, text)] = lineno
    return entries


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root, baseline_path, folders = argv[1], argv[2], argv[3:]
    baseline = read_baseline(baseline_path)
    # Not tests: this script, the baseline given, and a baseline of the tree by its usual name.
    skip = {os.path.abspath(p) for p in
            (baseline_path, __file__, os.path.join(root, "test/scripts/error_tests_baseline.txt"))}
    files = tracked_files(root)
    corpus = test_corpus(files, root, skip)
    sites = tested = 0
    listed = set()
    new = []
    for rel, line, parts in error_sites(files, root, folders):
        sites += 1
        if any(p in corpus for p in parts):
            tested += 1
            continue
        key = (rel, max(parts, key=len))
        if key in baseline:
            listed.add(key)
        else:
            new.append(f"{rel}:{line}: error without a test: '{key[1]}'")
    stale = [f"{baseline_path}:{n}: '{k[1]}' ({k[0]}) is tested now or gone: remove the line"
             for k, n in sorted(baseline.items(), key=lambda kv: kv[1]) if k not in listed]
    for msg in new + stale:
        print(msg)
    print(f"error tests: {sites} error sites, {tested} tested, {len(listed)} listed untested, "
          f"{len(new)} new untested, {len(stale)} stale baseline lines")
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
