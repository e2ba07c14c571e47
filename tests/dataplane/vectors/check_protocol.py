#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""An independent reimplementation of docs/protocol.md sections 1, 4, 11
and 14, written from the text alone (no tally code): computes every output
of tests/dataplane/vectors/protocol.txt again and compares.

    /usr/bin/python3 check_protocol.py tests/dataplane/vectors/protocol.txt

Standard library only (hashlib's BLAKE2b takes key, salt and personal).
Exit status 0 when every line agrees and every kind is present.
"""
import hashlib
import hmac
import struct
import sys

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1


# ---- section 11 ---------------------------------------------------------

def keys(secret):
    master = hashlib.blake2b(secret, digest_size=32).digest()

    def kdf(i):
        return hashlib.blake2b(b"", digest_size=32, key=master,
                               salt=struct.pack("<Q", i) + bytes(8),
                               person=b"tallyjob" + bytes(8)).digest()
    return kdf(1), kdf(2)


def cookie(data, job_key, epoch):
    d = hashlib.blake2b(b"cookie" + struct.pack(">II", job_key, epoch),
                        digest_size=16, key=data).digest()
    return struct.unpack(">I", d[:4])[0]


def tag(ctrl, direction, nonce_c, nonce_m, seq, msg):
    k = hashlib.blake2b(bytes([direction]) + nonce_c + nonce_m,
                        digest_size=32, key=ctrl).digest()
    return hmac.new(k, struct.pack(">Q", seq) + msg,
                    hashlib.sha512).digest()[:32]


def wire_job(job_key, epoch):
    return (((job_key * 0x9e3779b1) & M32) ^ ((epoch * 0x85ebca6b) & M32)
            ^ (job_key >> 16)) & 0xffff


def tensor_id(key, iteration, partition):
    x = key ^ ((((iteration << 32) | partition) * 0x9e3779b97f4a7c15) & M64)
    x = ((x ^ (x >> 33)) * 0xff51afd7ed558ccd) & M64
    x = ((x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53) & M64
    x ^= x >> 33
    return (x ^ (x >> 32)) & M32


def chunk_key(t, c, e):
    return (t << 32) | (c << 1) | e


def splitmix64(x):
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def chunk_hash(t, c, e):
    return splitmix64(chunk_key(t, c, e))


def slot_of(t, c, e, n):
    return ((chunk_hash(t, c, e) & M32) * n) >> 32


def fallback_of(t, c, e, n):
    return (chunk_hash(t, c, e) >> 40) % n


def shard_of(t, c, e, n):
    return ((chunk_hash(t, 0, 0) >> 32) + c + (n // 2 if e else 0)) % n


def thread_of(i, n):
    h = ((i ^ (i >> 15)) * 0x2c1b3c6d) & M32
    return (((h ^ (h >> 12)) & M32) * n) >> 32


# ---- section 1: header and envelope --------------------------------------

def header(typ, flags, job, rank, slot, tensor, chunk, shift, aux, ck):
    return struct.pack(">BBHHHIHbBI", (2 << 4) | typ, flags, job, rank, slot,
                       tensor, chunk, shift, aux, ck)


def ip_checksum(h):
    s = sum(struct.unpack(">10H", h))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def envelope(src_mac, src_ip, src_port, dst_mac, dst_ip, dst_port, dscp,
             tally_len):
    eth = dst_mac + src_mac + struct.pack(">H", 0x0800)
    total = 20 + 8 + tally_len
    ip = struct.pack(">BBHHHBBHII", 0x45, dscp << 2, total, 0, 0x4000, 64,
                     17, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack(">H", ip_checksum(ip)) + ip[12:]
    udp = struct.pack(">HHHH", src_port, dst_port, 8 + tally_len, 0)
    return eth + ip + udp


# ---- section 4: a worker's receipts --------------------------------------

def confirm_switch(rank, tensor, chunks):
    """The switch profile's first CONFIRM after the RESULTs of @chunks
    (one aggregator, 4096 slots): at most 8 chunks in the order placed, the
    first in the header (ACK_REQ, its slot), aux = the rest, each as
    tensor u32, chunk u16, slot u16."""
    c = chunks[:8]
    out = header(5, 0x04, 0x1234, rank, slot_of(tensor, c[0], 0, 4096),
                 tensor, c[0], 0, len(c) - 1, 0xc001d00d)
    for x in c[1:]:
        out += struct.pack(">IHH", tensor, x, slot_of(tensor, x, 0, 4096))
    return out


def confirm(rank, n_aggs, to, receipts):
    """The CONFIRM for aggregator @to after the RESULTs @receipts
    ((tensor, chunk, EXP), in order): a receipt goes to the chunk's
    aggregator; it extends the last range when same tensor and EXP, at or
    after its end, less than 256 from its first, and every skipped chunk
    is another aggregator's."""
    ranges = []
    for tensor, c, e in receipts:
        if shard_of(tensor, c, e, n_aggs) != to:
            continue
        if ranges:
            t, first, re, count = ranges[-1]
            end = first + count
            if (t == tensor and re == e and c >= end and c - first < 256 and
                    all(shard_of(tensor, x, e, n_aggs) != to
                        for x in range(end, c))):
                ranges[-1] = (t, first, e, c - first + 1)
                continue
        ranges.append((tensor, c, e, 1))
    assert 0 < len(ranges) <= 64
    out = header(5, 0, 0x1234, rank, 0, 0, 0, 0, len(ranges), 0xc001d00d)
    for t, first, e, count in ranges:
        out += struct.pack(">IHBB", t, first, e << 7, count - 1)
    return out


# ---- section 14: control messages ----------------------------------------

def entry(s):
    """A member entry's 16 bytes, and its thread MAC table (threads 1 ..
    T-1, 6 bytes each; empty when the member has none)."""
    rank, role, local, mac, ip, port, *table = s.split("/")
    macs = b"".join(bytes.fromhex(m) for t in table for m in t.split("+"))
    return struct.pack(">HBB6sHI", int(rank), int(role), int(local),
                       bytes.fromhex(mac), int(port), int(ip, 0)), macs


def boot(f):
    typ, epoch = num(f["type"]), num(f["epoch"])
    if typ == 1:
        e, macs = entry(f["self"])
        threads = num(f["threads"])
        assert len(macs) in (0, 6 * (threads - 1))
        p = (e + struct.pack(">IHBB", num(f["job_key"]), num(f["world"]),
                             num(f["algorithm"]), threads) +
             bytes.fromhex(f["nonce"]) + macs)
    elif typ == 2:
        members = [entry(m) for m in f["members"].split(",")]
        threads = num(f.get("threads", "0"))
        p = struct.pack(">IIHHBB6x", num(f["job_key"]), num(f["pool_slots"]),
                        num(f["k"]), len(members), num(f["algorithm"]),
                        threads)
        p += b"".join(e for e, _ in members)
        for _, macs in members:
            assert len(macs) == (6 * (threads - 1) if threads else 0)
            p += macs
    elif typ == 5:
        p = struct.pack(">HH", num(f["reason"]), 0)
    elif typ == 7:
        p = bytes.fromhex(f["nonce"])
    else:
        p = struct.pack(">HH", num(f["rank"]), 0)
    return (struct.pack(">IHHII", 0x544c5942, 2, typ, len(p), epoch) + p +
            bytes(32))


# ---- the file ------------------------------------------------------------

def num(s):
    return int(s, 0)


def check(kind, f):
    if kind == "kdf":
        ctrl, data = keys(bytes.fromhex(f["secret"]))
        return ctrl.hex() == f["ctrl"] and data.hex() == f["data"]
    if kind == "cookie":
        _, data = keys(bytes.fromhex(f["secret"]))
        return cookie(data, num(f["job_key"]), num(f["epoch"])) == \
            num(f["cookie"])
    if kind == "mac":
        ctrl, _ = keys(bytes.fromhex(f["secret"]))
        return tag(ctrl, num(f["dir"]), bytes.fromhex(f["nonce_c"]),
                   bytes.fromhex(f["nonce_m"]), num(f["seq"]),
                   bytes.fromhex(f["msg"])).hex() == f["tag"]
    if kind == "wire_job":
        return wire_job(num(f["job_key"]), num(f["epoch"])) == \
            num(f["wire_job"])
    if kind == "tensor_id":
        return tensor_id(num(f["key"]), num(f["iteration"]),
                         num(f["partition"])) == num(f["id"])
    if kind == "thread":
        return thread_of(num(f["id"]), num(f["n_threads"])) == \
            num(f["thread"])
    if kind in ("chunk_hash", "slot", "fallback", "shard"):
        t, c, e = num(f["tensor"]), num(f["chunk"]), num(f["exp"])
        if kind == "chunk_hash":
            return chunk_key(t, c, e) == num(f["key"]) and \
                chunk_hash(t, c, e) == num(f["hash"])
        if kind == "slot":
            return slot_of(t, c, e, num(f["n_slots"])) == num(f["slot"])
        if kind == "fallback":
            return fallback_of(t, c, e, num(f["n_fallback"])) == \
                num(f["start"])
        return shard_of(t, c, e, num(f["n_shards"])) == num(f["shard"])
    if kind == "sign_coin":
        # the tie coin of docs/protocol.md section 11, 64 elements
        seed = chunk_hash(num(f["tensor"]), num(f["chunk"]), 0)
        bits = 0
        for i in range(num(f["first"]), num(f["first"]) + 64):
            bits = bits << 1 | splitmix64((seed + i) & M64) >> 63
        return bits == num(f["bits"])
    if kind == "header":
        return header(num(f["type"]), num(f["flags"]), num(f["job"]),
                      num(f["rank"]), num(f["slot"]), num(f["tensor"]),
                      num(f["chunk"]), num(f["shift"]), num(f["aux"]),
                      num(f["cookie"])).hex() == f["bytes"]
    if kind == "envelope":
        return envelope(bytes.fromhex(f["src_mac"]), num(f["src_ip"]),
                        num(f["src_port"]), bytes.fromhex(f["dst_mac"]),
                        num(f["dst_ip"]), num(f["dst_port"]), num(f["dscp"]),
                        num(f["tally_len"])).hex() == f["bytes"]
    if kind == "confirm":
        t, t2 = num(f["tensor"]), num(f["tensor2"])
        rc = [(t, num(c), 0) for c in f["chunks"].split(",")]
        if f["chunks2"]:
            rc += [(t2, num(c), num(e)) for c, e in
                   zip(f["chunks2"].split(","), f["exps2"].split(","))]
        return confirm(num(f["rank"]), num(f["n_aggs"]), num(f["to"]),
                       rc).hex() == f["bytes"]
    if kind == "confirm_switch":
        return confirm_switch(num(f["rank"]), num(f["tensor"]),
                              [num(c) for c in f["chunks"].split(",")]
                              ).hex() == f["bytes"]
    if kind == "boot":
        return boot(f).hex() == f["bytes"]
    raise ValueError("unknown kind " + kind)


KINDS = ("kdf", "cookie", "mac", "wire_job", "tensor_id", "chunk_hash",
         "slot", "fallback", "shard", "thread", "header", "envelope",
         "confirm", "boot", "sign_coin", "confirm_switch")


def main(path):
    seen = dict.fromkeys(KINDS, 0)
    bad = 0
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            kind = words[0]
            fields = dict(w.split("=", 1) for w in words[1:])
            try:
                ok = check(kind, fields)
            except (KeyError, ValueError, AssertionError, struct.error) as e:
                ok = False
                print("%s:%d: %s: %r" % (path, n, kind, e))
            if kind in seen:
                seen[kind] += 1
            if not ok:
                bad += 1
                print("%s:%d: %s: the spec gives another value" %
                      (path, n, kind))
    for k, v in seen.items():
        if not v:
            bad += 1
            print("%s: no %s vector" % (path, k))
    print("%d vectors of %d kinds; %d disagree" %
          (sum(seen.values()), len(KINDS), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
