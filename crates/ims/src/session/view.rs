//! A buffer unit's live view: [`serve`] it, publish each consumed frame to it
//! ([`publish`]), and end it with the unit's counts ([`summary`]).

use super::unit::{FrameEvent, UnitSummary};
use rocelink_runtime::counters::Board;
use rocelink_view::{Kind, Live, Seen, Served};
use serde_json::{Value, json};
use std::net::SocketAddr;

/// Serve the view of `command` (a buffer unit: §4 images as pictures, other frames as
/// bytes) at `addr`, the counters on `board` shown.
pub fn serve(addr: SocketAddr, command: &str, board: Option<Board>) -> std::io::Result<Served> {
    let render = Some(rocelink_view::picture::ims_any());
    Served::start(addr, command, Kind::Ims, render, board)
}

/// The `n`th consumed frame to `live`: its verdict, and its bytes when the event carries
/// them.
pub fn publish(live: &Live, n: u64, ev: &FrameEvent) {
    let seen = Seen {
        source: ev.worker.1,
        number: n,
        good: ev.intact,
        bytes: ev.len as u64,
        packets_lost: 0,
        icrc_errors: 0,
        data: ev.data.as_deref(),
    };
    live.frame(&seen, &|| {
        json!({"frame": n, "worker_qpn": ev.worker.1, "va": ev.va, "bytes": ev.len, "intact": ev.intact})
    });
}

/// What the view's `end` event carries: the unit's summary, serialised (as the CLI's
/// `--json` and Python's `stop()` give it).
pub fn summary(sum: &UnitSummary) -> Value {
    serde_json::to_value(sum).unwrap_or_default()
}
