#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Check tools/models/*.csv: known parameter totals, tensor counts, backward
order, calibration to the study's single-GPU throughput, and that
gen_profiles.py regenerates them byte for byte.  Exit 0 when all hold.

Usage: check_profiles.py [DIR]   (default: the directory of this script)
"""
import os
import subprocess
import sys
import tempfile

# Independent of gen_profiles.py on purpose: the published totals.
EXPECT = {
    # name: (parameters, tensors, batch, samples/s)
    'resnet50': (25557032, 161, 64, 253.1),
    'bert_base': (109482240, 199, 64, 212.8),
    'bert_large': (335141888, 391, 8, 49.0),
}
HEADER = 'order,name,layer,elements,fwd_us,bwd_us'


def check(path, params, tensors, batch, tput):
    errs = []
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0] != HEADER:
        return ['%s: header is not %r' % (path, HEADER)]
    rows = [l.split(',') for l in lines[1:]]
    total, time_us, prev_layer, names = 0, 0.0, None, set()
    seen_layers = set()
    for i, r in enumerate(rows):
        if len(r) != 6 or int(r[0]) != i:
            errs.append('%s: row %d malformed: %r' % (path, i, r))
            return errs
        layer, n = int(r[2]), int(r[3])
        fwd, bwd = float(r[4]), float(r[5])
        if n <= 0 or fwd < 0 or bwd < 0 or r[1] in names:
            errs.append('%s: row %d bad values' % (path, i))
        names.add(r[1])
        if prev_layer is not None and layer != prev_layer:
            if layer > prev_layer or layer in seen_layers:
                errs.append('%s: row %d breaks backward order' % (path, i))
            seen_layers.add(prev_layer)
        prev_layer = layer
        total += n
        time_us += fwd + bwd
    if prev_layer != 0:
        errs.append('%s: the input layer is not 0' % path)
    if total != params:
        errs.append('%s: %d parameters, expected %d' % (path, total, params))
    if len(rows) != tensors:
        errs.append('%s: %d tensors, expected %d' % (path, len(rows),
                                                      tensors))
    want = batch / tput * 1e6
    if abs(time_us - want) > want * 1e-3:
        errs.append('%s: fwd+bwd %.1f us, expected %.1f us' %
                    (path, time_us, want))
    return errs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    d = sys.argv[1] if len(sys.argv) > 1 else here
    errs = []
    for name, exp in EXPECT.items():
        errs += check(os.path.join(d, name + '.csv'), *exp)
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.executable, os.path.join(here,
                            'gen_profiles.py'), '--out', tmp],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if r.returncode:
            errs.append('gen_profiles.py failed:\n' + r.stdout)
        for name in EXPECT:
            try:
                with open(os.path.join(tmp, name + '.csv'), 'rb') as f:
                    new = f.read()
                with open(os.path.join(d, name + '.csv'), 'rb') as f:
                    old = f.read()
            except OSError as e:
                errs.append(str(e))
                continue
            if new != old:
                errs.append('%s.csv differs from a fresh gen_profiles.py'
                            % name)
    for e in errs:
        print('FAIL', e)
    if not errs:
        print('ok: %s' % ', '.join(sorted(EXPECT)))
    return 1 if errs else 0


if __name__ == '__main__':
    sys.exit(main())
