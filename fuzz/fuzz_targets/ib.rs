//! InfiniBand transport parsing: IB packet views, RoCE datagrams, ICRC, GRH slots.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rocelink_wire::ib::{IbPacket, IbRepr, grh};
use rocelink_wire::roce::RocePacket;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = IbPacket::new_checked(data) {
        let r = IbRepr::parse(&p);
        let _ = (p.payload(), p.pad(), p.icrc(), r.buffer_len());
        if let Some(a) = r.aeth {
            let _ = a.kind();
        }
        // emit what was parsed into a buffer of exactly the stated size: must not panic
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out, p.payload());
    }
    if let Ok(p) = RocePacket::parse(data) {
        let _ = p.icrc_check();
    }
    let _ = grh::parse(data);
});
