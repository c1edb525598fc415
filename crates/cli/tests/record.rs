//! Recording end to end: frames from the emulator recorded by `rocelink demo --record`,
//! read back by the Python reader (numpy) and checked against their CRCs; crash consistency
//! after `kill -9`; a full disk ends the recording cleanly; inspect and export.

#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

fn python_with_numpy() -> std::path::PathBuf {
    let py = common::scapy_python().to_path_buf();
    let ok = Command::new(&py)
        .args(["-c", "import numpy"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let st = Command::new(&py)
            .args(["-m", "pip", "install", "--quiet", "numpy"])
            .status()
            .unwrap();
        assert!(st.success(), "need numpy for the Python reader test");
    }
    py
}

/// Run a Python script (with numpy and `python/` importable by the script); it must succeed.
fn run_python(script: &str) {
    let out = Command::new(python_with_numpy())
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn python_dir() -> String {
    common::test_file("../../../python")
        .canonicalize()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn python_reader_reads_what_rust_wrote() {
    let dir = common::tmpdir("record_python");
    let rec = dir.join("rec");
    let (code, _, err) = common::rocelink(&[
        "demo",
        "--device-ip",
        "127.0.61.2",
        "--frames",
        "6",
        "--sensor",
        "imx274-1080p-raw10",
        "--record",
        rec.to_str().unwrap(),
        "--snapshot",
        dir.join("snap.png").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = common::rocelink(&["inspect", rec.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["frames"].as_u64(), v["crc_failures"].as_u64()),
        (Some(6), Some(0))
    );
    let script = format!(
        r#"
import sys, zlib
sys.path.insert(0, {py_dir:?})
from rocelink import Recording
rec = Recording({rec:?})
assert len(rec) == 6, len(rec)
for meta, data in rec:
    assert meta["good"] and meta["crc_present"], meta
    assert data.dtype.name == "uint8" and data.size == 2611376, data.shape
    assert (zlib.crc32(data) ^ 0xFFFFFFFF) == meta["crc"], "frame CRC (JAMCRC) matches the bytes"
img = rec.image(0)
assert img.shape == (1080, 1920) and img.dtype.name == "uint16"
assert img.max() == 1023 and img[0, 1] > 0
print("ok", len(rec))
"#,
        py_dir = python_dir(),
        rec = rec.to_str().unwrap()
    );
    run_python(&script);
    // export: PNG and npy exist and have the right size
    let out_png = dir.join("f3.png");
    let (code, png, _) = common::rocelink(&[
        "export",
        rec.to_str().unwrap(),
        "--frame",
        "3",
        "--format",
        "png",
        "-o",
        out_png.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let png = std::fs::read(png.trim()).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let out_npy = dir.join("f3.npy");
    let (code, npy, _) = common::rocelink(&[
        "export",
        rec.to_str().unwrap(),
        "--frame",
        "3",
        "--format",
        "npy",
        "-o",
        out_npy.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::metadata(npy.trim()).unwrap().len(),
        128 + 1080 * 1920 * 2
    );
    // the snapshot is the last frame, rendered as export renders it
    let last = v["last_frame"].as_u64().unwrap().to_string();
    let out_last = dir.join("last.png");
    let (code, png, _) = common::rocelink(&[
        "export",
        rec.to_str().unwrap(),
        "--frame",
        &last,
        "--format",
        "png",
        "-o",
        out_last.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read(png.trim()).unwrap(),
        std::fs::read(dir.join("snap.png")).unwrap()
    );
    let (code, _, err) = common::rocelink(&["export", rec.to_str().unwrap(), "--frame", "99"]);
    assert_ne!(code, 0);
    assert!(err.contains("not in the recording"), "{err}");
}

#[test]
fn every_indexed_frame_survives_kill_9() {
    let dir = common::tmpdir("record_kill9");
    let rec = dir.join("rec");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocelink"))
        .args([
            "demo",
            "--device-ip",
            "127.0.62.2",
            "--frames",
            "100000",
            "--sensor",
            "pattern",
            "--fps",
            "200",
            "--record",
            rec.to_str().unwrap(),
            "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SIGKILL: no destructor, no flush
    child.kill().unwrap();
    child.wait().unwrap();
    let r = rocelink_record::read::Recording::open(&rec).unwrap();
    assert!(
        r.len() > 10,
        "frames were recorded before the kill: {}",
        r.len()
    );
    let mut expected = Vec::new();
    for (i, e) in r.entries.iter().enumerate() {
        let data = r.frame(i).unwrap();
        rocelink_hsb::sensor::Sensor::Pattern.frame(e.frame_number, data.len(), &mut expected);
        assert!(
            data == expected,
            "frame {} reads back intact",
            e.frame_number
        );
        assert_eq!(rocelink_wire::hsb::metadata::jamcrc(&data), e.crc);
    }
}

#[test]
fn full_disk_ends_the_recording_with_a_valid_directory() {
    if !common::root_or_ci() {
        return;
    }
    let dir = common::tmpdir("record_full");
    let mnt = common::small_disk(&dir, "8m");
    let rec = mnt.join("rec");
    let (code, _, err) = common::rocelink(&[
        "demo",
        "--device-ip",
        "127.0.63.2",
        "--frames",
        "10",
        "--sensor",
        "imx274-1080p-raw10",
        "--record",
        rec.to_str().unwrap(),
    ]);
    let checked = rocelink_record::read::Recording::open(&rec).map(|r| {
        let ok = (0..r.len()).all(|i| {
            r.frame(i)
                .is_ok_and(|d| rocelink_wire::hsb::metadata::jamcrc(&d) == r.entries[i].crc)
        });
        (r.len(), ok, r.inspect().recorder_drops)
    });
    drop(mnt);
    // the frames were received fine, but the recording lost some: say so in the exit code
    assert_eq!(code, 1, "frames lost to a full disk: {err}");
    assert!(err.contains("disk full"), "a clear error: {err}");
    let (n, ok, drops) = checked.unwrap();
    // 8 MiB holds three 2.6 MB frames at most; every listed one reads back intact
    assert!((1..=3).contains(&n), "{n} frames");
    assert!(ok);
    // and the recording itself says how many frames it is missing
    assert_eq!(
        n as u64 + drops,
        10,
        "{n} recorded + {drops} recorded as dropped"
    );
}

#[test]
fn a_full_disk_under_a_capture_names_the_file() {
    if !common::root_or_ci() {
        return;
    }
    let dir = common::tmpdir("pcap_full");
    let mnt = common::small_disk(&dir, "1m");
    let pcap = mnt.join("cap.pcap");
    let (code, _, err) = common::rocelink(&[
        "demo",
        "--device-ip",
        "127.0.66.2",
        "--frames",
        "5",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    drop(mnt);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains(pcap.to_str().unwrap()) && err.contains("No space left"),
        "the full file is named: {err}"
    );
}

/// Pack pixels the way the CoE (Thor) packetizer does, written from `docs/reference/hsb.md` ("Formats") here
/// rather than shared with the unpacker under test.
fn coe_pack(bits: u32, px: &[u16], bpl: usize) -> Vec<u8> {
    let mut line = Vec::new();
    if bits == 10 {
        for c in px.chunks(3) {
            let w = c
                .iter()
                .enumerate()
                .fold(0u32, |w, (i, &p)| w | (u32::from(p) << (10 * i)));
            line.extend_from_slice(&w.to_le_bytes());
        }
    } else {
        for c in px.chunks(2) {
            let (p0, p1) = (c[0], c.get(1).copied().unwrap_or(0));
            line.extend_from_slice(&[
                (p0 & 0xFF) as u8,
                ((p0 >> 8) as u8 & 0xF) | (((p1 & 0xF) as u8) << 4),
                (p1 >> 4) as u8,
            ]);
        }
    }
    assert!(line.len() <= bpl);
    line.resize(bpl, 0);
    line
}

#[test]
fn coe_packed_recordings_export_the_packed_pixels() {
    let dir = common::tmpdir("record_coe");
    let (w, h) = (100usize, 20usize);
    for (bits, bpl, ip) in [(10u32, 192usize, "127.0.64.2"), (12, 192, "127.0.65.2")] {
        let max = (1u16 << bits) - 1;
        let image: Vec<u16> = (0..w * h)
            .map(|i| ((i % w) * 7 + (i / w) * 31) as u16 & max)
            .collect();
        let frame: Vec<u8> = image
            .chunks(w)
            .flat_map(|row| coe_pack(bits, row, bpl))
            .collect();
        let src = dir.join(format!("coe{bits}.bin"));
        std::fs::write(&src, &frame).unwrap();
        let sensor = format!("file:{}", src.display());
        let size = frame.len().to_string();
        let emu = rocelink_testkit::emulator::Process::spawn(
            std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
            &[],
            &[
                "--ip",
                ip,
                "--bootp-target",
                "none",
                "--sensor",
                &sensor,
                "--frame-size",
                &size,
                "--fps",
                "50",
                "--seconds",
                "30",
            ],
        );
        let rec = dir.join(format!("rec{bits}"));
        let coe = format!("coe-raw{bits}:{w}x{h}");
        let (code, _, err) = common::rocelink(&[
            "receive",
            "--device",
            ip,
            "--frame-size",
            &size,
            "--frames",
            "3",
            "--sensor",
            &coe,
            "--record",
            rec.to_str().unwrap(),
        ]);
        drop(emu);
        assert_eq!(code, 0, "{err}");
        let npy_path = rec.join("frame-1.npy");
        let (code, npy, err) = common::rocelink(&[
            "export",
            rec.to_str().unwrap(),
            "--frame",
            "1",
            "--format",
            "npy",
            "-o",
            npy_path.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        let npy = std::fs::read(npy.trim()).unwrap();
        let hlen = u16::from_le_bytes([npy[8], npy[9]]) as usize;
        let header = String::from_utf8_lossy(&npy[10..10 + hlen]);
        assert!(header.contains(&format!("({h}, {w})")), "{header}");
        let got: Vec<u16> = npy[10 + hlen..]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(got, image, "RAW{bits} CoE pixels");
        // the Python reader unpacks the same pixels
        let script = format!(
            "import sys, numpy as np\nsys.path.insert(0, {py_dir:?})\nfrom rocelink import Recording\n\
             rec = Recording({rec:?})\nref = np.load({npy:?})\n\
             assert all((rec.image(i) == ref).all() for i in range(len(rec))), 'python CoE unpack'\n",
            py_dir = python_dir(),
            rec = rec.to_str().unwrap(),
            npy = npy_path.to_str().unwrap()
        );
        run_python(&script);
    }
}
