//! What a user meets around the core: stopping signals, existing recordings, bad input,
//! blamed addresses and files, damaged recordings. Each test reproduces one failure found
//! by trying rocelink as a new user would.
#![allow(clippy::unwrap_used)]

mod common;

use rocelink_record::read::Recording;
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn rocelink() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocelink"))
}

/// An emulator on `ip` (no enumeration), killed on drop.
struct Emu(Child);
impl Emu {
    fn start(ip: &str, extra: &[&str]) -> Emu {
        let c = rocelink()
            .args([
                "emulate",
                "--ip",
                ip,
                "--bootp-target",
                "none",
                "--seconds",
                "60",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let e = Emu(c);
        // ready once it answers ECB
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            let (code, _, _) = common::rocelink(&["read", "--device", ip, "0x80"]);
            if code == 0 {
                return e;
            }
        }
        panic!("emulator at {ip} never answered");
    }
}
impl Drop for Emu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(child: &Child, sig: i32) {
    assert!(common::sh(&[
        "kill",
        &format!("-{sig}"),
        &child.id().to_string()
    ]));
}

/// Run rocelink for 1.5 s, then send it `sig`; (exit code, stdout, stderr).
fn signalled(args: &[&str], sig: i32) -> (Option<i32>, String, String) {
    let child = rocelink()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, sig);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// True when a datagram reaches `addr` within one second.
fn streaming_to(addr: &str) -> bool {
    let s = UdpSocket::bind(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut b = [0u8; 9000];
    s.recv(&mut b).is_ok()
}

/// Every frame the JSON lines call good is in the recording with bytes that match its CRC,
/// but for those the summary (`stderr`) counts as dropped by the recorder (which drops
/// rather than stall the receiver when the disk, or a loaded machine, falls behind): none
/// goes missing uncounted. Returns how many good frames were reported.
fn assert_all_good_recorded(json: &str, dir: &Path, stderr: &str) -> usize {
    let good: Vec<u64> = json
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["good"] == true)
        .map(|v| v["frame_number"].as_u64().unwrap())
        .collect();
    let dropped: usize = stderr
        .split_once(" dropped by the recorder")
        .and_then(|(before, _)| before.split_whitespace().last()?.parse().ok())
        .unwrap_or(0);
    let r = Recording::open(dir).unwrap();
    let mut missing = Vec::new();
    for n in &good {
        match r.position(*n) {
            Some(i) => assert_eq!(r.verify(i).unwrap(), Some(true), "frame {n} bytes"),
            None => missing.push(*n),
        }
    }
    assert!(
        missing.len() <= dropped,
        "good frames {missing:?} missing from the recording, {dropped} counted as dropped: {stderr}"
    );
    good.len()
}

#[test]
fn sigint_during_receive_record_keeps_every_reported_frame_and_stops_the_device() {
    let dir = common::tmpdir("field_sigint");
    let rec = dir.join("rec");
    let _emu = Emu::start(
        "127.0.20.2",
        &["--sensor", "imx274-1080p-raw10", "--fps", "30"],
    );
    let rec_s = rec.to_str().unwrap();
    let (code, so, se) = signalled(
        &[
            "receive",
            "--device",
            "127.0.20.2",
            "--bind",
            "127.0.20.1",
            "--sensor",
            "imx274-1080p-raw10",
            "--json",
            "--record",
            rec_s,
        ],
        2,
    );
    assert_eq!(code, Some(0), "{se}");
    assert!(se.contains("stopped by signal"), "summary: {se}");
    assert!(se.contains("recorded"), "recording summary: {se}");
    let n = assert_all_good_recorded(&so, &rec, &se);
    assert!(n >= 10, "{n} good frames in 1.5 s at 30 fps");
    // the VP was disabled: nothing reaches the receiver's address any more
    assert!(
        !streaming_to("127.0.20.1:4791"),
        "device still streaming after exit"
    );
}

#[test]
fn sigterm_during_demo_record_exits_zero_with_every_frame() {
    let dir = common::tmpdir("field_sigterm");
    let rec = dir.join("rec");
    let rec_s = rec.to_str().unwrap();
    let (code, so, se) = signalled(
        &[
            "demo",
            "--device-ip",
            "127.0.21.2",
            "--frames",
            "100000",
            "--json",
            "--record",
            rec_s,
        ],
        15,
    );
    assert_eq!(code, Some(0), "{se}");
    assert!(assert_all_good_recorded(&so, &rec, &se) >= 10);
}

#[test]
fn receive_seconds_ends_cleanly() {
    let _emu = Emu::start("127.0.22.2", &["--fps", "50"]);
    let t = Instant::now();
    let (code, out, err) = common::rocelink(&[
        "receive",
        "--device",
        "127.0.22.2",
        "--bind",
        "127.0.22.1",
        "--frame-size",
        "100000",
        "--seconds",
        "1",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty(), "--quiet printed {out}");
    assert!(t.elapsed() < Duration::from_secs(30));
}

#[test]
fn record_refuses_an_existing_recording_unless_forced() {
    let dir = common::tmpdir("field_recdir");
    let rec = dir.join("rec");
    let run = |extra: &[&str]| {
        let mut a = vec![
            "demo",
            "--device-ip",
            "127.0.23.2",
            "--frames",
            "3",
            "--sensor",
            "ultrasound",
            "--quiet",
            "--record",
            rec.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        common::rocelink(&a)
    };
    assert_eq!(run(&[]).0, 0);
    let (code, _, err) = run(&[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("not empty") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(Recording::open(&rec).unwrap().len(), 3, "left untouched");
    let (code, _, err) = run(&["--force"]);
    assert_eq!(code, 0, "{err}");
    // a file where the directory should be: named, before any device is touched (nothing
    // answers at 127.0.24.2, so reaching the device would be an ECB timeout instead)
    let file = dir.join("plain");
    std::fs::write(&file, b"x").unwrap();
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--device",
        "127.0.24.2",
        "--record",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a directory"), "{err}");
    // --force does not delete a directory that holds something else
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"keep").unwrap();
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--device",
        "127.0.24.2",
        "--force",
        "--record",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(other.join("notes.txt").exists());
}

#[test]
fn bad_input_is_refused_before_any_side_effect_and_never_panics() {
    // nothing listens at 127.0.25.2: an input that reached the device would time out on
    // ECB, so "exit 2 with this message, fast" proves it was checked first
    let d = ["--device", "127.0.25.2"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            [&["receive"][..], &d, &["--snapshot", "x.png"]].concat(),
            "--snapshot needs an image sensor",
        ),
        (
            [&["receive"][..], &d, &["--sensor", "foo"]].concat(),
            "unknown sensor",
        ),
        (
            [&["receive"][..], &d, &["--timeout=-1"]].concat(),
            "seconds must be",
        ),
        (
            [&["receive"][..], &d, &["--timeout", "NaN"]].concat(),
            "seconds must be",
        ),
        (
            [&["receive"][..], &d, &["--seconds", "1e300"]].concat(),
            "seconds must be",
        ),
        (
            [&["receive"][..], &d, &["--frame-size", "1000000000000"]].concat(),
            "a frame is",
        ),
        (
            [&["receive"][..], &d, &["--frame-size", "4294967296"]].concat(),
            "a frame is",
        ),
        ([&["receive"][..], &d, &["--mtu", "0"]].concat(), "MTU"),
        ([&["receive"][..], &d, &["--mtu", "100"]].concat(), "MTU"),
        (
            [
                &["receive"][..],
                &d,
                &["--pages", "4096", "--frame-size", "1073741824"],
            ]
            .concat(),
            "GiB",
        ),
        (
            [&["receive"][..], &d, &["--pcap", "/no/such/dir/x.pcap"]].concat(),
            "/no/such/dir",
        ),
        (
            [
                &["receive"][..],
                &d,
                &[
                    "--sensor",
                    "coe-raw10:4294967295x4294967295",
                    "--snapshot",
                    "x.png",
                ],
            ]
            .concat(),
            "width and height",
        ),
        (
            [&["read"][..], &d, &["0x80", "5"]].concat(),
            "unexpected argument",
        ),
        (
            [&["read"][..], &d, &["--count", "0", "0x80"]].concat(),
            "--count",
        ),
        (
            [&["read"][..], &d, &["--count", "4294967295", "0x80"]].concat(),
            "--count",
        ),
        (
            [&["read"][..], &d, &["0xFFFFFFFC", "--count", "2"]].concat(),
            "past the end",
        ),
        (
            [&["write"][..], &d, &["--count", "4", "0x80", "1"]].concat(),
            "--count",
        ),
        ([&["write"][..], &d, &["0x80"]].concat(), "VALUES"),
        (vec!["emulate", "--fps", "0"], "--fps"),
        (vec!["emulate", "--seconds=-5"], "seconds"),
        (
            vec![
                "emulate",
                "--sensor",
                "file:/no/such/file",
                "--frame-size",
                "10",
            ],
            "/no/such/file",
        ),
        (vec!["emulate", "--ip", "192.0.2.1"], "192.0.2.1:8192"),
        (vec!["enumerate", "--timeout", "inf"], "seconds must be"),
        (vec!["demo", "--fps", "0"], "--fps"),
        (
            vec!["demo", "--pcap", "/no/such/dir/x.pcap"],
            "/no/such/dir",
        ),
        (vec!["demo", "--sensor", "foo"], "unknown sensor"),
        (vec!["bench", "stream", "--seconds=-1"], "seconds must be"),
        (vec!["bench", "stream", "--rate", "NaN"], "--rate"),
        (vec!["bench", "stream", "--frame", "0"], "a frame is"),
        (vec!["bench", "record", "--frames", "0"], "--frames"),
        (vec!["bench", "write-bw", "-t", "0"], "--tx-depth"),
        (vec!["bench", "write-bw", "-s", "1"], "--size"),
        (vec!["pingpong", "rc", "--time-limit=-1"], "seconds must be"),
        (
            vec!["pingpong", "rc", "--loss-timeout", "NaN"],
            "seconds must be",
        ),
        (vec!["pingpong", "rc", "-r", "0"], "--rx-depth"),
        (
            vec!["receive", "--device", "127.0.25.2", "--batch", "100000"],
            "--batch",
        ),
        (
            vec!["receive", "--device", "127.0.25.2", "--batch", "0"],
            "--batch",
        ),
        (vec!["emulate", "--trailer", "3"], "2 bytes (FPGA) or 4"),
        (
            vec!["emulate", "--ip", "127.0.0.1", "--xdp", "lo"],
            "an address of this host",
        ),
        (
            vec![
                "ims",
                "send",
                "127.0.25.2",
                "--in-flight",
                "64",
                "--frame",
                "2G",
            ],
            "send buffer",
        ),
        (
            vec!["ims", "serve", "--ring", "1T"],
            "more than this machine's",
        ),
        (
            vec!["send-audio", "--device", "127.0.25.2", "/dev/zero"],
            "a device, not a file",
        ),
    ];
    for (args, want) in cases {
        let t = Instant::now();
        let (code, out, err) = common::rocelink(&args);
        assert_eq!(code, 2, "{args:?}: exit {code}\n{err}");
        assert!(err.contains(want), "{args:?}: wanted {want:?} in\n{err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            !out.contains("rocelink emulate: HSB device"),
            "{args:?}: banner before the error"
        );
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{args:?} waited for something"
        );
    }
}

#[test]
fn demo_names_the_address_that_is_taken() {
    let _squatter = UdpSocket::bind("127.0.26.2:8192").unwrap();
    let (code, out, err) =
        common::rocelink(&["demo", "--device-ip", "127.0.26.2", "--frames", "2"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("127.0.26.2:8192") && err.contains("in use"),
        "{err}"
    );
    assert!(
        !out.contains("good"),
        "frames from someone else's device: {out}"
    );
}

use rocelink_hsb::regs::{hif, vp};

fn hif_reg(off: u32) -> u32 {
    rocelink_hsb::regs::hif_reg(0, off)
}
fn vp_reg(off: u32) -> u32 {
    rocelink_hsb::regs::vp_reg(0, off)
}

/// Program VP 0 of the device at `dev` as a host at `host`:4791 (QP 5, R_Key 0x77) would,
/// and enable it; returns a register writer for the device.
fn configure_vp0(dev: &'static str, host: &str, frame: u32) -> impl Fn(u32, u32) {
    let w = move |addr: u32, v: u32| {
        let (c, _, e) = common::rocelink(&[
            "write",
            "--device",
            dev,
            &format!("{addr:#x}"),
            &format!("{v:#x}"),
        ]);
        assert_eq!(c, 0, "{addr:#x}: {e}");
    };
    w(
        hif_reg(hif::PACKET_SIZE),
        rocelink_hsb::regs::packet_pages_for_mtu(1500),
    );
    w(
        hif_reg(hif::PACKET_UDP_PORT),
        u32::from(rocelink_wire::hsb::DATA_SOURCE_PORT),
    );
    w(vp_reg(vp::QP), 5);
    w(vp_reg(vp::RKEY), 0x77);
    w(
        vp_reg(vp::PAGE_INC),
        (frame.next_multiple_of(128) + 128) >> 7,
    );
    w(vp_reg(vp::MAX_BUFF), 3);
    w(vp_reg(vp::BUFFER_LENGTH), frame);
    w(
        vp_reg(vp::HOST_IP),
        u32::from(host.parse::<std::net::Ipv4Addr>().unwrap()),
    );
    w(vp_reg(vp::HOST_UDP_PORT), 4791);
    w(hif_reg(hif::VP_MASK), 1);
    w
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn the_emulator_survives_any_register_value() {
    let emu = Emu::start("127.0.32.2", &["--fps", "50"]);
    let w = configure_vp0("127.0.32.2", "127.0.32.1", 100_000);
    let host = UdpSocket::bind("127.0.32.1:4791").unwrap();
    host.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 9000];
    let (_, from) = host.recv_from(&mut b).unwrap();
    assert_eq!(from.port(), rocelink_wire::hsb::DATA_SOURCE_PORT);
    // a new data source port: the device moves its data socket and keeps serving
    w(hif_reg(hif::PACKET_UDP_PORT), 12345);
    let t = Instant::now();
    let moved = loop {
        let (_, from) = host.recv_from(&mut b).unwrap();
        if from.port() == 12345 {
            break true;
        }
        if t.elapsed() > Duration::from_secs(5) {
            break false;
        }
    };
    assert!(moved, "data never came from the new port");
    // the port of its own control socket: refused to move, still serving
    w(hif_reg(hif::PACKET_UDP_PORT), 8192);
    w(hif_reg(hif::PACKET_UDP_PORT), 12345);
    // windows no device holds: never allocated
    for len in [0xFFFF_FFF0u32, 0x8000_0000, 1, 7] {
        w(vp_reg(vp::BUFFER_LENGTH), len);
        std::thread::sleep(Duration::from_millis(300));
        let (c, _, e) = common::rocelink(&["read", "--device", "127.0.32.2", "0x80"]);
        assert_eq!(c, 0, "BUFFER_LENGTH {len:#x}: ECB stopped answering: {e}");
        let kb = rss_kb(emu.0.id());
        assert!(kb < 400_000, "BUFFER_LENGTH {len:#x}: emulator at {kb} kB");
    }
    w(hif_reg(hif::VP_MASK), 0);
}

#[test]
fn passive_receive_with_the_wrong_qp_says_what_was_refused() {
    let _emu = Emu::start("127.0.27.2", &["--fps", "50"]);
    // configure the device for QP 0x5, R_Key 0x77 at 127.0.27.1:4791, then listen as QP 0x6
    let w = configure_vp0("127.0.27.2", "127.0.27.1", 100_000);
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--listen",
        "127.0.27.1:4791",
        "--qp",
        "6",
        "--rkey",
        "0x77",
        "--device-ip",
        "127.0.27.2",
        "--frame-size",
        "100000",
        "--timeout",
        "1",
    ]);
    w(hif_reg(hif::VP_MASK), 0);
    assert_eq!(code, 2);
    assert!(err.contains("no frame within"), "{err}");
    assert!(err.contains("for another QP"), "{err}");
}

/// A small recording made by `demo` (in the returned directory, removed when it drops).
fn recording(name: &str, frames: &str) -> (common::TmpDir, std::path::PathBuf) {
    let dir = common::tmpdir(name);
    let rec = dir.join("rec");
    let ip = match name.len() % 4 {
        0 => "127.0.28.2",
        1 => "127.0.29.2",
        2 => "127.0.30.2",
        _ => "127.0.31.2",
    };
    let (code, _, err) = common::rocelink(&[
        "demo",
        "--device-ip",
        ip,
        "--frames",
        frames,
        "--sensor",
        "ultrasound",
        "--fps",
        "100",
        "--quiet",
        "--record",
        rec.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    (dir, rec)
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

#[test]
fn inspect_reports_damage_and_verify_finds_changed_bytes() {
    let (_dir, rec) = recording("field_damage", "6");
    let s =
        |args: &[&str]| common::rocelink(&[&["inspect", rec.to_str().unwrap()][..], args].concat());
    let (code, out, _) = s(&["--verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("all 6 good frames match"), "{out}");
    // one byte of frame 3's data
    let r = Recording::open(&rec).unwrap();
    let e = r.entries[3];
    flip(&rec.join("data.bin"), e.offset + 1000);
    let (code, out, _) = s(&["--verify", "--json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["crc_mismatch_frames"],
        serde_json::json!([e.frame_number])
    );
    let n = e.frame_number.to_string();
    let (code, _, err) = common::rocelink(&[
        "export",
        rec.to_str().unwrap(),
        "--frame",
        &n,
        "--format",
        "raw",
    ]);
    assert_eq!(code, 2, "exported a damaged frame silently");
    assert!(err.contains("no longer match"), "{err}");
    let forced = rec.with_extension("raw");
    let (code, _, _) = common::rocelink(&[
        "export",
        rec.to_str().unwrap(),
        "--frame",
        &n,
        "--format",
        "raw",
        "--force",
        "-o",
        forced.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    // one byte in the middle of the index hides only that record
    flip(&rec.join("index.bin"), 2 * 128 + 40);
    let (code, out, err) = s(&["--json"]);
    assert_eq!(code, 1);
    assert!(err.contains("DAMAGED") && err.contains("[256]"), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["frames"], 5, "later frames still listed");
    assert_eq!(v["torn_index_bytes"], 0);
    // a frame that is not there names the range
    let (code, _, err) = common::rocelink(&["export", rec.to_str().unwrap(), "--frame", "999"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("6 frames") || err.contains("5 frames"),
        "{err}"
    );
}

#[test]
fn inspect_reports_truncated_data_and_garbage_index() {
    let (_dir, rec) = recording("field_trunc", "4");
    let r = Recording::open(&rec).unwrap();
    let last = r.entries[3];
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(rec.join("data.bin"))
        .unwrap();
    f.set_len(last.offset + 10).unwrap();
    let (code, _, err) = common::rocelink(&["inspect", rec.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("truncated") && err.contains(&format!("[{}]", last.frame_number)),
        "{err}"
    );
    std::fs::write(rec.join("index.bin"), vec![0x5A; 128 * 4]).unwrap();
    let (code, out, err) = common::rocelink(&["inspect", rec.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("not one valid record"), "{err}");
}

#[test]
fn hostile_recording_json_is_an_error_not_a_panic() {
    let (_dir, rec) = recording("field_json", "2");
    let orig = std::fs::read_to_string(rec.join("recording.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&orig).unwrap();
    v["layout"] = "csi-raw10".into();
    v["width"] = 64.into();
    v["height"] = 4.into();
    v["bits"] = 10.into();
    v["bytes_per_line"] = 80.into();
    for (field, bad) in [
        ("bits", serde_json::json!(0)),
        ("bits", serde_json::json!(1)),
        ("bytes_per_line", serde_json::json!(0)),
        ("width", serde_json::json!(4_294_967_295u64)),
        ("height", serde_json::json!(4_294_967_295u64)),
        ("frame_size", serde_json::json!(u64::MAX)),
        ("layout", serde_json::json!("csi-raw99")),
    ] {
        let mut h = v.clone();
        h[field] = bad.clone();
        std::fs::write(rec.join("recording.json"), h.to_string()).unwrap();
        for format in ["png", "npy", "pgm"] {
            let (code, _, err) = common::rocelink(&[
                "export",
                rec.to_str().unwrap(),
                "--frame",
                "0",
                "--format",
                format,
            ]);
            assert_eq!(code, 2, "{field}={bad} {format}: {err}");
            assert!(err.contains("recording.json"), "{field}={bad}: {err}");
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Any recording.json either opens or is refused with an error; never a panic.
    #[test]
    fn recording_json_never_panics(
        layout in proptest::sample::select(vec!["bytes", "csi-raw10", "csi-raw12", "coe-raw10", "coe-raw12", "x"]),
        w in proptest::prelude::any::<u32>(), h in proptest::prelude::any::<u32>(),
        bits in proptest::prelude::any::<u32>(), bpl in proptest::prelude::any::<u64>(),
        start in proptest::prelude::any::<u64>(), size in proptest::prelude::any::<u64>(),
    ) {
        let dir = common::tmpdir("field_json_prop");
        std::fs::write(dir.join("index.bin"), b"").unwrap();
        std::fs::write(dir.join("data.bin"), b"").unwrap();
        let j = serde_json::json!({"format": "rocelink-recording", "version": 1, "sensor": "s",
            "frame_size": size, "layout": layout, "width": w, "height": h, "bits": bits,
            "start_byte": start, "bytes_per_line": bpl, "alignment": 4096, "created_ns": 0});
        std::fs::write(dir.join("recording.json"), j.to_string()).unwrap();
        if let Ok(r) = Recording::open(&dir) {
            // what opens must be safe to use
            let _ = r.inspect();
            proptest::prop_assert!(r.header.frame_size <= 1 << 30);
        }
    }
}

#[test]
fn decode_finds_roce_on_the_hosts_ephemeral_port() {
    let dir = common::tmpdir("field_decode");
    let pcap = dir.join("demo.pcap");
    let (code, _, err) = common::rocelink(&[
        "demo",
        "--device-ip",
        "127.0.35.2",
        "--frames",
        "3",
        "--sensor",
        "ultrasound",
        "--quiet",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = common::rocelink(&["decode", "--json", pcap.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let pkts: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let roce: Vec<_> = pkts.iter().filter(|p| p["kind"] == "roce").collect();
    // 3 frames of 1 MiB in 1408-byte pages, plus metadata
    assert!(roce.len() > 3 * 700, "{} RoCE packets", roce.len());
    assert!(roce.iter().all(|p| p["icrc_ok"] == true));
    assert!(
        roce.iter().all(|p| p["dst_port"] != 4791),
        "the host's port is ephemeral"
    );
    // the ECB exchange is UDP that is not RoCE: counted, and --hsb named
    assert!(
        err.contains("left undecoded") && err.contains("--hsb"),
        "{err}"
    );
    let (_, out, err) = common::rocelink(&["decode", "--hsb", pcap.to_str().unwrap()]);
    assert!(!err.contains("left undecoded"), "{err}");
    // a summary that adds up, and HSB layers in words like the others (no raw JSON)
    let summary = err
        .lines()
        .find(|l| l.starts_with("rocelink decode: "))
        .unwrap_or_else(|| panic!("no summary: {err}"));
    let n: u64 = summary.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert_eq!(n, pkts.len() as u64, "{summary}");
    assert!(
        summary.contains(&format!(
            "{} RoCE v2 ({} ICRC verified, 0 failed)",
            roce.len(),
            roce.len()
        )),
        "{summary}"
    );
    assert!(out.contains("ECB RD_DWORD request"), "{out}");
    assert!(out.contains("HSB metadata frame 0"), "{out}");
    assert!(!out.contains("{\""), "raw JSON in the human output");
}

#[test]
fn an_ecb_flood_does_not_stop_the_stream_or_the_host() {
    let _emu = Emu::start("127.0.37.2", &["--fps", "30"]);
    // another host floods the device with ECB reads (each moves the sequence latch)
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let flood = std::thread::spawn(move || {
        let s = UdpSocket::bind("127.0.37.9:0").unwrap();
        let mut sent = 0u32;
        while !s2.load(std::sync::atomic::Ordering::Relaxed) && sent < 2_000_000 {
            // RD_DWORD 0x80, ACK_REQUEST, sequence `sent`
            let seq = (sent as u16).to_be_bytes();
            let req = [0x14, 0x01, seq[0], seq[1], 0, 0, 0, 0, 0, 0x80];
            let _ = s.send_to(&req, "127.0.37.2:8192");
            sent += 1;
            if sent.is_multiple_of(64) {
                // hundreds of thousands a second, but sharing the CPU: on a loaded 2-core
                // runner an unyielding loop (even one that yields) starves the device
                // thread itself, which is not the point
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
        sent
    });
    // the host configures the device (re-synchronising its sequence) and receives
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--device",
        "127.0.37.2",
        "--bind",
        "127.0.37.1",
        "--frame-size",
        "50000",
        "--frames",
        "10",
        "--quiet",
    ]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flood.join().unwrap();
    assert_eq!(code, 0, "under a flood of {sent} ECB requests: {err}");
    assert!(sent > 1000, "the flood ran: {sent}");
}

/// rocelink is often root: a file or directory another user plants where it will write is
/// never followed, replaced or written into — and says so before anything starts.
#[test]
fn planted_links_devices_and_directories_are_refused_up_front() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::tmpdir("planted");
    // a world-writable sticky directory, like /tmp
    std::fs::set_permissions(&*dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let precious = dir.join("precious");
    std::fs::write(&precious, b"root's file").unwrap();
    let snap = dir.join("last.png");
    std::os::unix::fs::symlink(&precious, &snap).unwrap();
    let pcap = dir.join("cap.pcap");
    std::os::unix::fs::symlink(&precious, &pcap).unwrap();
    let rec = dir.join("rec");
    std::os::unix::fs::symlink(&*dir, &rec).unwrap();
    let svg = dir.join("plot.svg");
    std::os::unix::fs::symlink(&precious, &svg).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "demo",
                "--frames",
                "3",
                "--snapshot",
                snap.to_str().unwrap(),
            ],
            "symbolic link",
        ),
        (
            vec!["demo", "--frames", "3", "--pcap", pcap.to_str().unwrap()],
            "symbolic link",
        ),
        (
            vec!["demo", "--frames", "3", "--record", rec.to_str().unwrap()],
            "symbolic link",
        ),
        (
            vec!["demo", "--frames", "3", "--snapshot", "/dev/null"],
            "character device",
        ),
        (
            vec!["trigger", "--plot", svg.to_str().unwrap()],
            "symbolic link",
        ),
    ];
    for (args, says) in cases {
        let t = std::time::Instant::now();
        let out = rocelink().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{args:?} started first"
        );
    }
    assert_eq!(std::fs::read(&precious).unwrap(), b"root's file");
    assert!(
        std::fs::symlink_metadata(&snap)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}
