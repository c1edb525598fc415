"""rocelink: RoCE v2 sensor streaming in software.

``rocelink.hsb`` — the HSB emulator and host receiver (frames as numpy arrays, no copy);
``rocelink.Recording`` — a recording made by ``rocelink receive --record DIR``.
Errors are ``rocelink.Error`` and its subclasses (``ConfigError``, ``TimeoutError``,
``DeviceError``, ``NetworkError``). ``import rocelink`` needs only numpy; the roles load
the native extension when first used.
"""
import importlib

from .errors import ConfigError, DeviceError, Error, NetworkError, TimeoutError
from .recording import Recording

__all__ = ["Error", "ConfigError", "TimeoutError", "DeviceError", "NetworkError", "Recording", "hsb"]
__version__ = "0.1.0"


def __getattr__(name):
    if name == "hsb":
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'rocelink' has no attribute {name!r}")
