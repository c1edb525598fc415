"""The IMS streaming protocol: a buffer unit and a worker.

    import numpy as np, rocelink
    with rocelink.ims.BufferUnit(bind="127.0.0.1", ring=1 << 30) as unit:
        with rocelink.ims.Worker(server="127.0.0.1", bind="127.0.0.2") as w:
            w.send(np.zeros(1 << 20, np.uint8))        # returns when ACKed
            w.send_image6(img)                          # uint8 (rows, columns), each < 64
        for fr in unit.frames(count=2, timeout=5.0):    # consumed frames
            fr.va, fr.crc_ok, fr.array()
"""
from ._native import BufferUnit, UnitFrame, UnitFrameIter, Worker

__all__ = ["BufferUnit", "Worker", "UnitFrame", "UnitFrameIter"]
