//! A veth pair between two network namespaces made for one benchmark run (root): the
//! sender in namespace A at the "device" address, the receivers in B at the "host"
//! address — a real link with a driver, where AF_XDP can attach, unlike loopback.
//! Removed on drop.

use std::net::Ipv4Addr;
use std::process::Command;

/// The namespaces, interfaces and addresses of a benchmark link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Veth {
    /// The sender's namespace.
    pub ns_a: String,
    /// The receiver's namespace.
    pub ns_b: String,
    /// The receiver's interface (in `ns_b`).
    pub if_b: String,
    /// The sender's address.
    pub device: Ipv4Addr,
    /// The receiver's address.
    pub host: Ipv4Addr,
}

/// The link, removed when dropped.
#[derive(Debug)]
pub struct VethLink {
    /// What it is.
    pub veth: Veth,
}

fn ip(args: &[&str]) -> crate::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(crate::BenchError::doing("cannot run `ip` (iproute2)"))?;
    if !out.status.success() {
        return Err(crate::BenchError::Ip {
            args: args.join(" "),
            stderr: format!(
                "{} (the veth benchmark needs root)",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(())
}

impl VethLink {
    /// Namespaces `rlbench{a,b}<pid>` joined by a veth pair, 10.208.0.1/24 on A's end
    /// and 10.208.0.2/24 on B's, MTU `mtu`.
    pub fn create(mtu: u32) -> crate::Result<VethLink> {
        let id = std::process::id();
        let veth = Veth {
            ns_a: format!("rlbencha{id}"),
            ns_b: format!("rlbenchb{id}"),
            if_b: format!("vbenchb{id}"),
            device: Ipv4Addr::new(10, 208, 0, 1),
            host: Ipv4Addr::new(10, 208, 0, 2),
        };
        let if_a = format!("vbencha{id}");
        let link = VethLink { veth };
        let v = &link.veth;
        ip(&["netns", "add", &v.ns_a])?;
        ip(&["netns", "add", &v.ns_b])?;
        ip(&[
            "link", "add", &if_a, "netns", &v.ns_a, "type", "veth", "peer", "name", &v.if_b,
            "netns", &v.ns_b,
        ])?;
        let mtu = mtu.to_string();
        for (ns, dev, addr) in [
            (&v.ns_a, &if_a, "10.208.0.1/24"),
            (&v.ns_b, &v.if_b, "10.208.0.2/24"),
        ] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "mtu", &mtu, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(link)
    }
}

impl Drop for VethLink {
    fn drop(&mut self) {
        // deleting a namespace deletes its end of the pair, and with it the other
        let _ = ip(&["netns", "del", &self.veth.ns_a]);
        let _ = ip(&["netns", "del", &self.veth.ns_b]);
    }
}

/// Softirq and hardirq time of the whole machine so far (from `/proc/stat`): the kernel's
/// receive work that no thread's own CPU time shows (veth and NAPI run it in softirq on
/// whichever CPU raised it).
pub fn irq_time() -> std::time::Duration {
    let hz = 100.0; // USER_HZ
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let l = s.lines().next()?.to_owned();
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            Some(std::time::Duration::from_secs_f64(
                (f.get(5)? + f.get(6)?) as f64 / hz,
            ))
        })
        .unwrap_or_default()
}
