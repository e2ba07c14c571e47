# SPDX-License-Identifier: BSD-3-Clause
"""A real tallyd for the Python tests: started in a fresh temporary
folder, waited for until its socket accepts, stopped and removed after.
$TALLYD (set by meson) names the binary; else the build tree's."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def build_dir():
    """$TALLY_BUILD (set by meson), else the checkout's build/."""
    return Path(os.environ.get("TALLY_BUILD") or
                Path(__file__).resolve().parents[2] / "build")


def tallyd_binary():
    """$TALLYD (set by meson), else the build's."""
    return os.environ.get("TALLYD") or str(build_dir() / "ctrl" / "tallyd")


def _accepts(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
            return True
        except OSError:
            return False


class Tallyd:
    """tallyd --local-size N [extra...] on a socket of its own."""

    def __init__(self, local_size=1, extra=(), env=None):
        self.dir = tempfile.mkdtemp(prefix="tally-pytest-")
        self.sock = os.path.join(self.dir, "tallyd.sock")
        self.log = os.path.join(self.dir, "tallyd.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [tallyd_binary(), "--socket", self.sock, "--local-size",
                 str(local_size), *extra],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True)
        deadline = time.monotonic() + 10
        while not _accepts(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("tallyd did not start: " +
                                   self.log_text())
            time.sleep(0.01)

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self):
        """SIGTERM; returns the exit status (None if it had to be
        killed)."""
        status = None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                status = self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        else:
            status = self.proc.returncode
        shutil.rmtree(self.dir, ignore_errors=True)
        return status
