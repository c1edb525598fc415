//! Priority flow control end to end, in network namespaces joined by a veth pair.
//!
//! * The device honours pauses: `emulate --xdp --pfc` streams to a kernel-socket host
//!   while a raw-socket peer (`scapy/pfc_peer.py`, 802.1Qbb frames written from the
//!   standard) pauses every class, then one other class, then the stream's class with a
//!   resume soon after — and captures the device's RoCE packets: the capture shows the
//!   gap, the other class's pause leaves the stream flowing, and quanta 0 ends a pause at
//!   once. The host still receives every frame whole (the device held, not dropped).
//! * The host asks before it drops: `receive --xdp --pfc` with its consumer starved of
//!   CPU on purpose (a real-time busy loop on its CPU) pauses the device instead of
//!   letting the ring overflow; without `--pfc` the same run loses packets.

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

/// The largest gap (ms) between consecutive packets whose first lies in `[from, to]`.
fn largest_gap(ts: &[f64], from: f64, to: f64) -> f64 {
    ts.windows(2)
        .filter(|w| w[0] >= from && w[0] <= to)
        .map(|w| w[1] - w[0])
        .fold(0.0, f64::max)
}

/// The summary line for PFC class `class` in `err`.
fn class_line(err: &str, class: u8) -> &str {
    err.lines()
        .find(|l| l.contains(&format!("PFC class {class} ")))
        .unwrap_or_else(|| panic!("no PFC class {class} line in:\n{err}"))
}

/// The number before `what` in `line`.
fn count_before(line: &str, what: &str) -> f64 {
    let head = line
        .split(what)
        .next()
        .unwrap_or_else(|| panic!("no {what:?} in {line}"));
    head.split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {what:?} in {line}"))
}

/// The two tests share the machine's two CPUs' timing: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_paused_device_holds_its_stream_and_a_resume_lets_it_go_at_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    if !common::root_or_ci()
        || !common::need("ip", "iproute2")
        || !common::need("python3", "python3")
    {
        return;
    }
    let ns = common::VethPair::new("p62", &[], &["10.221.0.2/24"]);
    let d = common::VethPair::exec(&ns.a);
    let h = common::VethPair::exec(&ns.b);
    // 0.1 Gbit/s: a pause of 0xFFFF quanta lasts 335 ms, long enough to see a resume cut
    // it short; 100 frames a second of 64 KiB use half the link
    let mut emu = rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        &d,
        &[
            "--xdp",
            &ns.va,
            "--pfc",
            "--ip",
            "10.221.0.1",
            "--bootp-target",
            "none",
            "--fps",
            "100",
            "--link-gbps",
            "0.1",
            "--seconds",
            "60",
        ],
    );
    let host = rocelink(
        &h,
        &[
            "receive",
            "--device",
            "10.221.0.1",
            "--frame-size",
            "65536",
            "--frames",
            "400",
            "--timeout",
            "10",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // every class for 400 ms (refreshed every 100 ms, then resumed); class 5 alone (the
    // stream is class 0) for 400 ms; the stream's class for 335 ms, resumed after 50;
    // the stream's class for 335 ms, left to run out
    let schedule = r#"[
        {"at_ms": 300, "classes": 255, "quanta": 65535, "every_ms": 100, "for_ms": 400},
        {"at_ms": 700, "classes": 255, "quanta": 0, "every_ms": 1, "for_ms": 0},
        {"at_ms": 1200, "classes": 32, "quanta": 65535, "every_ms": 100, "for_ms": 400},
        {"at_ms": 2000, "classes": 1, "quanta": 65535, "every_ms": 1, "for_ms": 0},
        {"at_ms": 2050, "classes": 1, "quanta": 0, "every_ms": 1, "for_ms": 0},
        {"at_ms": 2600, "classes": 1, "quanta": 65535, "every_ms": 1, "for_ms": 0}
    ]"#;
    let peer = Command::new("ip")
        .args(["netns", "exec", &ns.b, "python3"])
        .arg(common::test_file("scapy/pfc_peer.py"))
        .args([&ns.vb, "10.221.0.1", schedule])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&peer.stdout);
    assert!(
        peer.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&peer.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ts: Vec<f64> = v["roce_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    assert!(ts.len() > 1000, "{} RoCE packets captured", ts.len());
    eprintln!(
        "{} RoCE packets captured; largest gaps (ms): every class paused {:.1}, class 5 {:.1}, resumed after 50 ms {:.1}, run out {:.1}",
        ts.len(),
        largest_gap(&ts, 250.0, 700.0),
        largest_gap(&ts, 1200.0, 1600.0),
        largest_gap(&ts, 1980.0, 2300.0),
        largest_gap(&ts, 2580.0, 3000.0)
    );
    // every class paused: nothing for the pause's length, then the stream again
    let gap = largest_gap(&ts, 250.0, 700.0);
    assert!(gap >= 380.0, "gap {gap} ms while every class was paused");
    assert!(gap < 500.0, "gap {gap} ms: the device did not resume");
    assert!(
        ts.iter().any(|&t| t > 700.0 && t < 760.0),
        "no packet after"
    );
    // another class paused: the stream flows (a frame every 10 ms)
    let gap = largest_gap(&ts, 1200.0, 1600.0);
    assert!(gap < 60.0, "gap {gap} ms while only class 5 was paused");
    // paused for 335 ms, resumed after 50: the stream is back long before the 335
    let gap = largest_gap(&ts, 1980.0, 2300.0);
    assert!(
        (40.0..200.0).contains(&gap),
        "gap {gap} ms around a pause cut short by quanta 0"
    );
    // and one left alone ends when its quanta run out
    let gap = largest_gap(&ts, 2580.0, 3000.0);
    assert!(
        (300.0..450.0).contains(&gap),
        "gap {gap} ms around a pause of 335 ms"
    );
    // the host got every frame whole: the device held the paused packets
    let host = host.wait_with_output().unwrap();
    let herr = String::from_utf8_lossy(&host.stderr);
    assert!(host.status.success(), "{herr}");
    assert!(
        herr.contains("400 frames: 400 good, 0 damaged; 0 packets dropped"),
        "{herr}"
    );
    // the device's counters, live (`rocelink stats`, as Prometheus reads them) ...
    let pid = emu.child().id().to_string();
    let (code, metrics, err) = common::rocelink(&["stats", &pid, "--prometheus"]);
    assert_eq!(code, 0, "{err}");
    let metric = |name: &str, class: u8| -> f64 {
        let l = metrics
            .lines()
            .find(|l| l.starts_with(name) && l.contains(&format!("class=\"{class}\"")))
            .unwrap_or_else(|| panic!("no {name} of class {class} in:\n{metrics}"));
        l.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(metric("rocelink_pfc_pauses_in_total", 0), 6.0);
    assert_eq!(metric("rocelink_pfc_resumes_in_total", 0), 2.0);
    assert_eq!(metric("rocelink_pfc_pauses_in_total", 5), 8.0);
    assert!(metric("rocelink_pfc_held_total", 0) > 100.0);
    assert_eq!(metric("rocelink_pfc_dropped_total", 0), 0.0);
    // ... and at exit: pauses in, time paused, packets held, none dropped
    common::ctrl_c(emu.child().id());
    let (status, err) = emu.wait_output();
    assert!(status.success(), "{err}");
    eprintln!("{err}");
    let c0 = class_line(&err, 0);
    assert_eq!(count_before(c0, "pauses and"), 6.0, "{c0}");
    assert_eq!(count_before(c0, "resumes received"), 2.0, "{c0}");
    let paused = count_before(c0, "ms, ");
    assert!((700.0..900.0).contains(&paused), "{c0}");
    assert!(count_before(c0, "packets held") > 100.0, "{c0}");
    assert!(c0.contains(" 0 dropped"), "{c0}");
    let c5 = class_line(&err, 5);
    assert_eq!(count_before(c5, "pauses and"), 8.0, "{c5}");
    assert!(c5.contains(" 0 packets held"), "{c5}");
}

/// Starve CPU `cpu` with a real-time busy loop: `busy_ms` of every `period_ms`, `times`
/// times. Returns the running hog.
fn starve(cpu: usize, busy_ms: u64, period_ms: u64, times: u32) -> std::process::Child {
    let script = format!(
        "import time\n\
         for _ in range({times}):\n\
         \x20   t = time.monotonic()\n\
         \x20   while time.monotonic() - t < {busy}:\n\
         \x20       pass\n\
         \x20   time.sleep({rest})\n",
        busy = busy_ms as f64 / 1e3,
        rest = (period_ms - busy_ms) as f64 / 1e3
    );
    Command::new("taskset")
        .args([
            "-c",
            &cpu.to_string(),
            "chrt",
            "-f",
            "50",
            "python3",
            "-c",
            &script,
        ])
        .spawn()
        .unwrap()
}

/// One run: the device streams 1 MiB frames at 50 a second at 10 Gbit/s; the host's
/// receiving thread, pinned to CPU 1, is starved for 200 ms of every 500. Returns the
/// host's and the device's stderr.
fn starved_run(tag: &str, net: u8, pfc: bool) -> (bool, String, String) {
    let ns = common::VethPair::new(tag, &[], &[&format!("10.{net}.0.2/24")]);
    let dev_ip = format!("10.{net}.0.1");
    let d = common::VethPair::exec(&ns.a);
    let d: Vec<&str> = d.iter().copied().chain(["taskset", "-c", "0"]).collect();
    // the host's process on CPU 0 but its receiving thread (--pin-cpu 1): the thread that
    // watches the ring must not share the starved CPU
    let h = common::VethPair::exec(&ns.b);
    let h: Vec<&str> = h.iter().copied().chain(["taskset", "-c", "0"]).collect();
    let mut args = vec![
        "--xdp",
        &ns.va,
        "--ip",
        &dev_ip,
        "--bootp-target",
        "none",
        "--fps",
        "50",
        "--seconds",
        "60",
        // 2 Gbit/s: the half ring of headroom lasts about 6 ms, more than a loaded 2-core
        // machine keeps the pause watcher from its CPU (at 10 Gbit/s: about 1 ms)
        "--link-gbps",
        "2",
        "--pfc",
        "--pfc-hold",
        "65536",
    ];
    if !pfc {
        args.truncate(args.len() - 3);
    }
    let mut emu = rocelink_testkit::emulator::Process::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_rocelink")),
        &d,
        &args,
    );
    let mut rargs = vec![
        "receive",
        "--device",
        &dev_ip,
        "--frame-size",
        "1048576",
        "--frames",
        "150",
        "--timeout",
        "10",
        "--xdp",
        &ns.vb,
        "--pin-cpu",
        "1",
    ];
    if pfc {
        rargs.push("--pfc");
    }
    let host = rocelink(&h, &rargs)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut hog = starve(1, 200, 500, 5);
    let host = host.wait_with_output().unwrap();
    let hog = hog.wait().unwrap();
    assert!(
        hog.success(),
        "the real-time busy loop did not run (chrt -f 50)"
    );
    common::ctrl_c(emu.child().id());
    let (_, err) = emu.wait_output();
    (
        host.status.success(),
        String::from_utf8_lossy(&host.stderr).into_owned(),
        err,
    )
}

#[test]
fn a_starved_host_pauses_the_device_instead_of_dropping() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    if !common::root_or_ci()
        || !common::need("ip", "iproute2")
        || !common::need("python3", "python3")
        || !common::need("chrt", "util-linux")
    {
        return;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipping: the starved receiver needs a CPU of its own (2 CPUs)");
        return;
    }
    // without PFC the ring overflows while the consumer is starved: the kernel drops
    let (_, host, dev) = starved_run("p63", 223, false);
    eprintln!("without PFC:\n{host}\n{dev}");
    let line = host
        .lines()
        .find(|l| l.contains("AF_XDP on"))
        .unwrap_or_else(|| panic!("{host}"));
    assert!(count_before(line, "dropped by the kernel") > 0.0, "{line}");
    assert!(!host.contains(" damaged; 0 packets dropped"), "{host}");
    // with PFC the host pauses the device, which holds its packets: nothing lost
    let (ok, host, dev) = starved_run("p64", 224, true);
    eprintln!("with PFC:\n{host}\n{dev}");
    assert!(ok, "{host}");
    assert!(
        host.contains("150 frames: 150 good, 0 damaged; 0 packets dropped; 0 ICRC errors"),
        "{host}"
    );
    assert!(host.contains(" 0 dropped by the kernel"), "{host}");
    let h0 = class_line(&host, 0);
    assert!(h0.contains(": 0 pauses and 0 resumes received"), "{h0}");
    let sent = h0.split("; ").nth(1).unwrap_or_else(|| panic!("{h0}"));
    assert!(count_before(sent, "pauses and") >= 5.0, "{h0}");
    assert!(count_before(sent, "resumes sent") >= 1.0, "{h0}");
    let d0 = class_line(&dev, 0);
    assert!(count_before(d0, "pauses and") >= 5.0, "{d0}");
    assert!(count_before(d0, "packets held") > 0.0, "{d0}");
    assert!(d0.contains(" 0 dropped;"), "{d0}");
}
