//! `rocelink ims serve` and `rocelink ims send` as two processes: over loopback (10 GiB,
//! every frame's §4 CRC and VA checked by the buffer unit), across two network namespaces
//! with nftables loss on the veth (1 GiB), Ctrl-C, and bad input refused up front.
#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn rocelink() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocelink"))
}

fn spawn(prefix: &[&str], args: &[&str]) -> Child {
    let mut c = match prefix.split_first() {
        Some((p, rest)) => {
            let mut c = Command::new(p);
            c.args(rest).arg(env!("CARGO_BIN_EXE_rocelink"));
            c
        }
        None => rocelink(),
    };
    c.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn json_of(c: Child) -> (Option<i32>, Value, String) {
    let out = c.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: stdout {stdout:?} stderr {stderr}"));
    (out.status.code(), v, stderr)
}

/// Serve until `frames` were consumed; send `bytes` in `frame`-byte frames; both JSON
/// summaries after both exited 0.
fn stream(
    ns: Option<(&str, &str)>,
    ip: &str,
    bytes: &str,
    frame: &str,
    extra: &[&str],
) -> (Value, Value) {
    // a free port in this namespace (4791 may be someone else's); in a namespace of the
    // test's own, RoCE's own
    let port = match ns {
        Some(_) => 4791,
        None => free_port(ip),
    };
    let (port_s, unit) = (port.to_string(), format!("{ip}:{port}"));
    let total = common_bytes(bytes) / common_bytes(frame);
    let (ps, pw) = match ns {
        Some((s, w)) => (
            vec!["ip", "netns", "exec", s],
            vec!["ip", "netns", "exec", w],
        ),
        None => (vec![], vec![]),
    };
    let frames = total.to_string();
    let serve = spawn(
        &ps,
        &[
            "ims",
            "serve",
            "--bind",
            ip,
            "--port",
            &port_s,
            "--ring",
            "64M",
            "--frames",
            &frames,
            "--seconds",
            "300",
            "--json",
        ],
    );
    let mut args = vec![
        "ims",
        "send",
        &unit,
        "--bytes",
        bytes,
        "--frame",
        frame,
        "--timeout",
        "0.05",
        // a unit silent for three short timeouts is only a stalled machine here (the
        // silence rule has its own test): the stream must not end on one
        "--silence",
        "30",
        "--json",
    ];
    args.extend_from_slice(extra);
    let send = spawn(&pw, &args);
    let (wc, w, we) = json_of(send);
    let (sc, s, se) = json_of(serve);
    assert_eq!(wc, Some(0), "worker: {w} {we}");
    assert_eq!(sc, Some(0), "server: {s} {se}");
    (w, s)
}

/// A UDP port free on the unit's address and on 127.0.0.1 (where a loopback worker binds).
fn free_port(ip: &str) -> u16 {
    rocelink_testkit::ports::free_udp_port(&[ip, "127.0.0.1"])
}

fn common_bytes(s: &str) -> u64 {
    let (n, unit) = s.split_at(s.len() - 1);
    n.parse::<u64>().unwrap()
        * match unit {
            "K" => 1 << 10,
            "M" => 1 << 20,
            "G" => 1 << 30,
            _ => panic!("{s}"),
        }
}

/// Every frame delivered once, intact, at both ends' count.
fn assert_complete(w: &Value, s: &Value, frames: u64) {
    assert_eq!(w["frames"], frames, "{w}");
    assert_eq!(w["state"], "Done", "{w}");
    assert_eq!(s["frames_delivered"], frames, "{s}");
    assert_eq!(s["frames_consumed"], frames, "{s}");
    assert_eq!(s["image_crc_failures"], 0, "{s}");
    assert_eq!(s["bytes"], w["bytes"]);
    for k in [
        "acked",
        "nacked",
        "retransmissions",
        "timeouts",
        "window_stalls",
        "gbps",
        "seconds",
    ] {
        assert!(!w[k].is_null(), "worker JSON lacks {k}: {w}");
    }
    for k in ["out_of_window", "duplicates", "nacked"] {
        assert!(!s[k].is_null(), "server JSON lacks {k}: {s}");
    }
    // both ends' network counters: what one received, the other sent (all of it, or less
    // where packets were lost), every data packet among them, no ICRC error
    let net = |v: &Value, k: &str| v["counters"]["links"][0]["net"][k].as_u64().unwrap();
    assert!(net(s, "roce_rx") <= net(w, "roce_tx"), "{s} {w}");
    assert!(net(w, "roce_rx") <= net(s, "roce_tx"), "{s} {w}");
    let data = s["bytes"].as_u64().unwrap().div_ceil(4096);
    assert!(net(s, "roce_rx") >= data, "{data} data packets: {s}");
    assert_eq!(net(s, "icrc_errors") + net(w, "icrc_errors"), 0);
    assert_eq!(s["counters"]["command"], "ims serve");
    assert_eq!(w["counters"]["command"], "ims send");
}

#[test]
fn loopback_streams_ten_gib_with_every_frame_checked() {
    // every 1024th frame goes out marked "end of bad frame" the first time
    let (w, s) = stream(
        None,
        "127.0.0.61",
        "10G",
        "1M",
        &["--in-flight", "4", "--mark-bad", "ebf:1024"],
    );
    assert_complete(&w, &s, 10 * 1024);
    assert_eq!(w["marked"], 10, "{w}");
    assert_eq!(s["nacked"]["end_of_bad_frame"], 10, "{s}");
    assert_eq!(w["nacked"]["end_of_bad_frame"], 10, "{w}");
    // the unit received the WRITEs straight into its ring: all but each frame's first
    // packet or two (taken alone, as they say where the rest goes) landed in place
    let link = &s["counters"]["links"][0]["net"];
    let landed = link["landed"].as_u64().unwrap_or(0);
    let packets = 10 * 1024 * 256;
    assert!(
        landed > packets * 9 / 10,
        "landed {landed} of {packets}: {s}"
    );
    eprintln!(
        "ims loopback: {:.2} Gbit/s, {} retransmissions",
        w["gbps"].as_f64().unwrap(),
        w["retransmissions"]
    );
}

#[test]
fn namespaces_with_loss_stream_one_gib_intact() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") || !common::need("nft", "nftables")
    {
        return;
    }
    let p = common::VethPair::new("ims", &["10.202.0.1/24"], &["10.202.0.2/24"]);
    let vb = &p.vb;
    // 0.5% of RoCE datagrams lost each way on B's end of the wire (frames to the buffer
    // unit go to port 4791; its answers come from it)
    p.nft(
        &p.b,
        &format!(
            "table netdev rocelink_loss {{\n chain in {{ type filter hook ingress device \"{vb}\" priority 0; udp dport 4791 numgen random mod 1000 < 5 drop; }}\n chain out {{ type filter hook egress device \"{vb}\" priority 0; udp sport 4791 numgen random mod 1000 < 5 drop; }}\n}}\n"
        ),
    );
    let (w, s) = stream(
        Some((&p.b, &p.a)),
        "10.202.0.2",
        "1G",
        "256K",
        &[
            "--bind",
            "10.202.0.1",
            "--in-flight",
            "8",
            "--packet",
            "1408",
        ],
    );
    assert_complete(&w, &s, 4096);
    assert!(
        w["retransmissions"].as_u64().unwrap() > 0,
        "loss must cost retransmissions: {w}"
    );
    // the veth's 1500-byte MTU does not take 4096-byte packets: said so, with the fix
    let serve = spawn(
        &["ip", "netns", "exec", &p.b],
        &[
            "ims",
            "serve",
            "--bind",
            "10.202.0.2",
            "--ring",
            "1M",
            "--seconds",
            "20",
            "--quiet",
        ],
    );
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &p.a,
            env!("CARGO_BIN_EXE_rocelink"),
            "ims",
            "send",
            "10.202.0.2",
            "--bind",
            "10.202.0.1",
            "--frames",
            "1",
            "--quiet",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--packet 1408"),
        "{err}"
    );
    assert!(common::sh(&["kill", "-INT", &serve.id().to_string()]));
    let _ = serve.wait_with_output();
    assert!(s["nacks"].as_u64().unwrap() > 0, "{s}");
}

#[test]
fn ctrl_c_finishes_the_frames_in_flight_and_closes_the_channels() {
    let port = free_port("127.0.0.62").to_string();
    let unit = format!("127.0.0.62:{port}");
    let serve = spawn(
        &[],
        &[
            "ims",
            "serve",
            "--bind",
            "127.0.0.62",
            "--port",
            &port,
            "--ring",
            "64M",
            "--seconds",
            "60",
            "--json",
        ],
    );
    let send = spawn(
        &[],
        &[
            "ims",
            "send",
            &unit,
            "--frame",
            "64K",
            "--timeout",
            "0.05",
            "--silence",
            "30",
            "--json",
        ],
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(common::sh(&["kill", "-INT", &send.id().to_string()]));
    let (wc, w, we) = json_of(send);
    assert_eq!(wc, Some(0), "{w} {we}");
    assert_eq!(w["state"], "Done", "{w}");
    let frames = w["frames"].as_u64().unwrap();
    assert!(frames > 0, "{w}");
    assert!(common::sh(&["kill", "-INT", &serve.id().to_string()]));
    let (sc, s, se) = json_of(serve);
    assert_eq!(sc, Some(0), "{s} {se}");
    // the buffer unit consumed exactly what the worker saw ACKed
    assert_eq!(s["frames_consumed"], frames, "{s}");
    assert_eq!(s["image_crc_failures"], 0);
}

#[test]
fn bad_input_is_refused_before_anything_starts() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["ims", "send", "127.0.0.63", "--packet", "100"],
            "packet size 100",
        ),
        (
            &["ims", "send", "127.0.0.63", "--packet", "8192"],
            "packet size 8192",
        ),
        (
            &["ims", "send", "127.0.0.63", "--frame", "4100"],
            "last 4096-byte packet at least 64",
        ),
        (
            &["ims", "send", "127.0.0.63", "--frame", "12X"],
            "unknown unit",
        ),
        (&["ims", "send", "not-an-ip"], "not an IP address"),
        (
            &["ims", "send", "127.0.0.63", "--file", "/nonexistent/x"],
            "/nonexistent/x",
        ),
        (&["ims", "serve", "--ring", "100"], "ring size 100"),
        (
            &["ims", "serve", "--va-offset", "0x21"],
            "not 64-byte aligned",
        ),
        (&["ims", "serve", "--rate", "-1"], "-1"),
        (
            &["ims", "send", "127.0.0.63", "--mark-bad", "ecc:5"],
            "the mark is ebf or ebp",
        ),
        (
            &["ims", "send", "127.0.0.63", "--mark-bad", "ebp:0"],
            "at least 1",
        ),
    ];
    for (args, want) in cases {
        let out = rocelink().args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // a taken address is named, with who holds it
    let port = free_port("127.0.0.64").to_string();
    let first = spawn(
        &[],
        &[
            "ims",
            "serve",
            "--bind",
            "127.0.0.64",
            "--port",
            &port,
            "--seconds",
            "5",
            "--quiet",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let out = rocelink()
        .args([
            "ims",
            "serve",
            "--bind",
            "127.0.0.64",
            "--port",
            &port,
            "--quiet",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(&format!("127.0.0.64:{port}")),
        "{err}"
    );
    assert!(err.contains(&format!("process {}", first.id())), "{err}");
    // a bad value is reported before the busy port
    let out = rocelink()
        .args([
            "ims",
            "serve",
            "--bind",
            "127.0.0.64",
            "--port",
            &port,
            "--ring",
            "100",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ring size 100"), "{err}");
    assert!(common::sh(&["kill", "-INT", &first.id().to_string()]));
    let _ = first.wait_with_output();
}

#[test]
fn serve_records_every_frame_it_consumes() {
    let (s, consumed) = serve_with_frames_recorded("127.0.0.65", 50, 50);
    assert_eq!(consumed, 50, "{s}");
}

/// A worker faster than the count asked for: the unit takes and ACKs exactly the count, the
/// recording holds them, nothing is called a recorder drop, and the worker is told of no
/// frame past them (it ends saying which were never acknowledged).
#[test]
fn serve_records_exactly_the_frames_asked_for_when_a_worker_sends_more() {
    let dir = common::tmpdir("ims_record_more");
    let rec = dir.join("rec");
    let ((wc, w, we), (sc, s, se)) = record_while_sending("127.0.0.58", &rec, 300, 10, "2");
    assert_eq!(sc, Some(0), "{s} {se}");
    assert_ne!(wc, Some(0), "{w} {we}");
    assert!(we.contains("never acknowledged"), "{we}");
    assert_eq!(w["frames"], 10, "{w}");
    assert_eq!(s["frames_consumed"], 10, "{s}");
    assert_eq!(s["recorded"]["frames"], 10, "{s}");
    assert_eq!(s["recorded"]["dropped"], 0, "{s}");
}

/// `ims serve --frames COUNT --record` while `ims send` sends `sent` §4 images: the
/// recording holds the first `count`, each verified by `inspect --verify`. The unit's JSON
/// summary and the frames it consumed.
fn serve_with_frames_recorded(ip: &str, sent: u64, count: u64) -> (Value, u64) {
    let dir = common::tmpdir(&format!("ims_record_{count}"));
    let rec = dir.join("rec");
    let rec_s = rec.to_str().unwrap();
    let ((wc, w, we), (sc, s, se)) = record_while_sending(ip, &rec, sent, count, "30");
    assert_eq!((wc, sc), (Some(0), Some(0)), "{w} {we} {s} {se}");
    assert_eq!(w["frames"], sent, "every frame ACKed: {w}");
    assert_eq!(s["recorded"]["frames"], count, "{s}");
    assert_eq!(s["recorded"]["dropped"], 0, "{s}");
    let out = rocelink()
        .args(["inspect", rec_s, "--json", "--verify"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["frames"], count, "{v}");
    assert_eq!(v["good"], count, "{v}");
    assert_eq!(v["recorder_drops"], 0, "{v}");
    assert_eq!(v["frame_size"], 64 + 256 * 128, "{v}");
    let consumed = s["frames_consumed"].as_u64().unwrap_or(0);
    (s, consumed)
}

/// A full disk under the unit's recording: the unit goes on consuming (every frame was
/// ACKed, and holding the worker back for ever would lose them all the same), the recording
/// says how many it holds and drops and why it stopped, and the exit code says frames were
/// lost to it.
#[test]
fn a_full_disk_under_the_units_recording_stops_the_recording_not_the_unit() {
    if !common::root_or_ci() {
        return;
    }
    let dir = common::tmpdir("ims_record_full");
    let mnt = common::small_disk(&dir, "8m");
    let rec = mnt.join("rec");
    // 600 frames of 32 KiB: twice what 8 MiB holds
    let ((wc, w, we), (sc, s, se)) = record_while_sending("127.0.0.57", &rec, 600, 600, "30");
    let read = rocelink_record::read::Recording::open(&rec)
        .map(|r| (r.len() as u64, r.inspect().recorder_drops));
    drop(mnt);
    assert_eq!(wc, Some(0), "every frame ACKed: {w} {we}");
    assert_eq!(w["frames"], 600, "{w}");
    assert_eq!(sc, Some(1), "frames lost to the recording: {s} {se}");
    assert!(se.contains("stopped early: disk full"), "{se}");
    assert_eq!(s["frames_consumed"], 600, "{s}");
    let (n, drops) = read.unwrap();
    assert!(n > 0 && n < 600, "{n} recorded");
    assert_eq!(n + drops, 600, "{n} recorded + {drops} recorded as dropped");
    assert_eq!(s["recorded"]["frames"], n, "{s}");
}

/// How a spawned command ended: exit code, JSON summary, stderr.
type Ended = (Option<i32>, Value, String);

/// `ims serve --frames COUNT --record REC` (an 8 MiB ring) on `ip` while `ims send` sends
/// `sent` §4 images of 32 KiB to it (`--silence` seconds): each one's (exit code, JSON
/// summary, stderr), worker first.
fn record_while_sending(
    ip: &str,
    rec: &std::path::Path,
    sent: u64,
    count: u64,
    silence: &str,
) -> (Ended, Ended) {
    let port = free_port(ip).to_string();
    let unit = format!("{ip}:{port}");
    let serve = spawn(
        &[],
        &[
            "ims",
            "serve",
            "--port",
            &port,
            "--bind",
            ip,
            "--ring",
            "8M",
            "--record",
            rec.to_str().unwrap(),
            "--frames",
            &count.to_string(),
            "--seconds",
            "60",
            "--json",
        ],
    );
    let send = spawn(
        &[],
        &[
            "ims",
            "send",
            &unit,
            "--image4",
            "--frames",
            &sent.to_string(),
            "--timeout",
            "0.05",
            "--silence",
            silence,
            "--json",
        ],
    );
    (json_of(send), json_of(serve))
}

/// The QPNs of a running rocelink process (from its control socket), busiest sender first.
fn qpns_of(pid: u32) -> Vec<u32> {
    let mut out = rocelink()
        .args(["stats", &pid.to_string(), "--json"])
        .output()
        .unwrap();
    for _ in 0..50 {
        if out.status.success() {
            break;
        }
        // not up yet
        std::thread::sleep(Duration::from_millis(100));
        out = rocelink()
            .args(["stats", &pid.to_string(), "--json"])
            .output()
            .unwrap();
    }
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let mut qps: Vec<(u64, u32)> = v["links"][0]["qps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["counters"]["tx_bytes"].as_u64().unwrap(),
                q["qpn"].as_u64().unwrap() as u32,
            )
        })
        .collect();
    qps.sort_unstable_by(|a, b| b.cmp(a));
    qps.into_iter().map(|(_, q)| q).collect()
}

/// A RoCE v2 packet with a valid ICRC from `src` to `dst`: UC SEND ONLY (IMS answer) or
/// UD SEND ONLY (status packet, `deth`) to `qpn` at `psn`.
fn forged(
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    qpn: u32,
    psn: u32,
    deth: Option<rocelink_wire::ib::DethRepr>,
    body: &[u8],
) -> Vec<u8> {
    use rocelink_wire::ib::{BthRepr, IbRepr, Opcode};
    let ib = IbRepr {
        bth: BthRepr {
            opcode: if deth.is_some() {
                Opcode::UD_SEND_ONLY
            } else {
                Opcode::UC_SEND_ONLY
            },
            dest_qp: qpn,
            psn,
            ..Default::default()
        },
        deth,
        payload_len: body.len(),
        ..Default::default()
    };
    let mut b = vec![0u8; ib.buffer_len()];
    ib.emit(&mut b, body);
    rocelink_wire::icrc::fill_socket(src, dst, &mut b).unwrap();
    b
}

#[test]
fn forged_acks_are_refused_and_a_vanished_unit_is_an_error() {
    let ip = "127.0.0.66";
    let port = free_port(ip);
    let (port_s, unit) = (port.to_string(), format!("{ip}:{port}"));
    let mut serve = spawn(
        &[],
        &["ims", "serve", "--bind", ip, "--port", &port_s, "--quiet"],
    );
    let send = spawn(
        &[],
        &[
            "ims",
            "send",
            &unit,
            "--frame",
            "64K",
            "--timeout",
            "0.2",
            "--silence",
            "1",
            "--json",
        ],
    );
    std::thread::sleep(Duration::from_millis(1000));
    let data_qpn = qpns_of(send.id())[0];
    // the unit goes away; someone else on its address sends ACKs for the next frames
    serve.kill().unwrap();
    let _ = serve.wait();
    let forger_port = rocelink_testkit::ports::free_udp_port(&[ip]);
    let src: std::net::SocketAddr = format!("{ip}:{forger_port}").parse().unwrap();
    let dst: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let sock = std::net::UdpSocket::bind(src).unwrap();
    for i in 0..400u64 {
        let mut ack = [0u8; 16];
        ack[8..12].copy_from_slice(&((i * 65536) as u32).to_be_bytes());
        let p = forged(src, dst, data_qpn, i as u32, None, &ack);
        sock.send_to(&p, dst).unwrap();
    }
    let (code, w, err) = json_of(send);
    assert_eq!(code, Some(2), "{w} {err}");
    assert!(
        w["state"]["Failed"]
            .as_str()
            .unwrap()
            .contains("answered nothing"),
        "{w}"
    );
    assert!(w["answers_refused"].as_u64().unwrap() >= 300, "{w}");
    assert!(!w["unacknowledged"].as_array().unwrap().is_empty(), "{w}");
    assert!(err.contains("never acknowledged"), "{err}");
}

#[test]
fn a_worker_cannot_be_torn_down_by_another_address() {
    let ip = "127.0.0.67";
    let port = free_port(ip);
    let (port_s, unit) = (port.to_string(), format!("{ip}:{port}"));
    let serve = spawn(
        &[],
        &[
            "ims",
            "serve",
            "--bind",
            ip,
            "--port",
            &port_s,
            "--ring",
            "16M",
            "--frames",
            "50000",
            "--seconds",
            "60",
            "--json",
        ],
    );
    let send = spawn(
        &[],
        &[
            "ims",
            "send",
            &unit,
            "--frame",
            "64K",
            "--frames",
            "50000",
            "--timeout",
            "0.05",
            "--silence",
            "30",
            "--json",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let qpns = qpns_of(send.id());
    let dst: std::net::SocketAddr = unit.parse().unwrap();
    // STAT_TERM and DATA_TERM for each of the worker's QPs (one is its status QP), with
    // its LID, from its address at another port and from another address
    for from in ["127.0.0.1", "127.0.0.68"] {
        let fp = rocelink_testkit::ports::free_udp_port(&[from]);
        let src: std::net::SocketAddr = format!("{from}:{fp}").parse().unwrap();
        let sock = std::net::UdpSocket::bind(src).unwrap();
        for &q in &qpns {
            for method in [6u8, 2] {
                let mut p = [0u8; 28];
                p[0] = 1;
                p[1] = 1;
                p[3] = method;
                p[4..8].copy_from_slice(&[127, 0, 0, 1]);
                p[8..12].copy_from_slice(&q.to_be_bytes());
                let d = rocelink_wire::ib::DethRepr {
                    qkey: 0x494D_5300,
                    src_qp: q,
                };
                sock.send_to(&forged(src, dst, 0x10, 0, Some(d), &p), dst)
                    .unwrap();
            }
        }
    }
    let (wc, w, we) = json_of(send);
    let (sc, s, se) = json_of(serve);
    assert_eq!(wc, Some(0), "{w} {we}");
    assert_eq!(sc, Some(0), "{s} {se}");
    assert_eq!(w["frames"], 50000, "{w}");
    assert_eq!(s["frames_consumed"], 50000, "{s}");
    assert!(s["status_foreign"].as_u64().unwrap() >= 4, "{s}");
}

#[test]
fn stopping_a_recording_unit_keeps_every_frame_it_acked() {
    let dir = common::tmpdir("ims_record_stop");
    let rec = dir.join("rec");
    let rec_s = rec.to_str().unwrap();
    let ip = "127.0.0.69";
    let port = free_port(ip);
    let (port_s, unit) = (port.to_string(), format!("{ip}:{port}"));
    let serve = spawn(
        &[],
        &[
            "ims", "serve", "--bind", ip, "--port", &port_s, "--ring", "64M", "--record", rec_s,
            "--json",
        ],
    );
    let send = spawn(
        &[],
        &[
            "ims",
            "send",
            &unit,
            "--frame",
            "256K",
            "--timeout",
            "0.2",
            "--silence",
            "1",
            "--json",
        ],
    );
    // stopped mid-stream, once 32 MiB are recorded (not after a fixed time: an unpaced
    // worker fills a CI disk at gigabytes a second)
    let data = rec.join("data.bin");
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&data).map_or(0, |m| m.len()) < 32 << 20
        && t0.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(common::sh(&["kill", "-TERM", &serve.id().to_string()]));
    let (sc, s, se) = json_of(serve);
    let (_, w, _) = json_of(send);
    assert_eq!(sc, Some(0), "{s} {se}");
    let acked = w["frames"].as_u64().unwrap();
    assert!(acked > 0, "{w}");
    let out = rocelink()
        .args(["inspect", rec_s, "--json", "--verify"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["good"], acked,
        "the worker saw {acked} frames ACKed, the recording holds {v}"
    );
    assert_eq!(s["frames_consumed"], acked, "{s}");
    assert_eq!(v["recorder_drops"], 0, "{v}");
}

/// A relay between a worker and a unit that can damage one WRITE: the worker talks to
/// `front` (the unit, as far as it knows), the unit to `back` (on the worker's address, so
/// the LID still matches, and at the unit's port, where RoCE v2 answers go), every
/// packet's ICRC recomputed for the hop it takes. The `nth` UC WRITE FIRST from the worker
/// goes through `edit`.
struct Relay {
    front: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    fn start(front: &str, back: &str, unit: &str, nth: usize, edit: fn(&mut [u8])) -> Relay {
        use std::net::UdpSocket;
        use std::sync::atomic::Ordering;
        let front = UdpSocket::bind(front).unwrap();
        let back = UdpSocket::bind(back).unwrap();
        let unit: std::net::SocketAddr = unit.parse().unwrap();
        let (fa, ba) = (front.local_addr().unwrap(), back.local_addr().unwrap());
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut worker, mut firsts, mut buf) = (None, 0usize, vec![0u8; 9000]);
            let t0 = std::time::Instant::now();
            while !flag.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(60) {
                while let Ok((n, from)) = front.recv_from(&mut buf) {
                    worker = Some(from);
                    let p = &mut buf[..n];
                    // UC RDMA WRITE FIRST
                    if p.first() == Some(&0x26) {
                        if firsts == nth {
                            edit(p);
                        }
                        firsts += 1;
                    }
                    let _ = rocelink_wire::icrc::fill_socket(ba, unit, p);
                    let _ = back.send_to(p, unit);
                }
                while let Ok((n, _)) = back.recv_from(&mut buf) {
                    if let Some(w) = worker {
                        let p = &mut buf[..n];
                        let _ = rocelink_wire::icrc::fill_socket(fa, w, p);
                        let _ = front.send_to(p, w);
                    }
                }
            }
        });
        Relay {
            front: fa,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `ims serve --record --frames COUNT` and a worker sending `sent` §4 images through a
/// relay that damages the sixth frame's first packet with `edit`, the worker pipelining
/// frames past it: the frames the worker saw ACKed are exactly the frames recorded (none
/// dropped), whatever ended it. The worker's and the unit's summaries.
fn acked_is_recorded(ips: [&str; 3], edit: fn(&mut [u8]), sent: u64, count: u64) -> (Ended, Ended) {
    let [unit_ip, front_ip, worker_ip] = ips;
    let dir = common::tmpdir(&format!("ims_acked_{count}_{unit_ip}"));
    let rec = dir.join("rec");
    let port = rocelink_testkit::ports::free_udp_port(&[unit_ip, worker_ip]).to_string();
    let front_port = rocelink_testkit::ports::free_udp_port(&[front_ip, worker_ip]).to_string();
    let serve = spawn(
        &[],
        &[
            "ims",
            "serve",
            "--bind",
            unit_ip,
            "--port",
            &port,
            "--ring",
            "8M",
            "--record",
            rec.to_str().unwrap(),
            "--frames",
            &count.to_string(),
            "--seconds",
            "4",
            "--json",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let relay = Relay::start(
        &format!("{front_ip}:{front_port}"),
        &format!("{worker_ip}:{port}"),
        &format!("{unit_ip}:{port}"),
        5,
        edit,
    );
    let send = spawn(
        &[],
        &[
            "ims",
            "send",
            &relay.front.to_string(),
            "--bind",
            &format!("{worker_ip}:{front_port}"),
            "--image4",
            "--frames",
            &sent.to_string(),
            // four frames of nine packets in flight: what the relay's socket holds
            "--in-flight",
            "4",
            "--timeout",
            "0.3",
            "--silence",
            "1",
            "--json",
        ],
    );
    let (w, s) = (json_of(send), json_of(serve));
    drop(relay);
    let acked = w.1["frames"].as_u64().unwrap_or_else(|| panic!("{w:?}"));
    assert_eq!(s.1["frames_consumed"], acked, "worker {} unit {}", w.1, s.1);
    assert_eq!(s.1["recorded"]["frames"], acked, "{}", s.1);
    assert_eq!(s.1["recorded"]["dropped"], 0, "{}", s.1);
    let v: Value = serde_json::from_slice(
        &rocelink()
            .args(["inspect", rec.to_str().unwrap(), "--json", "--verify"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(v["good"], acked, "{v}");
    (w, s)
}

/// The first packet of a frame with its R_Key damaged (a fatal NACK: the worker stops).
fn bad_rkey(p: &mut [u8]) {
    p[20] ^= 0x80;
}

/// The first packet of a frame with its VA off the 64-byte grid (NACKed invalid VA).
fn unaligned_va(p: &mut [u8]) {
    let va = u64::from_be_bytes(p[12..20].try_into().unwrap()) + 32;
    p[12..20].copy_from_slice(&va.to_be_bytes());
}

/// An ACK means the frame is recorded, for every way the stream ends: a worker's fatal
/// NACK with frames pipelined past it (the unit then ends on `--seconds`, or on its count
/// reached exactly at the refused frame), and a count smaller than what the worker sends
/// (frames past it are never ACKed).
#[test]
fn every_frame_acked_is_recorded_whatever_ends_the_stream() {
    // invalid R_Key at the sixth frame: five ACKed and recorded, the rest never ACKed
    for (count, ips) in [
        (10, ["127.0.0.140", "127.0.0.141", "127.0.0.142"]),
        (5, ["127.0.0.143", "127.0.0.144", "127.0.0.145"]),
    ] {
        let ((wc, w, we), (sc, s, se)) = acked_is_recorded(ips, bad_rkey, 40, count);
        assert_eq!(wc, Some(2), "the worker stops on the refusal: {w} {we}");
        assert!(we.contains("invalid_rkey"), "{we}");
        assert_eq!(w["frames"], 5, "{w}");
        assert_eq!(sc, Some(0), "{s} {se}");
        assert_eq!(s["nacked"]["invalid_rkey"], 1, "{s}");
        assert!(
            s["frames_delivered"].as_u64().unwrap() > 5,
            "frames past the refused one came: {s}"
        );
    }
    // invalid VA at the sixth frame (sent again on its timeout), and a count of 8 out of
    // 40: the eight are ACKed and recorded, the frames past them never ACKed
    let ((wc, w, we), (sc, s, se)) = acked_is_recorded(
        ["127.0.0.146", "127.0.0.147", "127.0.0.148"],
        unaligned_va,
        40,
        8,
    );
    assert_ne!(wc, Some(0), "frames never acknowledged: {w} {we}");
    assert_eq!(w["frames"], 8, "{w}");
    assert_eq!(sc, Some(0), "{s} {se}");
    assert_eq!(s["nacked"]["invalid_va"], 1, "{s}");
    assert!(s["frames_discarded"].as_u64().unwrap() > 0, "{s}");
}

/// Each channel keeps its own service level: a capture on loopback (tshark's) of a unit and
/// a worker shows the status packets both ways with the status channel's DSCP, the WRITEs
/// and their ACKs with the data channel's — by default (SL0 and SL1: CS0 and CS1) and as
/// set on both roles; `decode` reads the same values and names the service level.
#[test]
fn the_status_and_data_channels_carry_their_own_service_levels() {
    if !rocelink_testkit::netns::root_or_ci() || !rocelink_testkit::netns::need("tshark", "tshark")
    {
        return;
    }
    let ip = "127.0.0.151";
    for (flags, status, data) in [
        (vec![], 0u64, 8u64),
        (vec!["--status-sl", "2", "--data-dscp", "46"], 16, 46),
    ] {
        let dir = common::tmpdir(&format!("ims_dscp_{data}"));
        let pcap = dir.join("lo.pcap");
        let port = free_port(ip);
        let mut cap = Command::new("tshark")
            .args([
                "-i",
                "lo",
                "-f",
                &format!("host {ip} and udp port {port}"),
                "-w",
            ])
            .arg(&pcap)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // tshark says "Capturing on" once it is
        let mut err = std::io::BufReader::new(cap.stderr.take().unwrap());
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0 {
            if line.contains("Capturing on") {
                break;
            }
            line.clear();
        }
        // (it says so a moment before its capture process takes packets)
        std::thread::sleep(Duration::from_secs(1));
        let port_s = port.to_string();
        let mut serve_args = vec![
            "ims", "serve", "--bind", ip, "--port", &port_s, "--ring", "1M",
        ];
        serve_args.extend(["--frames", "3", "--json"]);
        serve_args.extend(&flags);
        let serve = spawn(&[], &serve_args);
        let unit = format!("{ip}:{port}");
        let bind = format!("127.0.0.152:{port}");
        let mut send_args = vec!["ims", "send", &unit, "--bind", &bind, "--frame", "64K"];
        send_args.extend(["--frames", "3", "--json"]);
        send_args.extend(&flags);
        let (wc, w, we) = json_of(spawn(&[], &send_args));
        let (sc, s, se) = json_of(serve);
        assert_eq!((wc, sc), (Some(0), Some(0)), "{w} {we} {s} {se}");
        std::thread::sleep(Duration::from_millis(300));
        common::ctrl_c(cap.id());
        let _ = cap.wait();
        // tshark's reading: DSCP and UDP ports of every datagram
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&pcap)
            .args(["-T", "fields", "-e", "ip.dsfield.dscp", "-e", "udp.length"])
            .output()
            .unwrap();
        let theirs: Vec<(u64, u64)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut f = l.split('\t').map(|x| x.trim().parse::<u64>().ok());
                Some((f.next()??, f.next()??))
            })
            .collect();
        // rocelink's reading of the same capture: which channel each one is
        let (code, ours, derr) = common::rocelink(&[
            "decode",
            "--json",
            "--roce-port",
            &port_s,
            pcap.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{derr}");
        let ours: Vec<Value> = ours
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(ours.len(), theirs.len(), "every datagram decoded");
        assert!(
            !ours.is_empty(),
            "a capture: {derr} {:?}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (mut seen_status, mut seen_data) = (0, 0);
        for (p, (dscp, _)) in ours.iter().zip(&theirs) {
            assert_eq!(p["dscp"], *dscp, "tshark and decode agree: {p}");
            // status packets are UD SENDs (to or from the status QP); the rest is the data
            // channel: UC WRITEs one way, UC SENDs (ACK/NACK) the other
            let opcode = p["opcode"].as_u64().unwrap();
            // the transport bits: 0b011 is UD
            let want = if opcode >> 5 == 3 {
                seen_status += 1;
                status
            } else {
                seen_data += 1;
                data
            };
            assert_eq!(*dscp, want, "{p}");
            let sl = rocelink_ims::levels::sl_of_dscp(want as u8);
            assert_eq!(p["sl"], serde_json::json!(sl), "{p}");
        }
        // STAT_REQ/RES, DATA_REQ/RES, the TERMs and DOWNs; three frames (a WRITE's packets
        // after its first are one segmented datagram on loopback) and their ACKs
        assert!(seen_status >= 8, "{seen_status} status packets");
        assert!(seen_data >= 3 + 3, "{seen_data} data-channel packets");
    }
}
