"""CPU of a Python loop receiving frames against `rocelink receive` on the same stream.

An emulator (`rocelink emulate`, its own process) streams IMX274 4K RAW10 at 60 fps; first
`rocelink receive` takes N frames, then this process takes N frames through
rocelink.hsb.Receiver, touching each frame's array (its sum of one byte per page, so the
bytes are really read). Each side's CPU time is its process's user+system time over the
same frame count; the ratio is Python / CLI. Repeats and reports the median.

    python3 python/bench/receive_cpu.py [--frames 600] [--repeat 3] [--rocelink target/release/rocelink]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import rocelink

p = argparse.ArgumentParser()
p.add_argument("--frames", type=int, default=600)
p.add_argument("--repeat", type=int, default=3)
p.add_argument("--rocelink", default="target/release/rocelink")
p.add_argument("--dev", default="127.0.77.2")
a = p.parse_args()

SENSOR = "imx274-4k-raw10"
emu = subprocess.Popen([a.rocelink, "emulate", "--ip", a.dev, "--sensor", SENSOR, "--fps", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.0)


def cli_cpu():
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([a.rocelink, "receive", "--device", a.dev, "--sensor", SENSOR,
                    "--frames", str(a.frames), "--quiet"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def python_cpu():
    t0 = time.process_time()
    good = 0
    with rocelink.hsb.Receiver(device=a.dev, sensor=SENSOR) as rx:
        for f in rx.frames(count=a.frames, timeout=5.0):
            good += f.good
            f.array()[::4096].sum()
    if good < a.frames * 0.99:
        sys.exit(f"only {good} of {a.frames} frames good")
    return time.process_time() - t0


try:
    runs = []
    for _ in range(a.repeat):
        c, py = cli_cpu(), python_cpu()
        runs.append({"cli_s": round(c, 3), "python_s": round(py, 3), "ratio": round(py / c, 3)})
    print(json.dumps({"frames": a.frames, "runs": runs,
                      "median_ratio": statistics.median(r["ratio"] for r in runs)}))
finally:
    emu.terminate()
    emu.wait()
