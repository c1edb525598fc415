"""Type stubs of the native extension (the classes ``rocelink.hsb`` exports)."""
from typing import Iterator, Optional, Union

import numpy as np
import numpy.typing as npt

class Emulator:
    """An emulated HSB device on background threads: ECB on ``ip``:``control_port``,
    streaming ``sensor`` frames at ``fps`` to the host that configures it — a host on
    loopback or the device's subnet, or in ``allow`` (address prefixes such as
    ``"192.168.1.0/24"``; ``"any"`` for every host). Use it in a ``with`` block, or call
    ``stop()``."""
    def __init__(
        self,
        ip: str = "127.0.0.2",
        sensor: str = "pattern",
        fps: float = 30.0,
        frame_size: Optional[int] = None,
        control_port: int = 8192,
        allow: Optional[list[str]] = None,
    ) -> None: ...
    @property
    def control_addr(self) -> str: ...
    def stop(self) -> Optional[dict]:
        """Stop; the emulator's summary (``rocelink emulate --json``'s keys and values, less
        ``counters``) and its ``notes``; None the second time."""
    def __enter__(self) -> "Emulator": ...
    def __exit__(self, *exc: object) -> bool: ...

class Frame:
    """One received frame; ``array()`` is a read-only view of its ring page (no copy),
    which is not written while the frame or any array of it lives."""
    number: int
    vp: int
    good: bool
    complete: bool
    crc: int  # HSB's form (JAMCRC): zlib.crc32(data) ^ 0xFFFFFFFF
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
    camera mode; IMX274 1080p RAW10 when neither is given). ``view=8080`` (or
    ``"IP:PORT"``) serves the live view the CLI's ``--view`` serves, at ``view_url``."""
    def __init__(
        self,
        device: str,
        frame_size: Optional[int] = None,
        pages: int = 4,
        sensor: Optional[str] = None,
        camera: Optional[str] = None,
        mode: Optional[Union[int, str]] = None,
        vps: list[int] = [0],
        bind: Optional[str] = None,
        port: int = 0,
        mtu: Optional[int] = None,
        xdp: Optional[str] = None,
        record: Optional[str] = None,
        depth: Optional[int] = None,
        view: Optional[Union[int, str]] = None,
        view_public: bool = False,
        coe: Optional[str] = None,
        coe_channel: int = 1,
    ) -> None: ...
    def frames(self, count: Optional[int] = None, timeout: float = 5.0) -> FrameIter: ...
    def counters(self) -> dict: ...
    @property
    def view_url(self) -> Optional[str]: ...
    @property
    def notes(self) -> list[str]: ...
    @property
    def dropped(self) -> int: ...
    def stop(self) -> dict:
        """Stop; the session's summary (``ports``: per virtual port ``vp``, ``outcome``,
        ``error``, ``stats``, ``link``; ``xdp``; ``warnings`` — what the view ends with) and
        ``dropped``, the frames this queue dropped unread; the same after a second call."""
    def __enter__(self) -> "Receiver": ...
    def __exit__(self, *exc: object) -> bool: ...

class Probe:
    """An emulated ultrasound probe: on a trigger it sends shots of ``samples`` x ``channels``
    12-bit echo samples (seeded) from ``bind``:``port``; triggers on ``trigger_port``."""
    def __init__(
        self,
        bind: str = "127.0.0.1",
        channels: int = 96,
        samples: int = 2000,
        port: int = 4791,
        trigger_port: int = 4792,
        seed: int = 1,
        trigger_hz: float = 1000.0,
    ) -> None: ...
    @property
    def trigger_addr(self) -> str: ...
    def stop(self) -> Optional[dict]:
        """Stop; the probe's summary (``rocelink probe --json``'s keys and values, less
        ``counters``); None the second time."""
    def __enter__(self) -> "Probe": ...
    def __exit__(self, *exc: object) -> bool: ...

class Shot:
    """One shot; ``array()`` its samples as uint16 (samples, channels)."""
    number: int
    complete: bool
    missing: int
    verified: Optional[bool]
    def raw(self) -> Optional[npt.NDArray[np.uint8]]: ...
    def array(self) -> npt.NDArray[np.uint16]: ...
    def to_dict(self) -> dict: ...

class ShotIter(Iterator[Shot]):
    def __iter__(self) -> "ShotIter": ...
    def __next__(self) -> Shot: ...

class Host:
    """The ultrasound host: ``shots()`` triggers the probe at ``probe`` ("IP:port" of its
    trigger port) and hands each reassembled shot on; ``seed`` checks the samples against
    the probe's echoes (None: unchecked). ``view=8080`` (or ``"IP:PORT"``) serves the live
    view of the shots ``shots()`` hands on, at ``view_url``, until ``stop()``."""
    def __init__(
        self,
        probe: str = "127.0.0.1:4792",
        bind: str = "127.0.0.2",
        channels: int = 96,
        samples: int = 2000,
        port: int = 4791,
        seed: Optional[int] = 1,
        view: Optional[Union[int, str]] = None,
        view_public: bool = False,
    ) -> None: ...
    @property
    def view_url(self) -> Optional[str]: ...
    @property
    def notes(self) -> list[str]: ...
    def shots(self, count: Optional[int] = None, trigger_hz: Optional[float] = None, timeout: float = 5.0) -> ShotIter: ...
    def stop(self) -> Optional[dict]:
        """Stop the shots running and the view; the last run's summary (``rocelink shots
        --json``'s summary line, less ``counters``), None if none ran since."""
    def __enter__(self) -> "Host": ...
    def __exit__(self, *exc: object) -> bool: ...

class UnitFrame:
    """A frame the buffer unit consumed; ``array()`` its bytes (read-only uint8)."""
    va: int
    length: int
    worker: tuple[int, int]
    crc_ok: Optional[bool]
    def array(self) -> npt.NDArray[np.uint8]: ...
    def __len__(self) -> int: ...

class UnitFrameIter(Iterator[UnitFrame]):
    def __iter__(self) -> "UnitFrameIter": ...
    def __next__(self) -> UnitFrame: ...

class BufferUnit:
    """An IMS buffer unit: workers stream frames into a ring of ``ring`` bytes each, every
    frame ACKed or NACKed; ``frames()`` hands on each consumed frame. ``verify="header"``
    checks each frame's §4 header (``crc_ok``); ``"none"`` takes raw bytes. ``view=8080`` (or
    ``"IP:PORT"``) serves the live view of the frames ``frames()`` hands on, at ``view_url``."""
    def __init__(
        self,
        bind: str = "127.0.0.1",
        port: int = 4791,
        ring: int = 64 << 20,
        verify: str = "header",
        view: Optional[Union[int, str]] = None,
        view_public: bool = False,
    ) -> None: ...
    @property
    def address(self) -> str: ...
    @property
    def view_url(self) -> Optional[str]: ...
    @property
    def notes(self) -> list[str]: ...
    def frames(self, count: Optional[int] = None, timeout: float = 5.0) -> UnitFrameIter: ...
    def stop(self) -> Optional[dict]:
        """Stop; the unit's summary (``rocelink ims serve --json``'s keys and values, less
        ``counters``); None the second time."""
    def __enter__(self) -> "BufferUnit": ...
    def __exit__(self, *exc: object) -> bool: ...

class Worker:
    """An IMS worker sending the frames given to ``send()`` (each up to ``max_frame``
    bytes) to the buffer unit at ``server``, each sent again until ACKed."""
    def __init__(
        self,
        server: str = "127.0.0.1",
        bind: Optional[str] = None,
        port: Optional[int] = None,
        max_frame: int = 4 << 20,
        packet: Optional[int] = None,
    ) -> None: ...
    def send(self, frame: npt.ArrayLike, wait: bool = True) -> None: ...
    def send_image6(self, image: npt.NDArray[np.uint8], wait: bool = True) -> None: ...
    def send_image4(self, image: npt.NDArray[np.uint8], wait: bool = True) -> None: ...
    @property
    def acked(self) -> int: ...
    def stop(self) -> dict:
        """Close the channels once every frame is ACKed; the worker's summary
        (``rocelink ims send --json``'s keys and values, less ``counters``)."""
    def __enter__(self) -> "Worker": ...
    def __exit__(self, *exc: object) -> bool: ...
