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

/// True when this process may create network namespaces (root), or in CI (which runs as
/// root, so a failure there is real). Elsewhere the caller skips with a message.
pub(crate) fn root_or_ci() -> bool {
    let uid0 = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    });
    if !uid0 && std::env::var_os("CI").is_none() {
        eprintln!("skipping: network namespaces need root (CI runs this test as root)");
        return false;
    }
    true
}

/// Run a command; true on success.
pub(crate) fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .status()
        .is_ok_and(|s| s.success())
}

/// True when `tool` is on the PATH. Otherwise: in CI (where `.ci/run` installs every
/// prerequisite) a failure naming the tool and what installs it; elsewhere a visible skip.
pub(crate) fn need(tool: &str, package: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return true;
    }
    let msg = format!(
        "this test needs `{tool}` (apt-get install {package}, or scripts/install-test-deps for every test prerequisite)"
    );
    assert!(std::env::var_os("CI").is_none(), "{msg}");
    eprintln!("skipping: {msg}");
    false
}

/// Two network namespaces joined by a veth pair, removed on drop. Traffic between them
/// stays inside this machine: the test's own hosts.
#[derive(Debug)]
pub(crate) struct VethPair {
    /// Namespace A and B.
    pub(crate) a: String,
    pub(crate) b: String,
    /// A's and B's ends of the veth pair.
    pub(crate) va: String,
    pub(crate) vb: String,
}

impl VethPair {
    /// Namespaces `rl<tag>a<pid>` / `rl<tag>b<pid>`, `a_addrs` on A's end and `b_addrs` on
    /// B's (CIDR), links and loopback up. Panics naming the step that failed.
    pub(crate) fn new(tag: &str, a_addrs: &[&str], b_addrs: &[&str]) -> VethPair {
        let id = std::process::id();
        let p = VethPair {
            a: format!("rl{tag}a{id}"),
            b: format!("rl{tag}b{id}"),
            va: format!("v{tag}a{id}"),
            vb: format!("v{tag}b{id}"),
        };
        let run = |args: &[&str]| assert!(sh(args), "{args:?} (needs root and iproute2)");
        run(&["ip", "netns", "add", &p.a]);
        run(&["ip", "netns", "add", &p.b]);
        run(&[
            "ip", "link", "add", &p.va, "netns", &p.a, "type", "veth", "peer", "name", &p.vb,
            "netns", &p.b,
        ]);
        for (ns, dev, addrs) in [(&p.a, &p.va, a_addrs), (&p.b, &p.vb, b_addrs)] {
            for addr in addrs {
                run(&["ip", "-n", ns, "addr", "add", addr, "dev", dev]);
            }
            run(&["ip", "-n", ns, "link", "set", dev, "up"]);
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        p
    }

    /// `ip netns exec NS`: a command prefix that runs inside namespace `ns`.
    pub(crate) fn exec(ns: &str) -> [&str; 4] {
        ["ip", "netns", "exec", ns]
    }

    /// Load an nftables ruleset (e.g. `numgen random` drops on a netdev hook) in `ns`.
    pub(crate) fn nft(&self, ns: &str, rules: &str) {
        assert!(need("nft", "nftables"), "nftables is needed here");
        let f = std::env::temp_dir().join(format!("rocelink-nft-{ns}.nft"));
        std::fs::write(&f, rules).expect("write nft rules");
        let ok = sh(&[
            "ip",
            "netns",
            "exec",
            ns,
            "nft",
            "-f",
            f.to_str().unwrap_or(""),
        ]);
        let _ = std::fs::remove_file(&f);
        assert!(ok, "nft -f in {ns} failed:\n{rules}");
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for n in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}
