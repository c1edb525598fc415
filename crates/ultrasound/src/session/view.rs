//! A shots session's live view: [`serve`] it, publish each shot to it
//! ([`Publisher::shot`]), and end it with the session's counts ([`summary`]).

use super::shots::{ShotEvent, ShotsSummary};
use crate::shot::Geometry;
use rocelink_runtime::counters::Board;
use rocelink_view::{Kind, Live, Seen, Served};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Serve the view of `command`, shots of geometry `g` (each a picture, samples by
/// channels, when it has at least two of each), at `addr`, the counters on `board` shown.
pub fn serve(
    addr: SocketAddr,
    command: &str,
    g: &Geometry,
    board: Option<Board>,
) -> std::io::Result<Served> {
    let header = crate::sink::record_config(PathBuf::new(), g).header;
    let render = rocelink_view::picture::for_header(&header);
    Served::start(addr, command, Kind::Shots, render, board)
}

/// Publishes shots to a view, keeping each link's running count of missing messages.
#[derive(Debug, Default)]
pub struct Publisher {
    lost: Vec<u64>,
}

impl Publisher {
    /// One shot to `live`: its verdict, its link's messages missing so far, its samples
    /// when the event carries them.
    pub fn shot(&mut self, live: &Live, ev: &ShotEvent) {
        let (r, o) = (&ev.report, &ev.outcome);
        if self.lost.len() <= ev.link {
            self.lost.resize(ev.link + 1, 0);
        }
        self.lost[ev.link] += u64::from(r.missing);
        let seen = Seen {
            source: ev.link as u32,
            number: r.shot,
            good: r.complete && o.verified != Some(false),
            bytes: r.bytes as u64,
            packets_lost: self.lost[ev.link],
            icrc_errors: 0,
            data: ev.data.as_deref(),
        };
        // the shot as `shots --json` prints it
        live.frame(&seen, &|| serde_json::to_value(ev).unwrap_or_default());
    }
}

/// What the view's `end` event carries: the session's summary, serialised (as the CLI's
/// `--json` and Python's `stop()` give it).
pub fn summary(sum: &ShotsSummary) -> Value {
    serde_json::to_value(sum).unwrap_or_default()
}
