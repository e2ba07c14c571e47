# SPDX-License-Identifier: BSD-3-Clause
"""The process's tally client for a torch.distributed job: finding the
host's tallyd, or starting one for the job.

Rendezvous goes through the store torch.distributed hands a backend (the
one torchrun, Slurm or init_process_group's init_method set up), so the
daemons of different hosts find each other with no configuration:

1. Every rank writes its host's identity (host name and network
   namespace, or $TALLY_HOST_ID) to the store; ranks with the same
   identity share a host.  Hosts are numbered by their lowest rank.
2. With $TALLY_SOCKET set, every rank connects to the daemon there: one
   that an operator or a test started for this job (docs/pytorch.md).
3. Otherwise the lowest rank of each host (its leader) starts a tallyd
   for the job: host 0's leader draws the job key and secret and picks the
   coordinator's address, the route towards the store's host; every
   leader starts its daemon with its host's number and publishes the
   socket; the other ranks of the host connect to it.  The daemon dies
   with its leader (PR_SET_PDEATHSIG), so a killed rank cannot leave it
   behind.
"""
import atexit
import ctypes
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from .. import _lib
from ..client import Client
from ..errors import TallyError, ECONNECT, EPROTO

_PREFIX = "tally/"
_job = None                 # the JobClient of this process, once made


class JobClient:
    """Where this process stands in the job, and its tally client."""

    def __init__(self, client, rank, world, host, hosts, local_rank,
                 local_size, daemon=None):
        self.client = client
        self.rank, self.world = rank, world
        self.host, self.hosts = host, hosts
        self.local_rank, self.local_size = local_rank, local_size
        self.daemon = daemon    # the Popen of a daemon we started


def host_identity():
    """Ranks with equal identities share a tallyd.  The network
    namespace counts: emulated hosts on one machine share a name."""
    env = os.environ.get("TALLY_HOST_ID")
    if env:
        return env
    try:
        ns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        ns = 0
    return "%s:%d" % (socket.gethostname(), ns)


def _get(store, key):
    return store.get(_PREFIX + key).decode()


def _set(store, key, value):
    store.set(_PREFIX + key, value)


def _store_host(store):
    """The host of the TCPStore under the (prefix) stores, or
    $MASTER_ADDR."""
    s = store
    for _ in range(8):
        if hasattr(s, "host"):
            return s.host
        s = getattr(s, "underlying_store", None)
        if s is None:
            break
    return os.environ.get("MASTER_ADDR", "127.0.0.1")


def _local_ip(towards):
    """This host's address on the route towards @towards."""
    try:
        addr = socket.gethostbyname(towards)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((addr, 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _free_port(ip, kind):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def tallyd_path():
    """$TALLYD, the build tree's, or the one on $PATH."""
    env = os.environ.get("TALLYD")
    if env:
        return env
    build = _lib.build_tree()
    if build and (build / "ctrl" / "tallyd").exists():
        return str(build / "ctrl" / "tallyd")
    found = shutil.which("tallyd")
    if found:
        return found
    raise TallyError(ECONNECT, "no tallyd to start for the job",
                     "set TALLYD, install tally, or start one and set "
                     "TALLY_SOCKET")


def _die_with_parent():
    """preexec_fn: SIGTERM the daemon when its leader dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)           # PR_SET_PDEATHSIG


def _connect_retry(path, daemon, log, timeout):
    """Connect to a daemon that may still be starting."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return Client(path)
        except TallyError as e:
            if e.code == EPROTO:
                raise
            if daemon and daemon.poll() is not None:
                raise TallyError(ECONNECT, "the job's tallyd exited with "
                                 "status %d" % daemon.returncode,
                                 _log_tail(log)) from None
            if time.monotonic() > deadline:
                raise
        time.sleep(0.02)


def _log_tail(log):
    try:
        with open(log) as f:
            return " | ".join(f.read().strip().splitlines()[-5:])
    except OSError:
        return None


def _daemon_args(sock, local_size, host, hosts, job):
    args = [tallyd_path(), "--socket", sock, "--local-size",
            str(local_size), "--log-level",
            os.environ.get("TALLY_LOG_LEVEL", "warn")]
    if hosts > 1:
        algorithm = os.environ.get("TALLY_ALGORITHM", "aggregate")
        role = "worker+aggregator" if algorithm == "aggregate" else "worker"
        args += ["--rank", str(host), "--world", str(hosts),
                 "--role", role, "--algorithm", algorithm,
                 "--schedule", os.environ.get("TALLY_SCHEDULE", "wfbp"),
                 "--coordinator", job["coordinator"],
                 "--job-key", str(job["job_key"]),
                 "--address", job["address"]]
    args += shlex.split(os.environ.get("TALLY_TALLYD_ARGS", ""))
    return args


def _start_daemon(store, host, hosts, local_size):
    """Host leader: start the job's tallyd; returns (path, Popen)."""
    master = _store_host(store)
    ip = _local_ip(master)
    if host == 0:
        job = {"coordinator": "%s:%d" % (ip, _free_port(ip,
                                                        socket.SOCK_STREAM)),
               "job_key": secrets.randbits(32),
               "secret": secrets.token_urlsafe(32)}
        _set(store, "job", json.dumps(job))
    else:
        job = json.loads(_get(store, "job"))
    job["address"] = "%s:%d" % (ip, _free_port(ip, socket.SOCK_DGRAM))
    folder = tempfile.mkdtemp(prefix="tally-job-")
    sock, log = os.path.join(folder, "tallyd.sock"), \
        os.path.join(folder, "tallyd.log")
    env = dict(os.environ)
    if hosts > 1:
        env["TALLY_JOB_SECRET"] = job["secret"]
    with open(log, "w") as logf:
        daemon = subprocess.Popen(
            _daemon_args(sock, local_size, host, hosts, job),
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env,
            preexec_fn=_die_with_parent)

    def stop():
        _exit_barrier(store, host, hosts)
        if daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(5)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        shutil.rmtree(folder, ignore_errors=True)
    # registered before the client's close(), so it runs after it
    atexit.register(stop)
    return sock, daemon, log


def _exit_barrier(store, host, hosts):
    """Keep a daemon up until every host finished: host 0's runs the
    coordinator, and a shard of every host's slots may still hold a
    result another host has not confirmed.  Bounded: the store dies
    with rank 0's process."""
    if hosts <= 1:
        return
    try:
        store.add(_PREFIX + "exit", 1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if store.add(_PREFIX + "exit", 0) >= hosts:
                return
            time.sleep(0.05)
    except Exception:
        return


def job_client(store, rank, world):
    """This process's client for the job (made once per process)."""
    global _job
    if _job is not None:
        return _job
    _set(store, "host/%d" % rank, host_identity())
    ids = [_get(store, "host/%d" % r) for r in range(world)]
    order = list(dict.fromkeys(ids))        # hosts by their lowest rank
    me = ids[rank]
    host, hosts = order.index(me), len(order)
    peers = [r for r in range(world) if ids[r] == me]
    local_rank, local_size = peers.index(rank), len(peers)
    timeout = float(os.environ.get("TALLY_CONNECT_TIMEOUT", "60"))

    path = os.environ.get("TALLY_SOCKET")
    daemon = None
    if path:
        client = _connect_retry(path, None, None, timeout)
    elif local_rank == 0:
        path, daemon, log = _start_daemon(store, host, hosts, local_size)
        client = _connect_retry(path, daemon, log, timeout)
        _set(store, "socket/%d" % host, path)
    else:
        path = _get(store, "socket/%d" % host)
        client = _connect_retry(path, None, None, timeout)
    if client.size != local_size:
        raise TallyError(EPROTO, "the daemon at %s serves %d processes, "
                         "this host runs %d of the job" %
                         (path, client.size, local_size))
    _job = JobClient(client, rank, world, host, hosts, local_rank,
                     local_size, daemon)
    return _job


def current():
    """The job client made by the backend or the hook, or None."""
    return _job


def resolve_client(given=None):
    """The tally.Client to use: @given (a Client or JobClient), else the
    job's, made from the default group's store when the tally backend did
    not make it already (the hook or SharedGradients under gloo/NCCL)."""
    job = given or current()
    if job is None:
        import torch.distributed as dist
        job = job_client(dist.distributed_c10d._get_default_store(),
                         dist.get_rank(), dist.get_world_size())
    return job.client if isinstance(job, JobClient) else job
