//! `rocelink bench stream` (with the no-loss search) and `bench record` run and report every
//! receiver/writer (functional checks; no timing is asserted).

#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;

#[test]
fn bench_stream_reports_three_receivers() {
    let (code, out, err) = common::rocelink(&[
        "bench",
        "stream",
        "--seconds",
        "0.3",
        "--json",
        "--no-pin",
        "--frame",
        "65536",
        "--no-loss",
        "--steps",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.trim().lines();
    let v: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let r = v["results"].as_array().unwrap();
    let names: Vec<&str> = r.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["sink", "recv1", "rocelink"]);
    for x in r {
        assert!(
            x["sent"].as_u64().unwrap() > 0 && x["received"].as_u64().unwrap() > 0,
            "{x}"
        );
    }
    // rocelink's receiver reported a frame for (nearly) every 17 datagrams it received
    // (64 KiB = 16 data packets + metadata; the first and last frame may be partial), and
    // they were good: the sender cycles through pre-built frames, which the receiver must
    // not refuse as a replay in this benchmark
    let (good, bad) = (
        r[2]["frames_good"].as_u64().unwrap(),
        r[2]["frames_damaged"].as_u64().unwrap(),
    );
    let received = r[2]["received"].as_u64().unwrap();
    assert!((good + bad + 2) * 17 >= received, "{}", r[2]);
    assert!(good > 0, "{}", r[2]);
    assert!(v["ratio_rocelink_to_sink"].as_f64().unwrap() > 0.0);
    // the no-loss search: every receiver, and a probe that counts as no-loss really
    // received everything it was sent
    let n: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let rows = n["no_loss"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["sink", "recv1", "rocelink"]);
    for r in rows {
        if r["no_loss_gbps"].as_f64().unwrap() > 0.0 {
            assert_eq!(r["sent"], r["received"], "{r}");
        }
    }
}

#[test]
fn bench_stream_rounds_of_sink_ring_beside_rocelink_and_cpu_is_compared() {
    let (code, out, err) = common::rocelink(&[
        "bench",
        "stream",
        "--seconds",
        "0.3",
        "--json",
        "--no-pin",
        "--frame",
        "65536",
        "--rate",
        "0.5",
        "--receivers",
        "sink,sink-ring,rocelink",
        "--runs",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let r = v["results"].as_array().unwrap();
    let names: Vec<&str> = r.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["sink", "sink-ring", "rocelink"]);
    // two rounds, each with every receiver; the results are their medians
    assert_eq!(v["runs"], 2);
    let rounds = v["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2);
    assert!(rounds.iter().all(|x| x.as_array().unwrap().len() == 3));
    let ring_cpu: Vec<f64> = rounds
        .iter()
        .map(|x| x[1]["cpu_percent"].as_f64().unwrap())
        .collect();
    // the median of two is the upper one
    assert_eq!(
        r[1]["cpu_percent"].as_f64().unwrap(),
        ring_cpu[0].max(ring_cpu[1])
    );
    // the ring sink counted what it received as the sink counts it
    let ring = &r[1];
    assert!(ring["received"].as_u64().unwrap() > 0, "{ring}");
    assert!(ring["gbps"].as_f64().unwrap() > 0.0, "{ring}");
    // paced: rocelink's CPU against both sinks
    let cpu = v["cpu_ratio_rocelink_to"].as_object().unwrap();
    let keys: Vec<&str> = cpu.keys().map(String::as_str).collect();
    assert_eq!(keys, ["sink", "sink-ring"]);
    assert!(cpu.values().all(|x| x.as_f64().unwrap() > 0.0), "{v}");
}

#[test]
fn bench_record_measures_dd_and_the_recorder_and_cleans_up() {
    let dir = common::tmpdir("bench_record");
    let (code, out, err) = common::rocelink(&[
        "bench",
        "record",
        "--dir",
        dir.to_str().unwrap(),
        "--frame",
        "100000",
        "--frames",
        "6",
        "--runs",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["dd", "recorder", "dd", "recorder"]);
    for r in runs {
        assert_eq!(r["bytes"], 600_000, "{r}");
        assert!(r["seconds"].as_f64().unwrap() > 0.0);
    }
    assert!(v["ratio_recorder_to_dd"].as_f64().unwrap() > 0.0);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "bench files removed: {left:?}");
}

#[test]
fn bench_record_never_follows_a_link_planted_in_its_directory() {
    let dir = common::tmpdir("bench_record_link");
    let elsewhere = common::tmpdir("bench_record_victim");
    let victim = elsewhere.join("precious");
    std::fs::write(&victim, b"precious").unwrap();
    // where dd wrote before: a link there made it overwrite the target (as root: any file)
    std::os::unix::fs::symlink(&victim, dir.join("dd.bin")).unwrap();
    let (code, _, err) = common::rocelink(&[
        "bench",
        "record",
        "--dir",
        dir.to_str().unwrap(),
        "--frame",
        "100000",
        "--frames",
        "3",
        "--runs",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    // the link is left as it was, and nothing else
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["dd.bin"]);
    assert!(
        std::fs::symlink_metadata(dir.join("dd.bin"))
            .unwrap()
            .is_symlink()
    );
}

#[test]
fn ctrl_c_during_bench_record_removes_its_files() {
    let dir = common::tmpdir("bench_record_stop");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_rocelink"))
        .args(["bench", "record", "--dir", dir.to_str().unwrap()])
        .args(["--frame", "1048576", "--frames", "64", "--runs", "50"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // a round may or may not have completed by then; either way it says so
    match out.status.code() {
        Some(0) => assert!(err.contains("stopped after"), "{err}"),
        Some(130) => assert!(err.contains("stopped before a round completed"), "{err}"),
        c => panic!("exit {c:?}: {err}"),
    }
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
}

/// `bench write-bw` and `bench write-lat` are `bench perf` of one test: two `rocelink perf`
/// processes next to the UDP figures of the same run.
#[test]
fn bench_write_bw_and_write_lat_are_bench_perf_of_one_test() {
    let (code, out, err) = common::rocelink(&[
        "bench", "write-bw", "-s", "8192", "-n", "300", "-t", "32", "--no-pin", "--json", "--runs",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["test"].as_str(), v["bytes"].as_u64()),
        (Some("write_bw"), Some(8192)),
        "{v}"
    );
    for k in ["rocelink", "udp", "udp_gso_gro", "ratio_to_udp"] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    // each ratio is the median of the runs' own ratios, not a ratio of medians
    let runs = |k: &str| -> Vec<f64> {
        let r: Vec<f64> = v["rounds"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(r.len(), 3, "{k}: {v}");
        r
    };
    let mine = runs("rocelink");
    for (k, ratio) in [
        ("udp", "ratio_to_udp"),
        ("udp_gso_gro", "ratio_to_udp_gso_gro"),
    ] {
        let mut each: Vec<f64> = mine.iter().zip(runs(k)).map(|(m, b)| m / b).collect();
        each.sort_by(f64::total_cmp);
        assert!(
            (v[ratio].as_f64().unwrap() - each[1]).abs() < 1e-9,
            "{ratio}: {v}"
        );
    }
    let (code, out, err) = common::rocelink(&["bench", "write-lat", "-n", "200", "--no-pin"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("write_lat") && out.contains("× UDP"), "{out}");
}

/// `bench perf`: both ends of a perf test over loopback next to the UDP figure of the same
/// run, as JSON.
#[test]
fn bench_perf_puts_each_test_next_to_udp() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rocelink"))
        .args(["bench", "perf", "write_bw", "send_lat", "--runs", "1"])
        .args([
            "--bw-iters",
            "300",
            "--lat-iters",
            "200",
            "--no-pin",
            "--json",
        ])
        .args(["--server-ip", "127.0.0.123", "--client-ip", "127.0.0.124"])
        .args(["--port", "19139"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the same code on two threads of one process
    let inproc = std::process::Command::new(env!("CARGO_BIN_EXE_rocelink"))
        .args([
            "bench",
            "perf",
            "read_lat",
            "--runs",
            "1",
            "--lat-iters",
            "100",
        ])
        .args(["--no-pin", "--json", "--in-process"])
        .args(["--server-ip", "127.0.0.123", "--client-ip", "127.0.0.124"])
        .output()
        .unwrap();
    assert!(
        inproc.status.success(),
        "{}",
        String::from_utf8_lossy(&inproc.stderr)
    );
    let row: serde_json::Value = serde_json::from_slice(&inproc.stdout).unwrap();
    assert!(row["rocelink"].as_f64().unwrap() > 0.0, "{row}");
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["test"], "write_bw");
    assert_eq!(rows[0]["unit"], "MiB/s");
    assert!(
        rows[0]["udp_gso_gro"].as_f64().unwrap() > 0.0,
        "{}",
        rows[0]
    );
    assert_eq!(rows[1]["test"], "send_lat");
    assert_eq!(rows[1]["unit"], "µs");
    assert!(rows[1]["udp_gso_gro"].is_null());
    for r in &rows {
        let (m, u, q) = (
            r["rocelink"].as_f64().unwrap(),
            r["udp"].as_f64().unwrap(),
            r["ratio_to_udp"].as_f64().unwrap(),
        );
        assert!(m > 0.0 && u > 0.0, "{r}");
        assert!((q - m / u).abs() < 1e-9, "{r}");
    }
}

#[test]
fn bench_scale_runs_n_streams_at_once_for_each_receiver() {
    let (code, out, err) = common::rocelink(&[
        "bench",
        "scale",
        "--streams",
        "1,2",
        "--seconds",
        "0.3",
        "--frame",
        "65536",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| r["streams"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2]
    );
    for r in rows {
        // both receivers moved data on every stream, and their per-CPU figures are finite
        assert!(r["sink_gbps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["rocelink_gbps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["rocelink_gbps_per_cpu"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            (0.0..=1.0).contains(&r["rocelink_loss"].as_f64().unwrap()),
            "{r}"
        );
    }
    assert!(v["cpus"].as_u64().unwrap() >= 1);
}

/// `bench stream` with `args`, interrupted (SIGINT) after `after`: its exit status, stdout
/// and stderr.
fn interrupted_stream(args: &[&str], after: std::time::Duration) -> (Option<i32>, String, String) {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_rocelink"))
        .args(["bench", "stream"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ctrl_c_reports_the_rounds_that_completed() {
    // rounds of about 0.7 s (0.5 s and the drain): several complete before the signal
    let (code, out, err) = interrupted_stream(
        &[
            "--seconds",
            "0.5",
            "--runs",
            "40",
            "--receivers",
            "sink",
            "--frame",
            "65536",
            "--rate",
            "0.5",
            "--no-pin",
            "--json",
        ],
        std::time::Duration::from_millis(4000),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("stopped after"), "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let runs = v["runs"].as_u64().unwrap();
    assert!((1..40).contains(&runs), "{v}");
    // and one stopped before any round completed says so, with 130
    let (code, out, err) = interrupted_stream(
        &[
            "--seconds",
            "5",
            "--receivers",
            "sink",
            "--frame",
            "65536",
            "--no-pin",
        ],
        std::time::Duration::from_millis(1000),
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("stopped before a round completed"), "{err}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn ctrl_c_over_veth_removes_the_namespaces() {
    if !common::root_or_ci() || !common::need("ip", "iproute2") {
        return;
    }
    let before = netns();
    let (code, _, err) = interrupted_stream(
        &[
            "--backend",
            "xdp",
            "--payload",
            "1408",
            "--seconds",
            "5",
            "--receivers",
            "sink",
            "--no-pin",
        ],
        std::time::Duration::from_millis(2000),
    );
    assert_eq!(code, Some(130), "{err}");
    let left: Vec<String> = netns()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?} ({err})");
}

/// The network namespaces there are now.
fn netns() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

#[test]
fn bench_perf_names_the_program_holding_the_servers_port() {
    // another program on the server's RoCE port: the server fails, the client only sees
    // its connection reset; the error is the server's
    let held = std::net::UdpSocket::bind("127.0.0.231:4791").unwrap();
    let (code, _, err) = common::rocelink(&[
        "bench",
        "perf",
        "write_lat",
        "--runs",
        "1",
        "--lat-iters",
        "100",
        "--server-ip",
        "127.0.0.231",
        "--client-ip",
        "127.0.0.232",
        "--port",
        "19231",
        "--no-pin",
    ]);
    drop(held);
    assert_ne!(code, 0);
    assert!(
        err.contains("cannot bind RoCE UDP socket 127.0.0.231:4791"),
        "{err}"
    );
    assert!(err.contains("--server-ip and --client-ip"), "{err}");
    // one line, not the client's counters
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
