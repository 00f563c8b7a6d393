"""Reading strings.bin and writing reference files (shared by the reference scripts).

Reference file: b"ETR1", u32 count, then per string: u32 n, n x int32 ids, u32 byte length
and the reference's decode of those ids (UTF-8)."""
import struct


def read_strings(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"ETS1"
    (n,) = struct.unpack_from("<I", data, 4)
    off = 8
    out = []
    for _ in range(n):
        (l,) = struct.unpack_from("<I", data, off)
        off += 4
        out.append(data[off:off + l].decode("utf-8"))
        off += l
    return out


def write_refs(path, rows):
    with open(path, "wb") as f:
        f.write(b"ETR1" + struct.pack("<I", len(rows)))
        for ids, dec in rows:
            f.write(struct.pack("<I", len(ids)))
            f.write(struct.pack("<%di" % len(ids), *ids))
            b = dec.encode("utf-8", "surrogatepass")
            f.write(struct.pack("<I", len(b)) + b)
