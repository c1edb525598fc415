//! `rocelink perf`: perftest's six tests as two processes over loopback (server and client
//! each a rocelink), their rows and counters; and bad input refused before anything is bound.
#![allow(clippy::unwrap_used)]

mod common;

use common::ctrl_c;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};

fn rocelink() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocelink"))
}

/// Read `out` into `text` until it holds `what` (the process must not end before).
fn wait_for(out: &mut BufReader<ChildStdout>, text: &mut String, what: &str) {
    while !text.contains(what) {
        assert!(
            out.read_line(text).unwrap() > 0,
            "ended before {what:?}: {text}"
        );
    }
}

/// `rocelink perf ARGS` as a server, once it says it waits for its client (it listens):
/// the process, its output and what it printed so far.
fn server(args: &[&str]) -> (Child, BufReader<ChildStdout>, String) {
    let mut srv = rocelink()
        .arg("perf")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(srv.stdout.take().unwrap());
    let mut text = String::new();
    wait_for(&mut out, &mut text, "Waiting for client");
    (srv, out, text)
}

/// A `rocelink perf ARGS --json --no-control` client, interrupted (Ctrl-C) half a second
/// after its server printed `ready` (read from the server's output and what it printed so
/// far): it must exit 0 saying it stopped early. Returns its first row.
fn stopped_client(
    args: &[&str],
    (sout, text, ready): (&mut BufReader<ChildStdout>, &mut String, &str),
) -> Value {
    let cli = rocelink()
        .arg("perf")
        .args(args)
        .args(["--json", "--no-control"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(sout, text, ready);
    std::thread::sleep(std::time::Duration::from_millis(500));
    ctrl_c(cli.id());
    let out = cli.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} {}: {err}", out.status);
    assert!(err.contains("stopped early (Ctrl-C)"), "{args:?}: {err}");
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap()
}

/// Run `test` between a server on 127.0.0.`ips.0` and a client on 127.0.0.`ips.1` (TCP
/// `port`); the client's JSON lines and the server's text.
fn pair(test: &str, ips: (u8, u8), port: u16, extra: &[&str]) -> (Vec<Value>, String) {
    pair_with(test, ips, port, extra, &[])
}

/// [`pair`], with `client` options given to the client alone.
fn pair_with(
    test: &str,
    ips: (u8, u8),
    port: u16,
    extra: &[&str],
    client: &[&str],
) -> (Vec<Value>, String) {
    let port = port.to_string();
    let (sip, cip) = (format!("127.0.0.{}", ips.0), format!("127.0.0.{}", ips.1));
    let mut args = vec![test, "--bind", &sip, "-p", &port, "--timeout", "20"];
    args.extend_from_slice(extra);
    let (mut srv, mut out, text) = server(&args);
    let cli = rocelink()
        .args(["perf", test, &sip, "--bind", &cip, "-p", &port])
        .args(["--timeout", "20", "--json"])
        .args(extra)
        .args(client)
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
        (
            vec!["perf", "write_lat", "-q", "2"],
            "only available on bw tests",
        ),
        (vec!["perf", "write_bw", "-q", "0"], "-q"),
        (
            vec!["perf", "write_bw", "-c", "UD"],
            "only possible in SEND",
        ),
        (
            vec!["perf", "read_lat", "--run_infinitely"],
            "only in bw tests",
        ),
        (
            vec!["perf", "write_bw", "--min-size", "3"],
            "not a power of two",
        ),
        (vec!["perf", "write_bw", "--min-size", "64"], "--max-size"),
        (
            vec!["perf", "write_bw", "--min-size", "64", "--max-size", "32"],
            "larger than --max-size",
        ),
        (
            vec![
                "perf",
                "write_bw",
                "-a",
                "--min-size",
                "2",
                "--max-size",
                "8",
            ],
            "exclude each other",
        ),
        (
            vec!["perf", "write_bw", "--plot", "/nonexistent-dir/x.svg"],
            "no directory",
        ),
        (
            vec!["perf", "write_bw", "--run_infinitely", "--plot", "x.svg"],
            "needs a run that ends",
        ),
        (
            vec!["perf", "write_bw", "-a", "-s", "64"],
            "exclude each other",
        ),
        (vec!["perf", "write_lat", "-s", "1"], "at least 2 bytes"),
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
    let (mut srv, _out, _) = server(&["write_bw", "--bind", "127.0.0.99", "-p", "19128"]);
    let sock = std::fs::read_dir(rocelink_runtime::control::socket_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_str().unwrap() == format!("{}.sock", srv.id()))
        .expect("a control socket while it waits");
    let t = std::time::Instant::now();
    ctrl_c(srv.id());
    let st = srv.wait().unwrap();
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut srv.stderr.take().unwrap(), &mut err).unwrap();
    assert!(st.success(), "{st}: {err}");
    assert!(err.contains("stopped before a client connected"), "{err}");
    assert!(!sock.exists(), "{} left behind", sock.display());
}

/// `-q`: every QP runs the iterations (perftest's `#iterations` counts all of them, as
/// perftest 6.06 prints it against rocelink over rxe) and each shows
/// in the counters; a SEND server re-posts only what the rest of a size needs, so `-a`
/// runs size after size.
#[test]
fn several_qps_each_run_the_iterations() {
    let (rows, server) = pair("write_bw", (102, 103), 19_132, &["-q", "4", "-n", "200"]);
    assert_eq!(rows[0]["iterations"], 4 * 200, "{}", rows[0]);
    let link = &rows[1]["counters"]["links"][0];
    let qps = link["qps"].as_array().unwrap();
    assert_eq!(qps.len(), 4, "{link}");
    for q in qps {
        // 200 messages of 65536 bytes at MTU 4096 (loopback), and what was sent again
        // if loopback dropped under the load of parallel tests
        let c = &q["counters"];
        let resent = c["retransmissions"].as_u64().unwrap();
        let sent = c["tx_packets"].as_u64().unwrap();
        assert!(sent >= 200 * 16 && (resent > 0 || sent == 200 * 16), "{q}");
    }
    assert_eq!(server.matches(" remote address: ").count(), 4, "{server}");
    assert!(server.contains(" Number of qps   : 4"), "{server}");
    let (rows, _) = pair(
        "send_bw",
        (102, 103),
        19_133,
        &[
            "-q",
            "2",
            "-n",
            "40",
            "--min-size",
            "512",
            "--max-size",
            "4096",
        ],
    );
    // -D: perftest's duration mode, measured between the margins, no peak
    let (timed, server) = pair(
        "write_bw",
        (102, 103),
        19_141,
        &["-D", "2", "-f", "0", "-s", "4096"],
    );
    assert_eq!(timed[0]["bw_peak"], 0.0, "{}", timed[0]);
    assert!(timed[0]["iterations"].as_u64().unwrap() > 0, "{}", timed[0]);
    assert!(
        server.contains("WARNING: BW peak won't be measured"),
        "{server}"
    );
    let got: Vec<(u64, u64)> = rows[..4]
        .iter()
        .map(|r| {
            (
                r["bytes"].as_u64().unwrap(),
                r["iterations"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [(512, 80), (1024, 80), (2048, 80), (4096, 80)]);
}

/// `-c UD` (SEND tests, as perftest): a message fits one packet, so a larger size becomes
/// the MTU and `-a` stops there; receives carry the GRH slot.
#[test]
fn ud_sends_fit_one_packet() {
    let (rows, server) = pair("send_bw", (104, 105), 19_134, &["-c", "UD", "-n", "300"]);
    // 65536 by default; loopback's MTU is 4096
    assert_eq!(
        (rows[0]["bytes"].as_u64(), rows[0]["iterations"].as_u64()),
        (Some(4096), Some(300))
    );
    assert!(server.contains(" Connection type : UD"), "{server}");
    assert!(
        server.contains("WARNING: BW peak won't be measured"),
        "{server}"
    );
    let (rows, _) = pair(
        "send_bw",
        (104, 105),
        19_135,
        &["-c", "UD", "-a", "-n", "30"],
    );
    let sizes: Vec<u64> = rows.iter().filter_map(|r| r["bytes"].as_u64()).collect();
    assert_eq!(sizes, (1..13).map(|i| 1u64 << i).collect::<Vec<_>>());
    let (rows, _) = pair(
        "send_lat",
        (104, 105),
        19_136,
        &["-c", "UD", "-n", "200", "-s", "32"],
    );
    assert_eq!(rows[0]["iterations"], 200);
    assert!(rows[0]["t_typical"].as_f64().unwrap() > 0.0);
}

/// `--out_json` writes perftest's report file; `--min-size/--max-size` sweep the powers of
/// two between them and `--plot` draws the rows.
#[test]
fn out_json_and_a_plotted_sweep() {
    let dir = std::env::temp_dir().join(format!("rocelink-perf-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, svg) = (dir.join("report.json"), dir.join("sweep.svg"));
    let (rows, _) = pair_with(
        "write_lat",
        (106, 107),
        19_137,
        &["-n", "100", "--min-size", "64", "--max-size", "1024"],
        &[
            "--out_json",
            "--out_json_file",
            json.to_str().unwrap(),
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    let sizes: Vec<u64> = rows.iter().filter_map(|r| r["bytes"].as_u64()).collect();
    assert_eq!(sizes, [64, 128, 256, 512, 1024]);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["test_info"]["test"], "RDMA_Write_Latency_Test", "{v}");
    assert_eq!(v["test_info"]["Connection_type"], "RC");
    assert_eq!(v["test_info"]["Mtu"], 4096);
    // perftest rewrites the file after each size: the last row is in it
    assert_eq!(v["results"]["MsgSize"], 1024);
    assert_eq!(v["results"]["n_iterations"], 100);
    assert_eq!(v["results"]["t_typical"], rows[4]["t_typical"], "{v}");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(
        s.starts_with("<svg") && s.contains("t_typical") && s.contains(">1K<"),
        "{s}"
    );
    assert_eq!(
        s.matches("<circle").count(),
        3 * 5,
        "three series of five sizes"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--run_infinitely`: a row per `-D` period until Ctrl-C, which ends the client cleanly;
/// the server learns the end from the closed exchange and prints its own row — in every
/// bandwidth test, whether the server was told `--run_infinitely` too or not.
#[test]
fn run_infinitely_until_ctrl_c() {
    for test in ["write_bw", "read_bw", "send_bw"] {
        for server_too in [true, false] {
            run_infinitely(test, server_too);
        }
    }
}

fn run_infinitely(test: &str, server_too: bool) {
    let port = rocelink_testkit::ports::free_udp_port(&["127.0.0.112"]).to_string();
    let port = port.as_str();
    let mut args = vec![test, "--bind", "127.0.0.112", "-p", port, "--no-control"];
    if server_too {
        args.extend(["--run_infinitely", "-D", "1"]);
    }
    let (mut srv, mut sout, text) = server(&args);
    let mut cli = rocelink()
        .args([
            "perf",
            test,
            "127.0.0.112",
            "--bind",
            "127.0.0.113",
            "-p",
            port,
        ])
        .args(["--run_infinitely", "-D", "1", "--json", "--no-control"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cout = BufReader::new(cli.stdout.take().unwrap());
    let mut rows = Vec::new();
    while rows.len() < 2 {
        let mut l = String::new();
        assert!(
            cout.read_line(&mut l).unwrap() > 0,
            "client ended after {rows:?}"
        );
        let v: Value = serde_json::from_str(&l).unwrap();
        rows.push(v);
    }
    for (i, r) in rows.iter().enumerate() {
        // no peak running infinitely (as perftest); a period's messages and rate. A SEND
        // server not told to run infinitely posts receives for its count only: after
        // that the client's SENDs wait (RNR) and its periods are empty
        assert_eq!(r["bw_peak"], 0.0, "{r}");
        if server_too || test != "send_bw" || i == 0 {
            assert!(r["iterations"].as_u64().unwrap() > 0, "{r}");
            assert!(r["bw_average"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    ctrl_c(cli.id());
    let st = cli.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut cli.stderr.take().unwrap(), &mut err).unwrap();
    assert!(st.success(), "{test} client {st}: {err}");
    let sst = srv.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut sout, &mut rest).unwrap();
    let mut serr = String::new();
    std::io::Read::read_to_string(&mut srv.stderr.take().unwrap(), &mut serr).unwrap();
    let what = format!("{test} server (--run_infinitely: {server_too}) {sst}: {text}{rest}{serr}");
    assert!(sst.success(), "{what}");
    assert!(rest.contains("Client closed connection"), "{what}");
    // the server's own row: 64 KiB messages, some of them, at some rate
    let row: Vec<f64> = rest
        .lines()
        .find(|l| l.trim_start().starts_with("65536"))
        .unwrap_or_else(|| panic!("no row: {what}"))
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    assert!(row[1] > 0.0 && row[3] > 0.0, "{what}");
}

/// Ctrl-C in the middle of a bandwidth run stops it early and still reports: the client's
/// row covers what completed, the exchange finishes, and the server prints the same row;
/// both exit 0.
#[test]
fn ctrl_c_mid_run_reports_what_completed() {
    let port = "19140";
    let (mut srv, mut sout, mut text) = server(&[
        "write_bw",
        "--bind",
        "127.0.0.108",
        "-p",
        port,
        "--no-control",
        "-n",
        "100000000",
    ]);
    // the server prints its column titles once the exchange is over and the client posts
    let row = stopped_client(
        &[
            "write_bw",
            "127.0.0.108",
            "--bind",
            "127.0.0.109",
            "-p",
            port,
            "-n",
            "100000000",
        ],
        (&mut sout, &mut text, "#bytes"),
    );
    let n = row["iterations"].as_u64().unwrap();
    assert!(n > 0 && n < 100_000_000, "{row}");
    let st = srv.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut sout, &mut rest).unwrap();
    assert!(st.success(), "server {st}: {rest}");
    // the server prints the client's report: the same count
    assert!(
        rest.contains(&format!(" 65536      {n:<10}")),
        "{n}: {rest}"
    );
}

/// Ctrl-C in the middle of a latency run: the stopped end prints the row of what completed
/// and exits 0; its peer sees the exchange's connection close, ends at once (not at its
/// deadline), prints its own row of what completed, says the peer left, and exits 0. A READ
/// latency server, passive, closes with its stopped client.
#[test]
fn ctrl_c_mid_latency_run_ends_both_sides_with_what_completed() {
    for (i, test) in ["write_lat", "send_lat", "read_lat"]
        .into_iter()
        .enumerate()
    {
        let (sip, cip) = (
            format!("127.0.0.{}", 146 + 2 * i),
            format!("127.0.0.{}", 147 + 2 * i),
        );
        let port = (19141 + i).to_string();
        let common = ["-p", &port, "-n", "100000000"];
        let (mut srv, mut sout, mut text) =
            server(&[&[test, "--bind", &sip, "--no-control"][..], &common].concat());
        // a passive READ server prints no column titles: its address lines, then
        let row = stopped_client(
            &[&[test, &sip, "--bind", &cip][..], &common].concat(),
            (&mut sout, &mut text, "remote address"),
        );
        let n = row["iterations"].as_u64().unwrap();
        assert!((2..100_000_000).contains(&n), "{test}: {row}");
        assert!(row["t_typical"].as_f64().unwrap() > 0.0, "{test}: {row}");
        // the server ends long before its deadline (a minute)
        let t0 = std::time::Instant::now();
        let st = loop {
            if let Some(st) = srv.try_wait().unwrap() {
                break st;
            }
            if t0.elapsed() > std::time::Duration::from_secs(20) {
                let _ = srv.kill();
                panic!("{test}: the server did not see its client go");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut sout, &mut rest).unwrap();
        let mut serr = String::new();
        std::io::Read::read_to_string(&mut srv.stderr.take().unwrap(), &mut serr).unwrap();
        assert!(st.success(), "{test} server {st}: {rest}\n{serr}");
        if test != "read_lat" {
            assert!(serr.contains("the peer left after"), "{test}: {serr}");
            // a row of what completed: the size, then a count short of the iterations asked
            let row = rest
                .lines()
                .find(|l| l.trim_start().starts_with("2 "))
                .unwrap_or_else(|| panic!("{test}: no row in {rest}"));
            let m: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
            assert!((2..100_000_000).contains(&m), "{test}: {row}");
        }
    }
}

/// Two rocelink sides say which test they run: a mismatch is refused on both, naming both
/// tests. A READ latency server prints no columns (no row follows, as perftest); the
/// counters table comes only with --counters; the header names a rocelink peer as such.
#[test]
fn mismatched_tests_are_refused_and_output_is_perftests() {
    let port = rocelink_testkit::ports::free_udp_port(&["127.0.0.117"]).to_string();
    let (mut srv, mut sout, _) = server(&["write_bw", "--bind", "127.0.0.117", "-p", &port]);
    let cli = rocelink()
        .args([
            "perf",
            "read_bw",
            "127.0.0.117",
            "--bind",
            "127.0.0.118",
            "-p",
            &port,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&cli.stderr);
    assert_eq!(cli.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the peer runs write_bw over RC, this side read_bw over RC"),
        "{err}"
    );
    let st = srv.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut sout, &mut rest).unwrap();
    assert!(!st.success(), "the server refused it too: {rest}");
    // read_lat: the server's output ends at the address lines
    let (_, text) = pair("read_lat", (119, 120), port.parse().unwrap(), &["-n", "50"]);
    assert!(!text.contains("t_min"), "{text}");
    assert!(text.contains("peer rocelink, perftest 6.27"), "{text}");
    // the counters table on request only
    for (flag, shown) in [(None, false), (Some("--counters"), true)] {
        let port = rocelink_testkit::ports::free_udp_port(&["127.0.0.121"]).to_string();
        let (mut srv, _out, _) = server(&[
            "write_lat",
            "--bind",
            "127.0.0.121",
            "-p",
            &port,
            "-n",
            "50",
        ]);
        let cli = rocelink()
            .args([
                "perf",
                "write_lat",
                "127.0.0.121",
                "--bind",
                "127.0.0.122",
                "-p",
                &port,
            ])
            .args(["-n", "50"])
            .args(flag)
            .output()
            .unwrap();
        srv.wait().unwrap();
        let err = String::from_utf8_lossy(&cli.stderr);
        assert!(cli.status.success(), "{err}");
        assert_eq!(err.contains("NET STATS"), shown, "{flag:?}: {err}");
    }
}

#[test]
fn a_server_told_its_address_refuses_a_held_port_before_any_client() {
    // before, the port was bound only once a client had come: the server waited, and the
    // client saw its connection reset
    let held = std::net::UdpSocket::bind("127.0.0.233:4791").unwrap();
    let mut srv = rocelink()
        .args(["perf", "write_lat", "--bind", "127.0.0.233", "-p", "19233"])
        .arg("--no-control")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // bounded: a server still waiting after 10 s has not refused the port
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while srv.try_wait().unwrap().is_none() {
        if std::time::Instant::now() >= give_up {
            let _ = srv.kill();
            panic!("the server waits for a client on a port it cannot bind");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(held);
    let out = srv.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("cannot bind RoCE UDP socket 127.0.0.233:4791"),
        "{err}"
    );
}

/// What a latency test puts on the wire, captured on the loopback device by `dumpcap` (the
/// kernel's own IP headers) and checked by `rocelink decode --strict`: every ICRC holds. The
/// ICRC covers the IPv4 Identification, which the socket's kernel chooses, so this fails if
/// the socket sends anything but what rocelink computed for (a connected socket numbers its
/// datagrams).
#[test]
fn a_latency_test_puts_correct_icrcs_on_the_wire() {
    if !rocelink_testkit::netns::root_or_ci() || !rocelink_testkit::netns::need("dumpcap", "tshark")
    {
        return;
    }
    let pcap = std::env::temp_dir().join(format!("rocelink-lat-{}.pcap", std::process::id()));
    let _ = std::fs::remove_file(&pcap);
    let mut cap = Command::new("dumpcap")
        .args([
            "-i",
            "lo",
            "-q",
            "-f",
            "udp port 4791 and host 127.0.0.135",
            "-w",
        ])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // dumpcap creates the file once it captures
    let t0 = std::time::Instant::now();
    while !pcap.exists() {
        assert!(t0.elapsed().as_secs() < 10, "dumpcap did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (rows, _) = pair("write_lat", (135, 136), 19_153, &["-n", "300", "-s", "2"]);
    assert_eq!(rows[0]["iterations"], 300);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // dumpcap ends its file cleanly on SIGINT
    let _ = Command::new("kill")
        .args(["-INT", &cap.id().to_string()])
        .status();
    cap.wait().unwrap();
    let out = rocelink()
        .args(["decode", "--strict"])
        .arg(&pcap)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&pcap);
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // both WRITEs and ACKs, both ways: 300 iterations, four packets each
    let summary = text.lines().find(|l| l.contains("ICRC verified")).unwrap();
    let verified: u64 = summary
        .split(" RoCE v2 (")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(verified >= 1200, "{summary}");
    assert!(summary.contains(", 0 failed"), "{summary}");
}
