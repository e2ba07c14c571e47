#!/usr/bin/env python3
"""tally-sim --calibrate reads tools/experiment's CSV as it is.

Checks: comment lines and FAILED rows are skipped; an empty field is a
field (a row of an older CSV without the replay's cost model), and such
a row predicts what a CSV without those columns predicts; MG-WFBP plans
with the replay's measured a and b when the row has them, so a cheap
cost model (little merging) predicts another throughput than the
simulated one; the error column and the median figure follow from the
measured and predicted columns.

usage: test_calibrate.py TALLY_SIM
"""
import os
import subprocess
import sys
import tempfile

SIM = sys.argv[1]
ROWS = [  # net, method, samples_per_s, set, a_us, b_ns_per_byte
    ("10g", "mgwfbp", "500", "check", "", ""),
    ("10g", "mgwfbp", "500", "check", "1", "0.0001"),
    ("10g", "wfbp-a2a", "FAILED", "tune", "", ""),
    ("100g", "wfbp-a2a", "900", "tune", "", ""),
]


def calibrate(text):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(text)
    try:
        out = subprocess.run([SIM, "--calibrate", f.name, "--figures"],
                             capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    if out.returncode:
        sys.exit(f"tally-sim failed: {out.stderr}")
    table = [line.split() for line in out.stdout.splitlines()
             if line.startswith("resnet50")]
    fig = [line for line in out.stdout.splitlines()
           if line.startswith("figure sim_calibration_median_abs_err")]
    return table, fig


def main():
    with_ab = "# measured\nmodel,net,method,hosts,dilation,iterations," \
              "samples_per_s,set,a_us,b_ns_per_byte\n" + "".join(
                  f"resnet50,{n},{m},4,20,2,{s},{st},{a},{b}\n"
                  for n, m, s, st, a, b in ROWS)
    without = "model,net,method,hosts,dilation,iterations,samples_per_s," \
              "set\n" + "".join(f"resnet50,{n},{m},4,20,2,{s},{st}\n"
                                for n, m, s, st, _, _ in ROWS)
    t1, fig = calibrate(with_ab)
    t0, _ = calibrate(without)
    fails = []
    if len(t1) != 3 or len(t0) != 3:
        fails.append(f"expected 3 rows (FAILED skipped): {t1} / {t0}")
    else:
        empty, cheap, wfbp = (float(r[5]) for r in t1)
        if abs(empty - float(t0[0][5])) > 1e-9:
            fails.append(f"an empty a_us changed the prediction: {empty} "
                         f"against {t0[0][5]}")
        if abs(float(t0[1][5]) - empty) > 1e-9:
            fails.append("the same row without a and b predicted "
                         "differently")
        if abs(cheap - empty) / empty < 0.05:
            fails.append(f"the replay's a and b were not used: {cheap} "
                         f"against {empty}")
        if abs(wfbp - float(t0[2][5])) > 1e-9:
            fails.append("a row without a plan changed with the columns")
        for r in t1:
            meas, pred, err = float(r[4]), float(r[5]), float(r[6][:-1])
            if abs(100 * (pred - meas) / meas - err) > 0.06:
                fails.append(f"error column wrong: {r}")
        errs = sorted(abs(float(r[5]) - float(r[4])) / float(r[4])
                      for r in t1)
        if len(fig) != 1 or abs(float(fig[0].split()[2]) - errs[1]) > 6e-4:
            fails.append(f"median figure wrong: {fig} against {errs}")
    for f in fails:
        print("FAIL:", f)
    print(f"{0 if fails else 1} passed, {1 if fails else 0} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
