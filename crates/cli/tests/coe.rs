//! Camera over Ethernet end to end, in network namespaces joined by a veth pair: the
//! emulated device, told over ECB to send CoE (`DP_QP` bit 24) by `rocelink receive --coe`,
//! sends IMX274 frames as raw IEEE 1722B frames from a raw socket (as HSB's emulator) or
//! from the AF_XDP port it owns; the receiver reassembles and verifies them from an
//! AF_PACKET socket, or from an AF_XDP socket steered EtherType 0x22F0 (`--xdp`), into
//! the same frame pipeline and recorder as RoCE. tshark dissects
//! the frames it sends (AVTP subtype, stream ID); nftables drops data packets at random
//! and the receiver counts exactly the packets it dropped, never passing a frame off as
//! good.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::BufRead;
use std::process::{Command, Stdio};

fn rocelink(prefix: &[&str], args: &[&str]) -> (bool, String, String) {
    let out = Command::new(prefix[0])
        .args(&prefix[1..])
        .arg(env!("CARGO_BIN_EXE_rocelink"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The frame lines of `receive --json`, its summary line checked to be a CoE port's with
/// the frames counted as the lines say.
fn frames(json: &str) -> Vec<serde_json::Value> {
    let (rows, summary) = common::frames_and_summary(json);
    let p = &summary["ports"][0];
    assert!(
        p["coe"]["other"].is_u64(),
        "a CoE port's summary: {summary}"
    );
    assert_eq!(p["outcome"]["frames"], rows.len() as u64, "{summary}");
    let good = rows.iter().filter(|r| r["good"] == true).count() as u64;
    assert_eq!(p["stats"]["good"], good, "{summary}");
    rows
}

fn emulator(prefix: &[&str], args: &[&str]) -> rocelink_testkit::emulator::Process {
    rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        prefix,
        args,
    )
}

/// tshark capturing `count` CoE frames on `iface` in `ns` into `file`; returns once it
/// says it is capturing.
fn tshark(ns: &str, iface: &str, count: u32, file: &std::path::Path) -> std::process::Child {
    let mut c = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "tshark",
            "-i",
            iface,
            "-f",
            "ether proto 0x22f0",
        ])
        .args(["-c", &count.to_string(), "-a", "duration:30", "-w"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = c.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(err).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("Capturing on") => break,
            Some(_) => {}
            None => panic!("tshark ended before capturing"),
        }
    }
    std::thread::spawn(move || for _ in lines {});
    c
}

#[test]
fn coe_frames_end_to_end_dissected_by_tshark_and_losses_counted_exactly() {
    if !common::root_or_ci()
        || !common::need("ip", "iproute2")
        || !common::need("nft", "nftables")
        || !common::need("tshark", "tshark")
    {
        return;
    }
    let ns = common::VethPair::new("c16", &["10.211.0.1/24"], &["10.211.0.2/24"]);
    let d = common::VethPair::exec(&ns.a);
    let h = common::VethPair::exec(&ns.b);
    let sensor = "imx274-1080p-raw10";
    let device = |frames: &str| {
        emulator(
            &d,
            &[
                "--ip",
                "10.211.0.1",
                "--bootp-target",
                "none",
                "--coe-iface",
                &ns.va,
                "--sensor",
                sensor,
                "--fps",
                "60",
                "--frames",
                frames,
                "--seconds",
                "60",
            ],
        )
    };
    let dir = std::env::temp_dir().join(format!("rocelink-coe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("rec");
    let pcap = dir.join("coe.pcapng");

    // 1. 20 frames, every one good, recorded; tshark sees HSB's 1722 framing
    let _emu = device("20");
    let mut cap = tshark(&ns.b, &ns.vb, 20, &pcap);
    let rec_s = rec.to_string_lossy().into_owned();
    let (ok, out, err) = rocelink(
        &h,
        &[
            "receive",
            "--device",
            "10.211.0.1",
            "--coe",
            &ns.vb,
            "--sensor",
            sensor,
            "--frames",
            "20",
            "--json",
            "--record",
            &rec_s,
            "--timeout",
            "10",
        ],
    );
    assert!(ok, "{out}\n{err}");
    let f = frames(&out);
    assert_eq!(f.len(), 20, "{err}");
    for (i, x) in f.iter().enumerate() {
        assert_eq!(x["good"], true, "{x}");
        assert_eq!(x["frame_number"], i as u64);
        assert_eq!(x["bytes"], 2_611_376);
        assert_eq!(x["crc_ok"], true);
    }
    assert!(
        err.contains("20 CoE frames: 20 good, 0 damaged; 0 packets dropped"),
        "{err}"
    );
    // the recorder drops rather than stalls when the disk falls behind (a loaded CI disk
    // may): every frame is recorded or counted as dropped
    let (recorded, dropped) = recorder_counts(&err);
    assert_eq!(recorded + dropped, 20, "{err}");
    assert!(recorded > 0, "{err}");
    cap.wait().unwrap();
    let fields = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-T", "fields", "-E", "separator=,"])
        .args([
            "-e",
            "ieee1722.subtype",
            "-e",
            "ieee1722.svfield",
            "-e",
            "ntscf.stream_id",
        ])
        .args(["-e", "ntscf.data_len", "-e", "frame.len"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&fields.stdout);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 20, "{text}");
    for r in &rows {
        // NTSCF, stream ID valid, HSB's stream ID, length 0 as HSB sends; a 1500-byte MTU
        // carries 1408 payload bytes after the 46-byte header (the last packet of a frame
        // may be shorter)
        let c: Vec<&str> = r.split(',').collect();
        assert_eq!(&c[..4], ["0x82", "1", "0x00000000aaaaaaaa", "0"], "{r}");
        assert!(c[4].parse::<u32>().unwrap() <= 1454, "{r}");
    }
    assert!(rows.iter().any(|r| r.ends_with(",1454")), "{text}");
    // the recording holds the frames: inspect agrees
    let out = Command::new(env!("CARGO_BIN_EXE_rocelink"))
        .args(["inspect", &rec_s])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("imx274-1080p-raw10")
            && text.contains(&format!(
                "{recorded} frames ({recorded} good, 0 damaged, 0 CRC failures)"
            )),
        "{text}"
    );

    // 2. nftables drops one data packet in 800 (never a frame's first or last, whose
    // flags bits 1:0 are set): every drop is counted in its frame and only those frames
    // are damaged
    ns.nft(
        &ns.a,
        &format!(
            "table netdev rlc16 {{\n chain e {{\n  type filter hook egress device \"{}\" priority 0; policy accept;\n  \
             ether type 0x22f0 @ll,328,8 & 0x03 == 0 numgen random mod 800 == 0 counter drop\n }}\n}}\n",
            ns.va
        ),
    );
    let _emu2 = device("40");
    let (ok, out, err) = rocelink(
        &h,
        &[
            "receive",
            "--device",
            "10.211.0.1",
            "--coe",
            &ns.vb,
            "--sensor",
            sensor,
            "--frames",
            "40",
            "--json",
            "--timeout",
            "10",
        ],
    );
    assert!(ok, "{out}\n{err}");
    let f = frames(&out);
    assert_eq!(f.len(), 40, "{err}");
    let dropped: u64 = f
        .iter()
        .map(|x| x["dropped_packets"].as_u64().unwrap())
        .sum();
    for x in &f {
        let lost = x["dropped_packets"].as_u64().unwrap() > 0;
        assert_eq!(x["good"], !lost, "{x}");
        if lost {
            assert_eq!(x["crc_ok"], false, "a hole fails the CRC: {x}");
        }
    }
    let listed = Command::new("ip")
        .args([
            "netns", "exec", &ns.a, "nft", "list", "table", "netdev", "rlc16",
        ])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    let counted: u64 = listed
        .split("counter packets ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        counted > 0,
        "the rule dropped nothing in 40 frames of 1855 packets: {listed}"
    );
    assert_eq!(dropped, counted, "{listed}\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn coe_between_two_af_xdp_ports_with_the_documented_short_metadata() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") {
        return;
    }
    // the device's address is on no interface: its own stack answers ECB's ARP
    let ns = common::VethPair::new("s16", &[], &["10.212.0.2/24"]);
    let d = common::VethPair::exec(&ns.a);
    let h = common::VethPair::exec(&ns.b);
    let mut emu = emulator(
        &d,
        &[
            "--xdp",
            &ns.va,
            "--ip",
            "10.212.0.1",
            "--bootp-target",
            "none",
            "--coe-metadata",
            "short",
            "--frame-size",
            "300000",
            "--fps",
            "60",
            "--frames",
            "10",
            "--seconds",
            "60",
        ],
    );
    let (ok, out, err) = rocelink(
        &h,
        &[
            "receive",
            "--device",
            "10.212.0.1",
            "--coe",
            &ns.vb,
            "--xdp",
            &ns.vb,
            "--coe-channel",
            "9",
            "--frame-size",
            "300000",
            "--frames",
            "10",
            "--json",
            "--timeout",
            "10",
        ],
    );
    assert!(ok, "{out}\n{err}");
    let f = frames(&out);
    assert_eq!(f.len(), 10, "{err}");
    assert!(
        f.iter()
            .all(|x| x["good"] == true && x["bytes_expected"] == 300000),
        "{out}"
    );
    assert!(err.contains("CoE channel 9"), "{err}");
    // the host took them through AF_XDP too: at least 10 frames of 214 packets
    let line = err.lines().find(|l| l.contains("AF_XDP on")).unwrap();
    let n: u64 = line
        .rsplit(": ")
        .next()
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(n >= 10 * 214, "{line}");
    let (_, emu_err) = emu.wait_output();
    assert!(
        emu_err.contains("CoE 10 frames; 0 packets found no room"),
        "{emu_err}"
    );
}

#[test]
fn coe_flags_are_checked_before_anything_starts() {
    let bin = env!("CARGO_BIN_EXE_rocelink");
    let run = |args: &[&str]| {
        let o = Command::new(bin).args(args).output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (ok, err) = run(&["receive", "--coe", "lo"]);
    assert!(!ok && err.contains("--coe needs --device"), "{err}");
    let (ok, err) = run(&[
        "receive",
        "--coe",
        "lo",
        "--device",
        "127.0.0.1",
        "--vp",
        "0,1",
    ]);
    assert!(!ok && err.contains("one virtual port"), "{err}");
    let (ok, err) = run(&["receive", "--coe", "lo", "--listen", "127.0.0.1:4791"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
    let (ok, err) = run(&[
        "receive",
        "--coe",
        "lo",
        "--device",
        "127.0.0.1",
        "--xdp",
        "nosuchif0",
    ]);
    assert!(!ok && err.contains("name different interfaces"), "{err}");
    let (ok, err) = run(&["receive", "--coe-channel", "3", "--device", "127.0.0.1"]);
    assert!(!ok && err.contains("--coe"), "{err}");
    let (ok, err) = run(&[
        "receive",
        "--coe",
        "lo",
        "--device",
        "127.0.0.1",
        "--coe-channel",
        "64",
    ]);
    assert!(!ok && err.contains("64"), "{err}");
    if common::root_or_ci() {
        let (ok, err) = run(&["receive", "--coe", "nosuchif0", "--device", "127.0.0.1"]);
        assert!(!ok && err.contains("nosuchif0"), "{err}");
    }
}

/// From `receive`'s "recorded N frames (…); D dropped by the recorder": (N, D).
fn recorder_counts(err: &str) -> (u64, u64) {
    let line = err
        .lines()
        .find(|l| l.contains("recorded ") && l.contains("dropped by the recorder"))
        .unwrap_or_else(|| panic!("no recording line: {err}"));
    let n = |after: &str| -> u64 {
        line.split(after)
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{line}"))
    };
    (n("recorded "), n("; "))
}
