"""Shared pieces: each test gets its own loopback addresses, so tests never collide with
each other or with a program already holding 127.0.0.1:4791."""
import itertools
import os

import pytest

_net = itertools.count(int(os.environ.get("ROCELINK_PYTEST_NET", "150")))


@pytest.fixture
def net():
    """A fresh 127.0.N.0/24 for one test: (device IP, host IP)."""
    n = next(_net)
    return f"127.0.{n}.2", f"127.0.{n}.1"
