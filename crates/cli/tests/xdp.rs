//! Kernel bypass end to end, in network namespaces joined by a veth pair: the emulated
//! device streams HSB frames from namespace A and `rocelink receive --xdp` takes them
//! through an AF_XDP socket in B, every ICRC checked over the IPv4 header as received.
//! Then nftables rewrites the IPv4 identification of every data packet on its way out of
//! A: the socket receiver cannot see the header and passes the frames; the AF_XDP receiver
//! refuses every packet, as a RoCE NIC would (the ICRC covers the identification).

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

fn rocelink(prefix: &[&str], args: &[&str]) -> Command {
    let mut c = Command::new(prefix[0]);
    c.args(&prefix[1..])
        .arg(env!("CARGO_BIN_EXE_rocelink"))
        .args(args);
    c
}

/// The summary line of the AF_XDP socket on `ifname` queue `queue` in `text`, and the
/// frames it says came through it.
fn af_xdp_frames<'a>(text: &'a str, ifname: &str, queue: u32) -> (&'a str, u64) {
    let line = text
        .lines()
        .find(|l| l.contains(&format!("AF_XDP on {ifname} queue {queue} ")))
        .unwrap_or_else(|| panic!("no AF_XDP line for {ifname} queue {queue} in {text}"));
    let frames = line
        .split("): ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no frame count in {line}"));
    (line, frames)
}

fn output(mut c: Command) -> (bool, String, String) {
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hsb_frames_over_af_xdp_with_every_icrc_over_the_real_header() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") || !common::need("nft", "nftables")
    {
        return;
    }
    let ns = common::VethPair::new("x16", &["10.209.0.1/24"], &["10.209.0.2/24"]);
    let d = common::VethPair::exec(&ns.a);
    let h = common::VethPair::exec(&ns.b);
    let _emu = rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        &d,
        &[
            "--ip",
            "10.209.0.1",
            "--bootp-target",
            "none",
            "--fps",
            "60",
            "--seconds",
            "120",
        ],
    );
    let receive = |xdp: bool| {
        let mut args = vec![
            "receive",
            "--device",
            "10.209.0.1",
            "--frame-size",
            "500000",
            "--frames",
            "30",
            "--timeout",
            "5",
            "--json",
        ];
        if xdp {
            args.extend(["--xdp", &ns.vb]);
        }
        output(rocelink(&h, &args))
    };
    // 1. through AF_XDP: every frame good, every datagram through the socket with its header
    let (ok, out, err) = receive(true);
    assert!(ok, "{out}\n{err}");
    let (frames, summary) = common::frames_and_summary(&out);
    assert_eq!(frames.len(), 30, "{err}");
    assert_eq!(summary["ports"][0]["stats"]["good"], 30, "{summary}");
    assert!(frames.iter().all(|f| f["good"] == true), "{out}");
    assert!(
        err.contains("30 frames: 30 good, 0 damaged; 0 packets dropped; 0 ICRC errors; 0 refused"),
        "{err}"
    );
    let line = err.lines().find(|l| l.contains("AF_XDP on")).unwrap();
    assert!(
        line.contains(&format!("AF_XDP on {} queue 0 (copy mode)", ns.vb)),
        "{line}"
    );
    let n = |what: &str| -> u64 {
        let at = line.find(what).unwrap();
        line[..at]
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap()
    };
    // at least the 30 frames' packets (356 each), every one a UDP datagram with its header
    assert!(n(" frames,") >= 30 * 356, "{line}");
    assert_eq!(
        n(" frames,"),
        n(" UDP datagrams with their IPv4 header"),
        "{line}"
    );
    assert!(
        line.contains(" 0 dropped by the kernel, 0 to no port"),
        "{line}"
    );
    // the program left with the receiver
    let (_, shown, _) = output({
        let mut c = Command::new("ip");
        c.args(["-n", &ns.b, "link", "show", &ns.vb]);
        c
    });
    assert!(!shown.contains("prog/xdp"), "{shown}");

    // 2. the identification rewritten on the way: only the real header shows it
    ns.nft(
        &ns.a,
        "table ip rlx16 {\n chain out {\n  type filter hook output priority 0; policy accept;\n  \
         udp dport 4791 ip id set 0x1234\n }\n}\n",
    );
    let (ok, _, err) = receive(false);
    assert!(
        ok && err.contains("30 frames: 30 good"),
        "the socket path cannot tell: {err}"
    );
    let (ok, out, err) = receive(true);
    assert!(!ok, "{out}");
    assert!(out.lines().all(|l| !l.contains("\"good\":true")), "{out}");
    let bad = err.lines().find(|l| l.contains("with a bad ICRC")).unwrap();
    // every datagram that came was refused for its ICRC
    let words: Vec<&str> = bad.split_whitespace().collect();
    let arrived = words[words.iter().position(|w| *w == "datagrams").unwrap() - 1];
    let bad_n = words[words.iter().position(|w| *w == "with").unwrap() - 1];
    assert_eq!(arrived.trim_end_matches(':'), bad_n, "{bad}");
    assert!(arrived.parse::<u64>().unwrap() > 1000, "{bad}");
}

/// An echo request from the kernel of namespace `ns` (a raw ICMP socket, as ping does):
/// true when `dst` answered with the same identifier, sequence and data.
fn ping(ns: &str, dst: &str, seq: u16) -> bool {
    let script = format!(
        "import socket, struct, sys\n\
         def csum(b):\n\
         \x20   s = sum(struct.unpack('!%dH' % (len(b) // 2), b))\n\
         \x20   s = (s >> 16) + (s & 0xffff); s += s >> 16\n\
         \x20   return ~s & 0xffff\n\
         data = b'rocelink-ping%03d' % {seq}\n\
         hdr = struct.pack('!BBHHH', 8, 0, 0, 0x1616, {seq})\n\
         pkt = struct.pack('!BBHHH', 8, 0, csum(hdr + data), 0x1616, {seq}) + data\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\n\
         s.settimeout(3)\n\
         s.sendto(pkt, ('{dst}', 0))\n\
         while True:\n\
         \x20   r, a = s.recvfrom(2048)\n\
         \x20   ihl = (r[0] & 15) * 4\n\
         \x20   t, c, _, i, q = struct.unpack('!BBHHH', r[ihl:ihl + 8])\n\
         \x20   if t == 0 and i == 0x1616 and q == {seq}:\n\
         \x20       sys.exit(0 if a[0] == '{dst}' and r[ihl + 8:] == data else 1)\n"
    );
    Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", &script])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_device_owning_its_port_answers_arp_and_ping_and_streams() {
    if !common::root_or_ci()
        || !common::need("ip", "iproute2")
        || !common::need("python3", "python3")
    {
        return;
    }
    // the device's address is on no interface: only its own stack can answer for it
    let ns = common::VethPair::new("d16", &[], &["10.210.0.2/24"]);
    let d = common::VethPair::exec(&ns.a);
    let h = common::VethPair::exec(&ns.b);
    let mut emu = rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        &d,
        &[
            "--xdp",
            &ns.va,
            "--ip",
            "10.210.0.1",
            "--bootp-target",
            "none",
            "--fps",
            "60",
            "--seconds",
            "60",
        ],
    );
    for seq in 1..=3 {
        assert!(ping(&ns.b, "10.210.0.1", seq), "no echo reply {seq}");
    }
    // the host learnt the device's MAC from its ARP reply: the interface's own
    let mac = std::fs::read_to_string(format!("/sys/class/net/{}/address", ns.va)).ok();
    let (_, neigh, _) = output({
        let mut c = Command::new("ip");
        c.args(["-n", &ns.b, "neigh", "show", "10.210.0.1"]);
        c
    });
    assert!(neigh.contains("lladdr"), "{neigh}");
    if let Some(m) = mac {
        assert!(neigh.contains(m.trim()), "{neigh} vs {m}");
    }
    // frames from the device's own stack to a kernel socket and to an AF_XDP socket
    for xdp in [false, true] {
        let mut args = vec![
            "receive",
            "--device",
            "10.210.0.1",
            "--frame-size",
            "300000",
            "--frames",
            "10",
            "--timeout",
            "5",
        ];
        if xdp {
            args.extend(["--xdp", &ns.vb]);
        }
        let (ok, out, err) = output(rocelink(&h, &args));
        assert!(ok, "{out}\n{err}");
        assert!(
            err.contains("10 frames: 10 good, 0 damaged; 0 packets dropped; 0 ICRC errors"),
            "{err}"
        );
    }
    // stopped by a signal, it says what its stack did
    let pid = emu.child().id().to_string();
    assert!(common::sh(&["kill", "-INT", &pid]));
    let (status, err) = emu.wait_output();
    assert!(status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("ICMP"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("ICMP 3 echo replies"), "{line}");
    assert!(!line.contains("ARP 0 replies"), "{line}");
    assert!(
        line.contains(&format!("AF_XDP on {} queue 0 (copy mode)", ns.va)),
        "{line}"
    );
}

/// Two virtual ports on one interface with two queues: `receive --xdp --vp 0,1
/// --xdp-queue 0,1` reads each queue with its own AF_XDP socket and thread. The sender's
/// `tc` egress program puts each VP's data port on its transmit queue (on veth, the receive
/// queue it arrives on), as a NIC's flow steering would.
#[test]
fn two_virtual_ports_on_two_queues_two_threads() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") {
        return;
    }
    let ns = common::VethPair::with_queues("q16", &["10.216.0.1/24"], &["10.216.0.2/24"], 2);
    let d = common::VethPair::exec(&ns.a);
    let h = common::VethPair::exec(&ns.b);
    let (na, va) = (ns.a.clone(), ns.va.clone());
    let _tc = std::thread::spawn(move || {
        rocelink_io::netns::enter(&na).unwrap();
        rocelink_io::xdp::TxQueueSteer::attach(&va, &[(4791, 0), (4792, 1)]).unwrap()
    })
    .join()
    .unwrap();
    let _emu = rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        &d,
        &[
            "--ip",
            "10.216.0.1",
            "--bootp-target",
            "none",
            "--vps",
            "2",
            "--fps",
            "60",
            "--seconds",
            "120",
        ],
    );
    let receive = |extra: &[&str]| {
        let mut args = vec![
            "receive",
            "--device",
            "10.216.0.1",
            "--frame-size",
            "500000",
            "--vp",
            "0,1",
            "--frames",
            "12",
            "--timeout",
            "5",
            "--json",
            "--xdp",
            &ns.vb,
        ];
        args.extend_from_slice(extra);
        output(rocelink(&h, &args))
    };
    let (ok, out, err) = receive(&[
        "--xdp-queue",
        "0,1",
        "--pin-cpu",
        "0,1",
        "--rx-coalesce-us",
        "50",
    ]);
    assert!(ok, "{out}\n{err}");
    let (rows, _) = common::frames_and_summary(&out);
    for vp in [0, 1] {
        let mine = rows.iter().filter(|r| r["vp"] == vp).count();
        assert_eq!(mine, 12, "vp {vp}: {out}");
        assert!(
            err.contains(&format!(
                "vp {vp}: 12 frames: 12 good, 0 damaged; 0 packets dropped; 0 ICRC errors; 0 refused"
            )),
            "{err}"
        );
    }
    assert!(rows.iter().all(|r| r["good"] == true), "{out}");
    // one AF_XDP socket per queue, each with its own VP's packets and nothing for another
    for q in [0, 1] {
        let (line, frames) = af_xdp_frames(&err, &ns.vb, q);
        assert!(frames >= 12 * 356, "{line}");
        assert!(line.contains(", 0 to no port"), "{line}");
        // exactly the datagrams of the VP steered to it
        let vp_line = err
            .lines()
            .find(|l| l.contains(&format!("receive: vp {q}: ")))
            .unwrap();
        assert!(
            vp_line.contains(&format!("; {frames} datagrams verified")),
            "{vp_line} / {line}"
        );
    }
    // the lists must match --vp, before anything opens
    let (ok, _, err) = receive(&["--xdp-queue", "0,1,1"]);
    assert!(
        !ok && err.contains("--xdp-queue gives 3 values for 2"),
        "{err}"
    );
    let (ok, _, err) = receive(&["--xdp-queue", "0,2"]);
    assert!(!ok && err.contains("no queue 2"), "{err}");
    let (ok, _, err) = receive(&["--xdp-queue", "2"]);
    assert!(!ok && err.contains("has 2 receive queue(s)"), "{err}");
}

/// `rocelink pingpong --xdp` and `rocelink perf --xdp` at both ends of a veth link: RC and
/// UC exchanges and a write_bw run over two AF_XDP sockets (the TCP exchanges and ARP stay
/// with the kernels), every payload checked, every ICRC over the IPv4 header as received
/// (none through a recovered identification).
#[test]
fn pingpong_and_perf_between_two_af_xdp_ports() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") {
        return;
    }
    let ns = common::VethPair::new("p16", &["10.217.0.1/24"], &["10.217.0.2/24"]);
    let a = common::VethPair::exec(&ns.a);
    let b = common::VethPair::exec(&ns.b);
    for (i, kind) in ["rc", "uc"].into_iter().enumerate() {
        let port = (18600 + i).to_string();
        let base = ["pingpong", kind, "-p", &port, "-n", "300", "--check"];
        let mut s = rocelink(&b, &base);
        s.args(["--bind", "10.217.0.2", "--xdp", &ns.vb]);
        let server = s
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        let mut c = rocelink(&a, &base);
        c.args(["10.217.0.2", "--bind", "10.217.0.1", "--xdp", &ns.va]);
        let (ok, out, err) = output(c);
        let so = server.wait_with_output().unwrap();
        let sout =
            String::from_utf8_lossy(&so.stdout).into_owned() + &String::from_utf8_lossy(&so.stderr);
        assert!(ok && so.status.success(), "{kind}: {out}\n{err}\n{sout}");
        for (text, ifname) in [(format!("{out}{err}"), &ns.va), (sout, &ns.vb)] {
            assert!(
                text.contains("rocelink: 300 received, 0 lost, 0 corrupt; ICRC: 0 bad, 0 IPv4 via recovered ID"),
                "{kind}: {text}"
            );
            // every RoCE datagram went through the AF_XDP socket, with its header
            let (line, frames) = af_xdp_frames(&text, ifname, 0);
            assert!(frames >= 300, "{line}");
            assert!(
                line.contains(&format!("{frames} UDP datagrams with their IPv4 header")),
                "{line}"
            );
        }
    }
    // perftest's write_bw: the server's socket takes every WRITE packet
    use std::io::BufRead as _;
    let mut srv = rocelink(
        &b,
        &[
            "perf",
            "write_bw",
            "--bind",
            "10.217.0.2",
            "-p",
            "18610",
            "-s",
            "4096",
            "-n",
            "2000",
            "--xdp",
            &ns.vb,
        ],
    );
    let mut srv = srv
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut sout = std::io::BufReader::new(srv.stdout.take().unwrap());
    let mut text = String::new();
    while !text.contains("Waiting for client") {
        assert!(sout.read_line(&mut text).unwrap() > 0, "{text}");
    }
    let mut c = rocelink(
        &a,
        &[
            "perf",
            "write_bw",
            "10.217.0.2",
            "--bind",
            "10.217.0.1",
            "-p",
            "18610",
            "-s",
            "4096",
            "-n",
            "2000",
            "--xdp",
            &ns.va,
            "--timeout",
            "20",
        ],
    );
    c.stdout(std::process::Stdio::piped());
    let (ok, out, err) = output(c);
    let so = srv.wait_with_output().unwrap();
    let serr = String::from_utf8_lossy(&so.stderr).into_owned();
    assert!(ok && so.status.success(), "{out}\n{err}\n{text}\n{serr}");
    let (line, frames) = af_xdp_frames(&serr, &ns.vb, 0);
    // 2000 writes of 4096 bytes at MTU 1024: four packets each
    assert!(frames >= 8000, "{line}");
    assert!(
        err.contains(&format!("AF_XDP on {} queue 0", ns.va)),
        "{err}"
    );
}

/// The README's recipe, verbatim: `scripts/veth-pair up`, an emulator owning 10.77.0.1
/// through AF_XDP in one namespace, a receiver through AF_XDP in the other, `down`.
#[test]
fn the_readme_veth_recipe_works_verbatim() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") {
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/veth-pair");
    let sh = |args: &[&str]| Command::new(script).args(args).output().unwrap();
    let _ = sh(&["down"]);
    let up = sh(&["up"]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let emu = rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        &["ip", "netns", "exec", "rl-dev"],
        &[
            "--ip",
            "10.77.0.1",
            "--xdp",
            "rl-dev0",
            "--bootp-target",
            "none",
        ],
    );
    let (ok, out, err) = output(rocelink(
        &["ip", "netns", "exec", "rl-host"],
        &[
            "receive",
            "--device",
            "10.77.0.1",
            "--xdp",
            "rl-host0",
            "--frames",
            "20",
            "--json",
        ],
    ));
    drop(emu);
    let down = sh(&["down"]);
    assert!(ok, "{err}");
    assert_eq!(common::frames_and_summary(&out).0.len(), 20, "{out}");
    assert!(down.status.success());
    assert!(
        !Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("rl-dev"))
            .unwrap_or(false)
    );
}
