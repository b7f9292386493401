"""Rewrites the pipefill dialect's format version in an MLIR bytecode file.

usage: set_bytecode_version.py IN.mlirbc VERSION OUT.mlirbc

Walks the file's sections (mlir/docs/BytecodeFormat.md: magic, version,
producer, then sections of id, length and optional alignment) to the dialect
section and replaces the version of the dialect named "pipefill": a section of
its own after the dialect's name, holding the one varint that
PipefillBytecodeInterface::writeVersion writes. The new version
must encode to as many bytes as the old one (a value below 128 for the
one-byte versions this build writes), so no length in the file changes.
"""
import sys


def varint(data, pos):
    """MLIR's prefix varint: the first byte's trailing zeros give the extra bytes."""
    first = data[pos]
    if first & 1:
        return first >> 1, pos + 1
    if first == 0:
        return int.from_bytes(data[pos + 1:pos + 9], "little"), pos + 9
    extra = (first & -first).bit_length() - 1
    raw = int.from_bytes(data[pos:pos + extra + 1], "little")
    return raw >> (extra + 1), pos + extra + 1


def sections(data):
    assert data[:4] == b"ML\xefR", "not MLIR bytecode"
    _, pos = varint(data, 4)
    pos = data.index(b"\0", pos) + 1  # producer
    found = {}
    while pos < len(data):
        head = data[pos]
        length, pos = varint(data, pos + 1)
        if head & 0x80:
            align, pos = varint(data, pos)
            while pos % align:
                pos += 1
        found[head & 0x7F] = (pos, pos + length)
        pos += length
    return found


def strings(data, begin):
    count, pos = varint(data, begin)
    sizes = []
    for _ in range(count):
        size, pos = varint(data, pos)
        sizes.append(size)
    out = []
    for size in reversed(sizes):
        out.append(data[pos:pos + size - 1].decode())
        pos += size
    return out


def main(argv):
    data = bytearray(open(argv[1], "rb").read())
    version = int(argv[2])
    found = sections(data)
    names = strings(data, found[0][0])
    count, pos = varint(data, found[1][0])
    for _ in range(count):
        flagged, pos = varint(data, pos)
        if not flagged & 1:
            continue
        # The version is a section of its own (id kDialectVersions), unaligned.
        assert not data[pos] & 0x80, "an aligned version section"
        size, pos = varint(data, pos + 1)
        if names[flagged >> 1] == "pipefill":
            assert size == 1 and version < 128, "expected a one-byte version"
            data[pos] = (version << 1) | 1
            open(argv[3], "wb").write(data)
            return 0
        pos += size
    sys.exit("no pipefill dialect version in " + argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
