"""Shared pieces: each test gets its own loopback addresses, so tests never collide with
each other or with a program already holding 127.0.0.1:4791."""
import itertools
import json
import os
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
