# SPDX-License-Identifier: BSD-3-Clause
"""The short convergence check of issue 15: every communication method of
tools/compress-study-worker.py trains the digits MLP for a few steps on 2
ranks under torchrun (the tally backend starts the job's tallyd), and the
loss must fall: the mean of the last 5 steps' losses below 0.8 x the
first 5 steps', and both ranks ending with the same parameters."""
import importlib.util
import json
import re
import unittest
from pathlib import Path

from test_torch_local import torchrun

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tools" / "compress-study-worker.py"
STEPS = 24


def methods():
    spec = importlib.util.spec_from_file_location("csw", WORKER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.METHODS)


class TestConvergence(unittest.TestCase):
    """One torchrun launch trains every method in turn (a launch costs
    more than the training)."""
    @classmethod
    def setUpClass(cls):
        cls.status, cls.out = torchrun(WORKER, 2, "--method", "all",
                                       "--backend", "tally", "--max-steps",
                                       str(STEPS), "--lr", "0.05")

    def run_method(self, method):
        out = self.out
        self.assertIsNotNone(self.status, "timed out:\n" + out[-3000:])
        self.assertEqual(self.status, 0, out[-3000:])
        runs = [r for r in (json.loads(m) for m in re.findall(
                r"^\[default\d\]:(\{.*\})$", out, re.M))
                if r["method"] == method]
        self.assertEqual(len(runs), 2, out[-3000:])
        for r in runs:
            losses = r["losses"]
            self.assertEqual(len(losses), STEPS)
            first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
            self.assertLess(last, 0.8 * first,
                            "%s rank %d: loss %.3f -> %.3f"
                            % (method, r["rank"], first, last))
        self.assertEqual(runs[0]["checksum"], runs[1]["checksum"])


for _name in methods():
    setattr(TestConvergence, "test_" + _name,
            lambda self, m=_name: self.run_method(m))

if __name__ == "__main__":
    unittest.main()
