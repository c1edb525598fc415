"""Ultrasound over RoCE: an emulated probe and the host that triggers it.

    import rocelink
    with rocelink.ultrasound.Probe(bind="127.0.0.1", channels=96, samples=2000) as probe:
        with rocelink.ultrasound.Host(probe=probe.trigger_addr, bind="127.0.0.2") as host:
            for s in host.shots(count=100, trigger_hz=1000, timeout=5.0):
                s.number, s.complete, s.missing, s.array()  # uint16 (samples, channels)
"""
from ._native import Host, Probe, Shot, ShotIter

__all__ = ["Probe", "Host", "Shot", "ShotIter"]
