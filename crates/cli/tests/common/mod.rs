//! Helpers shared by the CLI integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A Python interpreter that can `import scapy.contrib.roce`.
///
/// Uses `python3` if it already has scapy; otherwise creates a virtualenv under Cargo's
/// target directory and installs the pinned scapy from PyPI into it (once). Panics with a
/// clear message if neither works: the cross-checks are required, not optional.
pub(crate) fn scapy_python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let has_scapy = |py: &Path| {
            Command::new(py)
                .args(["-c", "import scapy.contrib.roce"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let system = PathBuf::from("python3");
        if has_scapy(&system) {
            return system;
        }
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scapy-venv");
        let py = venv.join("bin/python");
        if !has_scapy(&py) {
            let ok = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .is_ok_and(|s| s.success())
                && Command::new(&py)
                    .args(["-m", "pip", "install", "--quiet", "scapy==2.8.0"])
                    .status()
                    .is_ok_and(|s| s.success());
            assert!(
                ok && has_scapy(&py),
                "need python3 with scapy 2.8.0 (pip install scapy==2.8.0)"
            );
        }
        py
    })
}

/// Path of a file next to this module's tests.
pub(crate) fn test_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(rel)
}

/// A fresh temporary directory for one test, removed when the test passes (kept, for a
/// look, when it fails).
pub(crate) fn tmpdir(name: &str) -> TmpDir {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    TmpDir(d)
}

/// See [`tmpdir`].
#[derive(Debug)]
pub(crate) struct TmpDir(PathBuf);

impl std::ops::Deref for TmpDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for TmpDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A `size` tmpfs (e.g. "8m") mounted at `dir`/small, for a disk that fills; unmounted
/// when dropped (drop it before `dir`). Root only.
#[allow(dead_code)]
pub(crate) fn small_disk(dir: &Path, size: &str) -> SmallDisk {
    let mnt = dir.join("small");
    std::fs::create_dir_all(&mnt).expect("create the mount point");
    let opt = format!("size={size}");
    assert!(
        sh(&[
            "mount",
            "-t",
            "tmpfs",
            "-o",
            &opt,
            "tmpfs",
            mnt.to_str().unwrap()
        ]),
        "mount tmpfs"
    );
    SmallDisk(mnt)
}

/// See [`small_disk`].
#[derive(Debug)]
pub(crate) struct SmallDisk(PathBuf);

impl std::ops::Deref for SmallDisk {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Run the rocelink binary; returns (exit code, stdout, stderr).
pub(crate) fn rocelink(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rocelink"))
        .args(args)
        .output()
        .expect("run rocelink");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Ctrl-C to process `pid` (SIGINT, as a terminal sends it).
pub(crate) fn ctrl_c(pid: u32) {
    assert!(
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap()
            .success(),
        "kill -INT {pid}"
    );
}

#[allow(unused_imports)]
pub(crate) use rocelink_testkit::netns::{VethPair, need, root_or_ci, sh};

/// What `receive --json` printed: a line per frame, then the session's summary (which
/// must be there, with a port per virtual port).
#[allow(dead_code)] // not every test file receives
pub(crate) fn frames_and_summary(out: &str) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let summary = rows.pop().unwrap_or_default();
    assert!(summary["ports"].is_array(), "no summary line last: {out}");
    (rows, summary)
}
