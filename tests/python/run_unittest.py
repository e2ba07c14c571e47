#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Run one unittest module and print cmocka's summary lines, so that
tests/run-suite.py counts its cases one by one like the C tests'.

    run_unittest.py tests/python/test_binding.py [-k PATTERN]

Runs with the interpreter that has Debian's python3-torch and numpy
(/usr/bin/python3); the package comes from python/ of the checkout.
"""
import importlib.util
import sys
import unittest
from pathlib import Path


def main():
    path = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(path.parent))
    sys.path.insert(0, str(path.parents[2] / "python"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    loader = unittest.TestLoader()
    if len(sys.argv) > 3 and sys.argv[2] == "-k":
        loader.testNamePatterns = ["*%s*" % sys.argv[3]]
    suite = loader.loadTestsFromModule(mod)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    bad = result.failures + result.errors
    passed = result.testsRun - len(bad) - len(result.skipped)
    print("[  PASSED  ] %d test(s)." % passed)
    if result.skipped:
        print("[  SKIPPED ] %d test(s), listed below:" % len(result.skipped))
    if bad:
        print("[  FAILED  ] %d test(s), listed below:" % len(bad))
        for test, _ in bad:
            print("[  FAILED  ] %s" % test.id())
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
