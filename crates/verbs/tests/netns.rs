//! Unmodified programs under the library across a veth pair between two network
//! namespaces (root): an Ethernet link of MTU 1500, so a path MTU of 1024 as rxe would
//! choose; and RC riding out 1% loss each way.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use rocelink_testkit::netns::{VethPair, root_or_ci};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn ends(pair: &VethPair) -> Ends {
    Ends {
        server_ns: Some(pair.a.clone()),
        client_ns: Some(pair.b.clone()),
        server_ip: "10.91.0.1".parse().unwrap(),
        client_ip: "10.91.0.2".parse().unwrap(),
        connect: "10.91.0.1".into(),
        xdp: (None, None),
        env: Vec::new(),
    }
}

#[test]
fn perftest_and_pingpongs_cross_a_veth_pair() {
    if !root_or_ci()
        || !have("ib_write_bw", "perftest")
        || !have("ibv_ud_pingpong", "ibverbs-utils")
    {
        return;
    }
    let pair = VethPair::new("vb", &["10.91.0.1/24"], &["10.91.0.2/24"]);
    let e = ends(&pair);
    for (program, args) in [
        ("ib_write_bw", &["-n", "500"][..]),
        ("ib_read_lat", &["-n", "500"][..]),
        ("ib_send_bw", &["-c", "UD", "-D", "1"][..]),
        ("ib_send_lat", &["-n", "500"][..]),
    ] {
        let (s, c) = e.run(program, args, LIMIT);
        let server_rows = usize::from(program != "ib_read_lat");
        let rows = assert_rows(&format!("{program} {args:?}"), &s, &c, 1, server_rows);
        assert!(!rows.is_empty());
        // the port's MTU follows the link's: 1024 at 1500
        assert!(
            text(&c).contains("Mtu             : 1024[B]"),
            "{}",
            text(&c)
        );
    }
    let (s, c) = e.run(
        "ibv_ud_pingpong",
        &["-g", "0", "-n", "200", "-s", "1000"],
        LIMIT,
    );
    assert!(
        s.status.success() && c.status.success(),
        "{}\n{}",
        text(&s),
        text(&c)
    );
    assert!(text(&c).contains("200 iters in"), "{}", text(&c));
}

#[test]
fn rc_rides_out_loss_on_the_link() {
    if !root_or_ci() || !have("ib_write_bw", "perftest") || !have("nft", "nftables") {
        return;
    }
    let pair = VethPair::new("vl", &["10.91.0.1/24"], &["10.91.0.2/24"]);
    let drop_1pc = |dev: &str| {
        format!(
            "table netdev loss {{\n chain in {{ type filter hook ingress device \"{dev}\" priority 0; udp dport 4791 numgen random mod 100 < 1 counter drop; }}\n}}\n"
        )
    };
    pair.nft(&pair.a, &drop_1pc(&pair.va));
    pair.nft(&pair.b, &drop_1pc(&pair.vb));
    let e = ends(&pair);
    let (s, c) = e.run("ib_write_bw", &["-n", "300", "-s", "65536"], LIMIT);
    assert_rows("ib_write_bw with 1% loss", &s, &c, 1, 1);
    // (perftest's passive server ends with its client's final TCP message, after every
    // completion; a pingpong's last ACK lost after its peer left would be retried forever,
    // as with rxe, whose retry count 7 means "forever")
    let (s, c) = e.run("ib_read_bw", &["-n", "300"], LIMIT);
    assert_rows("ib_read_bw with 1% loss", &s, &c, 1, 1);
    // packets were dropped on the way, and the runs completed all the same
    let dropped: u64 = [&pair.a, &pair.b]
        .iter()
        .map(|ns| {
            let o = std::process::Command::new("ip")
                .args([
                    "netns", "exec", ns, "nft", "list", "table", "netdev", "loss",
                ])
                .output()
                .unwrap();
            let t = String::from_utf8_lossy(&o.stdout).into_owned();
            let n = t
                .split("counter packets ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next());
            n.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0)
        })
        .sum();
    assert!(dropped > 0, "no packet was dropped");
}

#[test]
fn devices_run_over_af_xdp_when_told() {
    if !root_or_ci() || !have("ib_write_bw", "perftest") {
        return;
    }
    let pair = VethPair::new("vx", &["10.91.0.1/24"], &["10.91.0.2/24"]);
    // the server over AF_XDP, the client over a socket; then both over AF_XDP
    let mut e = ends(&pair);
    e.xdp = (Some(pair.va.clone()), None);
    let (s, c) = e.run("ib_write_bw", &["-n", "300"], LIMIT);
    assert_rows("ib_write_bw, server over AF_XDP", &s, &c, 1, 1);
    e.xdp = (Some(pair.va.clone()), Some(pair.vb.clone()));
    let (s, c) = e.run("ib_send_lat", &["-n", "300"], LIMIT);
    assert_rows("ib_send_lat, both over AF_XDP", &s, &c, 1, 1);
    // an interface that does not exist is named when the first QP needs the device
    // (ibv_rc_pingpong makes its QP before it waits for a client)
    e.xdp = (Some("no-such-if".into()), None);
    let (s, _) = e.run_server_alone("ibv_rc_pingpong", &["-g", "0"]);
    assert!(!s.status.success(), "{:?} {}", s.status, text(&s));
    assert!(text(&s).contains("AF_XDP on no-such-if"), "{}", text(&s));
}

#[test]
fn ucx_crosses_a_veth_pair_over_rc_verbs_and_ud_verbs() {
    if !root_or_ci() || !have("ucx_perftest", "ucx-utils") {
        return;
    }
    let pair = VethPair::new("vu", &["10.91.0.1/24"], &["10.91.0.2/24"]);
    let mut e = ends(&pair);
    for tls in ["rc_verbs,ud_verbs,self", "ud_verbs,self"] {
        for test in [
            &["-t", "tag_bw", "-s", "1048576"][..],
            &["-t", "ucp_get", "-s", "65536"],
        ] {
            ucx_perftest(&mut e, tls, &[test, &["-n", "300", "-w", "20"]].concat());
        }
    }
}

/// An Open MPI job of two ranks, one in each namespace of `pair` ("hosts" named by their
/// namespace, the remote one started through `ip netns exec` as Open MPI's rsh agent): its
/// exit status and output.
fn mpi_across(pair: &VethPair, program: &[&str]) -> std::process::Output {
    let dir = std::env::temp_dir().join(format!("rocelink-mpi-{}", pair.a));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let agent = dir.join("agent");
    std::fs::write(
        &agent,
        "#!/bin/sh\nns=\"$1\"; shift\nexec ip netns exec \"$ns\" sh -c \"$*\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, format!("{} slots=1\n{} slots=1\n", pair.a, pair.b)).unwrap();
    let lib = library();
    let mut c = std::process::Command::new("ip");
    c.args([
        "netns",
        "exec",
        &pair.a,
        "mpirun",
        "--allow-run-as-root",
        "-np",
        "2",
    ]);
    c.arg("--hostfile").arg(&hosts);
    c.arg("--mca").arg("plm_rsh_agent").arg(&agent);
    for (k, v) in [
        ("pml", "ucx"),
        ("pml_ucx_devices", "rocelink*"),
        ("pml_ucx_tls", "any"),
        ("btl", "self"),
        // the launcher's channel over the veth pair only
        ("oob_tcp_if_include", "10.91.0.0/24"),
        // no topology shared through a mapped hole: the remote daemon crashed there now and
        // then (hwloc_shmem_topology_write), before any rank ran; binding is not needed
        ("rtc", "^hwloc"),
    ] {
        c.args(["--mca", k, v]);
    }
    for (k, v) in [
        ("LD_PRELOAD", lib.display().to_string()),
        ("UCX_TLS", "rc_verbs,ud_verbs,self".into()),
        ("UCX_NET_DEVICES", "rocelink0:1".into()),
        ("UCX_LOG_LEVEL", "info".into()),
    ] {
        c.args(["-x", &format!("{k}={v}")]);
    }
    c.args(program)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let o = wait_output(c.spawn().unwrap(), LIMIT);
    let _ = std::fs::remove_dir_all(&dir);
    o
}

#[test]
fn open_mpi_ranks_in_two_namespaces_ping_pong_and_allreduce_over_the_library() {
    if !root_or_ci() || !have_mpi() {
        return;
    }
    let pair = VethPair::new("vm", &["10.91.0.1/24"], &["10.91.0.2/24"]);
    // each rank's device: the one address of its namespace (no ROCELINK_VERBS needed)
    assert_mpi_run(&mpi_across(&pair, &[DEBIAN_PYTHON, MPI_PINGPONG]));
}
