//! The whole decoder, as `rocelink decode --hsb` runs it, over Ethernet and raw-IP frames.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rocelink_wire::dissect::{LinkType, Options, dissect};
use rocelink_wire::hsb::metadata::{Endian, ImmLayout};

fuzz_target!(|data: &[u8]| {
    let sel = data.first().copied().unwrap_or(0);
    let opts = Options {
        hsb: sel & 1 == 0,
        metadata_endian: if sel & 2 == 0 { Endian::Big } else { Endian::Little },
        imm_layout: if sel & 4 == 0 { ImmLayout::Psn20Page12 } else { ImmLayout::Psn24Buf8 },
        roce_port: if sel & 16 == 0 { 0 } else { 40_000 },
        detect_roce: sel & 8 == 0,
    };
    let _ = dissect(data, LinkType::Ethernet, &opts);
    let _ = dissect(data, LinkType::RawIp, &opts);
});
