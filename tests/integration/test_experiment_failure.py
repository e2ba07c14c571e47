#!/usr/bin/env python3
"""One failing cell of tools/experiment must not hide the others'
figures: it is marked FAILED, the rest are printed, the exit status is 1."""
import os
import re
import subprocess
import sys
import tempfile

build, tool = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory(prefix="tally-expfail-") as tmp:
    p = subprocess.run([sys.executable, tool, build, "--ci", "--fresh",
                        "--nets", "10g", "--methods", "wfbp-ps,bsp-ps",
                        "--inject-failure", "bsp-ps", "--timeout", "120",
                        "--csv", os.path.join(tmp, "x.csv")],
                       capture_output=True, text=True, timeout=280)
out = p.stdout
print(out)
print(p.stderr, file=sys.stderr)
errors = []
if p.returncode != 1:
    errors.append(f"exit status {p.returncode}, expected 1")
if not re.search(r"^figure replay_tiny_wfbp-ps_10g_samples_per_s "
                 r"[0-9.]+ samples/s$", out, re.M):
    errors.append("the measured cell's figure line is missing")
if not re.search(r"^figure replay_tiny_bsp-ps_10g_samples_per_s FAILED "
                 r"samples/s$", out, re.M):
    errors.append("the failed cell is not marked in a figure line")
if not re.search(r"^bsp-ps +FAILED$", out, re.M):
    errors.append("the failed cell is not marked in the table")
for e in errors:
    print(f"FAIL: {e}")
sys.exit(1 if errors else 0)
