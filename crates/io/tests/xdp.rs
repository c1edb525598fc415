//! The steering XDP program on a veth pair between two namespaces: loaded and attached
//! through a BPF link (visible on the interface while the link is open, gone after),
//! and with no AF_XDP socket in its map every datagram still reaches the kernel's socket.

#![allow(clippy::unwrap_used)]

use rocelink_testkit::netns::{VethPair, root_or_ci, sh};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const INNER: &str = "ROCELINK_XDP_INNER_IF";

/// Inside namespace B (run by the test below): attach, say READY, receive one datagram on
/// the kernel socket, say what came, detach by exiting.
#[test]
fn inner_attach_and_receive() {
    let Ok(ifname) = std::env::var(INNER) else {
        return; // only as the helper process
    };
    let map = rocelink_io::xdp::prog::create_xskmap(4).unwrap();
    let prog = rocelink_io::xdp::prog::load_xdp(&rocelink_io::xdp::prog::steer_udp(
        4791,
        std::os::fd::AsRawFd::as_raw_fd(&map),
    ))
    .unwrap();
    let _link = rocelink_io::xdp::prog::attach(&prog, &ifname).unwrap();
    let sock = std::net::UdpSocket::bind("10.205.0.2:4791").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    println!("READY");
    let mut buf = [0u8; 64];
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    println!("GOT {}", String::from_utf8_lossy(&buf[..n]));
}

#[test]
fn steering_program_attaches_and_passes_to_the_kernel_without_a_socket() {
    if std::env::var_os(INNER).is_some() || !root_or_ci() {
        return;
    }
    let pair = VethPair::new("xdp", &["10.205.0.1/24"], &["10.205.0.2/24"]);
    let exe = std::env::current_exe().unwrap();
    let mut inner = Command::new("ip")
        .args(["netns", "exec", &pair.b])
        .arg(&exe)
        .args([
            "--exact",
            "inner_attach_and_receive",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(INNER, &pair.vb)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(inner.stdout.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("READY"));
    if !ready {
        let out = inner.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("CAP_NET_ADMIN") && std::env::var_os("CI").is_none() {
            eprintln!("skipping: XDP is not permitted here: {err}");
            return;
        }
        panic!("the XDP helper failed:\n{err}");
    }
    let shown = Command::new("ip")
        .args(["-n", &pair.b, "link", "show", &pair.vb])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("prog/xdp"),
        "no XDP program on {}: {shown}",
        pair.vb
    );
    // a few datagrams from A: the first may wait for ARP
    for _ in 0..5 {
        assert!(sh(&[
            "ip",
            "netns",
            "exec",
            &pair.a,
            "python3",
            "-c",
            "import socket; socket.socket(2, 2).sendto(b'through-xdp', ('10.205.0.2', 4791))",
        ]));
    }
    let got: Vec<String> = lines.map_while(Result::ok).collect();
    let status = inner.wait().unwrap();
    assert!(status.success(), "{got:?}");
    assert!(got.iter().any(|l| l == "GOT through-xdp"), "{got:?}");
    // the link closed with the process: the program is gone
    let after = Command::new("ip")
        .args(["-n", &pair.b, "link", "show", &pair.vb])
        .output()
        .unwrap();
    let after = String::from_utf8_lossy(&after.stdout);
    assert!(
        !after.contains("prog/xdp"),
        "XDP left behind on {}: {after}",
        pair.vb
    );
}
