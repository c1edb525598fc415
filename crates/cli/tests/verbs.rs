//! `rocelink verbs`: the devices it lists, programs run with the library preloaded (their
//! exit status theirs), bad input refused; and perftest under the library against
//! `rocelink perf`, both ways round.
#![allow(clippy::unwrap_used)]

use std::net::IpAddr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rocelink() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocelink"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn devices_are_listed_from_ip_and_bad_addresses_are_named() {
    let ips = rocelink_testkit::ports::free_roce_ips(2);
    let list = format!("{},{}", ips[0], ips[1]);
    let o = rocelink()
        .args(["verbs", "devices", "--ip", &list, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let rows: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["name"], "rocelink0");
    assert_eq!(rows[1]["ip"], ips[1].to_string());
    assert_eq!(rows[0]["ifname"], "lo");
    let o = rocelink()
        .args(["verbs", "devices", "--ip", &ips[0].to_string()])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(
        t.contains(&format!("rocelink0  GID ::ffff:{}  RoCE v2", ips[0])),
        "{t}"
    );
    // an address no interface has, a word that is no address, nothing to run
    let o = rocelink()
        .args(["verbs", "devices", "--ip", "192.0.2.254"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("--ip: no interface has 192.0.2.254"),
        "{}",
        text(&o)
    );
    let o = rocelink()
        .args(["verbs", "--ip", "nonsense", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = rocelink().args(["verbs"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("name a program to run after `--`"),
        "{}",
        text(&o)
    );
    let o = rocelink()
        .args([
            "verbs",
            "--ip",
            &ips[0].to_string(),
            "--",
            "no-such-program-here",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("cannot run no-such-program-here"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_program_runs_with_the_library_and_devices_set_and_exits_as_itself() {
    let ip = rocelink_testkit::ports::free_roce_ips(1)[0].to_string();
    let o = rocelink()
        .args(["verbs", "--ip", &ip, "--", "sh", "-c"])
        .arg("echo \"$ROCELINK_VERBS|$LD_PRELOAD\"; exit 3")
        .env("LD_PRELOAD", "")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let (devs, lib) = out.trim().split_once('|').unwrap();
    assert_eq!(devs, ip);
    assert!(
        lib.ends_with("librocelink_verbs.so") && std::path::Path::new(lib).is_file(),
        "{lib}"
    );
    if rocelink_testkit::netns::need("ibv_devinfo", "ibverbs-utils") {
        let o = rocelink()
            .args(["verbs", "--ip", &ip, "--", "ibv_devinfo"])
            .output()
            .unwrap();
        let t = text(&o);
        assert!(
            o.status.success() && t.contains("hca_id:\trocelink0"),
            "{t}"
        );
        assert!(t.contains("PORT_ACTIVE"), "{t}");
    }
}

/// Run `server` (in the background) and `client` with the client's last argument the
/// server's address; both outputs. `server_ready` tells when the server listens.
fn pair(server: &mut Command, client: &mut Command, port: u16) -> (Output, Output) {
    let s = server
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(rocelink_testkit::ports::wait_tcp_listening(
        port,
        Duration::from_secs(20)
    ));
    let c = client
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let c = wait(c, Duration::from_secs(60));
    let s = wait(s, Duration::from_secs(20));
    (s, c)
}

fn wait(mut child: std::process::Child, limit: Duration) -> Output {
    let end = Instant::now() + limit;
    while Instant::now() < end && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// perftest's result rows in `out`.
fn rows(out: &str) -> usize {
    out.lines()
        .skip_while(|l| !l.contains("#bytes"))
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u64>().is_ok())
        })
        .count()
}

#[test]
fn perftest_under_the_library_and_rocelink_perf_interoperate_both_ways() {
    if !rocelink_testkit::netns::need("ib_write_bw", "perftest") {
        return;
    }
    let ips: Vec<String> = rocelink_testkit::ports::free_roce_ips(2)
        .iter()
        .map(IpAddr::to_string)
        .collect();
    for (test, perftest) in [
        ("write_bw", "ib_write_bw"),
        ("read_lat", "ib_read_lat"),
        ("send_bw", "ib_send_bw"),
    ] {
        // perftest over the library serves, rocelink perf connects
        let port = rocelink_testkit::ports::free_tcp_port().to_string();
        let mut srv = rocelink();
        srv.args([
            "verbs", "--ip", &ips[0], "--", perftest, "-n", "300", "-p", &port,
        ]);
        let mut cli = rocelink();
        cli.args([
            "perf",
            test,
            &ips[0],
            "-n",
            "300",
            "-p",
            &port,
            "--bind",
            &ips[1],
            "--no-control",
        ]);
        let (s, c) = pair(&mut srv, &mut cli, port.parse().unwrap());
        let (st, ct) = (text(&s), text(&c));
        assert!(
            s.status.success() && c.status.success(),
            "{test}\n--- verbs server\n{st}\n--- rocelink client\n{ct}"
        );
        assert!(rows(&ct) >= 1, "{test}: {ct}");
        // and the other way round
        let port = rocelink_testkit::ports::free_tcp_port().to_string();
        let mut srv = rocelink();
        srv.args([
            "perf",
            test,
            "-n",
            "300",
            "-p",
            &port,
            "--bind",
            &ips[1],
            "--no-control",
        ]);
        let mut cli = rocelink();
        cli.args([
            "verbs", "--ip", &ips[0], "--", perftest, "-n", "300", "-p", &port, &ips[1],
        ]);
        let (s, c) = pair(&mut srv, &mut cli, port.parse().unwrap());
        let (st, ct) = (text(&s), text(&c));
        assert!(
            s.status.success() && c.status.success(),
            "{test}\n--- rocelink server\n{st}\n--- verbs client\n{ct}"
        );
        assert!(rows(&ct) >= 1, "{test}: {ct}");
    }
}

#[test]
fn bench_verbs_puts_perftest_over_the_library_beside_rocelink_perf() {
    if !rocelink_testkit::netns::need("ib_write_lat", "perftest")
        || !rocelink_testkit::netns::need("ibv_rc_pingpong", "ibverbs-utils")
    {
        return;
    }
    let ips = rocelink_testkit::ports::free_roce_ips(2);
    let port = rocelink_testkit::ports::free_tcp_port().to_string();
    let o = rocelink()
        .args([
            "bench",
            "verbs",
            "write_lat",
            "send_bw",
            "--lat-iters",
            "300",
            "--bw-iters",
            "300",
        ])
        .args([
            "--runs", "2", "--no-pin", "--idle", "0.5", "--json", "--port", &port,
        ])
        .args([
            "--server-ip",
            &ips[0].to_string(),
            "--client-ip",
            &ips[1].to_string(),
        ])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let rows: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{t}");
    for (row, test) in rows.iter().zip(["write_lat", "send_bw"]) {
        assert_eq!(row["test"], test);
        let (mine, verbs) = (
            &row["rounds"]["rocelink_perf"],
            &row["rounds"]["perftest_verbs"],
        );
        assert_eq!(mine.as_array().unwrap().len(), 2, "{row}");
        assert!(
            verbs
                .as_array()
                .unwrap()
                .iter()
                .all(|v| v.as_f64().unwrap() > 0.0),
            "{row}"
        );
        assert!(row["ratio"].as_f64().unwrap() > 0.0);
    }
    // a program waiting over the library for half a second costs (almost) nothing
    let idle = &rows[2];
    assert!(idle["idle_cpu_seconds"].as_f64().unwrap() < 0.1, "{idle}");
}
