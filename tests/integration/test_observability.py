#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Observability of a real tallyd: its Prometheus endpoint and tally-ctl.

Usage: test_observability.py BUILD_DIR [TEST_NAME...]

Starts real daemons (one host, a two-host job over loopback UDP, and a
service serving two jobs at once) with metrics.listen on a free loopback
port, runs real clients (tally-bench), then:
  - scrapes GET /metrics, checks that the counters moved and validates the
    text with `promtool check metrics`;
  - starts a real `prometheus` scraping the daemon every second and queries
    a counter through its HTTP API;
  - runs tally-ctl status/jobs/peers/counters/top (--json parsed here)
    and compares its numbers with the endpoint's, job by job;
  - sends hostile control requests (truncated, oversized, wrong type or
    version, with fds, a flood past the pending limit) and checks that
    the daemon refuses them, never counts them as clients, and lives.
Daemon-wide samples carry no label; a job's carry job="<its id>" ("local"
for a one-host daemon's job, the job key in decimal for a multi-host one,
the client's TALLY_JOB_ID in a service).  Every wait is bounded.  Tests
needing promtool or prometheus are skipped (not passed) when those are
missing.
"""
import csv
import io
import json
import os
import re
import pty
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

BUILD = None
MSG = struct.Struct('<IHHiI4Q')
MAGIC = 0x544c4c59
# the control protocol's version, as the daemon is built with it
VERSION = int(re.search(r"#define TALLY_PROTO_VERSION (\d+)", open(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                 "shm", "proto.h")).read()).group(1))
CTL_QUERY, CTL_REPLY, WELCOME = 6, 7, 2


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def free_udp_ports(n):
    """@n consecutive UDP and TCP ports free a moment ago (base returned)."""
    for _ in range(50):
        base = free_port()
        if base + n >= 65535:
            continue
        try:
            socks = []
            for p in range(base, base + n):
                for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                    s = socket.socket(socket.AF_INET, kind)
                    socks.append(s)
                    s.bind(('127.0.0.1', p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError('no free port range')


def wait_for(pred, timeout, what, step=0.05):
    """Poll @pred until true or @timeout seconds; fail with @what."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError('timed out waiting for ' + what)


def http_get(url, timeout=5):
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def parse_metrics(text):
    """{(name, frozenset(labels)): value} from the text format."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        head, value = line.rsplit(' ', 1)
        labels = {}
        name = head
        if '{' in head:
            name, rest = head.split('{', 1)
            rest = rest[:-1]
            while rest:
                k, rest = rest.split('="', 1)
                v, i = '', 0
                while rest[i] != '"':
                    if rest[i] == '\\':
                        i += 1
                        v += {'n': '\n'}.get(rest[i], rest[i])
                    else:
                        v += rest[i]
                    i += 1
                labels[k] = v
                rest = rest[i + 1:].lstrip(',')
        out[(name, frozenset(labels.items()))] = float(value)
    return out


def value(metrics, name, **labels):
    """Sum of @name over the samples that have @labels."""
    want = set(labels.items())
    return sum(v for (n, ls), v in metrics.items()
               if n == name and want <= set(ls))


# the daemon's own numbers: never a job label (ctrl/collect.c)
DAEMON_WIDE = {
    'tally_info', 'tally_uptime_seconds', 'tally_jobs',
    'tally_jobs_started_total', 'tally_jobs_ended_total', 'tally_clients',
    'tally_connections_refused_total', 'tally_limit_refusals_total',
    'tally_ctl_queries_total', 'tally_ctl_refused_total',
    'tally_ended_jobs_operations_total', 'process_open_fds',
    'process_resident_memory_bytes'}


def job_ids(metrics):
    """The job labels of @metrics, checking that the daemon's own samples
    have none and every other sample has one."""
    ids = set()
    for (name, ls), _ in metrics.items():
        labels = dict(ls)
        if name in DAEMON_WIDE:
            assert 'job' not in labels, (name, labels)
        else:
            assert 'job' in labels, (name, labels)
            ids.add(labels['job'])
    return ids


class Daemon:
    """A tallyd in a temporary directory, metrics on a free port."""

    def __init__(self, local_size, extra=(), env=None):
        self.dir = tempfile.mkdtemp(prefix='tally-obs-')
        self.sock = os.path.join(self.dir, 'tallyd.sock')
        self.port = free_port()
        self.log = open(os.path.join(self.dir, 'log'), 'w+')
        tallyd = os.environ.get('TALLYD', os.path.join(BUILD, 'ctrl/tallyd'))
        self.proc = subprocess.Popen(
            [tallyd, '-s', self.sock, '-n', str(local_size),
             '--set', 'metrics.listen=127.0.0.1:%d' % self.port] +
            list(extra), stdout=self.log, stderr=subprocess.STDOUT,
            env=env)

    def wait_ready(self, timeout=15):
        """The socket and the endpoint answer."""
        def up():
            if self.proc.poll() is not None:
                raise AssertionError('tallyd exited: ' + self.log_text())
            try:
                return os.path.exists(self.sock) and \
                    http_get(self.url(), 1)[0] == 200
            except OSError:
                return False
        wait_for(up, timeout, 'tallyd to start')
        return self

    def url(self):
        return 'http://127.0.0.1:%d/metrics' % self.port

    def scrape(self):
        code, body = http_get(self.url())
        assert code == 200, code
        return body

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        """SIGTERM; the exit status (negative: died of a signal)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


def tool(name):
    return os.path.join(BUILD, 'tools', name)


def bench(sock, clients, extra=(), timeout=120):
    """Run tally-bench --check (real clients) to completion."""
    r = subprocess.run([tool('tally-bench'), '-n', str(clients), '-b', '1K',
                        '-e', '4M', '-f', '16', '-w', '1', '-i', '3',
                        '--check', '--socket', sock] + list(extra),
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def ctl(sock, *args, timeout=20):
    return subprocess.run([tool('tally-ctl'), '--socket', sock] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def ctl_json(sock, *args):
    r = ctl(sock, '--json', *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class LocalDaemon(unittest.TestCase):
    """One host, two clients."""

    def setUp(self):
        self.d = Daemon(2).wait_ready()

    def tearDown(self):
        rc = self.d.stop()
        self.assertGreaterEqual(rc, 0, 'tallyd crashed')

    def test_bench_spread(self):
        """tally-bench's CSV: beside the mean, the first, the median and
        the longest all-reduce, each the largest over the clients
        (net4-bench reads them), consistent with the mean"""
        r = bench(self.d.sock, 2, ['--csv', '-i', '9'])
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        self.assertEqual([int(x['size']) for x in rows],
                         [1024, 16384, 262144, 4194304])
        for x in rows:
            mean, first, p50, top = (float(x[k]) for k in (
                'time_us', 'first_us', 'p50_us', 'max_us'))
            self.assertEqual(int(x['errors']), 0)
            self.assertGreater(p50, 0, x)
            # the longest is at least the mean and the median and first;
            # 9 times whose mean is the total / 9: the longest is below 9x
            self.assertLessEqual(max(mean, p50, first), top * 1.0001, x)
            self.assertLess(top, 9 * mean * 1.0001 + 1, x)

    def test_scrape_moves_and_validates(self):
        before = parse_metrics(self.d.scrape())
        self.assertEqual(value(before, 'tally_operations_total',
                               result='done'), 0)
        bench(self.d.sock, 2)
        text = self.d.scrape()
        after = parse_metrics(text)
        done = value(after, 'tally_operations_total', result='done')
        self.assertGreater(done, 0)
        self.assertEqual(value(after, 'tally_operations_total',
                               result='failed'), 0)
        self.assertGreater(value(after, 'tally_reduced_bytes_total'), 0)
        # sizes 1K, 16K, 256K, 4M: the two small ones went through the
        # clients' fast-path table (docs/local-fast-path.md), counted
        # apart; the two large ones through the daemon's size classes
        for sc in ('le_1MiB', 'le_16MiB'):
            self.assertGreater(value(
                after, 'tally_allreduce_latency_seconds_count',
                size_class=sc), 0, sc)
        for sc in ('le_4KiB', 'le_64KiB'):
            self.assertEqual(value(
                after, 'tally_allreduce_latency_seconds_count',
                size_class=sc), 0, sc)
        fast = value(after, 'tally_fast_path_operations_total', job='local')
        self.assertGreater(fast, 0)
        self.assertEqual(fast % 2, 0)       # counted once per member
        self.assertEqual(value(after, 'tally_allreduce_latency_seconds_count',
                               size_class='gt_16MiB'), 0)
        inf = value(after, 'tally_allreduce_latency_seconds_bucket',
                    le='+Inf')
        self.assertEqual(inf, value(
            after, 'tally_allreduce_latency_seconds_count'))
        self.assertEqual(value(after, 'tally_clients'), 0)
        # one job, "local", and the daemon's numbers outside it
        self.assertEqual(job_ids(after), {'local'})
        self.assertEqual(value(after, 'tally_jobs'), 1)
        self.assertEqual(value(after, 'tally_info', mode='local'), 1)
        self.assertEqual(value(after, 'tally_operations_total', job='local',
                               result='done'), done)
        self.assertEqual(value(after, 'tally_local_size', job='local'), 2)
        self.assertEqual(value(after, 'tally_job_clients', job='local'), 0)
        self.assertEqual(value(after, 'tally_hosts', job='local'), 1)
        self.assertEqual(self.d.proc.poll(), None)
        self.assertEqual(http_get(self.d.url()[:-len('metrics')] + 'x')[0],
                         404)
        if not shutil.which('promtool'):
            self.skipTest('promtool missing (Debian package prometheus)')
        r = subprocess.run(['promtool', 'check', 'metrics'], input=text,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_prometheus_scrapes(self):
        if not shutil.which('prometheus'):
            self.skipTest('prometheus missing (Debian package prometheus)')
        bench(self.d.sock, 2)
        want = value(parse_metrics(self.d.scrape()),
                     'tally_operations_total', result='done')
        self.assertGreater(want, 0)
        tmp = tempfile.mkdtemp(prefix='tally-prom-')
        port = free_port()
        with open(os.path.join(tmp, 'prometheus.yml'), 'w') as f:
            f.write('global:\n  scrape_interval: 1s\n'
                    'scrape_configs:\n  - job_name: tallyd\n'
                    '    static_configs:\n'
                    "      - targets: ['127.0.0.1:%d']\n" % self.d.port)
        log = open(os.path.join(tmp, 'log'), 'w')
        prom = subprocess.Popen(
            ['prometheus', '--config.file=' + tmp + '/prometheus.yml',
             '--storage.tsdb.path=' + tmp + '/data',
             '--web.listen-address=127.0.0.1:%d' % port],
            stdout=log, stderr=subprocess.STDOUT)
        # without honor_labels Prometheus keeps its own "job" (the scrape
        # job's name) and renames tally's to exported_job
        query = ('http://127.0.0.1:%d/api/v1/query?query=' % port +
                 urllib.parse.quote('tally_operations_total{exported_job='
                                    '"local",result="done"}'))

        def scraped():
            if prom.poll() is not None:
                raise AssertionError('prometheus exited')
            if self.d.proc.poll() is not None:
                raise AssertionError('tallyd exited (%d): %s' % (
                    self.d.proc.returncode, self.d.log_text()))
            try:
                code, body = http_get(query, 2)
            except OSError:
                return None
            if code != 200:
                return None
            res = json.loads(body)['data']['result']
            return res or None
        try:
            try:
                res = wait_for(scraped, 60, 'prometheus to scrape',
                               step=0.5)
            except AssertionError as e:
                try:
                    targets = http_get('http://127.0.0.1:%d/api/v1/targets'
                                       % port, 2)
                except OSError as oe:
                    targets = oe
                log.flush()
                with open(log.name) as f:
                    raise AssertionError(
                        '%s; targets: %s; log: %s; tallyd: %s' % (
                            e, targets, f.read()[-3000:],
                            self.d.log_text()[-3000:])) from None
        finally:
            prom.terminate()
            try:
                prom.wait(15)
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait(5)
            log.close()
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(len(res), 1, res)
        self.assertEqual(res[0]['metric']['job'], 'tallyd')  # scrape job
        self.assertEqual(res[0]['metric']['exported_job'], 'local')
        self.assertEqual(float(res[0]['value'][1]), want)

    def test_tally_ctl_with_clients(self):
        # clients stay connected while we look: a benchmark far longer
        # than the test, stopped once we have looked
        run = subprocess.Popen(
            [tool('tally-bench'), '-n', '2', '-b', '64K', '-e', '64K',
             '-w', '1', '-i', '100000000', '--socket', self.d.sock],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        try:
            st = wait_for(lambda: (lambda s: s if s['clients'] == 2 else
                                   None)(ctl_json(self.d.sock, 'status')),
                          30, 'two clients in tally-ctl status')
            self.assertEqual(st['health'], 'ok')
            self.assertEqual(st['mode'], 'local')
            self.assertEqual(len(st['jobs']), 1)
            job = st['jobs'][0]
            self.assertEqual(job['job'], 'local')
            self.assertEqual(job['clients'], 2)
            self.assertEqual(job['local_size'], 2)
            self.assertEqual(job['hosts'], 1)
            self.assertEqual(job['host_rank'], 0)
            self.assertIs(job['broken'], False)
            self.assertIs(job['joined'], True)      # one host: at once
            self.assertIsNone(job['epoch'])         # no cluster
            self.assertEqual(st['jobs_started'], 1)
            self.assertEqual(st['jobs_ended'], 0)
            self.assertEqual(st['limit_refusals'], 0)
            txt = ctl(self.d.sock, 'status')
            self.assertEqual(txt.returncode, 0)
            self.assertIn('(local)', txt.stdout)
            self.assertIn('clients 2,', txt.stdout)         # the daemon's
            self.assertIn('job local: ok', txt.stdout)
            self.assertIn('clients 2 of 2', txt.stdout)     # the job's
            jobs = ctl_json(self.d.sock, 'jobs')
            self.assertEqual([j['job'] for j in jobs], ['local'])
            self.assertEqual(jobs[0]['clients'], 2)
            # the endpoint answers while the loop is busy with clients
            busy = parse_metrics(self.d.scrape())
            self.assertEqual(value(busy, 'tally_clients'), 2)
            self.assertEqual(value(busy, 'tally_job_clients', job='local'),
                             2)
            self.assertEqual(len([k for k in busy if k[0] ==
                                  'tally_client_outstanding_operations']), 2)
            # operations keep completing while the clients run
            first = jobs[0]['operations_done']
            wait_for(lambda: ctl_json(self.d.sock, 'jobs')[0]
                     ['operations_done'] > first, 30, 'operations to move')
            top = ctl(self.d.sock, 'top', '-n', '2')
            self.assertEqual(top.returncode, 0, top.stderr)
            self.assertIn('OPS/S', top.stdout)
            self.assertRegex(top.stdout, r'(?m)^local +ok +2/2 ')
            self.assertRegex(top.stdout, r'job local +le_64KiB')
        finally:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(30)
        # both members gone: the job is whole again, nothing runs, and
        # tally-ctl shows the endpoint's numbers
        wait_for(lambda: (lambda s: s['clients'] == 0 and
                          s['health'] == 'ok')(
                              ctl_json(self.d.sock, 'status')),
                 30, 'the clients to leave')
        counters = ctl_json(self.d.sock, 'counters')
        by = {(c['name'], frozenset(c['labels'].items())): c['value']
              for c in counters}
        http = parse_metrics(self.d.scrape())
        for name in ('tally_operations_total', 'tally_reduced_bytes_total',
                     'tally_allreduce_latency_seconds_count'):
            self.assertEqual(value(by, name), value(http, name), name)
            self.assertEqual(value(by, name, job='local'), value(by, name),
                             name)
        self.assertEqual(job_ids(by), {'local'})
        # the text: the daemon's samples, then the job's under its header
        lines = ctl(self.d.sock, 'counters').stdout.splitlines()
        head = lines.index('# job local')
        self.assertTrue(lines[0].startswith('tally_info{'), lines[0])
        self.assertFalse([ln for ln in lines[:head] if 'job=' in ln])
        self.assertFalse([ln for ln in lines[head + 1:] if ln and
                          '{job=local' not in ln])
        self.assertIn('tally_operations_total{job=local,result=done} ',
                      '\n'.join(lines[head:]))
        self.assertGreater(value(by, 'tally_operations_total',
                                 result='done'), 0)
        self.assertEqual(ctl_json(self.d.sock, 'peers'), [])

    def test_top_quits_on_q(self):
        # on a terminal: refreshes until q, and gives the terminal back
        master, slave = pty.openpty()
        before = termios.tcgetattr(slave)
        p = subprocess.Popen([tool('tally-ctl'), '--socket', self.d.sock,
                              'top'], stdin=slave, stdout=slave,
                             stderr=subprocess.PIPE)
        try:
            out = b''
            deadline = time.monotonic() + 15
            while out.count(b'q or Ctrl-C quits') < 2 and \
                    time.monotonic() < deadline:
                if select.select([master], [], [], 0.5)[0]:
                    out += os.read(master, 65536)
            self.assertGreaterEqual(out.count(b'q or Ctrl-C quits'), 2,
                                    'top did not refresh')
            self.assertIn(b'\033[H\033[2J', out)
            os.write(master, b'q')
            self.assertEqual(p.wait(10), 0)
            self.assertEqual(termios.tcgetattr(slave), before)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(5)
            p.stderr.close()
            os.close(master)
            os.close(slave)

    def test_tally_ctl_errors(self):
        r = ctl(os.path.join(self.d.dir, 'nope.sock'), 'status')
        self.assertEqual(r.returncode, 1)
        self.assertIn('cannot connect', r.stderr)
        self.assertIn('nope.sock', r.stderr)
        r = ctl(self.d.sock, 'frobnicate')
        self.assertEqual(r.returncode, 2)
        self.assertIn('unknown command', r.stderr)
        r = ctl(self.d.log.name, 'status')       # not a socket
        self.assertEqual(r.returncode, 1)
        r = ctl(self.d.sock, '--job', 'nope', 'status')
        self.assertEqual(r.returncode, 1)
        self.assertIn("no job 'nope'", r.stderr)
        self.assertEqual(r.stdout, '')
        self.assertEqual(len(ctl_json(self.d.sock, '--job', 'local',
                                      'jobs')), 1)


def raw_conn(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


def recv_exact(s, n):
    buf = b''
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


class HostileControl(unittest.TestCase):
    """Control requests a broken or hostile process might send."""

    def setUp(self):
        self.d = Daemon(1).wait_ready()

    def tearDown(self):
        alive = self.d.proc.poll() is None
        rc = self.d.stop()
        self.assertTrue(alive, 'tallyd died')
        self.assertGreaterEqual(rc, 0, 'tallyd crashed')

    def reply(self, s):
        hdr = recv_exact(s, MSG.size)
        self.assertEqual(len(hdr), MSG.size, 'no reply header')
        return MSG.unpack(hdr)

    def assert_healthy(self):
        st = ctl_json(self.d.sock, 'status')
        self.assertEqual(st['clients'], 0)
        self.assertEqual(st['health'], 'ok')

    def test_good_query_raw(self):
        with raw_conn(self.d.sock) as s:
            s.sendall(MSG.pack(MAGIC, VERSION, CTL_QUERY, 0, 0, 1, 0, 0, 0))
            m = self.reply(s)
            self.assertEqual((m[0], m[2], m[3]), (MAGIC, CTL_REPLY, 0))
            body = recv_exact(s, m[5]).decode()
            self.assertEqual(len(body), m[5])
            self.assertIn('\ntally_clients 0\n', body)
            self.assertIn('tally_job_clients{job="local"} 0', body)
            self.assertEqual(s.recv(1), b'')    # closed after one reply

    def test_wrong_version_and_args(self):
        for args in ((99, 0, 0, 0), (1, 5, 0, 0), (0, 0, 0, 0)):
            with raw_conn(self.d.sock) as s:
                s.sendall(MSG.pack(MAGIC, VERSION, CTL_QUERY, 0, 0, *args))
                m = self.reply(s)
                self.assertEqual(m[2], CTL_REPLY)
                self.assertLess(m[3], 0)
                self.assertEqual(m[5], 0)
                self.assertEqual(s.recv(1), b'')
        self.assert_healthy()
        m = parse_metrics(self.d.scrape())
        self.assertEqual(value(m, 'tally_ctl_refused_total'), 3)

    def test_wrong_type_and_protocol(self):
        with raw_conn(self.d.sock) as s:        # neither HELLO nor CTL
            s.sendall(MSG.pack(MAGIC, VERSION, 99, 0, 0, 1, 0, 0, 0))
            m = self.reply(s)
            self.assertEqual(m[2], WELCOME)
            self.assertLess(m[3], 0)
        with raw_conn(self.d.sock) as s:        # another protocol version
            s.sendall(MSG.pack(MAGIC, VERSION + 7, CTL_QUERY, 0, 0, 1, 0,
                               0, 0))
            m = self.reply(s)
            self.assertLess(m[3], 0)
        with raw_conn(self.d.sock) as s:        # garbage
            s.sendall(b'GET /metrics HTTP/1.0\r\n\r\n' + b'x' * 100)
            s.settimeout(10)
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass
        self.assert_healthy()

    def test_truncated_times_out(self):
        with raw_conn(self.d.sock) as s:
            s.sendall(MSG.pack(MAGIC, VERSION, CTL_QUERY, 0, 0, 1, 0, 0,
                               0)[:20])
            t0 = time.monotonic()
            s.settimeout(10)
            try:
                got = s.recv(4096)
            except ConnectionResetError:
                got = b''
            self.assertEqual(got, b'')           # dropped, no reply
            self.assertLess(time.monotonic() - t0, 8)
        self.assert_healthy()

    def test_oversized_and_fds(self):
        with raw_conn(self.d.sock) as s:         # a query, then 1 MiB more
            q = MSG.pack(MAGIC, VERSION, CTL_QUERY, 0, 0, 1, 0, 0, 0)
            s.setblocking(False)
            try:
                s.send(q + b'\xff' * (1 << 20))
            except BlockingIOError:
                pass
            s.settimeout(10)
            m = self.reply(s)
            self.assertEqual((m[2], m[3]), (CTL_REPLY, 0))
        with raw_conn(self.d.sock) as s, open(self.d.log.name) as f:
            socket.send_fds(s, [MSG.pack(MAGIC, VERSION, CTL_QUERY, 0, 0, 1,
                                         0, 0, 0)], [f.fileno()])
            m = self.reply(s)
            self.assertEqual(m[2], CTL_REPLY)
            self.assertLess(m[3], 0)
        self.assert_healthy()

    def test_pending_limit(self):
        # silent connections fill the pending slots (32): one more is
        # refused at once, and after the HELLO timeout queries work again
        silent = [raw_conn(self.d.sock) for _ in range(32)]
        try:
            time.sleep(0.2)
            with raw_conn(self.d.sock) as s:
                try:
                    s.sendall(MSG.pack(MAGIC, VERSION, CTL_QUERY, 0, 0, 1,
                                       0, 0, 0))
                except (BrokenPipeError, ConnectionResetError):
                    pass    # refused and closed first: the reply is there
                m = self.reply(s)
                self.assertEqual(m[2], WELCOME)     # refused like a client
                self.assertLess(m[3], 0)
            wait_for(lambda: ctl(self.d.sock, 'status').returncode == 0,
                     15, 'the silent connections to expire', step=0.5)
        finally:
            for s in silent:
                s.close()
        self.assert_healthy()


class TwoHosts(unittest.TestCase):
    """A two-host job over loopback UDP: peers and the engine's counters."""

    def test_cluster_metrics_and_peers(self):
        base = free_udp_ports(3)
        env = dict(os.environ)
        env.setdefault('TALLY_JOB_SECRET', 'tally-obs-test-%d' % os.getpid())
        key = 4000 + os.getpid() % 1000
        ds = []
        try:
            for r in range(2):
                ds.append(Daemon(1, [
                    '--rank', str(r), '--world', '2',
                    '--role', 'worker+aggregator', '--algorithm', 'aggregate',
                    '--coordinator', '127.0.0.1:%d' % base,
                    '--job-key', str(key),
                    '--address', '127.0.0.1:%d' % (base + 1 + r),
                    '--transport', 'udp'], env=env))
            for d in ds:
                d.wait_ready(30)
            runs = [subprocess.Popen(
                [tool('tally-bench'), '-n', '1', '--hosts', '2', '-b', '1K',
                 '-e', '1M', '-f', '32', '-w', '1', '-i', '3', '--check',
                 '--socket', d.sock], stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True) for d in ds]
            for p in runs:
                out, _ = p.communicate(timeout=120)
                self.assertEqual(p.returncode, 0, out)
            text = ds[0].scrape()
            m = parse_metrics(text)
            # the job's id is its key in decimal
            self.assertEqual(job_ids(m), {str(key)})
            self.assertEqual(value(m, 'tally_info', mode='cluster'), 1)
            self.assertEqual(value(m, 'tally_cluster_joined', job=str(key)),
                             1)
            self.assertGreaterEqual(value(m, 'tally_cluster_epoch',
                                          job=str(key)), 1)
            self.assertGreater(value(m, 'tally_engine_sent_bytes_total',
                                     engine='worker'), 0)
            self.assertGreater(value(m, 'tally_transport_received_bytes_total'),
                               0)
            self.assertGreater(value(m, 'tally_sched_units_total'), 0)
            # worker+aggregator on both: each host sends to the other
            # (and to its own aggregator through the transport)
            self.assertGreater(value(m, 'tally_peer_sent_bytes_total',
                                     peer='1'), 0)
            self.assertGreater(value(m, 'tally_peer_sent_packets_total',
                                     peer='0'), 0)
            self.assertEqual(
                value(m, 'tally_peer_sent_packets_total'),
                value(m, 'tally_engine_sent_packets_total') -
                value(m, 'tally_engine_drops_total', reason='tx_no_buffer'))
            # what it sends its own node (rank 0 is node 0) skips the
            # kernel: every such frame is looped, and only those
            self.assertEqual(
                value(m, 'tally_transport_looped_packets_total'),
                value(m, 'tally_peer_sent_packets_total', peer='0'))
            self.assertGreater(value(m, 'tally_operations_total',
                                     result='done'), 0)
            peers = ctl_json(ds[0].sock, 'peers')
            self.assertEqual(sorted(p['peer'] for p in peers), [0, 1])
            self.assertEqual(sum(p['self'] for p in peers), 1)
            self.assertEqual({p['job'] for p in peers}, {str(key)})
            self.assertIn(str(key), ctl(ds[0].sock, 'peers').stdout)
            st = ctl_json(ds[1].sock, 'status')
            self.assertEqual(st['mode'], 'cluster')
            self.assertEqual(len(st['jobs']), 1)
            job = st['jobs'][0]
            self.assertEqual(job['job'], str(key))
            self.assertEqual(job['hosts'], 2)
            self.assertEqual(job['host_rank'], 1)
            self.assertIs(job['joined'], True)
            self.assertEqual(job['health'], 'ok')
            self.assertGreaterEqual(job['epoch'], 1)
            self.assertGreater(job['operations_done'], 0)
            txt = ctl(ds[1].sock, 'status').stdout
            self.assertIn('job %d: ok' % key, txt)
            self.assertIn('hosts 2, host rank 1, joined yes, epoch', txt)
            if shutil.which('promtool'):
                r = subprocess.run(['promtool', 'check', 'metrics'],
                                   input=text, capture_output=True,
                                   text=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finally:
            for d in ds:
                self.assertGreaterEqual(d.stop(), 0, 'tallyd crashed')


class ServiceJobs(unittest.TestCase):
    """A service ([service] enabled) serving two jobs at once: the metrics
    and tally-ctl job by job, and the jobs' end."""

    def setUp(self):
        self.d = Daemon(1, ['--set', 'service.enabled=true',
                            '--set', 'service.job_linger_ms=200'])
        self.d.wait_ready()
        self.runs = []

    def tearDown(self):
        self.stop_clients()
        rc = self.d.stop()
        self.assertGreaterEqual(rc, 0, 'tallyd crashed')

    def client(self, job, size, rank):
        """A client of @job (@size on this host) that runs until killed."""
        env = dict(os.environ, TALLY_JOB_ID=job, TALLY_LOCAL_SIZE=str(size),
                   TALLY_LOCAL_RANK=str(rank))
        log = open(os.path.join(self.d.dir, 'client-%s-%d' % (job, rank)),
                   'w')
        self.runs.append(subprocess.Popen(
            [tool('tally-bench'), '-n', '1', '-b', '4K', '-e', '4K', '-w',
             '1', '-i', '100000000', '--socket', self.d.sock], env=env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        log.close()

    def stop_clients(self):
        for p in self.runs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)
        self.runs = []

    def test_two_jobs(self):
        sock = self.d.sock
        self.client('alpha', 2, 0)
        self.client('alpha', 2, 1)
        self.client('beta', 1, 0)
        st = wait_for(lambda: (lambda s: s if s['clients'] == 3 and
                               len(s['jobs']) == 2 else None)(
                                   ctl_json(sock, 'status')),
                      30, 'two jobs with three clients')
        self.assertEqual(st['mode'], 'service')
        self.assertEqual(st['health'], 'ok')
        self.assertEqual((st['jobs_started'], st['jobs_ended']), (2, 0))
        by = {j['job']: j for j in st['jobs']}
        self.assertEqual(set(by), {'alpha', 'beta'})
        self.assertEqual((by['alpha']['clients'], by['alpha']['local_size']),
                         (2, 2))
        self.assertEqual((by['beta']['clients'], by['beta']['local_size']),
                         (1, 1))
        for j in by.values():
            self.assertEqual((j['health'], j['hosts'], j['host_rank'],
                              j['joined'], j['broken']),
                             ('ok', 1, 0, True, False), j)
        # each job's operations move on its own counter
        first = {j['job']: j['operations_done']
                 for j in ctl_json(sock, 'jobs')}
        wait_for(lambda: all(j['operations_done'] > first[j['job']]
                             for j in ctl_json(sock, 'jobs')),
                 30, 'both jobs to progress')

        # the endpoint: the same two jobs, the daemon's numbers apart
        text = self.d.scrape()
        m = parse_metrics(text)
        self.assertEqual(job_ids(m), {'alpha', 'beta'})
        self.assertEqual(value(m, 'tally_info', mode='service'), 1)
        self.assertEqual(value(m, 'tally_jobs'), 2)
        self.assertEqual(value(m, 'tally_clients'), 3)
        self.assertEqual(value(m, 'tally_job_clients', job='alpha'), 2)
        self.assertEqual(value(m, 'tally_job_clients', job='beta'), 1)
        self.assertEqual(len([k for k in m if k[0] ==
                              'tally_client_outstanding_operations' and
                              ('job', 'alpha') in k[1]]), 2)
        self.assertGreater(value(m, 'tally_operations_total', job='beta',
                                 result='done'), 0)
        if shutil.which('promtool'):
            r = subprocess.run(['promtool', 'check', 'metrics'], input=text,
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

        # tally-ctl's text, one block or row per job
        txt = ctl(sock, 'status').stdout
        self.assertIn('(service)', txt)
        self.assertIn('jobs 2 (started 2, ended 0), clients 3,', txt)
        self.assertRegex(txt, r'job alpha: ok\n.*\n  clients 2 of 2,')
        self.assertRegex(txt, r'job beta: ok\n.*\n  clients 1 of 1,')
        txt = ctl(sock, 'jobs').stdout
        self.assertRegex(txt, r'(?m)^alpha +ok +2/2 +1 +0 +- ')
        self.assertRegex(txt, r'(?m)^beta +ok +1/1 +1 +0 +- ')
        lines = ctl(sock, 'counters').stdout.splitlines()
        a, b = lines.index('# job alpha'), lines.index('# job beta')
        self.assertFalse([ln for ln in lines[:min(a, b)] if 'job=' in ln])
        for start, job in ((a, 'alpha'), (b, 'beta')):
            block = lines[start + 1:]
            block = block[:block.index('') if '' in block else len(block)]
            self.assertTrue(block)
            self.assertFalse([ln for ln in block
                              if '{job=%s' % job not in ln], job)
        top = ctl(sock, 'top', '-n', '2')
        self.assertEqual(top.returncode, 0, top.stderr)
        self.assertRegex(top.stdout, r'(?m)^alpha +ok +2/2 ')
        self.assertRegex(top.stdout, r'(?m)^beta +ok +1/1 ')
        # alpha's two clients all-reduce in their fast-path table
        # (docs/local-fast-path.md): counted in OPS/S, not timed by the
        # daemon; beta, alone, through the daemon
        self.assertRegex(top.stdout, r'(?m)^alpha +ok +2/2 +[1-9]')
        self.assertNotRegex(top.stdout, r'job alpha +le_')
        self.assertRegex(top.stdout, r'job beta +le_4KiB')
        self.assertEqual(ctl_json(sock, 'peers'), [])

        # --job narrows every command to one job
        one = ctl_json(sock, '--job', 'beta', 'status')
        self.assertEqual([j['job'] for j in one['jobs']], ['beta'])
        self.assertEqual(one['clients'], 3)         # the daemon's still
        cs = ctl_json(sock, '--job', 'alpha', 'counters')
        self.assertTrue(cs)
        self.assertEqual({c['labels'].get('job') for c in cs}, {'alpha'})
        r = ctl(sock, '--job', 'gamma', 'jobs')
        self.assertEqual(r.returncode, 1)
        self.assertIn("no job 'gamma'", r.stderr)

        # the clients leave: the jobs end after the linger, and their
        # operations move to the ended jobs' counter
        seen = sum(j['operations_done'] for j in ctl_json(sock, 'jobs'))
        self.stop_clients()
        st = wait_for(lambda: (lambda s: s if not s['jobs'] else None)(
            ctl_json(sock, 'status')), 30, 'the jobs to end')
        self.assertEqual((st['clients'], st['jobs_started'],
                          st['jobs_ended']), (0, 2, 2))
        m = parse_metrics(self.d.scrape())
        self.assertEqual(job_ids(m), set())
        self.assertEqual(value(m, 'tally_jobs'), 0)
        self.assertGreaterEqual(value(m, 'tally_ended_jobs_operations_total',
                                      result='done'), seen)
        self.assertEqual(ctl(sock, 'jobs').stdout.count('\n'), 1)  # header


if __name__ == '__main__':
    BUILD = os.path.abspath(sys.argv[1])
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:], verbosity=2)
