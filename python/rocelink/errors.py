"""The exceptions rocelink raises: every one is a :class:`rocelink.Error`."""


class Error(Exception):
    """Something rocelink could not do; the message names the culprit, as the CLI's does."""


class ConfigError(Error, ValueError):
    """An argument is wrong. Raised before anything binds, sends or touches a device."""


class TimeoutError(Error, TimeoutError):  # noqa: A001 - rocelink.TimeoutError is the contract
    """Nothing arrived within the time given."""


class DeviceError(Error):
    """The device did not answer, or refused what it was asked."""


class NetworkError(Error, OSError):
    """A socket could not be opened or used (an address in use, no route)."""
