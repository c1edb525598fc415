//! Unmodified RDMA programs from Debian — rdma-core's `ibv_devinfo` and pingpongs, and
//! perftest — run under the library: two processes on two loopback addresses, each side
//! printing its own results.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn ibv_devinfo_shows_an_active_ethernet_port_with_a_roce_v2_gid() {
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let ip = rocelink_testkit::ports::free_roce_ips(1)[0];
    let o = wait_output(
        command(None, ip, "ibv_devinfo", &["-v"]).spawn().unwrap(),
        LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "hca_id:\trocelink0".to_owned(),
        "PORT_ACTIVE (4)".to_owned(),
        "link_layer:\t\tEthernet".to_owned(),
        format!("GID[  0]:\t\t::ffff:{ip}, RoCE v2"),
        "phys_port_cnt:\t\t\t1".to_owned(),
    ] {
        assert!(t.contains(&want), "no `{want}` in:\n{t}");
    }
    // two devices, in the order given
    let ips = rocelink_testkit::ports::free_roce_ips(2);
    let o = Command::new("ibv_devices")
        .env("ROCELINK_VERBS", format!("{},{}", ips[0], ips[1]))
        .env("LD_PRELOAD", library())
        .output()
        .unwrap();
    let t = text(&o);
    let names: Vec<&str> = t
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        names.contains(&"rocelink0") && names.contains(&"rocelink1"),
        "{t}"
    );
}

use std::process::Command;

/// `ibv_{rc,uc,ud}_pingpong -g 0`: both sides report their iterations.
fn pingpong(kind: &str, size: &str) {
    let program = format!("ibv_{kind}_pingpong");
    if !have(&program, "ibverbs-utils") {
        return;
    }
    let ends = Ends::loopback();
    let (s, c) = ends.run(&program, &["-g", "0", "-n", "500", "-s", size], LIMIT);
    let (st, ct) = (text(&s), text(&c));
    assert!(
        s.status.success() && c.status.success(),
        "{program}\n--- server\n{st}\n--- client\n{ct}"
    );
    for t in [&st, &ct] {
        assert!(t.contains("500 iters in"), "{program}: {t}");
        assert!(t.contains(&format!("GID ::ffff:{}", ends.server_ip)), "{t}");
        assert!(t.contains(&format!("GID ::ffff:{}", ends.client_ip)), "{t}");
    }
}

#[test]
fn rc_pingpong_runs_between_two_processes() {
    pingpong("rc", "4096");
}

#[test]
fn uc_pingpong_runs_between_two_processes() {
    pingpong("uc", "4096");
}

#[test]
fn ud_pingpong_runs_between_two_processes() {
    // a UD message fits the port's MTU (loopback: 4096, less the 40-byte GRH slot)
    pingpong("ud", "2048");
}

/// A perftest test between two processes: the client prints `rows` result rows, the
/// server as many — but one with `-a` (it reports the last size) and none for a READ or
/// atomic latency test (its server is passive), as on an RNIC.
fn perftest(program: &str, args: &[&str], rows: usize) -> Vec<Vec<f64>> {
    if !have(program, "perftest") {
        return Vec::new();
    }
    let ends = Ends::loopback();
    let (s, c) = ends.run(program, args, LIMIT);
    let server_rows = match (program, args.contains(&"-a")) {
        ("ib_read_lat" | "ib_atomic_lat", _) => 0,
        (p, true) if p.ends_with("_bw") => 1,
        _ => rows,
    };
    assert_rows(&format!("{program} {args:?}"), &s, &c, rows, server_rows)
}

#[test]
fn write_bw_and_write_lat_rc_and_uc() {
    let r = perftest("ib_write_bw", &["-n", "500"], 1);
    if let Some(row) = r.first() {
        // 65536-byte messages, 500 of them, some bandwidth
        assert_eq!((row[0], row[1]), (65536.0, 500.0));
        assert!(row[3] > 0.0, "{row:?}");
    }
    perftest("ib_write_bw", &["-c", "UC", "-n", "500"], 1);
    perftest("ib_write_lat", &["-n", "500"], 1);
    perftest("ib_write_lat", &["-c", "UC", "-n", "500"], 1);
}

#[test]
fn read_bw_and_read_lat() {
    perftest("ib_read_bw", &["-n", "300"], 1);
    perftest("ib_read_lat", &["-n", "500"], 1);
}

#[test]
fn send_bw_and_send_lat_rc_uc_ud() {
    perftest("ib_send_bw", &["-n", "500"], 1);
    perftest("ib_send_lat", &["-n", "500"], 1);
    // UC and UD lose what a full socket drops (a loaded machine starves the receiver), and
    // perftest's server then waits forever for its count, as over a lossy link with an
    // RNIC: unreliable bandwidth runs for a time instead
    perftest("ib_send_bw", &["-c", "UC", "-D", "1"], 1);
    perftest("ib_send_lat", &["-c", "UC", "-n", "500"], 1);
    perftest("ib_send_bw", &["-c", "UD", "-D", "1"], 1);
    perftest("ib_send_lat", &["-c", "UD", "-n", "500"], 1);
}

#[test]
fn every_size_with_a_and_four_qps_with_q() {
    // -a: 2 bytes to 8 MiB (23 sizes; UD: up to the MTU)
    let rows = perftest("ib_write_bw", &["-a", "-n", "100"], 23);
    if !rows.is_empty() {
        let sizes: Vec<f64> = rows.iter().map(|r| r[0]).collect();
        assert_eq!(sizes.first(), Some(&2.0));
        assert_eq!(sizes.last(), Some(&8_388_608.0));
    }
    perftest("ib_send_lat", &["-a", "-n", "100"], 23);
    perftest("ib_read_lat", &["-a", "-n", "50"], 23);
    perftest("ib_send_bw", &["-a", "-c", "UD", "-n", "100"], 12);
    perftest("ib_write_bw", &["-q", "4", "-n", "500"], 1);
    perftest("ib_send_bw", &["-q", "4", "-n", "500"], 1);
    perftest("ib_read_bw", &["-q", "4", "-n", "300"], 1);
}

#[test]
fn event_mode_sleeps_on_completion_channels() {
    // the programs arm their CQs and sleep in ibv_get_cq_event: the device's thread does
    // the network work and wakes them
    if have("ibv_rc_pingpong", "ibverbs-utils") {
        let ends = Ends::loopback();
        let (s, c) = ends.run("ibv_rc_pingpong", &["-g", "0", "-e", "-n", "300"], LIMIT);
        assert!(
            s.status.success() && c.status.success(),
            "{}\n{}",
            text(&s),
            text(&c)
        );
        assert!(text(&c).contains("300 iters in"), "{}", text(&c));
    }
    perftest("ib_send_lat", &["-e", "-n", "300"], 1);
    perftest("ib_send_bw", &["-e", "-n", "300"], 1);
}

#[test]
fn atomic_bw_and_atomic_lat_fetch_and_add_and_compare_and_swap() {
    for op in ["FETCH_AND_ADD", "CMP_AND_SWAP"] {
        perftest("ib_atomic_bw", &["-A", op, "-n", "500"], 1);
        perftest("ib_atomic_lat", &["-A", op, "-n", "500"], 1);
    }
}

#[test]
fn srq_pingpong_shares_one_receive_queue_among_sixteen_qps() {
    pingpong("srq", "4096");
}

#[test]
fn a_program_that_needs_what_the_device_lacks_is_told_so() {
    // ibv_xsrq_pingpong needs an XRC domain: ibv_open_xrcd answers EOPNOTSUPP (95)
    if !have("ibv_xsrq_pingpong", "ibverbs-utils") {
        return;
    }
    let ip = rocelink_testkit::ports::free_roce_ips(1)[0];
    let o = wait_output(
        command(None, ip, "ibv_xsrq_pingpong", &["-g", "0"])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("Couldn't Open the XRC Domain 95"),
        "{}",
        text(&o)
    );
}
