//! The Python package: `pip install ./python` into a virtualenv of the tests' own (the
//! extension built by maturin, as a user's install builds it), then the pytest suite in
//! `python/tests` against the emulators over loopback, and the recording reader against
//! `rocelink inspect`.
#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A virtualenv with the package installed from this checkout (once per test run), and
/// pytest; its python.
fn venv() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-venv");
        let py = venv.join("bin/python");
        if !py.exists() {
            let st = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .unwrap();
            assert!(st.success(), "python3 -m venv {}", venv.display());
        }
        let pip = |args: &[&str]| {
            let out = Command::new(&py)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(args)
                // the extension in a debug-optimised build of its own (the tests' build
                // directory may be locked by the cargo that runs them)
                .env("MATURIN_PEP517_ARGS", "--profile dev")
                .env("CARGO_TARGET_DIR", repo().join("target/python"))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "pip install {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        pip(&["pytest", "numpy"]);
        pip(&[repo().join("python").to_str().unwrap()]);
        py
    })
    .clone()
}

#[test]
fn the_pytest_suite_passes() {
    let dir = common::tmpdir("pytest");
    let out = Command::new(venv())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(repo().join("python/tests"))
        // the CLI the summaries are compared with
        .env("ROCELINK_BIN", env!("CARGO_BIN_EXE_rocelink"))
        .current_dir(&*dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" passed"), "{text}");
}

/// The installed package: the README's one-liner verbatim (no `sys.path`), frame access by device frame number, and the same damage verdicts as
/// `rocelink inspect`: a damaged record in the middle skipped and listed, drops counted.
#[test]
fn python_package_installs_and_agrees_with_inspect() {
    let dir = common::tmpdir("record_pip");
    let vpy = venv();
    let rec = dir.join("rec");
    let (code, _, err) = common::rocelink(&[
        "demo",
        "--device-ip",
        "127.0.34.2",
        "--frames",
        "5",
        "--quiet",
        "--record",
        rec.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    // the README's line, run from the directory that holds `rec`
    let out = Command::new(&vpy)
        .current_dir(&dir)
        .args([
            "-c",
            "import rocelink; r = rocelink.Recording(\"rec\"); print(len(r), r.image(0).shape)",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "5 (1080, 1920)",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // damage the third record: both readers skip exactly it
    let idx = rec.join("index.bin");
    let mut b = std::fs::read(&idx).unwrap();
    b[2 * 128 + 50] ^= 1;
    std::fs::write(&idx, b).unwrap();
    let (code, out, _) = common::rocelink(&["inspect", rec.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let script = format!(
        r#"
from rocelink import Recording
r = Recording({rec:?})
assert len(r) == {frames}, len(r)
assert r.damaged_records == [256], r.damaged_records
assert r.recorder_drops == {drops}
assert all(r.verify(i) for i in range(len(r)))
n = r.frame_numbers[-1]
assert r.frame(n)[0]["frame_number"] == n
try:
    r.frame(10**9)
    raise SystemExit("no error for a missing frame")
except KeyError as e:
    assert "numbers" in str(e), e
print("ok")
"#,
        rec = rec.to_str().unwrap(),
        frames = v["frames"],
        drops = v["recorder_drops"],
    );
    let out = Command::new(&vpy).args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
