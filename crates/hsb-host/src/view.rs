//! [`ViewSink`]: a virtual port's frames published to a live view.

use crate::sink::Delivered;
use crate::{FrameSink, SessionError, frame_json};
use rocelink_view::{Live, Seen};

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
