"""rocelink.ims: the buffer unit and the worker over loopback."""
import numpy as np
import pytest

import rocelink


def _crc32c(b):
    crc = 0xFFFFFFFF
    for byte in bytes(b):
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_frames_and_images_sent_from_numpy_arrive_as_sent(net):
    unit_ip, worker_ip = net
    raw = (np.arange(200_000) * 7 % 251).astype(np.uint8)
    img = (np.arange(30 * 40).reshape(30, 40) % 64).astype(np.uint8)  # rows, columns
    with rocelink.ims.BufferUnit(bind=unit_ip, port=47931, ring=8 << 20) as unit:
        with rocelink.ims.Worker(server=unit.address, bind=worker_ip, port=47931) as w:
            w.send(raw)
            assert w.acked == 1, "send returns once ACKed"
            w.send_image6(img)
            w.send(np.zeros(1 << 16, np.uint16))  # any dtype: its bytes
            s = w.stop()
        got = list(unit.frames(count=3, timeout=5.0))
    assert s["frames"] == 3 and s["unacknowledged"] == [] and s["state"] == "Done"
    a, b, c = (f.array() for f in got)
    assert (a == raw).all() and not got[0].crc_ok  # raw bytes carry no §4 header
    assert got[1].crc_ok and len(b) == 64 + 30 * 40
    # §4: CRC-32C (big-endian) of the columns, the frame's VA, then the image column by column
    assert int.from_bytes(bytes(b[0:4]), "big") == _crc32c(b[64:])
    assert int.from_bytes(bytes(b[8:16]), "big") == got[1].va
    assert (b[64:] == img.T.ravel()).all()
    assert len(c) == 1 << 17 and not c.any()
    assert got[0].va < got[1].va < got[2].va
    assert a.base is not None and not a.flags.writeable


def test_a_live_view_shows_the_frames_python_takes_as_pictures(net, view_page):
    unit_ip, worker_ip = net
    img = (np.arange(30 * 40).reshape(30, 40) % 64).astype(np.uint8)
    with rocelink.ims.BufferUnit(bind=unit_ip, port=47931, ring=8 << 20, view=0) as unit:
        url = unit.view_url
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/"), url
        # a page looks before the frames come: pictures are made only while one does
        assert view_page.status(url)["frames_good"] == 0
        with rocelink.ims.Worker(server=unit.address, bind=worker_ip, port=47931) as w:
            for _ in range(3):
                w.send_image6(img)
            w.stop()
        got = list(unit.frames(count=3, timeout=5.0))
        assert all(f.crc_ok for f in got)
        status = view_page.status(url)
        assert status["command"] == "python ims serve", status
        assert (status["frames_good"], status["frames_damaged"], status["last_frame_number"]) == (3, 0, 3)
        assert view_page.picture(url).startswith(b"\x89PNG")
        unit.stop()
        assert view_page.gone(url)


def test_a_wildcard_view_needs_view_public(net):
    unit_ip, _ = net
    with pytest.raises(rocelink.ConfigError, match="view_public"):
        rocelink.ims.BufferUnit(bind=unit_ip, view="0.0.0.0:0")


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: rocelink.ims.BufferUnit(bind="unit"), "bind"),
        (lambda: rocelink.ims.BufferUnit(verify="crc"), "verify"),
        (lambda: rocelink.ims.BufferUnit(bind="127.0.0.1", ring=100), "ring"),
        (lambda: rocelink.ims.Worker(server="somewhere"), "server"),
        (lambda: rocelink.ims.Worker(packet=100), "packet"),
    ],
)
def test_bad_arguments_raise_config_error(make, words):
    with pytest.raises(rocelink.ConfigError, match=words):
        make()


def test_a_frame_the_protocol_cannot_carry_is_refused_before_it_is_queued(net):
    unit_ip, worker_ip = net
    with rocelink.ims.BufferUnit(bind=unit_ip, port=47932):
        with rocelink.ims.Worker(server=f"{unit_ip}:47932", bind=worker_ip, port=47932, max_frame=1 << 16) as w:
            with pytest.raises(rocelink.ConfigError, match="max_frame"):
                w.send(np.zeros(1 << 17, np.uint8))
            with pytest.raises(rocelink.ConfigError):
                w.send(np.zeros(10, np.uint8))  # shorter than a packet's 64-byte minimum
            with pytest.raises(rocelink.ConfigError, match="6-bit"):
                w.send_image6(np.full((4, 4), 64, np.uint8))
            w.send(np.ones(4096, np.uint8))
            assert w.stop()["frames"] == 1


def test_summaries_are_the_clis_json_key_for_key(net, cli):
    """``stop()`` gives the session's summary as the CLI's ``--json`` prints it (less the
    process's counters table): the same keys, and the same figures for the same frames —
    a Python unit fed by the CLI's worker, and the CLI's unit fed by a Python worker."""
    unit_ip, worker_ip = net
    n = 4
    with rocelink.ims.BufferUnit(bind=unit_ip, port=47935, ring=8 << 20, verify="none") as unit:
        send = cli.start("ims", "send", f"{unit_ip}:47935", "--bind", worker_ip,
                         "--frames", str(n), "--frame", "64K", "--json")
        assert len(list(unit.frames(count=n, timeout=10))) == n
        cli_worker = cli.summary(send)
        py_unit = unit.stop()
    serve = cli.start("ims", "serve", "--bind", unit_ip, "--port", "47936", "--ring", "8M",
                      "--verify", "none", "--frames", str(n), "--json")
    try:
        with rocelink.ims.Worker(server=f"{unit_ip}:47936", bind=worker_ip, port=47936) as w:
            for i in range(n):
                w.send(np.full(65536, i, np.uint8))
            py_worker = w.stop()
    finally:
        cli_unit = cli.summary(serve)
    pairs = [
        (cli_unit, py_unit, ["frames_delivered", "frames_consumed", "frames_discarded",
                             "bytes", "acked", "nacks", "nacked", "image_crc_failures"]),
        (cli_worker, py_worker, ["frames", "bytes", "nacks", "nacked", "state",
                                 "unacknowledged", "answers_refused"]),
    ]
    for c, py, same in pairs:
        assert c.pop("counters")["pid"] > 0
        assert sorted(c) == sorted(py)
        for k in same:
            assert c[k] == py[k], (k, c, py)
    assert py_unit["frames_consumed"] == n and py_unit["bytes"] == n * 65536
    assert py_worker["frames"] == n and py_worker["state"] == "Done"
