//! Cross-check `rocelink decode` field decoding against Wireshark's InfiniBand dissector
//! (tshark). tshark does not verify the ICRC, so only fields (and the trailer as tshark
//! displays it, byte-swapped) are compared.

#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;
use std::process::Command;

const FIELDS: &[&str] = &[
    "infiniband.bth.opcode",
    "infiniband.bth.se",
    "infiniband.bth.m",
    "infiniband.bth.padcnt",
    "infiniband.bth.p_key",
    "infiniband.bth.destqp",
    "infiniband.bth.a",
    "infiniband.bth.psn",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.immdt",
    "infiniband.ieth",
    "infiniband.atomicacketh.origremdt",
    "infiniband.atomiceth.swapdt",
    "infiniband.invariant.crc",
];

/// tshark prints numbers as decimal, `0x`-prefixed hex, or bare hex bytes (immdt, ieth).
fn num(s: &str, bare_hex: bool) -> Option<u64> {
    if s.is_empty() {
        None
    } else if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()
    } else if bare_hex {
        u64::from_str_radix(s, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// The capture scapy builds (`scapy/gen_roce.py`) in `dir`.
fn scapy_pcap(dir: &std::path::Path) -> std::path::PathBuf {
    let pcap = dir.join("scapy.pcap");
    let st = Command::new(common::scapy_python())
        .arg(common::test_file("scapy/gen_roce.py"))
        .args([&pcap, &dir.join("expected.jsonl")])
        .status()
        .expect("run gen_roce.py");
    assert!(st.success());
    pcap
}

#[test]
fn decode_matches_tshark() {
    if !common::need("tshark", "tshark") {
        return;
    }
    let dir = common::tmpdir("tshark_crosscheck");
    let pcap = scapy_pcap(&dir);
    // and a capture rocelink itself wrote
    let demo = dir.join("demo.pcap");
    let (code, _, err) = common::rocelink(&[
        "demo",
        "--device-ip",
        "127.0.64.2",
        "--frames",
        "2",
        "--pcap",
        demo.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");

    let mut compared = 0;
    for file in [&pcap, &demo] {
        let (code, ours, _) = common::rocelink(&["decode", "--json", file.to_str().unwrap()]);
        assert_eq!(code, 0);
        let ours: Vec<Value> = ours
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // RoCE that rocelink found on other ports (the HSB host's ephemeral data port):
        // Wireshark decodes it when told to
        let mut ports: Vec<u64> = ours
            .iter()
            .filter(|j| j["kind"] == "roce" && j["dst_port"] != 4791)
            .filter_map(|j| j["dst_port"].as_u64())
            .collect();
        ports.sort_unstable();
        ports.dedup();
        let mut cmd = Command::new("tshark");
        cmd.arg("-r")
            .arg(file)
            .args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
        for p in &ports {
            cmd.args(["-d", &format!("udp.port=={p},infiniband")]);
        }
        for f in FIELDS {
            cmd.args(["-e", f]);
        }
        let out = cmd.output().expect("run tshark");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows = String::from_utf8(out.stdout).unwrap();
        let rows: Vec<&str> = rows.lines().collect();
        assert_eq!(rows.len(), ours.len());
        for (row, j) in rows.iter().zip(&ours) {
            if j["kind"] != "roce" || j["opcode"] == 0x81 {
                continue; // tshark 4.0 does not know CNP
            }
            let c: Vec<&str> = row.split('|').collect();
            let at = |i: usize, bare: bool| num(c[i], bare);
            let u = |v: &Value| v.as_u64();
            let b = |v: &Value| v.as_bool().map(u64::from);
            let ctx = format!("{} packet {}", file.display(), j["index"]);
            assert_eq!(at(0, false), u(&j["opcode"]), "{ctx} opcode");
            assert_eq!(at(1, false), b(&j["se"]), "{ctx} se");
            assert_eq!(at(2, false), b(&j["migreq"]), "{ctx} migreq");
            assert_eq!(at(3, false), u(&j["pad_count"]), "{ctx} pad");
            assert_eq!(at(4, false), u(&j["pkey"]), "{ctx} pkey");
            assert_eq!(at(5, false), u(&j["dest_qp"]), "{ctx} qp");
            assert_eq!(at(6, false), b(&j["ack_req"]), "{ctx} ackreq");
            assert_eq!(at(7, false), u(&j["psn"]), "{ctx} psn");
            // Wireshark shows the AtomicETH VA and R_Key under the RETH fields
            let addr = if j["atomic_eth"].is_object() {
                &j["atomic_eth"]
            } else {
                &j["reth"]
            };
            assert_eq!(at(8, false), u(&addr["va"]), "{ctx} va");
            assert_eq!(at(9, false), u(&addr["rkey"]), "{ctx} rkey");
            assert_eq!(at(10, false), u(&j["reth"]["dma_len"]), "{ctx} dma_len");
            assert_eq!(at(11, false), u(&j["aeth"]["syndrome"]), "{ctx} syndrome");
            assert_eq!(at(12, false), u(&j["aeth"]["msn"]), "{ctx} msn");
            assert_eq!(at(13, false), u(&j["deth"]["qkey"]), "{ctx} qkey");
            assert_eq!(at(14, false), u(&j["deth"]["src_qp"]), "{ctx} src_qp");
            assert_eq!(at(15, true), u(&j["immdt"]), "{ctx} immdt");
            assert_eq!(at(16, true), u(&j["ieth"]), "{ctx} ieth");
            assert_eq!(at(17, false), u(&j["atomic_ack"]), "{ctx} atomic ack");
            assert_eq!(at(18, false), u(&j["atomic_eth"]["swap_add"]), "{ctx} swap");
            // tshark shows the trailer read big-endian; QP1 (MAD) packets get no ICRC item
            if let Some(shown) = at(19, false) {
                assert_eq!(
                    Some(u64::from((shown as u32).swap_bytes())),
                    u(&j["icrc"]),
                    "{ctx} icrc"
                );
            }
            compared += 1;
        }
        if file == &demo {
            // every data packet of two 1080p frames (~1 855 each) plus metadata
            assert!(
                compared > 3_000,
                "the demo capture's RoCE compared: {compared}"
            );
        }
    }
    assert!(compared > 60, "compared {compared}");
}

/// PFC frames: `decode` names each enabled class with its quanta, as Wireshark's MAC
/// control dissector reads the same frames (scapy's: a pause of two classes, a resume of
/// two others).
#[test]
fn decode_names_pfc_classes_and_quanta_as_tshark() {
    if !common::need("tshark", "tshark") {
        return;
    }
    let dir = common::tmpdir("tshark_pfc");
    let pcap = scapy_pcap(&dir);
    let (code, ours, _) = common::rocelink(&["decode", "--json", pcap.to_str().unwrap()]);
    assert_eq!(code, 0);
    let mut fields = vec!["macc.cbfc.enbv".to_owned()];
    fields.extend((0..8).map(|c| format!("macc.cbfc.pause_time.c{c}")));
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(&pcap)
        .args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
    for f in &fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let rows = String::from_utf8(out.stdout).unwrap();
    let mut seen = 0;
    for (row, line) in rows.lines().zip(ours.lines()) {
        let j: Value = serde_json::from_str(line).unwrap();
        if j["kind"] != "pfc" {
            continue;
        }
        seen += 1;
        let c: Vec<&str> = row.split('|').collect();
        let cev = num(c[0], false).unwrap();
        assert_eq!(Some(cev), j["pfc"]["class_enable"].as_u64(), "{row}");
        let classes = j["pfc"]["classes"].as_array().unwrap();
        assert_eq!(classes.len() as u32, cev.count_ones(), "{line}");
        for k in classes {
            let class = k["class"].as_u64().unwrap() as usize;
            assert_eq!(
                num(c[1 + class], false),
                k["quanta"].as_u64(),
                "{row} / {line}"
            );
            assert_eq!(k["pause"], k["quanta"].as_u64() != Some(0), "{line}");
        }
    }
    assert_eq!(seen, 2, "two PFC frames in the capture");
    // and the human form names them
    let (_, human, _) = common::rocelink(&["decode", pcap.to_str().unwrap()]);
    assert!(
        human.contains(
            "PFC: class 0 pause 65535 quanta (3355.4 µs at 10 Gbit/s), class 3 pause 4660 quanta"
        ),
        "{human}"
    );
    assert!(
        human.contains("PFC: class 2 resume, class 7 resume"),
        "{human}"
    );
}
