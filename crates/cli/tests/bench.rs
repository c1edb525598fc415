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
    // rocelink's receiver verified frames (good ones at least)
    assert!(r[2]["frames_good"].as_u64().unwrap() > 0, "{}", r[2]);
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
