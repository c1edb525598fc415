"""rocelink.hsb against the emulator over loopback."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib

import numpy as np
import pytest

import rocelink

SENSOR = "imx274-1080p-raw10"


def test_frames_arrive_verified_and_their_crcs_match_zlib(net):
    dev, host = net
    with rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=120):
        with rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR) as rx:
            n = 0
            for f in rx.frames(count=10, timeout=5.0):
                a = f.array()
                assert f.good and f.complete and f.crc_ok
                assert a.dtype == np.uint8 and len(a) == f.bytes == 2611376 == len(f)
                assert zlib.crc32(a) ^ 0xFFFFFFFF == f.crc  # HSB's form: JAMCRC
                n += 1
            assert n == 10
            s = rx.stop()
    assert s["ports"][0]["stats"]["good"] >= 10 and s["ports"][0]["stats"]["damaged"] == 0


def test_arrays_are_read_only_views_of_the_ring_and_copies_own_their_bytes(net):
    dev, host = net
    with rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=120):
        with rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR) as rx:
            f = next(iter(rx.frames(timeout=5.0)))
            a, b = f.array(), f.array()
            assert a.base is not None and np.shares_memory(a, b), "a view, not a copy"
            assert not a.flags.writeable
            with pytest.raises(ValueError):
                a[0] = 1
            c = f.copy()
            assert c.base is None and not np.shares_memory(a, c) and (a == c).all()
            img = f.image()
            assert img.shape == (1080, 1920) and img.dtype == np.uint16 and img.max() < 1024


def test_a_held_frame_does_not_change_while_newer_frames_arrive(net):
    dev, host = net
    with rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=200):
        with rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR, pages=4) as rx:
            frames = rx.frames(timeout=5.0)
            held = next(frames)
            view = held.array()
            crc = held.crc
            del held  # the array alone keeps the page
            numbers = [f.number for f in (next(frames) for _ in range(20))]
            assert zlib.crc32(view) ^ 0xFFFFFFFF == crc, "a held page was written"
            s = rx.stop()
    # the frames the device sent into the held page were refused, counted, never reported
    assert s["ports"][0]["stats"]["held_packets"] > 0
    assert s["ports"][0]["stats"]["damaged"] == 0
    assert numbers == sorted(numbers)


def test_keyboard_interrupt_in_frames_stops_the_session_cleanly(net):
    dev, host = net
    main = threading.main_thread().ident
    with rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=5):
        rx = rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR)
        threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            for _ in rx.frames(timeout=30.0):
                pass
        assert time.monotonic() - t0 < 3.0, "KeyboardInterrupt took too long"
        s = rx.stop()  # already stopped: the same summary
        assert s["ports"][0]["vp"] == 0 and s["ports"][0]["error"] is None


def test_a_recording_reads_back_with_rocelink_recording(net, tmp_path):
    dev, host = net
    d = tmp_path / "rec"
    with rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=60):
        with rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR, record=str(d)) as rx:
            crcs = {f.number: f.crc for f in rx.frames(count=5, timeout=5.0)}
    rec = rocelink.Recording(str(d))
    assert len(rec) >= 5
    for i in range(len(rec)):
        meta, data = rec[i]
        assert meta["good"] and rec.verify(i)
        if meta["frame_number"] in crcs:
            # one form everywhere: the frame's, the recording's and the device's
            assert meta["crc"] == crcs[meta["frame_number"]]
            assert zlib.crc32(data) ^ 0xFFFFFFFF == crcs[meta["frame_number"]]
    assert rec.image(0).shape == (1080, 1920)


def test_a_live_view_shows_the_frames_python_takes(net, view_page):
    dev, host = net
    with rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=60):
        with rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR, view="127.0.0.1:0") as rx:
            url = rx.view_url
            assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/"), url
            numbers = [f.number for f in rx.frames(count=5, timeout=5.0)]
            status = view_page.status(url)
            assert status["command"] == "python receive" and status["ended"] is False
            # the view counts each frame before Python is handed it
            assert status["frames_good"] >= 5 and status["frames_damaged"] == 0, status
            assert status["last_frame_number"] >= numbers[-1], (status, numbers)
            assert view_page.picture(url).startswith(b"\x89PNG")
            s = rx.stop()
            assert rx.view_url == url
        # stopped: the view was told the run ended, and no longer serves
        assert view_page.gone(url)
    assert s["ports"][0]["stats"]["good"] >= 5


def test_a_busy_view_port_is_a_network_error_before_the_device_is_touched(net):
    dev, host = net
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # no emulator: had the device been asked, this would be a DeviceError
        with pytest.raises(rocelink.NetworkError, match=str(port)):
            rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR, view=port)


def _port_free(ip, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((ip, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(device="not-an-ip"), "device"),
        (dict(device="127.0.0.2", frame_size=1000, sensor=SENSOR), "disagrees"),
        (dict(device="127.0.0.2", sensor="no-such-sensor"), "sensor"),
        (dict(device="127.0.0.2", camera="imx274", mode="9"), "mode"),
        (dict(device="127.0.0.2", mode="1"), "camera"),
        (dict(device="127.0.0.2", pages=1), "pages"),
        (dict(device="127.0.0.2", vps=[0, 0]), "virtual port"),
        (dict(device="127.0.0.2", bind="localhost"), "bind"),
        (dict(device="127.0.0.2", view="0.0.0.0:8080"), "view_public"),
        (dict(device="127.0.0.2", view="nowhere"), "view"),
    ],
)
def test_bad_arguments_raise_config_error_before_anything_binds(net, kwargs, words):
    _, host = net
    kwargs.setdefault("bind", host)
    kwargs.setdefault("port", 0)
    with pytest.raises(rocelink.ConfigError, match=words):
        rocelink.hsb.Receiver(**kwargs)
    if kwargs["bind"] == host:
        assert _port_free(host, 47910)


def test_bad_camera_over_ethernet_arguments_are_named_before_anything_opens(net):
    dev, host = net
    for kwargs, words in [
        (dict(coe="lo", bind=host), "bind"),
        (dict(coe="lo", vps=[0, 1]), "one virtual port"),
        (dict(coe="lo", coe_channel=64), "63"),
        (dict(coe="lo", frame_size=300_000_000), "256 MiB"),
        (dict(coe="lo", xdp="nosuch0"), "same interface"),
    ]:
        with pytest.raises(rocelink.ConfigError, match=words):
            rocelink.hsb.Receiver(device=dev, **kwargs)
    if os.geteuid() == 0:  # a raw socket needs root; without, the error says so instead
        with pytest.raises(rocelink.NetworkError, match="nosuch0"):
            rocelink.hsb.Receiver(device=dev, coe="nosuch0", sensor=SENSOR)


def test_bad_emulator_arguments_and_the_error_hierarchy(net):
    dev, _ = net
    with pytest.raises(rocelink.ConfigError, match="fps"):
        rocelink.hsb.Emulator(ip=dev, fps=-1)
    with pytest.raises(rocelink.ConfigError, match="ip"):
        rocelink.hsb.Emulator(ip="nowhere")
    assert issubclass(rocelink.ConfigError, rocelink.Error) and issubclass(rocelink.ConfigError, ValueError)
    assert issubclass(rocelink.TimeoutError, rocelink.Error) and issubclass(rocelink.TimeoutError, TimeoutError)
    assert issubclass(rocelink.DeviceError, rocelink.Error)


def test_a_silent_device_is_a_device_error_naming_it(net):
    dev, host = net
    t0 = time.monotonic()
    with pytest.raises(rocelink.DeviceError, match=dev):
        rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR)
    assert time.monotonic() - t0 < 30


def test_a_device_that_stops_streaming_is_a_timeout_error(net):
    dev, host = net
    emu = rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=60)
    with rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR) as rx:
        frames = rx.frames(timeout=1.0)
        next(frames)
        emu.stop()
        with pytest.raises(rocelink.TimeoutError, match="no frame from device"):
            for _ in frames:
                pass


def test_two_virtual_ports_a_camera_mode_by_number_and_the_counters(net):
    dev, host = net
    with rocelink.hsb.Emulator(ip=dev, sensor="pattern", fps=60):
        with rocelink.hsb.Receiver(device=dev, bind=host, frame_size=100_000, vps=[0, 1]) as rx:
            seen = {0: 0, 1: 0}
            for f in rx.frames(count=20, timeout=5.0):
                assert f.good
                seen[f.vp] += 1
            c = rx.counters()
        assert seen[0] > 0 and seen[1] > 0, seen
        names = [link["name"] for link in c["links"]]
        assert names == ["vp0", "vp1"], names
        assert all(link["net"]["roce_rx"] > 0 for link in c["links"])
        assert all(link["net"]["icrc_errors"] == 0 for link in c["links"])
    # HSB's mode numbers as ints or names; a wrong one is named
    with pytest.raises(rocelink.ConfigError, match="mode 7"):
        rocelink.hsb.Receiver(device=dev, bind=host, camera="imx274", mode=7)
    with pytest.raises(rocelink.ConfigError, match="disagrees"):
        rocelink.hsb.Receiver(device=dev, bind=host, camera="imx274", mode=1, sensor="imx274-4k-raw10")


def test_emulator_summaries_are_the_clis_json_key_for_key(net, cli):
    """``Emulator.stop()`` is ``rocelink emulate --json``'s summary (less the counters
    table) with the notes besides; a receiver's ten frames are counted by both."""
    dev, host = net

    def ten_frames():
        with rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR) as rx:
            # frames not held: each keeps its ring page, and the ring has 4
            assert sum(1 for _ in rx.frames(count=10, timeout=5.0)) == 10

    emu = cli.start("emulate", "--ip", dev, "--bootp-target", "none", "--sensor", SENSOR,
                    "--fps", "60", "--json", "--no-control")
    try:
        cli.retry(ten_frames)
    finally:
        c = cli.summary(emu, interrupt=True)
    with rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=60) as e:
        ten_frames()
        py = e.stop()
    assert isinstance(py.pop("notes"), list)
    assert c.pop("counters")["command"] == "emulate"
    assert sorted(c) == sorted(py)
    assert sorted(c["sensor_tx"]) == sorted(py["sensor_tx"])
    for s in (c, py):
        assert s["frames"] >= 10 and s["packets"] > s["frames"] and s["ecb_requests"] > 0, s


def test_receiver_summaries_are_the_clis_json_key_for_key(net, cli):
    """``Receiver.stop()`` is ``rocelink receive --json``'s last line (less the counters
    table; Python adds its queue's ``dropped``): the same keys, and the figures of ten good
    frames from the same emulated device (the CLI stops at its frame count, Python when
    stopped, by which time more may have come)."""
    dev, host = net
    with rocelink.hsb.Emulator(ip=dev, sensor=SENSOR, fps=60):
        c = cli.run("receive", "--device", dev, "--bind", host, "--sensor", SENSOR,
                    "--frames", "10", "--json", "--no-control")
        with rocelink.hsb.Receiver(device=dev, bind=host, sensor=SENSOR) as rx:
            # frames not held: each keeps its ring page, and the ring has 4
            assert sum(1 for _ in rx.frames(count=10, timeout=5.0)) == 10
            py = rx.stop()
    assert c.pop("counters")["command"] == "receive"
    assert py.pop("dropped") == 0
    assert sorted(c) == sorted(py)
    (cp,), (pp,) = c["ports"], py["ports"]
    assert sorted(cp) == sorted(pp) and sorted(cp["stats"]) == sorted(pp["stats"])
    assert cp["stats"]["good"] == 10 and pp["stats"]["good"] >= 10, (cp, pp)
    assert cp["stats"]["damaged"] == pp["stats"]["damaged"] == 0
    assert cp["error"] is None and pp["error"] is None
    assert cp["outcome"] == {"frames": 10, "stopped": "Frames"}
    assert pp["outcome"]["stopped"] == "Stopped" and pp["outcome"]["frames"] >= 10


# Python in the host's namespace: ten CoE frames, each CRC checked against zlib, then the
# summary, as one JSON line
_COE_HOST = """
import json, sys, zlib
import rocelink
dev, iface, sensor = sys.argv[1:4]
with rocelink.hsb.Receiver(device=dev, coe=iface, coe_channel=5, sensor=sensor) as rx:
    rows = [[f.number, f.good, f.crc_ok, f.bytes, zlib.crc32(f.array()) ^ 0xFFFFFFFF == f.crc]
            for f in rx.frames(count=10, timeout=10.0)]
    live = rx.counters()
    s = rx.stop()
print(json.dumps({"frames": rows, "summary": s, "notes": rx.notes, "live": live}))
"""


def test_camera_over_ethernet_frames_reach_python_as_the_cli_receives_them(veth, cli):
    """``Receiver(coe=IFACE)`` has the emulated device (in namespace A) send Camera over
    Ethernet frames to B's interface: ten arrive verified (their CRCs agree with zlib), and
    the summary has ``rocelink receive --coe --json``'s keys, with the CoE counters."""
    a, b = veth
    dev = "10.215.0.1"
    emu = cli.start("emulate", "--ip", dev, "--bootp-target", "none", "--coe-iface", a,
                    "--sensor", SENSOR, "--fps", "60", "--seconds", "60", "--json",
                    "--no-control", prefix=("ip", "netns", "exec", a))
    try:
        c = cli.retry(lambda: cli.run("receive", "--device", dev, "--coe", b, "--coe-channel",
                                      "5", "--sensor", SENSOR, "--frames", "10", "--json",
                                      "--timeout", "10", "--no-control",
                                      prefix=("ip", "netns", "exec", b)))
        out = subprocess.run(["ip", "netns", "exec", b, sys.executable, "-c", _COE_HOST, dev, b,
                              SENSOR], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        py = json.loads(out.stdout.splitlines()[-1])
    finally:
        cli.summary(emu, interrupt=True)
    assert len(py["frames"]) == 10
    for number, good, crc_ok, size, zlib_agrees in py["frames"]:
        assert good and crc_ok and zlib_agrees and size == 2611376, py["frames"]
    assert any("CoE channel 5 to " + b in n for n in py["notes"]), py["notes"]
    # while it ran, its counters were published (about every 100 ms; ten frames take 150)
    (link,) = py["live"]["links"]
    assert link["local"] == b and link["net"]["rx_packets"] > 0, py["live"]
    s = py["summary"]
    assert c.pop("counters")["command"] == "receive"
    assert s.pop("dropped") == 0
    assert sorted(c) == sorted(s)
    (cp,), (pp,) = c["ports"], s["ports"]
    assert sorted(cp) == sorted(pp) and sorted(cp["coe"]) == sorted(pp["coe"])
    assert cp["outcome"] == {"frames": 10, "stopped": "Frames"}
    assert cp["stats"]["good"] == 10 and pp["stats"]["good"] >= 10, (cp, pp)
    for p in (cp, pp):
        assert p["stats"]["damaged"] == 0 and p["error"] is None, p
        assert p["coe"]["out_of_bounds"] == 0 and p["coe"]["runts"] == 0, p
