//! `rocelink probe`, `rocelink shots` and `rocelink trigger` as processes: trigger → shot
//! over loopback (recorded and read back byte-exact), two links, the round trip, across two
//! network namespaces, and bad input refused up front.
#![allow(clippy::unwrap_used)]

mod common;

use rocelink_record::read::Recording;
use rocelink_ultrasound::Geometry;
use rocelink_ultrasound::shot::Echoes;
use serde_json::Value;
use std::process::{Child, Command, Output, Stdio};

fn rocelink(prefix: &[&str]) -> Command {
    match prefix.split_first() {
        Some((p, rest)) => {
            let mut c = Command::new(p);
            c.args(rest).arg(env!("CARGO_BIN_EXE_rocelink"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_rocelink")),
    }
}

/// A probe that runs until killed (or 120 s).
struct ProbeProc(Child);

impl ProbeProc {
    fn start(prefix: &[&str], args: &[&str]) -> ProbeProc {
        let c = rocelink(prefix)
            .arg("probe")
            .args(["--seconds", "120", "--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // it binds before it reads anything; a trigger sent before would be refused by the
        // kernel, and the host's first trigger would go unanswered
        std::thread::sleep(std::time::Duration::from_millis(300));
        ProbeProc(c)
    }

    /// Stop it as Ctrl-C would; its JSON summary.
    fn stop(mut self) -> Value {
        let pid = self.0.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        );
        let out = std::mem::replace(&mut self.0, Command::new("true").spawn().unwrap())
            .wait_with_output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for ProbeProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(prefix: &[&str], args: &[&str]) -> Output {
    rocelink(prefix).args(args).output().unwrap()
}

/// Every JSON line of stdout.
fn lines(o: &Output) -> Vec<Value> {
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!("{e}: {l:?}; stderr {}", String::from_utf8_lossy(&o.stderr))
            })
        })
        .collect()
}

/// The per-shot lines and the summary of `rocelink shots --json`, checked for shape.
fn shots_of(o: &Output) -> (Vec<Value>, Value) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut all = lines(o);
    let summary = all.pop().unwrap();
    // the session's summary (its totals over the links under sink and host)
    assert!(
        summary["sink"].is_object() && summary["links"].is_array(),
        "{summary}"
    );
    (all, summary)
}

#[test]
fn trigger_to_shot_over_loopback_recorded_byte_exact() {
    let probe = ProbeProc::start(&[], &["--bind", "127.0.0.81", "--samples", "10"]);
    let dir = std::env::temp_dir().join(format!("rocelink-shots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // the host asks for its own shape: 500 samples x 96 channels, 200 shots at 2 kHz
    let o = run(
        &[],
        &[
            "shots",
            "--bind",
            "127.0.0.82",
            "--probe",
            "127.0.0.81",
            "--samples",
            "500",
            "--shots",
            "200",
            "--trigger-hz",
            "2000",
            "--verify",
            "--json",
            "--record",
            dir.to_str().unwrap(),
            "--seconds",
            "60",
        ],
    );
    let (shots, sum) = shots_of(&o);
    // --shots counts shots, not triggers: a trigger that comes while the probe still
    // sends is missed (a busy machine) and makes none, so the probe runs until the host
    // has its 200 and stops it; periodic shots are numbered as taken, without a hole
    let p = probe.stop();
    assert_eq!(shots.len(), 200, "{sum}");
    assert_eq!(sum["sink"]["shots"], 200, "{sum}");
    assert!(p["probe"]["shots"].as_u64().unwrap() >= 200, "{p}");
    assert_eq!(
        p["probe"]["shots"].as_u64().unwrap() + p["probe"]["missed"].as_u64().unwrap(),
        p["probe"]["triggers"].as_u64().unwrap(),
        "{p}"
    );
    // the network counters of both: the host received at most what the probe sent, at
    // least 18 messages for each complete shot
    let net = |v: &Value, k: &str| v["counters"]["links"][0]["net"][k].as_u64().unwrap();
    assert!(net(&sum, "roce_rx") <= net(&p, "roce_tx"), "{sum} {p}");
    assert!(
        net(&sum, "roce_rx") >= 18 * sum["sink"]["complete"].as_u64().unwrap(),
        "{sum}"
    );
    assert_eq!(
        net(&p, "roce_tx"),
        p["probe"]["messages"].as_u64().unwrap(),
        "{p}"
    );
    assert_eq!(net(&sum, "icrc_errors"), 0);
    for (i, s) in shots.iter().enumerate() {
        assert_eq!(s["shot"], i as u64);
        assert_eq!(s["bytes"], 72_000);
        for key in [
            "link", "messages", "missing", "complete", "recorded", "dropped",
        ] {
            assert!(!s[key].is_null(), "{key} in {s}");
        }
        assert!(s["t_trigger_ns"].is_null()); // periodic: the probe's own clock triggers
        if s["complete"] == true {
            assert_eq!(s["messages"], 18);
            assert_eq!(s["verified"], true, "{s}");
            assert!(s["t_complete_ns"].as_u64().unwrap() > 0);
        }
    }
    assert_eq!(sum["sink"]["corrupt"], 0);
    let complete = sum["sink"]["complete"].as_u64().unwrap();
    // loopback loses a datagram only when a socket buffer overflows: nearly every shot
    // taken arrives complete
    assert!(complete + 5 >= shots.len() as u64, "{sum}");
    let recorded = sum["sink"]["recorded"].as_u64().unwrap();
    assert_eq!(
        recorded + sum["sink"]["dropped"].as_u64().unwrap(),
        complete
    );
    // the recording holds whole shots, each the generator's under its own number
    let rec = Recording::open(&dir).unwrap();
    assert_eq!(rec.len() as u64, recorded);
    let (g, e) = (Geometry::new(500, 96), Echoes::new(1));
    for (i, entry) in rec.entries.iter().enumerate() {
        let b = rec.frame(i).unwrap();
        assert_eq!(e.first_difference(&g, entry.frame_number, &b), None);
    }
    // and exports as a samples x channels array
    let npy = dir.join("shot.npy");
    let first = rec.entries[0].frame_number.to_string();
    let o = run(
        &[],
        &[
            "export",
            dir.to_str().unwrap(),
            "--frame",
            &first,
            "--format",
            "npy",
            "-o",
            npy.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let head = std::fs::read(&npy).unwrap();
    assert!(String::from_utf8_lossy(&head[..128]).contains("(500, 96)"));
    // and as a grey picture of the echoes by default, not a demosaiced colour one: the
    // PNG's IHDR says 96 x 500, 16 bits, colour type 0 (greyscale)
    let png = dir.join("shot.png");
    let o = run(
        &[],
        &[
            "export",
            dir.to_str().unwrap(),
            "--frame",
            &first,
            "-o",
            png.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = std::fs::read(&png).unwrap();
    assert_eq!(&p[12..16], b"IHDR");
    assert_eq!(u32::from_be_bytes(p[16..20].try_into().unwrap()), 96);
    assert_eq!(u32::from_be_bytes(p[20..24].try_into().unwrap()), 500);
    assert_eq!((p[24], p[25]), (16, 0), "16-bit greyscale");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_links_each_carry_half_the_channels() {
    let probe = ProbeProc::start(&[], &["--bind", "127.0.0.83", "--links", "2"]);
    let o = run(
        &[],
        &[
            "shots",
            "--bind",
            "127.0.0.85,127.0.0.86",
            "--links",
            "2",
            "--probe",
            "127.0.0.83,127.0.0.84",
            "--samples",
            "1000",
            "--shots",
            "100",
            "--trigger-hz",
            "1000",
            "--verify",
            "--json",
            "--seconds",
            "60",
        ],
    );
    let (shots, sum) = shots_of(&o);
    assert_eq!(sum["links"].as_array().unwrap().len(), 2);
    assert_eq!(sum["geometry"]["channels"], 48);
    assert_eq!(sum["geometry"]["samples"], 1000);
    // each link carries its own shots, numbered as its half of the probe took them (how
    // many triggers a loaded machine misses is not rocelink's to promise)
    for link in 0..2 {
        let mine: Vec<_> = shots.iter().filter(|s| s["link"] == link).collect();
        assert!(
            (1..=100).contains(&mine.len()),
            "link {link}: {}",
            mine.len()
        );
        for (i, s) in mine.iter().enumerate() {
            assert_eq!(s["shot"], i as u64, "link {link}: {s}");
        }
        let verified = mine.iter().filter(|s| s["verified"] == true).count();
        assert!(
            verified + 5 >= mine.len(),
            "link {link}: {verified} verified"
        );
    }
    assert_eq!(sum["sink"]["corrupt"], 0);
    let p = probe.stop();
    assert_eq!(p["links"], 2);
    // the host handed on 100 shots per link, each the first its half of the probe took
    // (numbered from 0, checked above); the probe kept shooting until the host's STOP came,
    // so it may have taken more than were handed on, never fewer
    assert!(
        shots.len() as u64 <= p["probe"]["shots"].as_u64().unwrap(),
        "{p}"
    );
}

#[test]
fn trigger_round_trip_per_size() {
    let probe = ProbeProc::start(&[], &["--bind", "127.0.0.87"]);
    let svg = std::env::temp_dir().join(format!("rocelink-rtt-{}.svg", std::process::id()));
    let o = run(
        &[],
        &[
            "trigger",
            "--bind",
            "127.0.0.88",
            "--probe",
            "127.0.0.87:4792",
            "--samples",
            "1,500",
            "-n",
            "50",
            "--warmup",
            "5",
            "--verify",
            "1",
            "--json",
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = lines(&o);
    assert_eq!(rows.len(), 2);
    for (r, samples) in rows.iter().zip([1, 500]) {
        assert_eq!(r["samples"], samples);
        assert_eq!(r["shots"], 50);
        assert_eq!(
            (r["lost"].as_u64(), r["corrupt"].as_u64()),
            (Some(0), Some(0))
        );
        let q: Vec<f64> = ["min_us", "median_us", "p99_us", "max_us"]
            .iter()
            .map(|k| r[k].as_f64().unwrap())
            .collect();
        assert!(q[0] > 0.0 && q.windows(2).all(|w| w[0] <= w[1]), "{r}");
    }
    // 18 messages take longer than one
    assert!(rows[1]["median_us"].as_f64() > rows[0]["median_us"].as_f64());
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains("<svg") && svg_text.contains("N_s = 500"));
    let _ = std::fs::remove_file(&svg);
    probe.stop();
}

#[test]
fn no_probe_and_bad_input_are_clear_errors() {
    // nobody listens: three unanswered triggers end it with a message naming the probe
    let o = run(
        &[],
        &[
            "trigger",
            "--bind",
            "127.0.0.89",
            "--probe",
            "127.0.0.90",
            "--samples",
            "1",
            "--timeout",
            "0.2",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("127.0.0.90:4792") && err.contains("rocelink probe"),
        "{err}"
    );
    // so does the host of periodic shots, within a second or so, not never
    let t = std::time::Instant::now();
    let o = run(
        &[],
        &[
            "shots",
            "--bind",
            "127.0.0.89",
            "--probe",
            "127.0.0.90",
            "--seconds",
            "30",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no probe answers at 127.0.0.90:4792"), "{err}");
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    for (args, says) in [
        (vec!["shots", "--channels", "95"], "even"),
        (
            vec!["shots", "--links", "2", "--channels", "98"],
            "even number of channels",
        ),
        (
            vec!["shots", "--bind", "127.0.0.1,127.0.0.2", "--links", "3"],
            "--links is 3",
        ),
        (vec!["shots", "--links", "2"], "one per link"),
        (vec!["shots", "--samples", "0"], "samples"),
        (vec!["probe", "--trigger-hz", "0"], "trigger-hz"),
        (
            vec!["shots", "--samples", "1000000", "--channels", "1000"],
            "at most 65536",
        ),
    ] {
        let o = run(&[], &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn namespaces_trigger_and_shots_across_a_veth() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") {
        return;
    }
    let p = common::VethPair::new("us", &["10.203.0.1/24"], &["10.203.0.2/24"]);
    let (a, b) = (common::VethPair::exec(&p.a), common::VethPair::exec(&p.b));
    // 4096-byte UD messages travel whole: at the default MTU of 1500 the probe says so
    let at_1500 = rocelink(&a)
        .args([
            "probe",
            "--bind",
            "10.203.0.1",
            "--allow",
            "10.203.0.0/24",
            "--seconds",
            "20",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = run(
        &b,
        &[
            "trigger",
            "--bind",
            "10.203.0.2",
            "--probe",
            "10.203.0.1",
            "--samples",
            "100",
            "-n",
            "1",
            "--warmup",
            "0",
            "--timeout",
            "0.2",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let out = at_1500.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("path MTU") && err.contains("jumbo"), "{err}");
    for (ns, dev) in [(&p.a, &p.va), (&p.b, &p.vb)] {
        assert!(common::sh(&[
            "ip", "-n", ns, "link", "set", dev, "mtu", "9000"
        ]));
    }
    let probe = ProbeProc::start(&a, &["--bind", "10.203.0.1", "--allow", "10.203.0.2"]);
    let o = run(
        &b,
        &[
            "shots",
            "--bind",
            "10.203.0.2",
            "--probe",
            "10.203.0.1",
            "--samples",
            "2000",
            "--shots",
            "100",
            "--trigger-hz",
            "500",
            "--verify",
            "--json",
            "--seconds",
            "60",
        ],
    );
    let (shots, sum) = shots_of(&o);
    // the probe misses a trigger that comes while it still sends (a loaded machine: the
    // count is not rocelink's to promise); the shots it took come whole, in order
    assert!((1..=100).contains(&shots.len()), "{sum}");
    for (i, s) in shots.iter().enumerate() {
        assert_eq!(s["shot"], i as u64, "{s}");
    }
    assert_eq!(sum["sink"]["corrupt"], 0);
    // a full socket buffer may still cost a message or two
    assert!(
        sum["sink"]["complete"].as_u64().unwrap() + 5 >= sum["sink"]["shots"].as_u64().unwrap(),
        "{sum}"
    );
    let o = run(
        &b,
        &[
            "trigger",
            "--bind",
            "10.203.0.2",
            "--probe",
            "10.203.0.1",
            "--samples",
            "1000",
            "-n",
            "30",
            "--warmup",
            "2",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let row = &lines(&o)[0];
    assert_eq!(row["shots"], 30);
    probe.stop();
}

#[test]
fn bench_shots_measures_roce_against_udp_and_plots() {
    let svg = std::env::temp_dir().join(format!("rocelink-bench-shots-{}.svg", std::process::id()));
    let o = run(
        &[],
        &[
            "bench",
            "shots",
            "--samples",
            "500",
            "--khz",
            "1,4",
            "--seconds",
            "0.2",
            "--runs",
            "3",
            "--no-pin",
            "--json",
            "--plot",
            svg.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let all = lines(&o);
    let points: Vec<_> = all.iter().filter(|v| v["table"].is_null()).collect();
    let table: Vec<_> = all.iter().filter(|v| v["table"] == true).collect();
    // 2 protocols × 2 frequencies, in each of 3 rounds
    assert_eq!(points.len(), 12);
    for p in &points {
        // shots came, never more than the window's triggers (give or take its edges);
        // how many a loaded machine misses is not rocelink's to promise (the figure the
        // bench reports, not a test's)
        let want = p["trigger_hz"].as_f64().unwrap() * 0.2;
        let got = p["complete"].as_f64().unwrap();
        assert!(got > 0.0 && got <= want * 1.05 + 2.0, "{p}");
        assert!(p["gbps"].as_f64().unwrap() > 0.0);
        // what the ends spent: the receiver's CPU per byte, the sender's share of a CPU
        let per_cpu = p["receiver_gbit_per_cpu_s"].as_f64().unwrap();
        let busy = p["sender_busy"].as_f64().unwrap();
        assert!(per_cpu > 0.0 && per_cpu.is_finite(), "{p}");
        assert!(busy > 0.0 && busy <= 1.05, "{p}");
    }
    assert_eq!(table.len(), 2);
    assert_eq!(table[0]["proto"], "RoCE UD");
    assert_eq!(table[1]["proto"], "UDP");
    // the ratio is the median of the rounds' own: each round's best RoCE point over its
    // best UDP point
    let best = |round: u64, proto: &str| -> f64 {
        points
            .iter()
            .filter(|p| p["round"] == round && p["proto"] == proto)
            .map(|p| p["gbps"].as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    let mut each: Vec<f64> = (0..3)
        .map(|r| best(r, "RoCE UD") / best(r, "UDP"))
        .collect();
    each.sort_by(f64::total_cmp);
    let ratio = table[0]["ratio_to_udp"].as_f64().unwrap();
    assert!((ratio - each[1]).abs() < 1e-9, "{ratio} against {each:?}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("Frame rate against trigger frequency") && text.contains("UDP N_s=500"));
    let _ = std::fs::remove_file(&svg);
}

/// Ctrl-C during `bench shots` ends it after the point under way, with the table of the
/// rounds completed (exit 0).
#[test]
fn ctrl_c_ends_bench_shots_with_the_rounds_completed() {
    use std::io::BufRead;
    let mut c = rocelink(&[])
        .args([
            "bench",
            "shots",
            "--samples",
            "500",
            "--khz",
            "1,2",
            "--seconds",
            "0.2",
        ])
        .args(["--runs", "50", "--no-pin", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    // the first round's four points (two protocols, two frequencies), then one more
    let mut line = String::new();
    for _ in 0..5 {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "ended early");
    }
    common::ctrl_c(c.id());
    let rest: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let st = c.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut c.stderr.take().unwrap(), &mut err).unwrap();
    assert!(st.success(), "{st}: {err}");
    assert!(err.contains("stopped (Ctrl-C) after"), "{err}");
    let table: Vec<&Value> = rest.iter().filter(|v| v["table"] == true).collect();
    assert_eq!(table.len(), 2, "{rest:?}");
    let rounds = table[0]["rounds"].as_u64().unwrap();
    assert!(
        (1..50).contains(&rounds) && err.contains(&format!("after {rounds} complete")),
        "{rounds}: {err}"
    );
}

/// A 64-byte trigger command (rocelink's format) with `command`, `port`, `cookie`.
fn trigger_bytes(command: u8, port: u16, cookie: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..4].copy_from_slice(b"USTR");
    b[4] = 1;
    b[5] = command;
    b[24..28].copy_from_slice(&0x0012_3456u32.to_be_bytes());
    b[28..32].copy_from_slice(&0x5553_0001u32.to_be_bytes());
    b[32..34].copy_from_slice(&port.to_be_bytes());
    if command == 2 {
        b[36..40].copy_from_slice(&1_000_000u32.to_be_bytes()); // 1 kHz, until stopped
    }
    b[56..64].copy_from_slice(&cookie.to_be_bytes());
    b
}

#[test]
fn the_probe_amplifies_nothing_and_obeys_only_the_host_that_started_it() {
    use std::net::UdpSocket;
    let ports = |ip: &str| rocelink_testkit::ports::free_udp_port(&[ip]);
    let (rp, tp) = (ports("127.0.0.91"), ports("127.0.0.91"));
    let (rp_s, tp_s) = (rp.to_string(), tp.to_string());
    let probe = ProbeProc::start(
        &[],
        &[
            "--bind",
            "127.0.0.91",
            "--port",
            &rp_s,
            "--trigger-port",
            &tp_s,
        ],
    );
    let trig: std::net::SocketAddr = format!("127.0.0.91:{tp}").parse().unwrap();
    // someone asks for a stream to a victim's RoCE port without proving its address
    let a = UdpSocket::bind("127.0.0.92:0").unwrap();
    let victim = UdpSocket::bind("127.0.0.92:0").unwrap();
    let vport = victim.local_addr().unwrap().port();
    a.send_to(&trigger_bytes(2, vport, 0), trig).unwrap();
    a.set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 128];
    let (n, from) = a.recv_from(&mut buf).unwrap();
    assert_eq!(
        (n, from, buf[5]),
        (64, trig, 4),
        "one 64-byte challenge back"
    );
    let cookie = u64::from_be_bytes(buf[56..64].try_into().unwrap());
    victim
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    assert!(victim.recv_from(&mut buf).is_err(), "nothing to the victim");
    // a real host starts a session (its trigger socket echoes the challenge)
    let host = rocelink(&[])
        .args([
            "shots",
            "--bind",
            "127.0.0.93",
            "--port",
            &rp_s,
            "--probe",
            &trig.to_string(),
            "--trigger-hz",
            "200",
            "--seconds",
            "3",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    // the other host, its address proven, tries to stop it and to take it over
    a.send_to(&trigger_bytes(3, vport, cookie), trig).unwrap();
    a.send_to(&trigger_bytes(2, vport, cookie), trig).unwrap();
    let o = host.wait_with_output().unwrap();
    let (shots, _) = shots_of(&o);
    let p = probe.stop();
    assert_eq!(p["triggers"]["gate"]["not_owner"], 2, "{p}");
    assert!(
        p["triggers"]["gate"]["challenges"].as_u64().unwrap() >= 2,
        "{p}"
    );
    // shots kept coming after the refused stop: ~200 Hz for ~2 s more
    assert!(shots.len() > 400, "{} shots; {p}", shots.len());
    assert!(
        victim.recv_from(&mut buf).is_err(),
        "still nothing to the victim"
    );
}
