//! `rocelink bench stream` runs and reports all three receivers (a functional check; no
//! timing is asserted).

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
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
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
}
