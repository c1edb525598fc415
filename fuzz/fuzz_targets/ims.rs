//! IMS formats: status packets, ACK/NACK packets, image mappings.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rocelink_wire::ims::{self, ImageGeometry, PixelDepth};

fuzz_target!(|data: &[u8]| {
    let _ = ims::StatusRepr::parse(data);
    if let Ok(a) = ims::AckRepr::parse(data) {
        let _ = (a.events.names().count(), a.events.action());
    }
    if data.len() >= 2 {
        let geom = ImageGeometry { columns: usize::from(data[0] % 17), rows: usize::from(data[1] % 33) };
        for depth in [PixelDepth::Four, PixelDepth::Six] {
            let _ = ims::image::decode(&data[2..], geom, depth);
        }
    }
});
