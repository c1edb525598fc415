//! `rocelink perf`: perftest's six tests as two processes over loopback (server and client
//! each a rocelink), their rows and counters; and bad input refused before anything is bound.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn rocelink() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocelink"))
}

/// Run `test` between a server on 127.0.0.`ips.0` and a client on 127.0.0.`ips.1` (TCP
/// `port`); the client's JSON lines and the server's text.
fn pair(test: &str, ips: (u8, u8), port: u16, extra: &[&str]) -> (Vec<Value>, String) {
    let port = port.to_string();
    let (sip, cip) = (format!("127.0.0.{}", ips.0), format!("127.0.0.{}", ips.1));
    let mut srv = rocelink()
        .args(["perf", test, "--bind", &sip, "-p", &port, "--timeout", "20"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // the server says it waits once it listens
    let mut out = BufReader::new(srv.stdout.take().unwrap());
    let mut text = String::new();
    while !text.contains("Waiting for client") {
        assert!(
            out.read_line(&mut text).unwrap() > 0,
            "server ended: {text}"
        );
    }
    let cli = rocelink()
        .args(["perf", test, &sip, "--bind", &cip, "-p", &port])
        .args(["--timeout", "20", "--json"])
        .args(extra)
        .output()
        .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let st = srv.wait().unwrap();
    assert!(
        cli.status.success(),
        "{test} client: {}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert!(st.success(), "{test} server: {text}{rest}");
    let lines = String::from_utf8(cli.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, text + &rest)
}

#[test]
fn all_six_tests_run_between_two_processes() {
    for (k, test) in [
        "write_bw",
        "read_bw",
        "send_bw",
        "write_lat",
        "read_lat",
        "send_lat",
    ]
    .into_iter()
    .enumerate()
    {
        let bw = test.ends_with("_bw");
        let size = if bw { "8192" } else { "64" };
        let (rows, server) = pair(
            test,
            (95, 96),
            19_110 + k as u16,
            &["-n", "300", "-s", size],
        );
        let row = &rows[0];
        assert_eq!(row["bytes"], if bw { 8192 } else { 64 }, "{test}: {row}");
        assert_eq!(row["iterations"], 300, "{test}: {row}");
        if bw {
            let avg = row["bw_average"].as_f64().unwrap();
            assert!(
                avg > 0.0 && avg <= row["bw_peak"].as_f64().unwrap() + 1e-6,
                "{row}"
            );
            // the server prints a row too: the client's report (WRITE/READ) or its own
            assert!(server.contains(" 8192 "), "{test} server: {server}");
        } else {
            let (min, med, max) = (
                row["t_min"].as_f64().unwrap(),
                row["t_typical"].as_f64().unwrap(),
                row["t_max"].as_f64().unwrap(),
            );
            assert!(0.0 < min && min <= med && med <= max, "{test}: {row}");
        }
        // perftest's address lines on the server, the GID in decimal
        assert!(
            server.contains(" remote address: LID 0000 QPN 0x"),
            "{server}"
        );
        assert!(server.contains(" GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:96"));
        // the counters: every message went once, nothing was refused
        let c = &rows[1]["counters"]["links"][0]["net"];
        assert_eq!(c["retransmissions"], 0, "{test}: {c}");
        assert_eq!(c["icrc_errors"], 0, "{test}: {c}");
        assert_eq!(c["access_violations"], 0, "{test}: {c}");
        assert!(c["ibv_tx"].as_u64().unwrap() >= 300, "{test}: {c}");
        assert_eq!(c["roce_rx"], c["rx_packets"], "{test}: {c}");
    }
}

#[test]
fn a_size_sweep_and_uc_writes() {
    let (rows, _) = pair(
        "write_bw",
        (97, 98),
        19_120,
        &["-n", "50", "-c", "UC", "-s", "4096"],
    );
    assert_eq!(rows[0]["iterations"], 50);
    let (rows, _) = pair("send_lat", (97, 98), 19_121, &["-n", "20", "-a"]);
    let sizes: Vec<u64> = rows[..23]
        .iter()
        .map(|r| r["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, (1..24).map(|i| 1u64 << i).collect::<Vec<_>>());
}

#[test]
fn bad_input_is_refused_before_anything_is_bound() {
    for (args, want) in [
        (vec!["perf", "write_foo"], "unknown test"),
        (vec!["perf", "read_bw", "-c", "UC"], "READ needs RC"),
        (vec!["perf", "write_bw", "-m", "1500"], "MTU must be"),
        (vec!["perf", "write_bw", "-q", "2"], "only one QP"),
        (
            vec!["perf", "write_bw", "-a", "-s", "64"],
            "exclude each other",
        ),
        (vec!["perf", "write_lat", "-s", "1"], "at least 2 bytes"),
        (vec!["perf", "send_bw", "-c", "UD"], "not supported yet"),
    ] {
        let o = rocelink().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // no server: the error names it
    let o = rocelink()
        .args([
            "perf",
            "write_bw",
            "127.0.0.99",
            "-p",
            "19129",
            "--timeout",
            "2",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot connect to the perftest server at 127.0.0.99:19129"),
        "{err}"
    );
}

/// Ctrl-C while a server waits for its client ends it cleanly: exit 0, its control socket
/// removed.
#[test]
fn ctrl_c_ends_a_waiting_server() {
    let mut srv = rocelink()
        .args(["perf", "write_bw", "--bind", "127.0.0.99", "-p", "19128"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(srv.stdout.take().unwrap());
    let mut text = String::new();
    while !text.contains("Waiting for client") {
        assert!(
            out.read_line(&mut text).unwrap() > 0,
            "server ended: {text}"
        );
    }
    let sock = std::fs::read_dir(rocelink_runtime::control::socket_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_str().unwrap() == format!("{}.sock", srv.id()))
        .expect("a control socket while it waits");
    let t = std::time::Instant::now();
    assert!(
        Command::new("kill")
            .args(["-INT", &srv.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let st = srv.wait().unwrap();
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut srv.stderr.take().unwrap(), &mut err).unwrap();
    assert!(st.success(), "{st}: {err}");
    assert!(err.contains("stopped before a client connected"), "{err}");
    assert!(!sock.exists(), "{} left behind", sock.display());
}
