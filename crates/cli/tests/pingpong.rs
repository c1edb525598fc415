//! Two `rocelink pingpong` processes talk over loopback (RC 10 000 iterations, UC, UD), and
//! across a veth pair between two network namespaces with 5% random loss injected by
//! nftables in one of them (RC completes every iteration; UC/UD report losses and complete
//! nothing corrupt). Captures decode with every ICRC correct.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(prefix: &[&str], args: &[&str]) -> Child {
    let (cmd, rest) = match prefix.split_first() {
        Some((c, r)) => (
            c.to_string(),
            r.iter()
                .map(|s| s.to_string())
                .chain([env!("CARGO_BIN_EXE_rocelink").to_string()])
                .collect::<Vec<_>>(),
        ),
        None => (env!("CARGO_BIN_EXE_rocelink").to_string(), vec![]),
    };
    Command::new(cmd)
        .args(rest)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(c: Child, what: &str) -> String {
    let out = c.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

/// Numbers from the last summary line.
fn summary(out: &str) -> (u64, u64, u64) {
    let line = out
        .lines()
        .find(|l| l.starts_with("rocelink: ") && l.contains("received"))
        .unwrap_or_else(|| panic!("no summary in\n{out}"));
    let num = |key: &str| -> u64 {
        let i = line.find(key).unwrap_or_else(|| panic!("{key} in {line}"));
        line[..i]
            .trim_end()
            .rsplit([' ', ','])
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (num(" received"), num(" lost"), num(" corrupt"))
}

/// Run server and client; returns (server output, client output).
#[allow(clippy::too_many_arguments)]
fn pair(
    kind: &str,
    iters: u32,
    server_ns: &[&str],
    client_ns: &[&str],
    server_ip: &str,
    client_ip: &str,
    extra: &[&str],
    pcap: Option<&str>,
) -> (String, String) {
    let port = free_tcp_port().to_string();
    let n = iters.to_string();
    let mut sargs = vec![
        "pingpong",
        kind,
        "--bind",
        server_ip,
        "-p",
        &port,
        "-n",
        &n,
        "--check",
        "--loss-timeout",
        "2",
    ];
    sargs.extend_from_slice(extra);
    let server = spawn(server_ns, &sargs);
    // wait until the server listens
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let mut cargs = vec![
        "pingpong",
        kind,
        server_ip,
        "--bind",
        client_ip,
        "-p",
        &port,
        "-n",
        &n,
        "--check",
        "--loss-timeout",
        "0.05",
    ];
    cargs.extend_from_slice(extra);
    if let Some(p) = pcap {
        cargs.extend_from_slice(&["--pcap", p]);
    }
    let client = spawn(client_ns, &cargs);
    let c = finish(client, &format!("{kind} client"));
    let s = finish(server, &format!("{kind} server"));
    assert!(start.elapsed() < Duration::from_secs(240));
    (s, c)
}

fn check_pcap(path: &str) {
    let (code, out, err) = common::rocelink(&["decode", "--strict", "--json", path]);
    assert_eq!(code, 0, "every ICRC in {path} must verify: {err}");
    let n = out.lines().count();
    assert!(n > 100);
    assert!(!out.contains("\"icrc_ok\":false"));
    // and Wireshark's dissector reads every packet as InfiniBand over RoCE v2
    if !common::need("tshark", "tshark") {
        return;
    }
    let t = Command::new("tshark")
        .args(["-r", path, "-T", "fields", "-e", "infiniband.bth.opcode"])
        .output()
        .expect("tshark is required (apt-get install tshark)");
    assert!(t.status.success());
    let opcodes = String::from_utf8_lossy(&t.stdout);
    assert_eq!(
        opcodes.lines().filter(|l| !l.is_empty()).count(),
        n,
        "tshark decoded every packet as RoCE"
    );
}

#[test]
fn loopback_rc_uc_ud() {
    let dir = common::tmpdir("pingpong_loopback");
    let pcap = dir.join("rc.pcap");
    let (s, c) = pair(
        "rc",
        10_000,
        &[],
        &[],
        "127.0.21.1",
        "127.0.21.2",
        &[],
        Some(pcap.to_str().unwrap()),
    );
    for out in [&s, &c] {
        assert!(out.contains("81920000 bytes in"), "{out}");
        assert!(out.contains("10000 iters in"), "{out}");
        assert_eq!(summary(out), (10_000, 0, 0), "{out}");
    }
    check_pcap(pcap.to_str().unwrap());
    for (kind, ip, extra) in [("uc", 22, vec![]), ("ud", 23, vec!["-s", "1000"])] {
        let (s, c) = pair(
            kind,
            2000,
            &[],
            &[],
            &format!("127.0.{ip}.1"),
            &format!("127.0.{ip}.2"),
            &extra,
            None,
        );
        assert_eq!(summary(&c), (2000, 0, 0), "{c}");
        assert_eq!(summary(&s), (2000, 0, 0), "{s}");
    }
}

/// Two namespaces joined by a veth pair, 10.201.<n>.1 and .2, with `loss`% of UDP/4791
/// dropped at random in B's input and output (netdev hooks on B's end drop silently, like
/// a lossy wire, in both directions).
fn netns(n: u8, loss: u32) -> common::VethPair {
    let p = common::VethPair::new(
        &format!("pp{n}"),
        &[&format!("10.201.{n}.1/24")],
        &[&format!("10.201.{n}.2/24")],
    );
    if loss > 0 {
        let vb = &p.vb;
        p.nft(
            &p.b,
            &format!(
                "table netdev rocelink_loss {{\n chain in {{ type filter hook ingress device \"{vb}\" priority 0; udp dport 4791 numgen random mod 100 < {loss} drop; }}\n chain out {{ type filter hook egress device \"{vb}\" priority 0; udp dport 4791 numgen random mod 100 < {loss} drop; }}\n}}\n"
            ),
        );
    }
    p
}

#[test]
fn veth_with_5_percent_loss() {
    if !common::root_or_ci()
        || !common::need("ip", "iproute2")
        || !common::need("nft", "nftables")
        || !common::need("tshark", "tshark")
    {
        return;
    }
    let ns = netns(1, 5);
    let (sa, sb) = (common::VethPair::exec(&ns.b), common::VethPair::exec(&ns.a));
    let dir = common::tmpdir("pingpong_veth");
    let pcap = dir.join("rc_loss.pcap");
    // RC: every one of 10 000 iterations completes despite the loss
    let (s, c) = pair(
        "rc",
        10_000,
        &sa,
        &sb,
        "10.201.1.2",
        "10.201.1.1",
        &["--timeout-ms", "5"],
        Some(pcap.to_str().unwrap()),
    );
    assert_eq!(summary(&c), (10_000, 0, 0), "{c}");
    assert_eq!(summary(&s), (10_000, 0, 0), "{s}");
    let retx: u64 = c
        .lines()
        .chain(s.lines())
        .filter_map(|l| l.split("retransmissions ").nth(1))
        .map(|t| t.split(',').next().unwrap().trim().parse::<u64>().unwrap())
        .sum();
    assert!(retx > 0, "5% loss must cause retransmissions:\n{c}\n{s}");
    check_pcap(pcap.to_str().unwrap());
    // UC and UD: losses are reported, nothing corrupt completes
    for (kind, extra) in [("uc", vec![]), ("ud", vec!["-s", "1000"])] {
        let (s, c) = pair(
            kind,
            2000,
            &sa,
            &sb,
            "10.201.1.2",
            "10.201.1.1",
            &extra,
            None,
        );
        let (rx, lost, bad) = summary(&c);
        assert_eq!(bad, 0, "{c}");
        assert!(
            lost > 0 && rx + lost == 2000,
            "client must report its losses: {c}"
        );
        let (_, slost, sbad) = summary(&s);
        assert_eq!(sbad, 0, "{s}");
        assert!(slost > 0, "server must report losses: {s}");
    }
}

/// rdma-core's idiom on one host, with rocelink's defaults: `pingpong K` then
/// `pingpong K 127.0.0.1`. The server prints its address line before a client connects;
/// the time reported covers the exchanges only (not the closing linger).
#[test]
fn one_host_rdma_core_idiom_with_defaults() {
    for kind in ["rc", "uc", "ud"] {
        let port = free_tcp_port().to_string();
        let mut server = spawn(&[], &["pingpong", kind, "-p", &port, "-n", "10"]);
        // the address line comes before any client exists
        let mut first = String::new();
        {
            use std::io::BufRead;
            let out = server.stdout.as_mut().unwrap();
            std::io::BufReader::new(out).read_line(&mut first).unwrap();
        }
        assert!(
            first.starts_with("  local address:  LID 0x0000, QPN 0x"),
            "{kind}: {first:?}"
        );
        let t = Instant::now();
        let client = spawn(
            &[],
            &["pingpong", kind, "127.0.0.1", "-p", &port, "-n", "10"],
        );
        let c = finish(client, &format!("{kind} client"));
        let wall = t.elapsed().as_secs_f64();
        finish(server, &format!("{kind} server"));
        assert_eq!(summary(&c), (10, 0, 0), "{kind}: {c}");
        // "N iters in S seconds": S excludes the 200/20 ms linger that follows the exchanges
        let secs: f64 = c
            .lines()
            .find(|l| l.contains(" iters in "))
            .and_then(|l| {
                l.split(" iters in ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap();
        let linger = if kind == "rc" { 0.2 } else { 0.02 };
        assert!(
            secs <= wall - linger,
            "{kind}: reported {secs} s of a {wall} s run that ends with a {linger} s linger"
        );
    }
}
