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
from rocelink_reader import Recording
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
        py_dir = common::test_file("../../../python")
            .canonicalize()
            .unwrap()
            .to_str()
            .unwrap(),
        rec = rec.to_str().unwrap()
    );
    let out = Command::new(python_with_numpy())
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // export: PNG and npy exist and have the right size
    let (code, png, _) = common::rocelink(&[
        "export",
        rec.to_str().unwrap(),
        "--frame",
        "3",
        "--format",
        "png",
    ]);
    assert_eq!(code, 0);
    let png = std::fs::read(png.trim()).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let (code, npy, _) = common::rocelink(&[
        "export",
        rec.to_str().unwrap(),
        "--frame",
        "3",
        "--format",
        "npy",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::metadata(npy.trim()).unwrap().len(),
        128 + 1080 * 1920 * 2
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
    let mnt = dir.join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    assert!(
        common::sh(&[
            "mount",
            "-t",
            "tmpfs",
            "-o",
            "size=8m",
            "tmpfs",
            mnt.to_str().unwrap()
        ]),
        "mount tmpfs"
    );
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
        (r.len(), ok)
    });
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(code, 0, "the receiver itself is fine: {err}");
    let (n, ok) = checked.unwrap();
    // 8 MiB holds three 2.6 MB frames at most; every listed one reads back intact
    assert!((1..=3).contains(&n), "{n} frames");
    assert!(ok);
}
