"""rocelink.ultrasound: the probe and the host over loopback."""
import signal
import threading
import time

import numpy as np
import pytest

import rocelink


def test_shots_arrive_as_unpacked_sample_arrays_that_match_the_probes_echoes(net):
    dev, host = net
    with rocelink.ultrasound.Probe(bind=dev, channels=32, samples=500, port=47921, trigger_port=47922) as probe:
        assert probe.trigger_addr == f"{dev}:47922"
        with rocelink.ultrasound.Host(probe=probe.trigger_addr, bind=host, channels=32, samples=500, port=47921) as h:
            shots = list(h.shots(count=20, trigger_hz=2000, timeout=5.0))
            s = h.stop()
    assert [x.number for x in shots] == list(range(20))
    complete = [x for x in shots if x.complete]
    assert len(complete) >= 18
    for x in complete:
        a = x.array()
        assert a.shape == (500, 32) and a.dtype == np.uint16 and a.max() < 4096
        assert x.verified is True and x.missing == 0
        raw = x.raw()
        assert len(raw) == 500 * 32 * 3 // 2
        # channel 0 of sample 0 from the packed bytes by hand: CSI RAW12
        assert a[0, 0] == (int(raw[0]) << 4) | (int(raw[2]) & 0xF)
        assert a[0, 1] == (int(raw[1]) << 4) | (int(raw[2]) >> 4)
    # the echoes differ from shot to shot
    assert not (complete[0].array() == complete[1].array()).all()
    assert s["sink"]["corrupt"] == 0 and s["sink"]["shots"] == 20


def test_a_live_view_shows_the_shots_python_takes_until_stop(net, view_page):
    dev, host = net
    with rocelink.ultrasound.Probe(bind=dev, channels=32, samples=500, port=47921, trigger_port=47922) as probe:
        with rocelink.ultrasound.Host(probe=probe.trigger_addr, bind=host, channels=32, samples=500, port=47921, view=0) as h:
            url = h.view_url
            assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/"), url
            assert view_page.status(url)["frames_good"] == 0
            first = list(h.shots(count=10, trigger_hz=2000, timeout=5.0))
            # a second run: the same view goes on counting
            second = list(h.shots(count=10, trigger_hz=2000, timeout=5.0))
            status = view_page.status(url)
            good = sum(1 for x in first + second if x.complete and x.verified)
            assert status["command"] == "python shots" and status["frames_good"] == good >= 18, status
            assert view_page.picture(url).startswith(b"\x89PNG")
            h.stop()
            assert view_page.gone(url)


def test_keyboard_interrupt_in_shots_stops_cleanly(net):
    dev, host = net
    main = threading.main_thread().ident
    with rocelink.ultrasound.Probe(bind=dev, channels=16, samples=100, port=47923, trigger_port=47924) as probe:
        h = rocelink.ultrasound.Host(probe=probe.trigger_addr, bind=host, channels=16, samples=100, port=47923)
        threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            for _ in h.shots(trigger_hz=10, timeout=30.0):
                pass
        assert time.monotonic() - t0 < 3.0
        # stopped by the iterator (the interrupt came while it waited) or by this call
        # (it came while Python ran the loop body): either way, nothing runs after
        h.stop()
        assert h.stop() is None


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: rocelink.ultrasound.Probe(channels=0), "channel"),
        (lambda: rocelink.ultrasound.Probe(bind="here"), "bind"),
        (lambda: rocelink.ultrasound.Probe(trigger_hz=0), "trigger_hz"),
        (lambda: rocelink.ultrasound.Host(probe="127.0.0.1"), "probe"),
        (lambda: rocelink.ultrasound.Host(samples=0), "sample"),
        (lambda: rocelink.ultrasound.Host().shots(timeout=-1), "timeout"),
    ],
)
def test_bad_arguments_raise_config_error(make, words):
    with pytest.raises(rocelink.ConfigError, match=words):
        make()


def test_summaries_are_the_clis_json_key_for_key(net, cli):
    """``stop()`` gives the session's summary as the CLI's ``--json`` prints it (less the
    process's counters table): a Python host fed by the CLI's probe and the CLI's host fed
    by a Python probe have the same keys, and the same figures for the same shots."""
    dev, host = net
    n, shape = 10, ["--channels", "32", "--samples", "500"]
    # the CLI's probe, a Python host
    probe = cli.start("probe", "--bind", dev, "--port", "47923", "--trigger-port", "47924", *shape, "--json")
    try:
        with rocelink.ultrasound.Host(probe=f"{dev}:47924", bind=host, channels=32, samples=500, port=47923) as h:
            shots = cli.retry(lambda: list(h.shots(count=n, trigger_hz=500, timeout=5.0)))
            py_host = h.stop()
    finally:
        cli_probe = cli.summary(probe, interrupt=True)
    # a Python probe, the CLI's host
    with rocelink.ultrasound.Probe(bind=dev, channels=32, samples=500, port=47925, trigger_port=47926) as p:
        cli_host = cli.run("shots", "--bind", host, "--probe", p.trigger_addr, "--port", "47925", *shape,
                           "--shots", str(n), "--trigger-hz", "500", "--verify", "--json", "--seconds", "30")
        cli_shots = cli.lines[:-1]
        py_probe = p.stop()
    assert len(shots) == n
    # each shot: the CLI's line and Python's to_dict() have the same keys
    assert len(cli_shots) == n and all(sorted(s) == sorted(shots[0].to_dict()) for s in cli_shots)
    assert [s.to_dict()["shot"] for s in shots] == [s.number for s in shots]
    for c, py in ((cli_host, py_host), (cli_probe, py_probe)):
        assert c.pop("counters")["pid"] > 0
        assert sorted(c) == sorted(py)
    for k in ("sink", "host"):
        assert sorted(cli_host[k]) == sorted(py_host[k])
    assert sorted(cli_host["links"][0]) == sorted(py_host["links"][0])
    assert cli_host["geometry"] == py_host["geometry"]
    assert cli_host["sink"]["shots"] == py_host["sink"]["shots"] == n
    assert cli_host["sink"]["verified"] == py_host["sink"]["verified"] == cli_host["sink"]["complete"]
    for k in ("probe", "triggers"):
        assert sorted(cli_probe[k]) == sorted(py_probe[k])
    assert cli_probe["links"] == py_probe["links"] == 1
