"""rocelink: RoCE v2 sensor streaming in software.

``rocelink.hsb`` — the HSB emulator and host receiver (frames as numpy arrays, no copy);
``rocelink.ims`` — the IMS buffer unit and worker (frames and §4 images from numpy);
``rocelink.ultrasound`` — an emulated probe and the host that triggers it (shots as arrays);
``rocelink.Recording`` — a recording made by ``rocelink receive --record DIR``.
Errors are ``rocelink.Error`` and its subclasses (``ConfigError``, ``TimeoutError``,
``DeviceError``, ``NetworkError``). ``import rocelink`` needs only numpy; the roles load
the native extension when first used.
"""
import importlib

from .errors import ConfigError, DeviceError, Error, NetworkError, TimeoutError
from .recording import Recording

__all__ = ["Error", "ConfigError", "TimeoutError", "DeviceError", "NetworkError", "Recording", "hsb", "ims", "ultrasound"]
__version__ = "0.1.0"


def __getattr__(name):
    if name in ("hsb", "ims", "ultrasound"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'rocelink' has no attribute {name!r}")
