#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets into corpus/<target>/:

fuzz-wire       one valid packet of each type, bare and in full
                Ethernet/IPv4/UDP frames, and one conversation, in the record
                format of fuzz_wire.c (job 0x7a11, cookie 0, K 8, 3 workers,
                16 slots); header version 2: 20 bytes, the epoch's cookie at
                offset 16
fuzz-bootstrap  one control message of each kind (version 2, with a MAC tag)
                and a stream of them
fuzz-admission  handshakes, control messages and hang-ups (fuzz_admission.c)
fuzz-submit     descriptors that complete, mismatch, fall outside their
                segments, back up the rings (fuzz_submit.c)
fuzz-config     configuration files, valid and not
fuzz-cmdline    command lines (NUL-separated arguments)
fuzz-job-desc   job descriptions (struct tally_job_wire) under several
                daemon configurations, and launcher environments for the
                client's job_resolve (fuzz_job_desc.c)

and the dictionaries dict/fuzz-config.dict and dict/fuzz-cmdline.dict from
the key table of ctrl/config.c and the options of ctrl/cmdline.c, and
dict/fuzz-job-desc.dict from the variables shm/job_env.c reads."""
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")


def corpus_dir(target):
    out = os.path.join(HERE, "corpus", target)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    return out


def write_all(target, seeds):
    out = corpus_dir(target)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)

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
# the counted round's words: E = 3, m = 2 for every third block, else
# TLY_EXP_NONE (-1000) with m = 0
payload_topk = b"".join(struct.pack(">i", 3 * 256 + 2 if i % 3 == 0 else
                                    -1000 * 256) for i in range(K))
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
    # narrow lanes (docs/compression.md section 7): tensor 10 int16 (0x40),
    # tensor 11 int8 (0x80); the same 4K payload bytes
    "data-lane16": hdr(1, 0x44, 1, 10, 0, shift=9) + payload,
    "result-lane16": hdr(2, 0x40, 0, 10, 1, shift=9) + payload,
    "data-lane8": hdr(1, 0x84, 2, 11, 0, shift=1) + payload,
    "result-lane8": hdr(2, 0x80, 0, 11, 0, shift=-127) + payload,
    "result-exp-narrow": hdr(2, 0x01, 0, 10, 0) + payload,
    # sign_ef (section 3): tensor 12, lane code 11 (0xc0), its RESULT
    "data-sign": hdr(1, 0xc4, 1, 12, 0, shift=20) + payload,
    "result-sign": hdr(2, 0xc0, 0, 12, 0, shift=20) + payload,
    "result-exp-sign": hdr(2, 0x01, 0, 12, 0) + payload,
    # block_topk10_ef (section 4): tensor 13; the counted round (EXP aux
    # 1, words E * 256 + m: every third block sent by 2, the rest by
    # none), a DATA with m(b) = 2, a PULL (aux 0x82), the block's RESULT
    "result-exp-topk": hdr(2, 0x01, 0, 13, 0, aux=1) + payload_topk,
    "data-exp-topk": hdr(1, 0x05, 1, 13, 0, aux=1) + payload,
    "data-topk": hdr(1, 0x04, 1, 13, 0, shift=20, aux=2) + payload,
    "data-pull": hdr(1, 0x0c, 2, 13, 1, shift=20, aux=0x82) +
    bytes(4 * K),
    "result-topk": hdr(2, 0x00, 0, 13, 0, shift=20) + payload,
}
out = corpus_dir("fuzz-wire")


def record(pkt, op=0x06):
    return bytes([op]) + struct.pack(">H", len(pkt)) + pkt


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
with open(os.path.join(out, "sequence-narrow"), "wb") as f:
    f.write(b"\x00" + b"".join(record(seeds[n]) for n in
                               ("result-exp-narrow", "data-lane16",
                                "result-lane16", "data-lane8",
                                "result-lane8")))
with open(os.path.join(out, "sequence-topk"), "wb") as f:
    f.write(b"\x00" + b"".join(record(seeds[n]) for n in
                               ("result-exp-topk", "data-topk", "data-pull",
                                "result-topk")))
with open(os.path.join(out, "sequence-sign"), "wb") as f:
    f.write(b"\x00" + b"".join(record(seeds[n]) for n in
                               ("result-exp-sign", "data-sign",
                                "result-sign")))

# the switch profile (mode bit 1: K 64, docs/switch-profile.md): DATA,
# RESULT, the CONFIRM of one chunk (aux 0, its slot) and its ACK (RELEASED),
# a CONFIRM of three chunks (aux 2: two receipts, each at its slot) and
# its ACK echoing them
K_SW = 64
payload_sw = b"".join(struct.pack(">i", i * 7 - 200) for i in range(K_SW))


def receipt(tensor, chunk, exp=0):
    slot = ((chunk_hash(tensor, chunk, exp) & 0xffffffff) * SLOTS) >> 32
    return struct.pack(">IHH", tensor, chunk, slot)


receipts_9 = receipt(9, 2) + receipt(9, 3)
sw_seeds = {
    "sw-data": hdr(1, 0x06, 1, 9, 0) + payload_sw,
    "sw-result": hdr(2, 0x02, 0, 9, 1) + payload_sw,
    "sw-result-exp": hdr(2, 0x01, 0, 7, 0) + payload_sw,
    "sw-confirm": hdr(5, 0x04, 2, 9, 1),
    "sw-confirm-exp": hdr(5, 0x0d, 1, 7, 0),
    "sw-confirm-3": hdr(5, 0x04, 2, 9, 1, aux=2) + receipts_9,
    "sw-ack-released-3": hdr(3, 0x40, 0, 9, 1, aux=2) + receipts_9,
    "sw-ack-released": hdr(3, 0x40, 0, 9, 1),
    "sw-busy": hdr(4, 0x02, 0, 9, 0),
    "sw-data-lane8": hdr(1, 0x84, 1, 11, 0, shift=2) + payload_sw,
    "sw-result-lane16": hdr(2, 0x40, 0, 10, 0, shift=5) + payload_sw,
}
for name, pkt in sw_seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"\x02" + record(pkt))
    with open(os.path.join(out, name + "-frame"), "wb") as f:
        f.write(b"\x03" + record(frame(pkt)))
with open(os.path.join(out, "sw-sequence"), "wb") as f:
    f.write(b"\x02" + b"".join(record(sw_seeds[n]) for n in
                               ("sw-result-exp", "sw-data", "sw-result",
                                "sw-confirm", "sw-ack-released",
                                "sw-confirm-3", "sw-ack-released-3",
                                "sw-result", "sw-busy")))


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
    # rdma: 3 dataplane threads, a MAC (queue pair) for threads 1 and 2
    "register-threads": boot(1, entry(1, 1, 7001, 0x0a4d0002)
                             + struct.pack(">IHBB", 42, 4, 1, 3)
                             + bytes(range(100, 116))
                             + bytes([2, 0, 0, 0, 1, 0x12,
                                      2, 0, 0, 0, 1, 0x13]), epoch=0),
    "roster-threads": boot(2, struct.pack(">IIHHBB6x", 42, 4096, 256, 2, 1, 2)
                           + entry(0, 1, 7000, 0x0a4d0001)
                           + entry(1, 2, 7001, 0x0a4d0002)
                           + bytes([2, 0, 0, 0, 0, 0x41,
                                    2, 0, 0, 0, 0, 0x42])),
    "heartbeat": boot(3, struct.pack(">HH", 1, 0)),
    "refuse": boot(5, struct.pack(">HH", 4, 0), epoch=0),
}
boot_seeds["stream"] = b"".join(boot_seeds[n] for n in
                                ("challenge", "register", "heartbeat",
                                 "roster"))
write_all("fuzz-bootstrap", boot_seeds)


# --- the client protocol (shm/proto.h, host byte order) ---
MAGIC, VERSION = 0x544C4C59, 3
HELLO, WELCOME, SEG_ADD, SEG_DEL = 1, 2, 3, 4
CTL_QUERY = 6           # tally-ctl's query, sent instead of HELLO
(MEMFD, EVENTFD, DEVNULL, PIPE_R, PIPE_W, SOCKET, DIRECTORY, MEMFD_RO,
 MEMFD_UNSEALABLE, MEMFD_SEALED, MEMFD_SPARSE) = range(11)
MSG_LEN = 48


def msg(typ, *args):
    a = list(args) + [0] * (4 - len(args))
    return struct.pack("<IHHiI4Q", MAGIC, VERSION, typ, 0, 0, *a)


def sqe(opcode=1, dtype=0, redop=0, key=1, iteration=0, count=16,
        send_seg=1, recv_seg=1, send_off=0, recv_off=0, user_data=1):
    return struct.pack("<BBBBHHQQQIIQQQ", opcode, dtype, redop, 0, 0, 0, key,
                       iteration, count, send_seg, recv_seg, send_off,
                       recv_off, user_data)


def fds(*kinds):
    """[n] then [kind][pages] per fd; memfds of one 4 KiB page."""
    return bytes([len(kinds)]) + b"".join(bytes([k, 1]) for k in kinds)


def a_connect(m, kinds=(MEMFD,), op=0):
    return bytes([op]) + fds(*kinds) + bytes([len(m)]) + m


def a_more(slot, m, kinds=()):
    """more of pending connection @slot's HELLO"""
    return bytes([0x40, slot]) + fds(*kinds) + bytes([len(m)]) + m


def a_pending_end(slot, how):
    return bytes([0x42 | how << 2, slot])


def a_control(rank, m, kinds=(), op=1):
    return bytes([op, rank]) + fds(*kinds) + bytes([len(m)]) + m


def a_ring(rank, e):
    return bytes([3, rank]) + e


HELLO_OK = msg(HELLO, 8, 8, 4096)
admission = {
    "hello": b"\x00" + a_connect(HELLO_OK),
    "hello-bad-rings": b"\x00" + a_connect(msg(HELLO, 3, 8, 4096)),
    "hello-wrong-fds": b"\x00" + a_connect(HELLO_OK, (DEVNULL,)),
    "hello-eventfds": b"\x00" + a_connect(HELLO_OK, (MEMFD, EVENTFD,
                                                    EVENTFD)),
    "hello-dir-socket": b"\x00" + a_connect(HELLO_OK,
                                            (DIRECTORY, SOCKET, MEMFD_RO)),
    "hello-readonly": b"\x00" + a_connect(HELLO_OK, (MEMFD_RO,)),
    "hello-unsealable": b"\x00" + a_connect(HELLO_OK, (MEMFD_UNSEALABLE,)),
    "hello-sealed": b"\x00" + a_connect(HELLO_OK, (MEMFD_SEALED,)),
    "hello-sparse": b"\x00" + a_connect(HELLO_OK, (MEMFD_SPARSE,)),
    "hello-too-many-fds": b"\x00" + a_connect(
        HELLO_OK, (MEMFD, EVENTFD, EVENTFD, EVENTFD, MEMFD, SOCKET, PIPE_R)),
    "hello-half": b"\x00" + a_connect(HELLO_OK[:20]),
    "hello-version": b"\x00" + a_connect(
        struct.pack("<IHHiI4Q", MAGIC, 1, HELLO, 0, 0, 8, 8, 4096, 0)),
    # msg_recv_step: a HELLO in three pieces, its fd with the first
    "hello-pieces": b"\x00" + a_connect(HELLO_OK[:7]) +
    a_more(0, HELLO_OK[7:30]) + a_more(0, HELLO_OK[30:]) +
    a_control(0, msg(SEG_ADD, 1, 4096), (MEMFD,)),
    "hello-pieces-fd-late": b"\x00" + a_connect(HELLO_OK[:10], ()) +
    a_more(0, HELLO_OK[10:], (MEMFD,)),
    "pending-ends": b"\x01" + a_connect(HELLO_OK[:5]) +
    a_connect(HELLO_OK[:9]) + a_connect(HELLO_OK[:40]) +
    a_pending_end(0, 0) + a_pending_end(1, 1) + a_pending_end(2, 2) +
    a_connect(HELLO_OK),
    "full": b"\x00" + a_connect(HELLO_OK) + a_connect(HELLO_OK),
    "segments": b"\x01" + a_connect(HELLO_OK) +
    a_control(0, msg(SEG_ADD, 1, 4096), (MEMFD,)) +
    a_control(0, msg(SEG_ADD, 1, 4096), (MEMFD,)) +
    a_control(0, msg(SEG_ADD, 2, 8192), (MEMFD,)) +
    a_control(0, msg(SEG_ADD, 3, 4096), (EVENTFD,)) +
    a_control(0, msg(SEG_ADD, 4, 4096), (MEMFD_SPARSE,)) +
    a_control(0, msg(SEG_ADD, 5, 4096), (MEMFD_UNSEALABLE,)) +
    a_control(0, msg(SEG_DEL, 1)) + a_control(0, msg(SEG_DEL, 1)) +
    a_control(0, msg(WELCOME)),
    # control messages in pieces and two in one write
    "control-pieces": b"\x00" + a_connect(HELLO_OK) +
    a_control(0, msg(SEG_ADD, 1, 4096)[:13], (MEMFD,)) +
    a_control(0, msg(SEG_ADD, 1, 4096)[13:]) +
    a_control(0, msg(SEG_DEL, 1) + msg(SEG_DEL, 1)[:16]) +
    a_control(0, msg(SEG_DEL, 1)[16:]) +
    a_control(0, msg(SEG_DEL, 1)[:30]) + bytes([6, 0]),
    "allreduce": b"\x01" + a_connect(HELLO_OK) + a_connect(HELLO_OK) +
    a_control(0, msg(SEG_ADD, 1, 4096), (MEMFD,)) +
    a_control(1, msg(SEG_ADD, 1, 4096), (MEMFD,)) +
    a_ring(0, sqe()) + a_ring(1, sqe()) + a_ring(0, sqe(opcode=0)),
    "hangups": b"\x01" + a_connect(HELLO_OK) + a_connect(HELLO_OK) +
    a_control(0, msg(SEG_ADD, 1, 4096), (MEMFD,)) + a_ring(0, sqe()) +
    bytes([6, 1]) + bytes([2, 0]) + a_connect(HELLO_OK),
    "corrupt": b"\x00" + a_connect(HELLO_OK) + bytes([7, 0, 0]) +
    struct.pack(">I", 1000) + bytes([7, 0, 4]) + struct.pack(">I", 77) +
    a_ring(0, sqe(opcode=0)),
}
# control queries (ctrl/ctl.c): one reply, never a client
admission["ctl-query"] = b"\x00" + a_connect(msg(CTL_QUERY, 1), ()) + \
    a_connect(HELLO_OK)
admission["ctl-query-bad"] = b"\x00" + a_connect(msg(CTL_QUERY, 9), ()) + \
    a_connect(msg(CTL_QUERY, 1, 1), ()) + \
    a_connect(msg(CTL_QUERY, 1), (MEMFD,))
admission["ctl-query-half"] = b"\x00" + a_connect(msg(CTL_QUERY, 1)[:20],
                                                  ()) + \
    a_more(0, msg(CTL_QUERY, 1)[20:])
# protocol 3: a job description follows HELLO (arg[3] = its size); the
# fake daemon runs a static job, which reads it and takes the client anyway
JOB_WIRE_LEN = 152


def job_wire(job_id=b"fuzz", secret=b"", coord_ip=0, coord_port=0, hosts=1,
             host_rank=0, local_size=1, local_rank=0, source=1, pad=0):
    return struct.pack("<64s64sIIHHHHHHI", job_id, secret, len(secret),
                       coord_ip, coord_port, hosts, host_rank, local_size,
                       local_rank, source, pad)


HELLO_JOB = msg(HELLO, 8, 8, 4096, JOB_WIRE_LEN)
JW = job_wire(b"slurm:42.0", b"s" * 16, 0x0a000001, 7000, 2, 1, 2, 1, 3)
admission["hello-job"] = b"\x01" + a_connect(HELLO_JOB) + \
    a_more(0, JW[:64]) + a_more(0, JW[64:128]) + a_more(0, JW[128:]) + \
    a_connect(HELLO_JOB) + a_more(0, JW[:100]) + a_pending_end(0, 1)
admission["hello-job-size"] = b"\x00" + a_connect(
    msg(HELLO, 8, 8, 4096, JOB_WIRE_LEN - 1)) + a_connect(HELLO_JOB) + \
    a_pending_end(0, 2)
# a 98-page ctrl memfd for 4096-entry rings
admission["hello-big-rings"] = b"\x00" + bytes([0, 1, MEMFD, 98, MSG_LEN]) + \
    msg(HELLO, 4096, 4096, 400000)
write_all("fuzz-admission", admission)


def s_sub(rank, key=1, it=0, count=16, dtype=0, redop=0, segs=0x11,
          soff=0, roff=0, op=0xC0):
    return bytes([op, rank, key, it, count, dtype, redop, segs]) + \
        struct.pack(">HH", soff, roff)


submit = {
    "pair": b"\x00" + s_sub(0) + s_sub(1),
    "three": b"\x01" + s_sub(0) + s_sub(1) + s_sub(2),
    "dtypes": b"\x00" + b"".join(s_sub(r, key=d, dtype=d, redop=d & 1)
                                for d in range(4) for r in range(2)),
    "mismatch": b"\x00" + s_sub(0, count=16) + s_sub(1, count=8),
    "duplicate": b"\x00" + s_sub(0) + s_sub(0) + s_sub(1),
    "out-of-range": b"\x00" + s_sub(0, soff=4090) + s_sub(1, segs=0x13) +
    s_sub(0, segs=0x12, soff=0, roff=32) + s_sub(1, segs=0x11, roff=8),
    "overlap": b"\x00" + s_sub(0, roff=16) + s_sub(1),
    "seg-del-pending": b"\x00" + s_sub(0) + bytes([0x05, 0, 1]) +
    s_sub(1) + bytes([0x0d, 0, 1, 0]) + s_sub(0, it=1) + s_sub(1, it=1),
    "hangup-pending": b"\x00" + s_sub(0) + bytes([0x07, 0]) + s_sub(1),
    "backpressure": b"\x00" + b"".join(s_sub(0, key=k, op=0x80)
                                      for k in range(12)) +
    b"".join(s_sub(1, key=k) for k in range(12)),
    "corrupt": b"\x00" + s_sub(0, op=0) + bytes([0x86, 0, 0]) +
    struct.pack(">I", 0x10000) + s_sub(1) + bytes([0xc6, 1, 4]) +
    struct.pack(">I", 3),
    "raw": b"\x00" + bytes([0xc4, 0]) + sqe() + bytes([0xc4, 1]) + sqe(),
    "nop": b"\x00" + s_sub(0, key=0, op=0xC8),
    # found by fuzzing: misaligned floats reached the reduction kernels
    "misaligned": b"\x00" + s_sub(0, soff=1, roff=1) +
    s_sub(1, soff=1, roff=1) + s_sub(0, key=2, dtype=1, soff=3, roff=3),
}
write_all("fuzz-submit", submit)

# --- job descriptions and launcher environments (fuzz_job_desc.c) ---
# setup byte: 0x80 environment text, else a wire description under a
# daemon with 1 service, 2 require_secret, 4 dataplane.address, 8 dpdk
SVC, REQ, ADDR, DPDK, ENV = 1, 2, 4, 8, 0x80


def env(*lines):
    return bytes([ENV]) + "\n".join(lines).encode()


TORCHRUN = ["RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4",
            "GROUP_RANK=1", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500",
            "TORCHELASTIC_RUN_ID=abc"]
SLURM = ["SLURM_JOB_ID=4242", "SLURM_STEP_ID=0", "SLURM_PROCID=3",
         "SLURM_NTASKS=6", "SLURM_LOCALID=1", "SLURM_NODEID=1",
         "SLURM_NNODES=2", "SLURM_STEP_TASKS_PER_NODE=4,2",
         "SLURM_STEP_NODELIST=node[01-02]"]
OMPI = ["OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8",
        "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
        "OMPI_MCA_ess_base_jobid=1234", "TALLY_COORDINATOR=10.0.0.1:7000"]
job_desc = {
    "wire-local": bytes([SVC]) + job_wire(),
    "wire-cluster": bytes([SVC | ADDR]) + job_wire(
        b"ompi:77", b"0123456789abcdef", 0x0a000001, 0, 4, 3, 8, 7, 4),
    "wire-no-address": bytes([SVC]) + job_wire(
        b"j", coord_ip=0x0a000001, hosts=2),
    "wire-require-secret": bytes([SVC | REQ | ADDR]) + job_wire(b"j"),
    "wire-short-secret": bytes([SVC | ADDR]) + job_wire(b"j", b"short"),
    "wire-dpdk": bytes([SVC | ADDR | DPDK]) + job_wire(
        b"j", coord_ip=0x0a000001, hosts=2),
    "wire-bad-ranks": bytes([ADDR]) + job_wire(
        b"j", hosts=2, host_rank=2, coord_ip=1),
    "wire-unterminated": bytes([SVC]) + job_wire(b"x" * 64),
    "wire-bad-source": bytes([SVC]) + job_wire(source=9, pad=1),
    "env-torchrun": env(*TORCHRUN),
    "env-slurm": env(*SLURM),
    "env-slurm-tasks": env(*(SLURM[:7] + [
        "SLURM_TASKS_PER_NODE=2(x3),1", "SLURM_JOB_NODELIST=r[1-2]-n[3-4]"])),
    "env-ompi": env(*OMPI),
    "env-ompi-pmix": env(*(OMPI[:4] + ["PMIX_NAMESPACE=prterun-h-1@1"])),
    "env-slurm-and-ompi": env(*(SLURM + OMPI)),
    "env-tally": env("TALLY_JOB_ID=train-7", "TALLY_JOB_SECRET=" + "k" * 20,
                     "TALLY_COORDINATOR=node7:7100", "TALLY_HOSTS=3",
                     "TALLY_HOST_RANK=2", "TALLY_LOCAL_SIZE=2",
                     "TALLY_LOCAL_RANK=1"),
    "env-opts": env("opt.id=job", "opt.secret=" + "q" * 16,
                    "opt.coordinator=localhost", "opt.hosts=2",
                    "opt.host_rank=1", "opt.local_size=64",
                    "opt.local_rank=63", "opt.noenv", *TORCHRUN),
    "env-bad": env("RANK=8", *TORCHRUN[1:]),
    "env-unknown-host": env("TALLY_JOB_ID=x", "TALLY_LOCAL_SIZE=1",
                            "TALLY_LOCAL_RANK=0", "TALLY_HOSTS=2",
                            "TALLY_COORDINATOR=nowhere.example"),
}
write_all("fuzz-job-desc", job_desc)

# --- configuration file and command line ---
config = {
    "daemon": b"[daemon]\nsocket = /run/tally/tallyd.sock\nlocal_size = 4\n"
    b"idle_spin_us = 50\nreduce_threads = 2\nlog_level = debug\n"
    b"socket_group = tally\n",
    "cluster": b"[cluster]\nrank = 1\nworld = 3\nrole = worker+aggregator\n"
    b"algorithm = ring\ncoordinator = 10.0.0.1:7000\njob_key = 0x7a11\n"
    b"heartbeat_ms = 100\npeer_timeout_ms = 500\nschedule = bytescheduler\n"
    b"partition_kib = 512\ncredit_kib = 2048\ncredit_autotune = 1\n"
    b"[dataplane]\naddress = 10.0.0.2:9191\n",
    "dataplane": b"[dataplane]\ntransport = dpdk\nmac = 02:00:00:00:00:01\n"
    b"eal_args = --in-memory --no-pci\nmbufs = 4096\nrdma_device = rxe0\n"
    b"rdma_port = 1\nrdma_gid_index = 1\nk = 64\npool_slots = 1024\n"
    b"window = 32\nrto_us = 2000\n",
    "emulator": b"[emulator]\nrate_bps = 10000000000\ndelay_us = 10\n"
    b"jitter_us = 5\nloss_ppm = 100\ndup_ppm = 10\nreorder_ppm = 10\n"
    b"reorder_us = 20\nseed = 7\n",
    "comments": b"; comment\n# another\n\n[daemon]  ; trailing\n"
    b"local_size=2 ; two\n",
    "errors": b"[daemon]\nlocal_size = 99\nbogus = 1\n[nope]\nx\n",
    "long-line": b"[daemon]\n; " + b"x" * 300 + b"\nlocal_size = 2\n",
}
write_all("fuzz-config", config)

cmdline = {
    "local": b"\0".join([b"-n", b"4", b"-s", b"/tmp/t.sock", b"-l",
                         b"debug"]),
    "cluster": b"\0".join([b"--world", b"2", b"--rank", b"1", b"--role",
                           b"worker", b"--algorithm", b"aggregate",
                           b"--coordinator", b"10.0.0.1:7000",
                           b"--address", b"10.0.0.2:9000", b"--job-key",
                           b"0x10", b"--schedule", b"mgwfbp"]),
    "dpdk": b"\0".join([b"--transport", b"dpdk", b"--eal-args",
                        b"--no-pci --in-memory", b"--mac",
                        b"02:00:00:00:00:02", b"--world", b"2",
                        b"--coordinator", b"10.0.0.1:1", b"--address",
                        b"10.0.0.1:2"]),
    "set": b"\0".join([b"--set", b"cluster.heartbeat_ms=100", b"--set",
                       b"emulator.loss_ppm=5", b"--idle-spin-us=10",
                       b"--reduce-threads", b"1"]),
    "help": b"-h",
    "bad": b"\0".join([b"--local-size", b"0", b"stray"]),
}
write_all("fuzz-cmdline", cmdline)


# fuzz-fast-table (fuzz_fast_table.c): the client's script (rank, key,
# iteration, dtype, op, count), the daemon's (key, iteration, ranks, keep
# the header), then the table from the directory (4 ranks: 2048 entries
# of 32 bytes) and its 2 slots of 64-byte rows (stride 384), as
# shm/fast.h lays it out.
FAST_DIR = 2048
ROUTE_EMPTY, ROUTE_DEAD, ROUTE_DAEMON = 0, 1, 2


def fast_slot_of(key, iteration, slots=2):
    h = ((key * 0x9e3779b97f4a7c15) & M64) ^ iteration
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & M64
    h ^= h >> 33
    return h % slots


def fast_slot(state, key, it, count, arrived, released=0, mismatch=0,
              res=0, desc=0):
    head = struct.pack("<QQQQIiQQI", state, key, it, count, desc, res,
                       arrived, released, mismatch)
    return head.ljust(128, b"\0") + bytes(range(256))


def fast_dirent(key, it, seen, route):
    return struct.pack("<QQQII", key, it, seen, route, 0)


def fast_table(slots, entries=None):
    """@entries: directory index -> entry bytes."""
    entries = entries or {}
    directory = b"".join(entries.get(i, b"\0" * 32) for i in range(FAST_DIR))
    return directory + b"".join(slots.get(i, b"\0" * 384) for i in range(2))


def fast_seed(table, key=1, it=2, rank=3, ranks=0x8, keep=1, count=4):
    client = bytes([rank, key, it, 0, 0, count])
    return client + bytes([key, it, ranks, keep]) + table


FAST_OPEN, FAST_DONE = 2, 3
si = fast_slot_of(1, 2)
di = fast_slot_of(1, 2, FAST_DIR)
write_all("fuzz-fast-table", {
    "free": fast_seed(fast_table({})),
    "open-last": fast_seed(fast_table({si: fast_slot(
        (5 << 2) | FAST_OPEN, 1, 2, 5, 0x7)},
        {di: fast_dirent(1, 2, 0x7, 3 + si)})),
    "open-cross": fast_seed(fast_table({si: fast_slot(
        (5 << 2) | FAST_OPEN, 1, 2, 5, 0x3)},
        {di: fast_dirent(1, 2, 0x3, 3 + si)}), ranks=0xc),
    "done-mismatch": fast_seed(fast_table({si: fast_slot(
        (9 << 2) | FAST_DONE, 1, 2, 5, 0x7, 0x7, 1, -7)},
        {di: fast_dirent(1, 2, 0x7, 3 + si)})),
    "chain-daemon": fast_seed(fast_table({}, {
        di: fast_dirent(7, 7, 0x1, ROUTE_DEAD),
        (di + 1) % FAST_DIR: fast_dirent(9, 9, 0x3, ROUTE_DAEMON),
        (di + 2) % FAST_DIR: fast_dirent(1, 2, 0x7, ROUTE_DAEMON)})),
    "no-header": fast_seed(bytes(range(256)) * 4, keep=0),
})


def dictionary(name, words):
    os.makedirs(os.path.join(HERE, "dict"), exist_ok=True)
    with open(os.path.join(HERE, "dict", name + ".dict"), "w") as f:
        for w in sorted(set(words)):
            f.write('"%s"\n' % "".join(
                c if " " <= c <= "~" and c not in '"\\' else
                "\\x%02x" % ord(c) for c in w))


with open(os.path.join(ROOT, "ctrl", "config.c")) as f:
    src = f.read()
keys = re.findall(r'(?:STR\(|\{ )"(\w+)", "(\w+)"', src)
values = ["udp", "dpdk", "rdma", "worker", "aggregator", "worker+aggregator",
          "aggregate", "ring", "bsp", "wfbp", "mgwfbp", "bytescheduler",
          "error", "warn", "info", "debug", "0x", "127.0.0.1:", "02:00:",
          # [compression] method (dataplane/engine/codec.c)
          "none", "int16", "int8", "sign_ef", "block_topk10_ef",
          "block_topk1_ef"]
dictionary("fuzz-config", ["[%s]" % s for s, _ in keys] +
           ["%s = " % k for _, k in keys] + values + ["\n", ";", "="])
with open(os.path.join(ROOT, "ctrl", "cmdline.c")) as f:
    opts = re.findall(r'\{ "([\w-]+)", (?:required|no)_argument', f.read())
dictionary("fuzz-cmdline", ["--" + o for o in opts] +
           ["%s.%s=" % k for k in keys] + values + ["\0"])
with open(os.path.join(ROOT, "shm", "job_env.c")) as f:
    names = set(re.findall(r'"((?:TALLY|SLURM|OMPI|PMIX|TORCHELASTIC)_\w+|'
                           r'RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|'
                           r'GROUP_RANK|MASTER_ADDR|MASTER_PORT)"', f.read()))
dictionary("fuzz-job-desc", [n + "=" for n in names] +
           ["opt.%s=" % k for k in ("id", "secret", "coordinator", "hosts",
                                    "host_rank", "local_size",
                                    "local_rank")] +
           ["opt.noenv", "\n", "(x", ")", "[", "]", "-", ",", ":",
            "localhost", "node", "10.0.0.1", "torchrun:", "slurm:", "ompi:",
            "none"])
