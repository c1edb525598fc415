//! A live view being served: the [`Live`] a session publishes into and the web server that
//! shows it, as one value for whoever runs the session (the CLI's `--view`, Python's
//! `view=`).

use crate::live::{Kind, Live};
use crate::picture::Render;
use rocelink_runtime::counters::Board;
use rocelink_web::{Limits, Server};
use serde_json::Value;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// How long [`Served::end`] waits for the pages following the run to be sent its end.
const END_GRACE: Duration = Duration::from_secs(2);

/// A live view of `command`, served over HTTP; [`Served::end`] tells the pages the run is
/// over.
#[derive(Debug)]
pub struct Served {
    live: Live,
    server: Server,
}

impl Served {
    /// Serve the view of `command` streaming `kind` at `addr` (bound before this returns: a
    /// taken port is an error before anything starts), pictures made by `render`, the
    /// counters on `board` shown. Which addresses may be served is the caller's to decide.
    pub fn start(
        addr: SocketAddr,
        command: &str,
        kind: Kind,
        render: Option<Render>,
        board: Option<Board>,
    ) -> io::Result<Served> {
        let live = Live::new(command, kind, render, board)?;
        let server = Server::start(addr, crate::live(live.clone()), Limits::default(), "view")?;
        Ok(Served { live, server })
    }

    /// Where frames are published.
    pub fn live(&self) -> &Live {
        &self.live
    }

    /// The address served (the port chosen when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The run is over: the pages following it are sent `summary` (waiting up to two
    /// seconds for them), then the server stops.
    pub fn end(self, summary: Value) {
        self.live.end(summary);
        self.live.flush(END_GRACE);
        drop(self.server);
    }
}
