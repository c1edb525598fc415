"""Send a 6-bit image to an IMS buffer unit and read it back as the unit consumed it.

    python3 python/examples/ims_send_image.py [NET]   (NET: loopback /24, 127.0.0)
"""
import sys

import numpy as np

import rocelink

net = sys.argv[1] if len(sys.argv) > 1 else "127.0.0"

rows, columns = 256, 256  # the specification's image size
img = ((np.arange(rows)[:, None] + np.arange(columns)[None, :]) % 64).astype(np.uint8)
with rocelink.ims.BufferUnit(bind=f"{net}.1", ring=16 << 20) as unit:
    with rocelink.ims.Worker(server=unit.address, bind=f"{net}.2") as w:
        w.send_image6(img)  # returns once the unit ACKed it
    frame = next(iter(unit.frames(count=1, timeout=5.0)))
    back = frame.array()[64:].reshape(columns, rows).T  # §4 is column-major after the header
    print(f"frame at VA {frame.va:#x}: CRC-32C {'ok' if frame.crc_ok else 'BAD'}, image {'intact' if (back == img).all() else 'CHANGED'}")
