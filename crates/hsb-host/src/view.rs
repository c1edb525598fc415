//! A camera stream's live view: [`serve`] it, publish each virtual port's frames to it
//! ([`ViewSink`]), and end it with the ports' counts ([`summary`]).

use crate::session::HostSummary;
use crate::sink::Delivered;
use crate::{FrameSink, SessionError, frame_json, record_header};
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_runtime::counters::Board;
use rocelink_view::{Kind, Live, Seen, Served};
use serde_json::Value;
use std::net::SocketAddr;

/// Serve the view of `command`, a camera stream from `sensor` (pictures when it is an
/// image sensor) of `frame_size`-byte frames, at `addr`, the counters on `board` shown.
pub fn serve(
    addr: SocketAddr,
    command: &str,
    sensor: Option<&SensorSpec>,
    frame_size: usize,
    board: Option<Board>,
) -> std::io::Result<Served> {
    let header = record_header(sensor, frame_size);
    let render = rocelink_view::picture::for_header(&header);
    Served::start(addr, command, Kind::Camera, render, board)
}

/// What the view's `end` event carries for a camera stream: the session's summary,
/// serialised (as Python's `Receiver.stop()` gives it).
pub fn summary<S>(sum: &HostSummary<S>) -> Value {
    serde_json::to_value(sum).unwrap_or_default()
}

/// Publishes each frame of virtual port `vp` to a [`Live`] view: its verdict always, its
/// bytes for a picture when the view wants one (the view copies them at most a few times a
/// second and declines at once while its encoder is busy).
#[derive(Debug, Clone)]
pub struct ViewSink {
    live: Live,
    vp: u32,
}

impl ViewSink {
    /// The frames of virtual port `vp` to `live`.
    pub fn new(live: Live, vp: u32) -> ViewSink {
        ViewSink { live, vp }
    }
}

impl FrameSink for ViewSink {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        let f = d.report;
        let seen = Seen {
            source: self.vp,
            number: f.frame_number,
            good: f.good(),
            bytes: f.bytes,
            packets_lost: d.stats.dropped_packets,
            icrc_errors: d.stats.icrc_errors,
            data: Some(d.data),
        };
        let vp = self.vp;
        self.live.frame(&seen, &|| {
            let mut j = frame_json(f);
            if let Some(o) = j.as_object_mut() {
                o.insert("vp".into(), vp.into());
            }
            j
        });
        Ok(())
    }
}
