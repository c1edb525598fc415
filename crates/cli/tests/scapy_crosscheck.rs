//! Cross-check `rocelink decode` against scapy's RoCE layer: every field and the ICRC
//! verdict of packets scapy builds (IPv4 and IPv6, non-zero DSCP/ECN/TTL/FECN/BECN), of
//! copies with every masked field changed (same ICRC, must verify), and of corrupted copies
//! (must fail).

#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;
use std::process::Command;

#[test]
fn decode_matches_scapy_field_by_field() {
    let dir = common::tmpdir("scapy_crosscheck");
    let pcap = dir.join("scapy.pcap");
    let exp = dir.join("expected.jsonl");
    let st = Command::new(common::scapy_python())
        .arg(common::test_file("scapy/gen_roce.py"))
        .args([&pcap, &exp])
        .status()
        .expect("run gen_roce.py");
    assert!(st.success(), "gen_roce.py failed");

    let (code, stdout, stderr) = common::rocelink(&["decode", "--json", pcap.to_str().unwrap()]);
    assert_eq!(
        code, 0,
        "ICRC failures must not fail without --strict: {stderr}"
    );
    assert!(
        stderr.contains("failed ICRC verification"),
        "failures are reported: {stderr}"
    );
    let got: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected: Vec<Value> = std::fs::read_to_string(&exp)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), expected.len());

    let (mut ok, mut bad, mut masked) = (0, 0, 0);
    for (g, e) in got.iter().zip(&expected) {
        let variant = e["variant"].as_str().unwrap();
        for (k, v) in e.as_object().unwrap() {
            if k == "variant" {
                continue;
            }
            assert!(
                contains(&g[k], v),
                "packet {} ({variant}): field {k}: rocelink {} vs scapy {}",
                e["index"],
                g[k],
                v
            );
        }
        match e.get("icrc_ok").and_then(Value::as_bool) {
            Some(true) => ok += 1,
            Some(false) => bad += 1,
            None => {}
        }
        if variant.ends_with("/masked") {
            masked += 1;
            // a masked variant keeps the original packet's ICRC value
            let orig = got
                .iter()
                .find(|x| x["index"] == g["index"].as_u64().unwrap() - 1)
                .unwrap();
            assert_eq!(g["icrc"], orig["icrc"], "{variant}");
        }
    }
    assert!(
        ok >= 30 && bad >= 30 && masked >= 15,
        "ok {ok} bad {bad} masked {masked}"
    );

    let (code, _, _) = common::rocelink(&["decode", "--strict", pcap.to_str().unwrap()]);
    assert_eq!(code, 1, "--strict exits 1 on ICRC failures");
}

/// `got` equals `want`, except that objects in `got` may have extra keys.
fn contains(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| contains(gv, v))),
        _ => got == want,
    }
}
