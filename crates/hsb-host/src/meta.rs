//! A frame report in the forms the sinks need: the recorder's metadata, a JSON object, a
//! text line; and a recording's header for a sensor.

use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb::host::receiver::FrameReport;
use rocelink_record::FrameMeta;
use rocelink_record::format::Header;
use serde_json::json;

/// Stream parameters of a recording made from `sensor` (`None`: unknown bytes).
pub fn record_header(sensor: Option<&SensorSpec>, frame_size: usize) -> Header {
    let mut h = Header {
        sensor: sensor.map_or("unknown".to_string(), |s| s.to_string()),
        frame_size: frame_size as u64,
        layout: "bytes".into(),
        ..Default::default()
    };
    if let Some(g) = sensor.and_then(SensorSpec::image) {
        h.layout = g.layout.into();
        (h.width, h.height, h.bits) = (g.width, g.height, g.bits);
        h.start_byte = g.start_byte;
        h.bytes_per_line = g.bytes_per_line;
    }
    h
}

/// The recorder's per-frame metadata from a frame report.
pub fn frame_meta(f: &FrameReport) -> FrameMeta {
    FrameMeta {
        frame_number: f.frame_number,
        good: f.good(),
        complete: f.complete,
        crc_ok: f.crc_ok == Some(true),
        crc_present: f.crc_ok.is_some(),
        crc: f.crc_expected.unwrap_or(f.crc),
        flags: f.flags,
        dropped_packets: f.dropped_packets,
        sof: f.sof,
        meta: f.meta,
        packets: f.packets,
        page: f.page,
        ..Default::default()
    }
}

/// A frame report as one JSON object (the keys `receive --json` prints).
pub fn frame_json(f: &FrameReport) -> serde_json::Value {
    json!({"frame_number": f.frame_number, "bytes": f.bytes, "bytes_expected": f.bytes_expected, "crc": f.crc,
           "crc_expected": f.crc_expected, "crc_ok": f.crc_ok, "psn": f.psn, "page": f.page, "packets": f.packets,
           "dropped_packets": f.dropped_packets, "flags": f.flags, "sof_s": f.sof.0, "sof_ns": f.sof.1,
           "meta_s": f.meta.0, "meta_ns": f.meta.1, "complete": f.complete, "good": f.good()})
}

/// A frame report as one text line.
pub fn frame_line(f: &FrameReport) -> String {
    format!(
        "frame {:>6} page {:>3} {:>9} bytes {:>5} packets crc {:#010x} {} dropped {} flags {:#x} -> {}",
        f.frame_number,
        f.page,
        f.bytes,
        f.packets,
        f.crc,
        match f.crc_ok {
            Some(true) => "ok",
            Some(false) => "MISMATCH",
            None => "n/a",
        },
        f.dropped_packets,
        f.flags,
        if f.good() { "good" } else { "DAMAGED" }
    )
}
