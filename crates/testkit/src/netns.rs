//! Network namespaces joined by a veth pair, for tests whose traffic must stay inside
//! this machine and leave the host's own stack alone; loss by nftables rules in them.

use std::process::Command;

/// True when this process may create network namespaces (root), or in CI (which runs as
/// root, so a failure there is real). Elsewhere the caller skips with a message.
pub fn root_or_ci() -> bool {
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
pub fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .status()
        .is_ok_and(|s| s.success())
}

/// True when `tool` is on the PATH. Otherwise: in CI (where `.ci/run` installs every
/// prerequisite) a failure naming the tool and what installs it; elsewhere a visible skip.
pub fn need(tool: &str, package: &str) -> bool {
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
pub struct VethPair {
    /// Namespace A.
    pub a: String,
    /// Namespace B.
    pub b: String,
    /// A's end of the veth pair.
    pub va: String,
    /// B's end of the veth pair.
    pub vb: String,
}

impl VethPair {
    /// Namespaces `rl<tag>a<pid>` / `rl<tag>b<pid>`, `a_addrs` on A's end and `b_addrs` on
    /// B's (CIDR), links and loopback up. Panics naming the step that failed.
    pub fn new(tag: &str, a_addrs: &[&str], b_addrs: &[&str]) -> VethPair {
        VethPair::with_queues(tag, a_addrs, b_addrs, 1)
    }

    /// As [`VethPair::new`], each end with `queues` transmit and receive queues (a frame
    /// arrives on the receive queue numbered as the transmit queue it left by).
    pub fn with_queues(tag: &str, a_addrs: &[&str], b_addrs: &[&str], queues: u32) -> VethPair {
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
        let q = queues.max(1).to_string();
        run(&[
            "ip",
            "link",
            "add",
            &p.va,
            "netns",
            &p.a,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &p.vb,
            "netns",
            &p.b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
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
    pub fn exec(ns: &str) -> [&str; 4] {
        ["ip", "netns", "exec", ns]
    }

    /// Load an nftables ruleset (e.g. `numgen random` drops on a netdev hook) in `ns`.
    pub fn nft(&self, ns: &str, rules: &str) {
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
