#!/usr/bin/env python3
"""Congestion control on 4 emulated hosts (tools/net4-bench, which needs
root: network namespaces and tbf), issue 13's congestion tests:

  shaped    links shaped to 200 Mbit/s, a window allowed to grow to 1024
            (without congestion control 80 % of the packets were
            retransmissions and algbw fell to 0.09 R): the workers
            retransmit at most 1 % of their packets, every result is
            exact, algbw >= 0.9 R (in one of up to 5 runs);
  tcpshare  one TCP stream crossing host 0's shaped uplink while tally
            all-reduces: the stream keeps at least 0.35 R.

A link-bound property (200 Mbit/s is a fraction of what the hosts' CPUs
carry), so the thresholds hold on a busy 2-core machine too."""
import os
import re
import subprocess
import sys

build, bench = sys.argv[1], sys.argv[2]
errors = []


def cpu_times():
    """The machine's CPU times (user .. steal) from /proc/stat."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def run(scenario, size):
    before = cpu_times()
    p = subprocess.run([sys.executable, bench, build, "--scenarios",
                        scenario, "--sizes", size, "--tally-only",
                        "--set", "dataplane.window=1024", "--csv",
                        "/dev/null"], capture_output=True, text=True,
                       timeout=600)
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    if p.returncode:
        errors.append(f"{scenario}: net4-bench exit status {p.returncode}")
    # what else took the CPUs: a run that falls short on a VM whose host
    # took its cores (steal) says so in the log
    used = [b - a for a, b in zip(before, cpu_times())]
    total = sum(used) or 1
    print(f"{scenario}: cpu over the run: steal {100 * used[7] / total:.1f} %, "
          f"idle {100 * used[3] / total:.1f} %, load average "
          f"{os.getloadavg()[0]:.1f}")
    if "CHECK FAILED" in p.stdout:
        errors.append(f"{scenario}: tally-bench found a wrong result")
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r"^figure (\S+) ([0-9.]+) ", p.stdout, re.M)}


# algbw is a mean over 64 all-reduces of 168 ms each: a stall of the VM's
# host (seen once in CI: 0.797 R with 40 retransmissions, 0.951 R on the
# rerun) can cost a run its margin, so up to SHAPED_RUNS runs are made and
# one must reach 0.9 R; every run must keep retransmissions under 1 % and
# every result exact.  A window without congestion control gives 0.09 R.
# Three runs were not enough once: 0.876, 0.731 and 0.851 R in a CI run
# (a few minutes of a noisy host), 0.952 R on the same build alone; a run
# takes under a minute, and a quiet machine passes on the first.
SHAPED_RUNS = 5
fracs = []
for attempt in range(SHAPED_RUNS):
    fig = run("shaped", "4M")
    retx = fig.get("net4_shaped_retx_frac")
    frac = fig.get("net4_shaped_algbw_frac_of_link_4MiB")
    if retx is None or retx > 0.01:
        errors.append(f"retransmissions {retx} of the packets sent, > 1 %")
    fracs.append(frac)
    if errors or (frac is not None and frac >= 0.9):
        break
if not errors and (fracs[-1] is None or fracs[-1] < 0.9):
    errors.append(f"algbw {fracs} of the link in {len(fracs)} runs, "
                  "none >= 0.9")
fig = run("tcpshare", "16M")
share = fig.get("net4_tcp_share_of_link")
if share is None or share < 0.35:
    errors.append(f"the TCP stream kept {share} of the link, < 0.35")
for e in errors:
    print(f"FAIL: {e}")
sys.exit(1 if errors else 0)
