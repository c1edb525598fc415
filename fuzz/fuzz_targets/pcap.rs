//! The capture-file reader (pcap and pcapng) followed by the decoder on every record.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rocelink_io::pcap::PcapReader;
use rocelink_wire::dissect::{Options, dissect};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = PcapReader::new(data) {
        for rec in r.take(64) {
            let Ok(rec) = rec else { break };
            if let Some((link, off)) = rec.network() {
                let _ = dissect(&rec.data[off..], link, &Options { hsb: true, ..Default::default() });
            }
        }
    }
});
