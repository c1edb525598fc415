"""Type stubs of the native extension (the classes ``rocelink.hsb`` exports)."""
from typing import Iterator, Optional

import numpy as np
import numpy.typing as npt

class Emulator:
    """An emulated HSB device on background threads: ECB on ``ip``:``control_port``,
    streaming ``sensor`` frames at ``fps`` to whatever host configures it. Use it in a
    ``with`` block, or call ``stop()``."""
    def __init__(
        self,
        ip: str = "127.0.0.2",
        sensor: str = "pattern",
        fps: float = 30.0,
        frame_size: Optional[int] = None,
        control_port: int = 8192,
    ) -> None: ...
    @property
    def control_addr(self) -> str: ...
    def stop(self) -> Optional[dict]: ...
    def __enter__(self) -> "Emulator": ...
    def __exit__(self, *exc: object) -> bool: ...

class Frame:
    """One received frame; ``array()`` is a read-only view of its ring page (no copy),
    which is not written while the frame or any array of it lives."""
    number: int
    vp: int
    good: bool
    complete: bool
    crc: int
    crc_ok: Optional[bool]
    bytes: int
    psn: int
    dropped_packets: int
    timestamp_ns: int
    metadata_ns: int
    def array(self) -> npt.NDArray[np.uint8]: ...
    def copy(self) -> npt.NDArray[np.uint8]: ...
    def image(self) -> npt.NDArray[np.uint16]: ...
    def __len__(self) -> int: ...

class FrameIter(Iterator[Frame]):
    def __iter__(self) -> "FrameIter": ...
    def __next__(self) -> Frame: ...

class Receiver:
    """The HSB host: configures the device at ``device`` over ECB (its camera too, with
    ``camera="imx274"``), receives every virtual port on a thread of its own, verifies each
    frame and hands them to ``frames()``; frames Python does not take in time are dropped
    (``dropped``), never waited for. ``frame_size=None``: the sensor's (``sensor=`` or the
    camera mode; IMX274 1080p RAW10 when neither is given)."""
    def __init__(
        self,
        device: str,
        frame_size: Optional[int] = None,
        pages: int = 4,
        sensor: Optional[str] = None,
        camera: Optional[str] = None,
        mode: Optional[str] = None,
        vps: list[int] = [0],
        bind: Optional[str] = None,
        port: int = 0,
        mtu: Optional[int] = None,
        record: Optional[str] = None,
        depth: Optional[int] = None,
    ) -> None: ...
    def frames(self, count: Optional[int] = None, timeout: float = 5.0) -> FrameIter: ...
    @property
    def notes(self) -> list[str]: ...
    @property
    def dropped(self) -> int: ...
    def stop(self) -> dict: ...
    def __enter__(self) -> "Receiver": ...
    def __exit__(self, *exc: object) -> bool: ...
