"""Holoscan Sensor Bridge: an emulated device and the host that receives it.

    import rocelink
    with rocelink.hsb.Emulator(ip="127.0.0.2", sensor="imx274-1080p-raw10", fps=30):
        with rocelink.hsb.Receiver(device="127.0.0.2", sensor="imx274-1080p-raw10") as rx:
            for f in rx.frames(count=30, timeout=5.0):
                a = f.array()      # read-only uint8 view of the ring page, no copy
                img = f.image()    # uint16 (height, width) Bayer
"""
from ._native import Emulator, Frame, FrameIter, Receiver

__all__ = ["Emulator", "Receiver", "Frame", "FrameIter"]
