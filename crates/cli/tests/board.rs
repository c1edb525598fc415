//! A real board's bring-up against the emulator, as separate processes: `rocelink i2c`
//! (errors, the expander, camera registers), `receive --camera imx274 --mode` (nothing
//! streams before, the camera stopped after), `reset` (the device comes back announcing
//! itself, its registers cleared), PTP (`--ptp` waits, or says why not), and the payload
//! from the interface's MTU on a veth pair (1500 → 1408, 9000 → 8832).

#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;

fn emulator(prefix: &[&str], args: &[&str]) -> rocelink_testkit::emulator::Process {
    rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        prefix,
        args,
    )
}

/// An emulated board at `dev` with `cameras` IMX274s, no enumeration, and `extra` flags.
fn board(dev: &str, cameras: &str, extra: &[&str]) -> rocelink_testkit::emulator::Process {
    let mut args = vec!["--ip", dev, "--bootp-target", "none", "--cameras", cameras];
    args.extend_from_slice(extra);
    emulator(&[], &args)
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = common::rocelink(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

#[test]
fn i2c_and_camera_bring_up_from_the_command_line() {
    let dev = "127.0.173.2";
    let _emu = board(dev, "2", &["--fps", "60"]);
    // the camera is behind the expander: not enabled, not acknowledged
    let (code, _, err) = common::rocelink(&[
        "i2c", "--device", dev, "0x1a", "--write", "3000", "--read", "1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("NAK") && err.contains("0x1a"), "{err}");
    // bad input is refused before anything is sent
    let (code, _, err) = common::rocelink(&["i2c", "--device", dev, "0x80", "--read", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("7-bit"), "{err}");
    let (code, _, err) = common::rocelink(&["i2c", "--device", dev, "0x1a"]);
    assert_eq!(code, 2);
    assert!(err.contains("--write") && err.contains("--read"), "{err}");
    ok(&["i2c", "--device", dev, "0x70", "--write", "01"]);
    assert_eq!(
        ok(&[
            "i2c", "--device", dev, "0x1a", "--write", "3000", "--read", "1"
        ])
        .trim(),
        "12"
    );
    // receive brings the camera up in 1080p and gets its frames
    let out = ok(&[
        "receive", "--device", dev, "--camera", "imx274", "--mode", "1080p", "--frames", "5",
        "--json", "--quiet",
    ]);
    let (rows, summary) = common::frames_and_summary(&out);
    assert_eq!(rows.len(), 5);
    assert_eq!(summary["ports"][0]["stats"]["good"], 5, "{summary}");
    for r in &rows {
        assert_eq!(r["good"], true, "{r}");
        assert_eq!(r["bytes"], 2_611_376, "{r}");
    }
    // and stopped it at the end (standby register 0x01, HSB's stop table)
    let j = ok(&[
        "i2c", "--device", dev, "0x1a", "--write", "30,00", "--read", "1", "--json",
    ]);
    let v: Value = serde_json::from_str(j.trim()).unwrap();
    assert_eq!(v["read"], serde_json::json!(["01"]), "{v}");
    assert_eq!(
        ok(&[
            "i2c", "--device", dev, "0x1a", "--write", "3004", "--read", "1"
        ])
        .trim(),
        "02"
    );
    // stereo: both cameras on one port, one thread each, every frame verified
    let out = ok(&[
        "receive", "--device", dev, "--camera", "imx274", "--mode", "1080p", "--vp", "0,1",
        "--frames", "4", "--json", "--quiet",
    ]);
    let (rows, _) = common::frames_and_summary(&out);
    for vp in [0, 1] {
        let mine: Vec<&Value> = rows.iter().filter(|r| r["vp"] == vp).collect();
        assert_eq!(mine.len(), 4, "vp {vp}: {out}");
        assert!(
            mine.iter()
                .all(|r| r["good"] == true && r["bytes"] == 2_611_376),
            "{out}"
        );
    }
    let (code, _, err) = common::rocelink(&["receive", "--device", dev, "--vp", "1,1"]);
    assert_eq!(code, 2);
    assert!(err.contains("twice"), "{err}");
    // a --sensor that disagrees with the camera's mode is refused
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--device",
        dev,
        "--camera",
        "imx274",
        "--mode",
        "1",
        "--sensor",
        "imx274-4k-raw10",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("disagrees"), "{err}");
}

#[test]
fn reset_comes_back_and_ptp_is_checked() {
    let dev = "127.0.174.2";
    let bootp = rocelink_testkit::ports::free_udp_port(&["127.0.174.1"]);
    let _emu = emulator(
        &[],
        &[
            "--ip",
            dev,
            "--bootp-target",
            &format!("127.0.174.1:{bootp}"),
            "--cameras",
            "1",
            "--ptp-sync-after",
            "4",
        ],
    );
    // PTP: not yet synchronised at first (4 s leave room for a slow machine to start the
    // first receive), a clear error; then synchronised
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--device",
        dev,
        "--ptp",
        "--ptp-timeout",
        "0.3",
        "--frames",
        "1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("PTP is not synchronised"), "{err}");
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--device",
        dev,
        "--ptp",
        "--ptp-timeout",
        "15",
        "--camera",
        "imx274",
        "--mode",
        "1080p",
        "--frames",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("PTP synchronised"), "{err}");
    // something to be cleared by the reset
    ok(&["write", "--device", dev, "0x1000", "0x55"]);
    ok(&["i2c", "--device", dev, "0x70", "--write", "01"]);
    ok(&["i2c", "--device", dev, "0x1a", "--write", "300400"]);
    let out = ok(&[
        "reset",
        "--device",
        dev,
        "--bind",
        &format!("127.0.174.1:{bootp}"),
        "--timeout",
        "10",
    ]);
    assert!(
        out.contains("reset; back after") && out.contains("0x2606"),
        "{out}"
    );
    assert!(ok(&["read", "--device", dev, "0x1000"]).contains("0x00000000"));
    // the camera is at power-on again: standby, and the expander closed
    let (code, _, err) = common::rocelink(&[
        "i2c", "--device", dev, "0x1a", "--write", "3000", "--read", "1",
    ]);
    assert_eq!(code, 2, "{err}");
    ok(&["i2c", "--device", dev, "0x70", "--write", "01"]);
    assert_eq!(
        ok(&[
            "i2c", "--device", dev, "0x1a", "--write", "3000", "--read", "1"
        ])
        .trim(),
        "12"
    );
    // and PTP is lost until it synchronises again
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--device",
        dev,
        "--ptp",
        "--ptp-timeout",
        "0.2",
        "--frames",
        "1",
    ]);
    assert_eq!(code, 2, "{err}");
    // nobody answers the reset: a clear error naming the device
    let bind = format!(
        "127.0.174.1:{}",
        rocelink_testkit::ports::free_udp_port(&["127.0.174.1"])
    );
    let (code, _, err) = common::rocelink(&[
        "reset",
        "--device",
        "127.0.174.9",
        "--bind",
        &bind,
        "--timeout",
        "1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("127.0.174.9"), "{err}");
}

/// The largest RETH DMA length among the data packets of a pcap.
fn largest_payload(pcap: &str) -> u64 {
    let (code, out, err) = common::rocelink(&["decode", "--json", pcap]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["opcode"] == 0x2A)
        .filter_map(|r| r["reth"]["dma_len"].as_u64())
        .max()
        .unwrap_or(0)
}

#[test]
fn netns_payload_follows_the_interface_mtu() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") {
        return;
    }
    let ns = common::VethPair::new("mtu", &["10.204.0.2/24"], &["10.204.0.1/24"]);
    let d = common::VethPair::exec(&ns.a);
    let h = common::VethPair::exec(&ns.b);
    let _emu = emulator(
        &d,
        &[
            "--ip",
            "10.204.0.2",
            "--bootp-target",
            "none",
            "--cameras",
            "1",
            "--fps",
            "30",
        ],
    );
    let dir = common::tmpdir("board_mtu");
    for (mtu, payload) in [("1500", 1408), ("9000", 8832)] {
        for (n, v) in [(&ns.a, &ns.va), (&ns.b, &ns.vb)] {
            assert!(common::sh(&["ip", "-n", n, "link", "set", v, "mtu", mtu]));
        }
        let pcap = dir.join(format!("mtu{mtu}.pcap"));
        let p = pcap.to_str().unwrap();
        let mut c = std::process::Command::new(h[0]);
        c.args(&h[1..]).arg(env!("CARGO_BIN_EXE_rocelink")).args([
            "receive",
            "--device",
            "10.204.0.2",
            "--camera",
            "imx274",
            "--mode",
            "1080p",
            "--frames",
            "3",
            "--json",
            "--quiet",
            "--pcap",
            p,
        ]);
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "MTU {mtu}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let good = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("\"good\":true"))
            .count();
        assert_eq!(good, 3, "MTU {mtu}");
        assert_eq!(largest_payload(p), payload, "MTU {mtu}");
    }
}

#[test]
fn sequencer_programs_agree_with_an_independent_interpreter() {
    let dev = "127.0.175.2";
    let dir = common::tmpdir("board_sequencer");
    let pcap = dir.join("ecb.pcap");
    let p = pcap.to_str().unwrap();
    let mut emu = board(dev, "1", &["--pcap", p]);
    ok(&["i2c", "--device", dev, "0x70", "--write", "01"]);
    ok(&["i2c", "--device", dev, "0x1a", "--write", "300402"]);
    ok(&[
        "i2c",
        "--device",
        dev,
        "0x1a",
        "--write",
        "300a,11,22,33,44,55,66,77,88,99",
    ]);
    assert_eq!(
        ok(&[
            "i2c", "--device", dev, "0x1a", "--write", "300a", "--read", "9"
        ])
        .trim(),
        "11 22 33 44 55 66 77 88 99"
    );
    assert_eq!(
        ok(&[
            "i2c", "--device", dev, "0x1a", "--write", "3004", "--read", "1"
        ])
        .trim(),
        "02"
    );
    let (code, _, _) = common::rocelink(&["i2c", "--device", dev, "0x36", "--read", "2"]);
    assert_eq!(code, 2);
    // SIGINT: the emulator flushes its capture and exits
    assert!(common::sh(&["kill", "-INT", &emu.child().id().to_string()]));
    assert!(emu.child().wait().unwrap().success());
    let out = std::process::Command::new(common::scapy_python())
        .arg(common::test_file("scapy/sequencer_check.py"))
        .arg(p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["mismatches"], serde_json::json!([]), "{v}");
    assert_eq!(v["programs"], 6, "{v}");
    assert_eq!(v["transactions"], 6, "{v}");
    // every transaction's copied status, and the read bytes, were compared
    assert!(v["replies_checked"].as_u64().unwrap() >= 6 + 3, "{v}");
    assert_eq!(v["camera"]["0x3004"], 2, "{v}");
    assert_eq!(v["camera"]["0x3012"], 0x99, "{v}");
}

/// A 24-bit stereo 48 kHz WAV of `frames` frames of varied samples.
fn wav_file(frames: usize) -> (Vec<u8>, Vec<u8>) {
    let data: Vec<u8> = (0..frames * 6).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut f = Vec::new();
    f.extend_from_slice(b"RIFF");
    f.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    f.extend_from_slice(b"WAVEfmt ");
    f.extend_from_slice(&16u32.to_le_bytes());
    for v in [1u16, 2] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(&48_000u32.to_le_bytes());
    f.extend_from_slice(&(48_000u32 * 6).to_le_bytes());
    f.extend_from_slice(&6u16.to_le_bytes());
    f.extend_from_slice(&24u16.to_le_bytes());
    f.extend_from_slice(b"data");
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    f.extend_from_slice(&data);
    (f, data)
}

#[test]
fn sensor_tx_delivers_files_byte_exact() {
    let dev = "127.0.176.2";
    let dir = common::tmpdir("board_stx");
    let (wav, samples) = wav_file(2401); // 19 208 I2S bytes: the last chunk is partial
    let wav_path = dir.join("tone.wav");
    std::fs::write(&wav_path, &wav).unwrap();
    let raw: Vec<u8> = (0..50_001u32).map(|i| (i * 13 + i / 97) as u8).collect();
    let raw_path = dir.join("blob.bin");
    std::fs::write(&raw_path, &raw).unwrap();
    let (record, pcap) = (dir.join("tx.bin"), dir.join("tx.pcap"));
    let mut emu = board(
        dev,
        "0",
        &[
            "--record-tx",
            record.to_str().unwrap(),
            "--pcap",
            pcap.to_str().unwrap(),
        ],
    );
    let (w, r) = (wav_path.to_str().unwrap(), raw_path.to_str().unwrap());
    // HSB's audio_player.py way, paced at the sample rate (0.05 s), with the I2S set-up
    let out = ok(&["send-audio", "--device", dev, w, "--json"]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["packets"], 101, "{v}");
    assert_eq!(v["bytes"], 101 * 192, "{v}");
    // the set-up reached the device: TX enabled, the FIFO started
    assert_eq!(
        ok(&["read", "--device", dev, "0x80000000"]).trim(),
        "0x80000000: 0x00000001"
    );
    assert_eq!(
        ok(&["read", "--device", dev, "0x01200000"]).trim(),
        "0x01200000: 0x00000004"
    );
    // HSB's linux_audio_player.py packets, unpaced
    ok(&[
        "send-audio",
        "--device",
        dev,
        w,
        "--format",
        "linux",
        "--fast",
        "--no-setup",
        "--quiet",
    ]);
    // any file, as it is: 1000-byte packets, the last 1 byte (3 pad bytes on the wire)
    ok(&[
        "send-audio",
        "--device",
        dev,
        r,
        "--raw",
        "--chunk",
        "1000",
        "--no-setup",
        "--quiet",
    ]);
    // bad input is refused before anything is sent
    let (code, _, err) = common::rocelink(&["send-audio", "--device", dev, r]);
    assert_eq!(code, 2);
    assert!(
        err.contains("not a WAV file") && err.contains("--raw"),
        "{err}"
    );
    assert!(common::sh(&["kill", "-INT", &emu.child().id().to_string()]));
    let (status, said) = emu.wait_output();
    assert!(status.success(), "{said}");
    assert!(
        said.contains("sensor TX 253 packets")
            && said.contains("0 lost, 0 ICRC errors, 101 in HSB's Linux-player format"),
        "{said}"
    );
    // what the I2S output got: each sample in a 4-byte slot, the last chunk zero-padded,
    // twice, then the raw file
    let mut i2s: Vec<u8> = samples
        .chunks(3)
        .flat_map(|s| [s[0], s[1], s[2], 0])
        .collect();
    i2s.resize(101 * 192, 0);
    let want = [i2s.clone(), i2s, raw].concat();
    let got = std::fs::read(&record).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the recording differs from what was sent");
    // and independently: scapy's ICRC, zlib's trailer, Python's wave module
    let out = std::process::Command::new(common::scapy_python())
        .arg(common::test_file("scapy/stx_check.py"))
        .args([pcap.to_str().unwrap(), "192", w, w, &format!("{r}:raw")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["roce_icrc_ok"], 101 + 51, "{v}");
    assert_eq!(v["linux_trailer_ok"], 101, "{v}");
}

/// Messages a first try meets say what to do: a camera asked of a device without one, an
/// address the host does not have, a port chosen by the kernel.
#[test]
fn first_try_errors_say_what_to_do() {
    let dev = "127.0.177.2";
    let emu = board(dev, "0", &["--control-port", "0"]);
    let port: u16 = emu
        .banner
        .split("ECB on 127.0.177.2:")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    assert_ne!(port, 0, "the port chosen is named: {}", emu.banner);
    drop(emu);
    let _emu = board("127.0.178.2", "0", &[]);
    // an address of its own: with 127.0.0.1:4791 held by another program, the receiver
    // would otherwise move to the next 127.0.0.x, which another test may hold
    let (code, _, err) = common::rocelink(&[
        "receive",
        "--device",
        "127.0.178.2",
        "--bind",
        "127.0.178.1",
        "--camera",
        "imx274",
        "--frames",
        "1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("emulate --cameras N"), "{err}");
    assert!(!err.contains("Raw10"), "no Rust names: {err}");
    let (code, _, err) = common::rocelink(&["emulate", "--ip", "10.99.99.99"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("ip addr add 10.99.99.99") && err.contains("--xdp"),
        "{err}"
    );
}

/// One IP for both: the emulator at 127.0.0.1 holds its RoCE port (sensor TX), and the
/// receiver moves to another loopback address (the device is told where to send).
#[test]
fn device_and_receiver_on_one_address() {
    // this needs 127.0.0.1's ECB and RoCE ports; another program may hold them
    let free = ["127.0.0.1:8192", "127.0.0.1:4791"]
        .iter()
        .all(|a| std::net::UdpSocket::bind(a).is_ok());
    if !free {
        eprintln!("skipped: 127.0.0.1:8192 or :4791 is taken by another program");
        return;
    }
    let _emu = emulator(
        &[],
        &["--ip", "127.0.0.1", "--bootp-target", "none", "--fps", "60"],
    );
    let (code, out, err) = common::rocelink(&[
        "receive",
        "--device",
        "127.0.0.1",
        "--frame-size",
        "100000",
        "--frames",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(common::frames_and_summary(&out).0.len(), 3, "{out}");
}
