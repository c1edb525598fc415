"""Receive an emulated IMX274 stream and show it live (matplotlib, if installed; otherwise
print each frame's verdict). NET: the loopback /24 to use (127.0.0 by default).

    python3 python/examples/live_receive.py [FRAMES [NET]]
"""
import sys
import zlib

import rocelink

frames = int(sys.argv[1]) if len(sys.argv) > 1 else 60
net = sys.argv[2] if len(sys.argv) > 2 else "127.0.0"
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

with rocelink.hsb.Emulator(ip=f"{net}.2", sensor="imx274-1080p-raw10", fps=30):
    with rocelink.hsb.Receiver(device=f"{net}.2", bind=f"{net}.1", sensor="imx274-1080p-raw10") as rx:
        shown = None
        for f in rx.frames(count=frames, timeout=5.0):
            ok = zlib.crc32(f.array()) ^ 0xFFFFFFFF == f.crc  # HSB's JAMCRC
            if plt is None:
                print(f"frame {f.number}: good {f.good}, CRC recomputed {'matches' if ok else 'DIFFERS'}")
                continue
            img = f.image()[::4, ::4]  # a quarter-size preview
            if shown is None:
                shown = plt.imshow(img, cmap="gray", vmin=0, vmax=1023)
            else:
                shown.set_data(img)
            plt.title(f"frame {f.number} ({'good' if f.good else 'damaged'})")
            plt.pause(0.001)
        print(rx.stop())
