//! HSB formats: ECB requests and responses, BOOTP, metadata, async events.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rocelink_wire::hsb::{bootp, ecb, event, metadata};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = ecb::Request::new_checked(data) {
        let _ = (r.command().name(), r.length_is_exact(), r.ops().count(), r.op(usize::MAX / 8));
    }
    if let Ok(r) = ecb::Response::new_checked(data) {
        let _ = (r.status().to_string(), r.latched_sequence(), r.trailer());
        for i in 0..r.op_count() + 1 {
            let _ = r.op(i);
        }
    }
    if let Ok(p) = bootp::Packet::new_checked(data) {
        if let Ok(e) = bootp::EnumerationRepr::parse(&p) {
            let _ = (e.vendor.uuid_string(), e.vendor.serial_string());
        }
        let _ = bootp::SetIpRepr::parse(&p);
    }
    let _ = metadata::Metadata::parse(data, metadata::Endian::Big);
    let _ = metadata::Metadata::parse(data, metadata::Endian::Little);
    let _ = event::EventRepr::parse(data);
});
