"""The examples in python/examples run and say what they should (on loopback networks
of the tests' own)."""
import os
import subprocess
import sys

import numpy as np

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def run(*args):
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, args[0]), *args[1:]],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_ims_send_image(net):
    dev, _ = net
    assert "CRC-32C ok, image intact" in run("ims_send_image.py", dev.rsplit(".", 1)[0])


def test_shots_to_npy(net, tmp_path):
    dev, _ = net
    f = tmp_path / "shots.npy"
    out = run("shots_to_npy.py", str(f), "20", dev.rsplit(".", 1)[0])
    data = np.load(f)
    assert data.shape[1:] == (2000, 96) and data.dtype == np.uint16 and len(data) >= 18, out


def test_live_receive_without_matplotlib(net):
    dev, _ = net
    out = run("live_receive.py", "5", dev.rsplit(".", 1)[0])
    assert out.count("CRC recomputed matches") == 5, out
