"""Trigger an emulated ultrasound probe and save every complete shot to a numpy file.

    python3 python/examples/shots_to_npy.py shots.npy [SHOTS [NET]]   (NET: loopback /24, 127.0.0)
"""
import sys

import numpy as np

import rocelink

out = sys.argv[1] if len(sys.argv) > 1 else "shots.npy"
count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
net = sys.argv[3] if len(sys.argv) > 3 else "127.0.0"
with rocelink.ultrasound.Probe(bind=f"{net}.1", channels=96, samples=2000) as probe:
    with rocelink.ultrasound.Host(probe=probe.trigger_addr, bind=f"{net}.2") as host:
        shots = [s.array() for s in host.shots(count=count, trigger_hz=1000, timeout=5.0) if s.complete]
data = np.stack(shots)  # (shots, samples, channels), uint16
np.save(out, data)
print(f"{len(shots)} of {count} shots complete -> {out} {data.shape}")
