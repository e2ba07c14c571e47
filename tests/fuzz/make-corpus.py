#!/usr/bin/env python3
"""Write the seed corpus of fuzz-wire: one valid packet of each type, bare
and in full Ethernet/IPv4/UDP frames, and one conversation, in the record
format of fuzz_wire.c (job 0x7a11, cookie 0, K 8, 3 workers, 16 slots).
Header version 2: 20 bytes, the epoch's cookie at offset 16.  Then the seed
corpus of fuzz-bootstrap: one control message of each kind (version 2, with
a MAC tag) and a stream of them."""
import os
import struct

M64 = (1 << 64) - 1
JOB, K, SLOTS = 0x7a11, 8, 16
COOKIE = 0          # fuzz_wire.c's engines leave it 0


def chunk_hash(tensor, chunk, exp):
    x = ((tensor << 32) | (chunk << 1) | exp) & M64
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def hdr(typ, flags, rank, tensor, chunk, shift=0, aux=0, slot=None):
    if slot is None:
        slot = ((chunk_hash(tensor, chunk, flags & 1) & 0xffffffff) * SLOTS) >> 32
    return struct.pack(">BBHHHIHbBI", 0x20 | typ, flags, JOB, rank, slot,
                       tensor, chunk, shift, aux, COOKIE)


def ip_sum(h):
    s = sum(struct.unpack(">10H", h))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def frame(pkt, src=1, dst=4):
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 28 + len(pkt), 0,
                               0x4000, 64, 17, 0,
                               bytes([10, 0, 0, src]), bytes([10, 0, 0, dst])))
    ip[10:12] = struct.pack(">H", ip_sum(bytes(ip)))
    udp = struct.pack(">HHHH", 9191, 9191, 8 + len(pkt), 0)
    eth = bytes([2, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src, 8, 0])
    return eth + bytes(ip) + udp + pkt


payload = b"".join(struct.pack(">i", i * 1000 - 3000) for i in range(K))
seeds = {
    "data": hdr(1, 0x04, 1, 7, 2, shift=20) + payload,
    "data-exp": hdr(1, 0x01, 2, 7, 0) + payload,
    "data-int": hdr(1, 0x02, 1, 8, 1) + payload,
    "result": hdr(2, 0, 0, 7, 3, shift=20) + payload,
    "result-exp": hdr(2, 0x01, 0, 7, 0) + payload,
    "ack": hdr(3, 0, 0, 7, 1),
    "busy": hdr(4, 0x01, 0, 7, 0),
    "confirm": hdr(5, 0, 2, 0, 0, aux=2, slot=0)
    + struct.pack(">IHBB", 7, 0, 0, 12) + struct.pack(">IHBB", 7, 0, 0x80, 0),
    "ring": hdr(6, 0x02, 2, 8, 0, slot=3) + payload,
    "ring-ack": hdr(7, 0, 1, 8, 5, slot=0),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                   "fuzz-wire")
os.makedirs(out, exist_ok=True)


def record(pkt, op=0x06):
    return bytes([op]) + struct.pack(">H", len(pkt)) + pkt


for f in os.listdir(out):
    os.remove(os.path.join(out, f))
for name, pkt in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"\x00" + record(pkt))
    with open(os.path.join(out, name + "-frame"), "wb") as f:
        f.write(b"\x01" + record(frame(pkt)))
# a conversation: the exponent round answered, then data, ack, result
with open(os.path.join(out, "sequence"), "wb") as f:
    f.write(b"\x00" + b"".join(record(seeds[n]) for n in
                               ("result-exp", "data", "ack", "result",
                                "confirm", "ring", "ring-ack")))


# ---- fuzz-bootstrap: the daemons' control messages (ctrl/bootstrap.h) ----
# Version 2: 16-byte header, payload, 32-byte MAC tag (not checked by the
# decoder; the target decodes and re-encodes only).
def boot(typ, payload, epoch=1):
    return (struct.pack(">IHHII", 0x544c5942, 2, typ, len(payload), epoch)
            + payload + bytes(range(32)))


def entry(rank, role, port, ip):
    return struct.pack(">HBB6sHI", rank, role, 2 if role != 2 else 0,
                       bytes([2, 0, 0, 0, 0, rank]), port, ip)


boot_seeds = {
    "challenge": boot(7, bytes(range(16)), epoch=0),
    "register": boot(1, entry(1, 1, 7001, 0x0a4d0002)
                     + struct.pack(">IHBB", 42, 4, 1, 0)
                     + bytes(range(100, 116)), epoch=0),
    "roster": boot(2, struct.pack(">IIHHB7x", 42, 4096, 256, 2, 1)
                   + entry(0, 1, 7000, 0x0a4d0001)
                   + entry(1, 2, 7001, 0x0a4d0002)),
    "heartbeat": boot(3, struct.pack(">HH", 1, 0)),
    "refuse": boot(5, struct.pack(">HH", 4, 0), epoch=0),
}
bout = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                    "fuzz-bootstrap")
os.makedirs(bout, exist_ok=True)
for f in os.listdir(bout):
    os.remove(os.path.join(bout, f))
for name, msg in boot_seeds.items():
    with open(os.path.join(bout, name), "wb") as f:
        f.write(msg)
with open(os.path.join(bout, "stream"), "wb") as f:
    f.write(b"".join(boot_seeds[n] for n in
                     ("challenge", "register", "heartbeat", "roster")))
