//! Network counters, provoked: packets with a bad ICRC, a wrong R_Key, an address outside
//! the region and an unknown QP sent at a running `rocelink perf` server are each counted,
//! read from the running process with `rocelink stats PID` and printed at its exit; random
//! loss on a veth pair shows as PSN drops on the responder and retransmissions on the
//! requester.
#![allow(clippy::unwrap_used)]

mod common;

use rocelink_wire::ib::{BthRepr, IbRepr, Opcode, RethRepr};
use rocelink_wire::roce::{IpParams, RoceRepr};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn rocelink() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocelink"))
}

/// A hex field of perftest's address line (`QPN 0x…`).
fn field(line: &str, name: &str) -> u64 {
    let v = line
        .split_whitespace()
        .skip_while(|w| *w != name)
        .nth(1)
        .unwrap_or_else(|| panic!("no {name} in {line:?}"));
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

/// `rocelink stats PID --json`, retried while the process has not yet published.
fn stats_of(pid: u32) -> Value {
    let out = rocelink()
        .args(["stats", &pid.to_string(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rocelink stats {pid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Read `child`'s stdout lines until one contains `what`; all of them.
fn until(out: &mut impl BufRead, what: &str) -> String {
    let mut text = String::new();
    while !text.contains(what) {
        assert!(
            out.read_line(&mut text).unwrap() > 0,
            "ended before {what:?}: {text}"
        );
    }
    text
}

fn finish(mut c: Child) -> (String, String) {
    let st = c.wait().unwrap();
    let (mut o, mut e) = (String::new(), String::new());
    if let Some(mut so) = c.stdout.take() {
        so.read_to_string(&mut o).unwrap();
    }
    c.stderr.take().unwrap().read_to_string(&mut e).unwrap();
    assert!(st.success(), "exit {st}: {o}\n{e}");
    (o, e)
}

/// One UC WRITE ONLY of 64 bytes to `qpn` at `va` with `rkey`, as UDP payload (the ICRC
/// as a sender with IPv4 ID 0 computes it), optionally with the ICRC broken.
fn write_only(
    src: SocketAddr,
    (dst, dst_port): (Ipv4Addr, u16),
    qpn: u32,
    rkey: u32,
    va: u64,
    bad_icrc: bool,
) -> Vec<u8> {
    let SocketAddr::V4(src) = src else {
        panic!("IPv4 only")
    };
    let repr = RoceRepr {
        ip: IpParams::v4(*src.ip(), dst),
        // the ICRC covers the UDP source port
        src_port: src.port(),
        dst_port,
        ib: IbRepr {
            bth: BthRepr {
                opcode: Opcode::UC_RDMA_WRITE_ONLY,
                dest_qp: qpn,
                psn: 7,
                ..Default::default()
            },
            reth: Some(RethRepr {
                va,
                rkey,
                dma_len: 64,
            }),
            payload_len: 64,
            ..Default::default()
        },
    };
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut buf, &[0xA5; 64]).unwrap();
    if bad_icrc {
        let n = buf.len();
        buf[n - 1] ^= 0x5A;
    }
    buf.split_off(28) // past IPv4 and UDP headers: what a UDP socket sends
}

#[test]
fn refusals_are_counted_and_readable_while_running() {
    let (sip, cip) = ("127.0.0.100", "127.0.0.101");
    // the exchange and RoCE ports: free ones (4791 may be another program's)
    let tcp = rocelink_testkit::ports::free_udp_port(&[sip]).to_string();
    let roce = rocelink_testkit::ports::free_udp_port(&[sip, cip]).to_string();
    let mut srv = rocelink()
        .args(["perf", "write_bw", "-c", "UC", "--bind", sip, "-p", &tcp])
        .args(["-D", "5", "--timeout", "20", "-s", "1024", "--counters"])
        .args(["--roce-port", &roce])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(srv.stdout.take().unwrap());
    until(&mut out, "Waiting for client");
    let cli = rocelink()
        .args([
            "perf",
            "write_bw",
            "-c",
            "UC",
            sip,
            "--bind",
            cip,
            "-p",
            &tcp,
            "--roce-port",
            &roce,
        ])
        .args([
            "-D",
            "5",
            "--timeout",
            "20",
            "-s",
            "1024",
            "--json",
            "--no-control",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let head = until(&mut out, "remote address");
    let local = head.lines().find(|l| l.contains("local address")).unwrap();
    let (qpn, rkey, va) = (
        field(local, "QPN") as u32,
        field(local, "RKey") as u32,
        field(local, "VAddr"),
    );
    // the QP is ready once the server has printed its addresses and connected
    std::thread::sleep(Duration::from_millis(300));
    let before = stats_of(srv.id());
    assert_eq!(before["command"], "perf write_bw");
    assert_eq!(before["pid"], srv.id());
    let net0 = &before["links"][0]["net"];

    // from the client's address at another UDP port, DF set: IPv4 ID 0. The ICRC and the
    // QPN are checked first; a packet for the QP from a port that is not its peer's is
    // refused before its R_Key is looked at
    let sock = rocelink_io::udp::UdpSocket::bind(
        SocketAddr::new(cip.parse().unwrap(), 0),
        &rocelink_io::udp::UdpConfig::default(),
    )
    .unwrap()
    .into_std()
    .unwrap();
    let to: SocketAddr = format!("{sip}:{roce}").parse().unwrap();
    let (s4, d4) = (
        sock.local_addr().unwrap(),
        (sip.parse().unwrap(), roce.parse().unwrap()),
    );
    let kinds: [(&str, Vec<u8>, u64); 4] = [
        ("icrc_errors", write_only(s4, d4, qpn, rkey, va, true), 5),
        (
            "access_violations",
            write_only(s4, d4, qpn, rkey ^ 0x8000_0001, va, false),
            6,
        ),
        (
            "unknown_qp",
            write_only(s4, d4, qpn ^ 0x00FF_0000, rkey, va, false),
            7,
        ),
        // inside the key's reach, outside the region: a bounds refusal, counted with R_Key
        (
            "access_violations",
            write_only(s4, d4, qpn, rkey, va + (1 << 30), false),
            3,
        ),
    ];
    for (_, pkt, n) in &kinds {
        for _ in 0..*n {
            sock.send_to(pkt, to).unwrap();
        }
    }
    // read back while it runs: the published counters (every 100 ms) show each refusal
    let deadline = Instant::now() + Duration::from_secs(2);
    let want = |net: &Value, k: &str| net[k].as_u64().unwrap() - net0[k].as_u64().unwrap();
    let mid = loop {
        let s = stats_of(srv.id());
        let net = s["links"][0]["net"].clone();
        if (
            want(&net, "icrc_errors"),
            want(&net, "foreign_port"),
            want(&net, "unknown_qp"),
        ) == (5, 9, 7)
            || Instant::now() > deadline
        {
            break net;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(want(&mid, "icrc_errors"), 5, "{mid}");
    assert_eq!(want(&mid, "foreign_port"), 9, "{mid}");
    assert_eq!(want(&mid, "access_violations"), 0, "{mid}");
    assert_eq!(want(&mid, "unknown_qp"), 7, "{mid}");
    // the table form of the same, over the same socket
    let table = rocelink()
        .args(["stats", &srv.id().to_string()])
        .output()
        .unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.contains(" -- NET STATS perf (perf write_bw, pid"),
        "{table}"
    );
    assert!(table.contains("\nICRC errors: 5\n"), "{table}");
    assert!(
        !table.contains("Sensor TX"),
        "rows no one set are left out: {table}"
    );
    // --watch: the table once, then only what moved, with rates; Ctrl-C ends it
    let watch = rocelink()
        .args(["stats", "--watch", "0.2", &srv.id().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..4 {
        sock.send_to(&kinds[0].1, to).unwrap();
    }
    std::thread::sleep(Duration::from_millis(900));
    assert!(common::sh(&["kill", "-INT", &watch.id().to_string()]));
    let watched = watch.wait_with_output().unwrap();
    assert!(watched.status.success(), "{watched:?}");
    let watched = String::from_utf8(watched.stdout).unwrap();
    let blocks: Vec<&str> = watched.split("\n\n").collect();
    assert!(blocks.len() >= 3, "{watched}");
    assert!(blocks[0].contains("\nICRC errors: 5\n"), "{watched}");
    let moved = blocks
        .iter()
        .find(|b| b.contains("ICRC errors: 9 ("))
        .unwrap_or_else(|| panic!("{watched}"));
    assert!(moved.contains("/s)\n"), "{moved}");
    assert!(
        !moved.contains("Unknown QP"),
        "only rows that moved: {moved}"
    );

    let pid = srv.id();
    let (_, serr) = finish(srv);
    let (cout, _) = finish(cli);
    // at exit: the table on stderr, the control socket gone
    assert!(serr.contains("\nICRC errors: 9\n"), "{serr}");
    assert!(serr.contains("\nUnknown QP: 7\n"), "{serr}");
    let gone = rocelink()
        .args(["stats", &pid.to_string()])
        .output()
        .unwrap();
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("no control socket"),
        "{gone:?}"
    );
    // the client (--json, --no-control) saw none of it
    let last: Value = serde_json::from_str(cout.lines().last().unwrap()).unwrap();
    let c = &last["counters"]["links"][0]["net"];
    assert_eq!(c["icrc_errors"], 0, "{c}");
    assert!(c["tx_packets"].as_u64().unwrap() > 0, "{c}");
}

/// Two namespaces, 10.202.1.1 and .2, `loss`% of UDP/4791 dropped at random both ways on B.
fn lossy(tag: &str, loss: u32) -> common::VethPair {
    let p = common::VethPair::new(tag, &["10.202.1.1/24"], &["10.202.1.2/24"]);
    let vb = &p.vb;
    p.nft(
        &p.b,
        &format!(
            "table netdev rocelink_loss {{\n chain in {{ type filter hook ingress device \"{vb}\" priority 0; udp dport 4791 numgen random mod 100 < {loss} drop; }}\n chain out {{ type filter hook egress device \"{vb}\" priority 0; udp dport 4791 numgen random mod 100 < {loss} drop; }}\n}}\n"
        ),
    );
    p
}

/// `rocelink perf TEST` between the namespaces of [`lossy`] (3% lost each way); see
/// [`perf_between`].
fn perf_over_lossy(tag: &str, test: &str, args: &[&str]) -> (Value, Value, Value) {
    perf_between(&lossy(tag, 3), test, args)
}

/// `rocelink perf TEST ARGS --json` from 10.202.1.1 in namespace A to a server at
/// 10.202.1.2 in B: the server and the client, started once the server listens.
fn spawn_between(ns: &common::VethPair, test: &str, args: &[&str]) -> (Child, Child) {
    let run = |ns: &str, args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(env!("CARGO_BIN_EXE_rocelink"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let common_args = [args, &["--timeout", "30", "--json"]].concat();
    let srv = run(
        &ns.b,
        &[
            &["perf", test, "--bind", "10.202.1.2", "-p", "19131"][..],
            &common_args,
        ]
        .concat(),
    );
    // the server listens before the client connects; give it the moment it needs
    let t0 = Instant::now();
    while !common::sh(&[
        "sh",
        "-c",
        &format!("ip netns exec {} ss -ltn | grep -q 19131", ns.b),
    ]) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "server not listening"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let cli = run(
        &ns.a,
        &[
            &[
                "perf",
                test,
                "10.202.1.2",
                "--bind",
                "10.202.1.1",
                "-p",
                "19131",
            ][..],
            &common_args,
        ]
        .concat(),
    );
    (srv, cli)
}

/// [`spawn_between`], the server's counters read back while it runs. Returns the server's
/// and the client's counters and the client's first row.
fn perf_between(ns: &common::VethPair, test: &str, args: &[&str]) -> (Value, Value, Value) {
    let (srv, cli) = spawn_between(ns, test, args);
    let t0 = Instant::now();
    // `ip netns exec` execs: the server's pid is rocelink's, and its control socket is in
    // the shared file system
    let mut mid = Value::Null;
    while mid.is_null() && t0.elapsed() < Duration::from_secs(10) {
        let o = rocelink()
            .args(["stats", &srv.id().to_string(), "--json"])
            .output()
            .unwrap();
        if o.status.success() {
            mid = serde_json::from_slice(&o.stdout).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(mid["command"], format!("perf {test}"), "{mid}");
    let (sout, _) = finish(srv);
    let (cout, _) = finish(cli);
    let counters = |out: &str| -> Value {
        out.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v.get("counters").is_some())
            .unwrap_or_else(|| panic!("no counters in {out}"))["counters"]["links"][0]["net"]
            .clone()
    };
    let row: Value = serde_json::from_str(cout.lines().next().unwrap()).unwrap();
    (counters(&sout), counters(&cout), row)
}

#[test]
fn loss_shows_as_psn_drops_and_retransmissions() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") || !common::need("nft", "nftables")
    {
        return;
    }
    let (s, c, row) = perf_over_lossy("ct", "write_bw", &["-n", "3000", "-s", "4096"]);
    // the responder saw packets out of sequence and said so; the requester resent
    assert!(s["psn_drops"].as_u64().unwrap() > 0, "server: {s}");
    assert!(s["naks_sent"].as_u64().unwrap() > 0, "server: {s}");
    assert!(c["retransmissions"].as_u64().unwrap() > 0, "client: {c}");
    // and nothing was refused or corrupt
    for v in [&s, &c] {
        assert_eq!(v["icrc_errors"], 0, "{v}");
        assert_eq!(v["access_violations"], 0, "{v}");
    }
    // every message arrived: the client's row reports all iterations
    assert_eq!(row["iterations"], 3000, "{row}");
}

/// A latency test's ping-pong sockets (a datagram at a time, plain calls) over a link
/// that loses 3% each way: every lost SEND, or its acknowledgement, is resent by its
/// requester, and every iteration completes — the last one too: two rocelink ends close
/// `write_lat` with an exchange, so an end whose last acknowledgement was lost finds its
/// peer still there to answer the retry.
#[test]
fn a_latency_test_on_ping_pong_sockets_recovers_every_loss() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") || !common::need("nft", "nftables")
    {
        return;
    }
    for (tag, test) in [("cw", "write_lat"), ("cs", "send_lat")] {
        let (s, c, row) = perf_over_lossy(tag, test, &["-n", "1000", "-s", "64"]);
        let resent =
            s["retransmissions"].as_u64().unwrap() + c["retransmissions"].as_u64().unwrap();
        assert!(resent > 0, "{test}: nothing resent: {s} {c}");
        for v in [&s, &c] {
            assert_eq!(v["icrc_errors"], 0, "{test}: {v}");
            assert_eq!(v["access_violations"], 0, "{test}: {v}");
        }
        assert_eq!(row["iterations"], 1000, "{test}: {row}");
    }
}

/// A veth pair (see [`perf_between`]) whose server end drops the RC acknowledgements it
/// sends that `pick` selects (an nftables expression over them in order, e.g. `numgen inc
/// mod 10 0`); `None` where the test cannot run (not root, no `ip` or `nft`).
fn dropping_server_acks(tag: &str, pick: &str) -> Option<common::VethPair> {
    if !common::root_or_ci() || !common::need("ip", "iproute2") || !common::need("nft", "nftables")
    {
        return None;
    }
    let ns = common::VethPair::new(tag, &["10.202.1.1/24"], &["10.202.1.2/24"]);
    let vb = &ns.vb;
    // the BTH's first byte (8 bytes into the UDP header) is the opcode; 17 is RC Acknowledge
    ns.nft(
        &ns.b,
        &format!(
            "table netdev rocelink_acks {{\n chain out {{ type filter hook egress device \"{vb}\" priority 0; udp dport 4791 @th,64,8 17 {pick} drop; }}\n}}\n"
        ),
    );
    Some(ns)
}

/// `write_lat` between two rocelink ends with the server's last acknowledgement dropped
/// (nftables counts the server's ACKs and drops the one that answers the client's last
/// WRITE): the client resends that WRITE after its timeout, and the server, waiting in the
/// closing exchange, answers it, so both ends finish every iteration.
#[test]
fn write_lat_survives_the_loss_of_its_last_acknowledgement() {
    const N: u32 = 200;
    // every N-th: the one that answers the client's last WRITE
    let Some(ns) = dropping_server_acks("cl", &format!("numgen inc mod {N} {}", N - 1)) else {
        return;
    };
    let n = N.to_string();
    let (s, c, row) = perf_between(&ns, "write_lat", &["-n", &n, "-s", "64"]);
    assert!(c["retransmissions"].as_u64().unwrap() > 0, "client: {c}");
    assert_eq!(s["retransmissions"], 0, "server: {s}");
    assert_eq!(row["iterations"], N, "{row}");
}

/// An end that has run every iteration keeps its row when its peer is stopped during the
/// closing exchange: every acknowledgement the server sends from the last iteration on is
/// dropped, so the client retries its last WRITE while the server waits in the close; the
/// client is then stopped (Ctrl-C) and leaves. Both print their rows and exit 0.
#[test]
fn a_finished_end_keeps_its_row_when_the_peer_leaves_in_the_close() {
    const N: u32 = 200;
    // the first N - 1 pass, every one after is dropped
    let Some(ns) = dropping_server_acks("cc", &format!("numgen inc mod 100000 >= {}", N - 1))
    else {
        return;
    };
    let n = N.to_string();
    let (srv, cli) = spawn_between(&ns, "write_lat", &["-n", &n, "-s", "64"]);
    // the iterations take milliseconds; then the client retries for as long as it runs
    std::thread::sleep(Duration::from_millis(1500));
    common::ctrl_c(cli.id());
    let (cout, cerr) = finish(cli);
    assert!(cerr.contains("stopped early (Ctrl-C)"), "client: {cerr}");
    let (sout, _) = finish(srv);
    let first = |out: &str| -> Value { serde_json::from_str(out.lines().next().unwrap()).unwrap() };
    assert_eq!(first(&sout)["iterations"], N, "server: {sout}");
    // the client's last WRITE was never acknowledged: it retried until it was stopped
    let retried = cout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["counters"]["links"][0]["net"]["retransmissions"].as_u64());
    assert!(retried > Some(0), "client: {cout}");
}

/// `receive` publishes the counters of its data link while frames arrive (the scatter
/// receive's datagrams included) and prints them at exit.
#[test]
fn receive_publishes_its_counters() {
    let emu = rocelink()
        .args([
            "emulate",
            "--ip",
            "127.0.51.2",
            "--bootp-target",
            "none",
            "--seconds",
            "60",
        ])
        .args(["--fps", "50"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !rocelink()
        .args(["read", "--device", "127.0.51.2", "0x80"])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "emulator never answered"
        );
    }
    let rx = rocelink()
        .args(["receive", "--device", "127.0.51.2", "--bind", "127.0.51.1"])
        .args(["--frame-size", "100000", "--seconds", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // frames flow within the first second; read the counters while they do
    let mut net = Value::Null;
    while t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(300));
        let o = rocelink()
            .args(["stats", &rx.id().to_string(), "--json"])
            .output()
            .unwrap();
        if !o.status.success() {
            continue;
        }
        let s: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(s["command"], "receive");
        assert_eq!(s["links"][0]["name"], "data");
        net = s["links"][0]["net"].clone();
        if net["roce_rx"].as_u64().unwrap_or(0) > 0 {
            break;
        }
    }
    assert!(net["roce_rx"].as_u64().unwrap() > 0, "{net}");
    assert_eq!(net["rx_packets"], net["roce_rx"], "{net}");
    assert_eq!(net["icrc_errors"], 0, "{net}");
    // a clean stream drops nothing: the device's first PSN is where it starts, not a gap
    assert_eq!(net["psn_drops"], 0, "{net}");
    let (_, err) = finish(rx);
    assert!(
        err.contains("rocelink receive: counters: RX pkgs "),
        "{err}"
    );
    // the emulated device publishes too: ECB requests in, data packets out
    let o = rocelink()
        .args(["stats", &emu.id().to_string(), "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["command"], "emulate");
    let dev = &s["links"][0];
    assert_eq!(dev["name"], "device", "{s}");
    assert_eq!(dev["local"], "127.0.51.2", "{s}");
    // the receiver saw no more data packets than the device sent
    let sent = dev["net"]["roce_tx"].as_u64().unwrap();
    assert!(sent >= net["roce_rx"].as_u64().unwrap(), "{s} {net}");
    assert!(
        dev["net"]["rx_packets"].as_u64().unwrap() > 0,
        "ECB requests: {s}"
    );
    common::ctrl_c(emu.id());
    let (_, err) = finish(emu);
    assert!(
        err.contains("rocelink emulate: counters: RX pkgs "),
        "{err}"
    );
}

#[test]
fn metrics_serve_loopback_unless_asked_and_many_clients_at_once() {
    // the wildcard is refused before anything binds, with the way out
    let out = rocelink()
        .args(["ims", "serve", "--metrics", "0.0.0.0:0", "--seconds", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--metrics-public"), "{err}");
    // on loopback, a port of its choosing, named at start
    let port = rocelink_testkit::ports::free_udp_port(&["127.0.0.71"]).to_string();
    let mut c = rocelink()
        .args([
            "ims",
            "serve",
            "--bind",
            "127.0.0.71",
            "--port",
            &port,
            "--metrics",
            "127.0.0.1:0",
            "--seconds",
            "10",
            "--quiet",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(c.stderr.take().unwrap());
    let line = until(&mut err, "metrics at");
    let url = line.split("http://").nth(1).unwrap().trim();
    let addr: std::net::SocketAddr = url.trim_end_matches("/metrics").parse().unwrap();
    // idle connections do not hold up a reader
    let idle: Vec<_> = (0..5)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let get = || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        body
    };
    let t = Instant::now();
    let first = get();
    assert!(first.starts_with("HTTP/1.1 200 OK"), "{first}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    // the counters, once the unit published them (every 100 ms)
    let body = (0..30)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            get()
        })
        .find(|b| b.contains("rocelink_roce_rx_total"));
    assert!(body.is_some(), "no counters in 3 s");
    drop(idle);
    let _ = c.kill();
    let _ = c.wait();
}

#[test]
fn a_second_ctrl_c_exits_at_once_and_leaves_no_control_socket() {
    // the control socket goes to $XDG_RUNTIME_DIR/rocelink when that is ours: a private
    // one for this test, to look into
    let run = std::env::temp_dir().join(format!("rocelink-2ctrlc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run);
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    for round in 0..3 {
        let ip = rocelink_testkit::ports::free_roce_ips(1)[0].to_string();
        let port = rocelink_testkit::ports::free_tcp_port().to_string();
        let mut srv = rocelink()
            .args(["perf", "write_bw", "--bind", &ip, "-p", &port])
            .env("XDG_RUNTIME_DIR", &run)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(srv.stdout.take().unwrap());
        until(&mut out, "Waiting for client");
        let sock = run.join("rocelink").join(format!("{}.sock", srv.id()));
        assert!(
            sock.exists(),
            "round {round}: no control socket at {}",
            sock.display()
        );
        // two stop signals at once: the second exits before the clean stop is done. Two
        // SIGINTs could merge into one pending signal; SIGINT then SIGTERM cannot. The two
        // may reach two threads at the same moment: exactly one of them must count as first
        let pid = srv.id() as libc::pid_t;
        // SAFETY: signals a child this test spawned and has not yet waited for
        unsafe {
            assert_eq!(libc::kill(pid, libc::SIGINT), 0);
            assert_eq!(libc::kill(pid, libc::SIGTERM), 0);
        }
        let st = srv.wait().unwrap();
        assert_eq!(st.code(), Some(130), "round {round}: {st}");
        assert!(
            !sock.exists(),
            "round {round}: {} left behind",
            sock.display()
        );
    }
    let _ = std::fs::remove_dir_all(&run);
}
