#!/usr/bin/env python3
"""Run the meson test suite of a build directory and print one closing line,
'N passed, N failed[, N skipped]', counting cmocka test cases one by one
(a cmocka binary holds many) and every other test as one."""
import json
import re
import subprocess
import sys

PASSED = re.compile(r"^\[  PASSED  \] (\d+) test\(s\)\.", re.M)
FAILED = re.compile(r"^\[  FAILED  \] (\d+) test\(s\), listed below", re.M)
SKIPPED = re.compile(r"^\[  SKIPPED \] (\d+) test\(s\), listed below", re.M)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    extra = sys.argv[2:]
    rc = subprocess.call(["meson", "test", "-C", build, "--print-errorlogs"]
                         + extra)
    passed = failed = skipped = 0
    with open(f"{build}/meson-logs/testlog.json") as log:
        for line in log:
            t = json.loads(line)
            # cmocka prints its case lines to stdout, its summary to stderr
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            ok = t["result"] in ("OK", "EXPECTEDFAIL")
            if t["result"] == "EXPECTEDFAIL":
                # a should_fail test (a mutant the suite must catch): its
                # cmocka failures are the pass
                passed += 1
                continue
            p = sum(int(n) for n in PASSED.findall(out))
            f = sum(int(n) for n in FAILED.findall(out))
            s = sum(int(n) for n in SKIPPED.findall(out))
            if p + f + s == 0:
                # not cmocka (or it crashed before its summary)
                if t["result"] == "SKIP":
                    skipped += 1
                elif ok:
                    passed += 1
                else:
                    failed += 1
                continue
            if not ok and f == 0:
                f = 1  # cmocka reported passes, then the binary died
            passed, failed, skipped = passed + p, failed + f, skipped + s
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    sys.exit(1 if rc != 0 or failed else 0)


if __name__ == "__main__":
    main()
