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

/// Run this test binary's helper `test` inside namespace `ns` with `env` = `ifname`; its
/// stdout lines. Returns once it printed READY, or with its stderr if it never did.
fn spawn_inner(
    ns: &str,
    test: &str,
    env: &str,
    ifname: &str,
) -> Result<
    (
        std::process::Child,
        std::io::Lines<BufReader<std::process::ChildStdout>>,
    ),
    String,
> {
    let mut inner = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(env, ifname)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(inner.stdout.take().unwrap()).lines();
    if lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("READY"))
    {
        return Ok((inner, lines));
    }
    let out = inner.wait_with_output().unwrap();
    Err(String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn steering_program_attaches_and_passes_to_the_kernel_without_a_socket() {
    if std::env::var_os(INNER).is_some() || !root_or_ci() {
        return;
    }
    let pair = VethPair::new("xdp", &["10.205.0.1/24"], &["10.205.0.2/24"]);
    let (mut inner, lines) = match spawn_inner(&pair.b, "inner_attach_and_receive", INNER, &pair.vb)
    {
        Ok(x) => x,
        Err(err) if err.contains("CAP_NET_ADMIN") && std::env::var_os("CI").is_none() => {
            eprintln!("skipping: XDP is not permitted here: {err}");
            return;
        }
        Err(err) => panic!("the XDP helper failed:\n{err}"),
    };
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

const INNER_XSK: &str = "ROCELINK_XSK_INNER_IF";

/// Inside namespace B: an AF_XDP socket on queue 0 behind the UDP 4791 program; every
/// datagram that comes is answered from user space with a frame built in the UMEM
/// (addresses and ports swapped, payload reversed), until 5 have come or 10 s pass.
#[test]
fn inner_xsk_echo() {
    use rocelink_io::xdp::{Steer, XdpMode, XdpProgram, Xsk, XskConfig};
    let Ok(ifname) = std::env::var(INNER_XSK) else {
        return;
    };
    let cfg = XskConfig {
        mode: XdpMode::Copy,
        frames: 64,
        rx_size: 32,
        tx_size: 16,
        ..XskConfig::default()
    };
    let mut xsk = Xsk::open(&ifname, &cfg).unwrap();
    let prog = XdpProgram::attach(
        &ifname,
        Steer::UdpPorts {
            first: 4790,
            last: 4791,
        },
        1,
    )
    .unwrap();
    prog.register(0, &xsk).unwrap();
    println!("READY");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut answered = 0;
    while answered < 5 && std::time::Instant::now() < deadline {
        xsk.wait_readable(Some(Duration::from_millis(100))).unwrap();
        let mut replies = Vec::new();
        xsk.recv(8, |f| {
            assert_eq!(&f[12..14], &[0x08, 0x00], "only IPv4 is steered");
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), 4791);
            let mut r = f.to_vec();
            r[..6].copy_from_slice(&f[6..12]);
            r[6..12].copy_from_slice(&f[..6]);
            r[26..30].copy_from_slice(&f[30..34]);
            r[30..34].copy_from_slice(&f[26..30]);
            r[34..36].copy_from_slice(&f[36..38]);
            r[36..38].copy_from_slice(&f[34..36]);
            r[40..42].fill(0); // no UDP checksum
            r[42..].reverse();
            replies.push(r);
        })
        .unwrap();
        for r in &replies {
            assert!(xsk.send(r));
            answered += 1;
        }
        xsk.flush().unwrap();
    }
    // wait for the last frames to leave
    for _ in 0..100 {
        if xsk.in_flight() == 0 {
            break;
        }
        xsk.flush().unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = xsk.stats().unwrap();
    println!(
        "ANSWERED {answered} rx {} tx {} zc {} dropped {}",
        xsk.counters.rx_frames,
        xsk.counters.tx_frames,
        xsk.zero_copy(),
        s.rx_dropped + s.rx_ring_full
    );
}

#[test]
fn af_xdp_socket_receives_and_sends_frames_in_the_umem() {
    if std::env::var_os(INNER_XSK).is_some() || !root_or_ci() {
        return;
    }
    let pair = VethPair::new("xsk", &["10.206.0.1/24"], &["10.206.0.2/24"]);
    let (inner, lines) = spawn_inner(&pair.b, "inner_xsk_echo", INNER_XSK, &pair.vb)
        .unwrap_or_else(|err| panic!("the AF_XDP helper failed:\n{err}"));
    // from A: five datagrams, each answered through the AF_XDP socket
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.a, "python3", "-c"])
        .arg(
            "import socket\n\
             s = socket.socket(2, 2); s.bind(('10.206.0.1', 5000)); s.settimeout(5)\n\
             for i in range(5):\n\
             \x20   m = b'ping-%d-abc' % i\n\
             \x20   s.sendto(m, ('10.206.0.2', 4791))\n\
             \x20   r, a = s.recvfrom(100)\n\
             \x20   assert r == m[::-1] and a == ('10.206.0.2', 4791), (r, a)\n\
             print('ECHOED')\n",
        )
        .output()
        .unwrap();
    let got: Vec<String> = lines.map_while(Result::ok).collect();
    let status = inner.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ECHOED"),
        "A: {}{}\nB: {got:?} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(status.status.success(), "{got:?}");
    let line = got.iter().find(|l| l.starts_with("ANSWERED")).unwrap();
    assert!(line.starts_with("ANSWERED 5 rx 5 tx 5 "), "{line}");
    assert!(line.ends_with("dropped 0"), "{line}");
}
