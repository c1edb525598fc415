//! The library example runs against `rocelink emulate`: it receives ten good frames into
//! its own memory and exits 0.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/` of this test binary.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The built artifact at `rel` under the target directory, building it with cargo if the
/// workspace build did not (e.g. `cargo test -p rocelink-examples`).
fn artifact(rel: &str, build: &[&str]) -> PathBuf {
    let p = target_dir().join(rel);
    if !p.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "--quiet"])
            .args(build)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
            .status()
            .unwrap();
        assert!(st.success(), "cargo build {build:?}");
    }
    assert!(p.exists(), "{} not built", p.display());
    p
}

/// Build (if needed) and run example `name` with `args`; its stdout, once it exited 0.
fn run_example(name: &str, args: &[&str]) -> String {
    let example = artifact(
        &format!("examples/{name}"),
        &["-p", "rocelink-examples", "--example", name],
    );
    let out = Command::new(example).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn receive_frames_example_runs_against_rocelink_emulate() {
    let rocelink = artifact("rocelink", &["-p", "rocelink", "--bin", "rocelink"]);
    let example = artifact(
        "examples/receive_frames",
        &["-p", "rocelink-examples", "--example", "receive_frames"],
    );
    let (dev, host) = ("127.0.77.2", "127.0.77.1");
    // ready once it has bound its ports (its banner says so)
    let _emu = rocelink_testkit::emulator::Process::spawn(
        &rocelink,
        &[],
        &["--ip", dev, "--bootp-target", "none", "--seconds", "60"],
    );
    let out = Command::new(example)
        .args([dev, host, "10"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("10 good frames of 10"), "{stdout}");
    // each frame was handed to the application's code with its bytes
    assert_eq!(stdout.matches("bytes, byte sum").count(), 10, "{stdout}");
    assert!(stdout.contains("ring of"), "{stdout}");
}

/// The summary the example printed for `role` (its `{"role": …, "summary": …}` line).
fn summary(stdout: &str, role: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["role"] == role)
        .map(|v| v["summary"].clone())
        .unwrap_or_else(|| panic!("no summary of {role}: {stdout}"))
}

#[test]
fn ultrasound_shots_example_receives_every_shot_it_asked_for() {
    let stdout = run_example("ultrasound_shots", &["40"]);
    assert!(
        stdout.contains("40 shots, 40 complete, 40 verified, 0 corrupt"),
        "{stdout}"
    );
    assert!(
        stdout.contains("shot 39: 144000 bytes in 36 messages"),
        "{stdout}"
    );
    // the summaries as JSON say the same
    let host = summary(&stdout, "shots host");
    assert_eq!(host["links"][0]["sink"]["verified"], 40, "{host}");
    assert_eq!(host["links"][0]["host"]["messages"], 40 * 36, "{host}");
    let probe = summary(&stdout, "probe");
    assert!(probe["probe"]["shots"].as_u64().unwrap() >= 40, "{probe}");
}

#[test]
fn ims_stream_example_consumes_every_frame_it_acked() {
    let stdout = run_example("ims_stream", &["300"]);
    assert!(
        stdout.contains("300 frames ACKed to the worker") && stdout.contains("300 consumed"),
        "{stdout}"
    );
    assert!(stdout.contains("300 intact"), "{stdout}");
    assert_eq!(stdout.matches("262144 bytes at VA").count(), 3, "{stdout}");
    let unit = summary(&stdout, "ims unit");
    let worker = summary(&stdout, "ims worker");
    // the counters sit among the summary's own fields
    assert_eq!(worker["frames"], 300, "{worker}");
    assert_eq!(worker["state"], "Done", "{worker}");
    assert_eq!(unit["frames_consumed"], 300, "{unit}");
    assert_eq!(unit["icrc_errors"], 0, "{unit}");
}

#[test]
fn hsb_session_example_receives_two_ports_from_an_emulator_in_process() {
    let stdout = run_example("hsb_session", &["15"]);
    for vp in [0, 1] {
        assert!(
            stdout.contains(&format!("vp {vp}: 15 frames, 15 good, 0 damaged")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!(
                "vp {vp} frame 1: 100000 bytes, good true, as sent true"
            )),
            "{stdout}"
        );
    }
    let host = summary(&stdout, "hsb host");
    for (i, p) in host["ports"].as_array().unwrap().iter().enumerate() {
        assert_eq!(p["vp"], i, "{host}");
        assert_eq!(p["outcome"]["frames"], 15, "{host}");
        assert_eq!(p["outcome"]["stopped"], "Frames", "{host}");
        assert_eq!(p["stats"]["good"], 15, "{host}");
        assert_eq!(p["error"], serde_json::Value::Null, "{host}");
    }
    let emulator = summary(&stdout, "hsb emulator");
    assert!(emulator["frames"].as_u64().unwrap() >= 15, "{emulator}");
}

#[test]
fn perf_write_bw_example_measures_both_ends() {
    let stdout = run_example("perf_write_bw", &["500"]);
    for who in ["client", "server"] {
        assert!(
            stdout.contains(&format!("{who}: 65536 bytes x 500 iterations")),
            "{stdout}"
        );
    }
    // 64 KiB WRITEs at MTU 4096: 16 packets each from the client (more if any was sent
    // again)
    let client = stdout.lines().find(|l| l.starts_with("client: ")).unwrap();
    let packets: u64 = client
        .split(", ")
        .find_map(|p| p.strip_suffix(" packets sent"))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(packets >= 8000, "{stdout}");
    assert!(stdout.contains("MTU 4096"), "{stdout}");
    let client = summary(&stdout, "perf client");
    let server = summary(&stdout, "perf server");
    assert_eq!(client["outcome"]["Bw"][0]["iters"], 500, "{client}");
    assert_eq!(client["link"]["net"]["tx_packets"], packets, "{client}");
    // each end's addresses are the other's
    assert_eq!(
        client["addresses"]["local"], server["addresses"]["remote"],
        "{client} {server}"
    );
}

#[test]
fn pingpong_example_answers_every_exchange() {
    let stdout = run_example("pingpong", &["50"]);
    for who in ["client", "server"] {
        let s = summary(&stdout, &format!("pingpong {who}"));
        let r = &s["report"];
        assert_eq!(
            (&r["iters"], &r["received"]),
            (&50.into(), &50.into()),
            "{s}"
        );
        assert_eq!(r["corrupt"], 0, "{s}");
        // rdma-core's count: 4096 bytes × 50 × 2
        assert_eq!(r["bytes"], 409_600, "{s}");
        assert!(r["elapsed"].as_f64().unwrap() > 0.0, "{s}");
    }
    let c = summary(&stdout, "pingpong client");
    let s = summary(&stdout, "pingpong server");
    assert_eq!(
        c["report"]["endpoint"]["tx_datagrams"], s["report"]["endpoint"]["rx_datagrams"],
        "{c} {s}"
    );
}

#[test]
fn trigger_rtt_example_measures_every_size() {
    let stdout = run_example("trigger_rtt", &["30"]);
    let rows = summary(&stdout, "round trip");
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{stdout}");
    for (row, samples) in rows.iter().zip([100, 1000]) {
        assert_eq!(row["samples"], samples, "{row}");
        assert_eq!(row["shots"], 30, "{row}");
        assert!(row["median_us"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(
            (&row["lost"], &row["corrupt"]),
            (&0.into(), &0.into()),
            "{row}"
        );
    }
    // every shot measured came from the probe
    let probe = summary(&stdout, "probe");
    assert!(
        probe["probe"]["shots"].as_u64().unwrap() >= 2 * 30,
        "{probe}"
    );
}
