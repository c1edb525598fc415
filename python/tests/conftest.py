"""Shared pieces: each test gets its own loopback addresses, so tests never collide with
each other or with a program already holding 127.0.0.1:4791."""
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

_net = itertools.count(int(os.environ.get("ROCELINK_PYTEST_NET", "150")))


@pytest.fixture
def net():
    """A fresh 127.0.N.0/24 for one test: (device IP, host IP)."""
    n = next(_net)
    return f"127.0.{n}.2", f"127.0.{n}.1"


class ViewPage:
    """What a browser asks a live view for."""

    def status(self, url):
        """The numbers the page shows (`status.json`); asking marks the page as looking."""
        with urllib.request.urlopen(url + "status.json", timeout=5) as r:
            return json.load(r)

    def picture(self, url):
        """The latest picture (`frame.png`), asked for until one is made (10 s)."""
        t0 = time.monotonic()
        while True:
            try:
                with urllib.request.urlopen(url + "frame.png", timeout=5) as r:
                    return r.read()
            except urllib.error.HTTPError:
                assert time.monotonic() - t0 < 10, "no picture"
                time.sleep(0.1)

    def gone(self, url):
        """True when nothing serves the view any more."""
        try:
            urllib.request.urlopen(url + "status.json", timeout=2)
        except OSError:
            return True
        return False


@pytest.fixture
def view_page():
    """Reads a live view as the page does."""
    return ViewPage()


class Cli:
    """The rocelink command line the summaries are compared with (``ROCELINK_BIN``)."""

    def __init__(self, exe):
        self.exe = exe

    def start(self, *args, prefix=()):
        """Run ``rocelink ARGS`` in the background (after ``prefix``, such as ``ip netns exec
        NS``); its stderr goes to a file (a pipe nobody reads until the end could fill and
        stall it)."""
        log = tempfile.TemporaryFile("w+")
        proc = subprocess.Popen([*prefix, self.exe, *args], stdout=subprocess.PIPE, stderr=log,
                                text=True)
        proc.log = log
        return proc

    def summary(self, proc, interrupt=False, timeout=60):
        """The JSON summary ``proc`` ends with (after a Ctrl-C with ``interrupt``); it must
        exit 0."""
        try:
            if interrupt:
                proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=timeout)
        finally:
            proc.kill()
        proc.log.seek(0)
        assert proc.returncode == 0, proc.log.read()
        # every line it printed, for a test that reads more than the summary
        self.lines = [json.loads(line) for line in out.splitlines()]
        return self.lines[-1]

    def run(self, *args, timeout=60, prefix=()):
        """Run ``rocelink ARGS`` to its end: its JSON summary."""
        return self.summary(self.start(*args, prefix=prefix), timeout=timeout)

    @staticmethod
    def retry(f, limit=10):
        """``f()``, tried again while a process just started binds its ports (``limit`` s)."""
        t0 = time.monotonic()
        while True:
            try:
                return f()
            except Exception:  # noqa: BLE001 - any failure before the peer listens
                if time.monotonic() - t0 > limit:
                    raise
                time.sleep(0.2)


@pytest.fixture
def cli():
    """The CLI to compare with; the test is skipped where ``ROCELINK_BIN`` names none."""
    exe = os.environ.get("ROCELINK_BIN")
    if not exe:
        pytest.skip("ROCELINK_BIN names the CLI to compare with")
    return Cli(exe)



@pytest.fixture
def veth():
    """Two network namespaces joined by a veth pair, A's end 10.215.0.1/24 and B's
    10.215.0.2/24, removed afterwards: ``(A, B)``, each namespace named as its end of the
    pair. Skipped without root and iproute2."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    tag = f"rlpy{os.getpid() % 100000}"
    a, b = f"{tag}a", f"{tag}b"

    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True)

    try:
        ip("netns", "add", a)
        ip("netns", "add", b)
        ip("link", "add", a, "netns", a, "type", "veth", "peer", "name", b, "netns", b)
        for end, addr in ((a, "10.215.0.1/24"), (b, "10.215.0.2/24")):
            ip("-n", end, "addr", "add", addr, "dev", end)
            ip("-n", end, "link", "set", end, "up")
            ip("-n", end, "link", "set", "lo", "up")
        yield a, b
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
