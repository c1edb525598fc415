//! `--view` (a live view of a running command in the browser) and `rocelink view DIR` (the
//! same page over a finished recording).

use crate::stats::{allowed, metrics_addr};
use anyhow::{Context, Result};
use rocelink_runtime::counters::Board;
use rocelink_view::picture::Render;
use rocelink_view::{Kind, Live};
use rocelink_web::{Limits, Server};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The live view's options.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct ViewArgs {
    /// Serve a live view in the browser at ADDR: a port (on 127.0.0.1), or IP:PORT. The
    /// page shows the latest good frame, the rates, losses and counters while the command
    /// runs; reach it over SSH with `ssh -L 8080:127.0.0.1:8080 HOST`. A wildcard address
    /// needs --view-public.
    #[arg(long, value_name = "ADDR", value_parser = metrics_addr)]
    pub(crate) view: Option<SocketAddr>,
    /// Let --view serve every interface (0.0.0.0 or ::).
    #[arg(long, requires = "view")]
    pub(crate) view_public: bool,
}

/// A live view being served; [`Viewing::end`] tells the pages the run is over.
#[derive(Debug)]
pub(crate) struct Viewing {
    live: Live,
    server: Server,
}

impl ViewArgs {
    /// Serve the view of `command` if asked (the address is checked and bound now: a taken
    /// port is an error before anything starts).
    pub(crate) fn start(
        &self,
        command: &str,
        kind: Kind,
        render: Option<Render>,
        board: &Board,
    ) -> Result<Option<Viewing>> {
        let Some(addr) = self.view else {
            return Ok(None);
        };
        allowed(addr, self.view_public, "--view")?;
        let live = Live::new(command, kind, render, Some(board.clone())).context("--view")?;
        let server = Server::start(
            addr,
            rocelink_view::live(live.clone()),
            Limits::default(),
            "view",
        )
        .context("--view")?;
        eprintln!("rocelink {command}: live view at http://{}/", server.addr());
        Ok(Some(Viewing { live, server }))
    }
}

/// The view of a camera stream from `sensor` (pictures when it is an image sensor).
pub(crate) fn camera(
    a: &ViewArgs,
    command: &str,
    sensor: Option<&rocelink_hsb::catalogue::SensorSpec>,
    frame_size: usize,
    board: &Board,
) -> Result<Option<Viewing>> {
    let header = rocelink_hsb_host::record_header(sensor, frame_size);
    a.start(
        command,
        Kind::Camera,
        rocelink_view::picture::for_header(&header),
        board,
    )
}

/// What the view's `end` event carries for a camera stream: the receiver's counts.
pub(crate) fn camera_summary<'a>(
    ports: impl Iterator<Item = (u64, &'a rocelink_hsb::host::receiver::ReceiverStats)>,
) -> serde_json::Value {
    let (mut frames, mut good, mut damaged, mut dropped, mut icrc) = (0, 0, 0, 0, 0);
    for (n, s) in ports {
        frames += n;
        good += s.good;
        damaged += s.damaged;
        dropped += s.dropped_packets;
        icrc += s.icrc_errors;
    }
    serde_json::json!({"frames": frames, "good": good, "damaged": damaged,
        "packets_dropped": dropped, "icrc_errors": icrc})
}

/// End the view of an HSB host session, if there is one, with its ports' counts.
pub(crate) fn end_session<S>(v: Option<Viewing>, sum: &rocelink_hsb_host::session::HostSummary<S>) {
    end(v, || {
        let done = sum
            .ports
            .iter()
            .filter_map(|p| Some((p.outcome.as_ref().ok()?.frames, &p.stats)));
        camera_summary(done)
    });
}

/// End the view if there is one (see [`Viewing::end`]).
pub(crate) fn end(v: Option<Viewing>, summary: impl FnOnce() -> serde_json::Value) {
    if let Some(v) = v {
        v.end(summary());
    }
}

impl Viewing {
    /// Where frames are published.
    pub(crate) fn live(&self) -> &Live {
        &self.live
    }

    /// The run is over: pages following it are sent `summary` (waiting up to two seconds
    /// for them), then the server stops.
    pub(crate) fn end(self, summary: serde_json::Value) {
        self.live.end(summary);
        self.live.flush(Duration::from_secs(2));
        drop(self.server);
    }
}

/// `rocelink view DIR`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  rocelink view rec                  # http://127.0.0.1:8080/\n  rocelink view rec --addr 9000\n  ssh -L 8080:127.0.0.1:8080 labhost   # then open http://127.0.0.1:8080/ here"
)]
pub(crate) struct ViewDirArgs {
    /// The recording's directory.
    dir: PathBuf,
    /// Where to serve the page: a port (on 127.0.0.1), or IP:PORT.
    #[arg(long, default_value = "8080", value_parser = metrics_addr)]
    addr: SocketAddr,
    /// Let --addr serve every interface (0.0.0.0 or ::).
    #[arg(long)]
    public: bool,
}

/// Serve a recording's page until Ctrl-C.
pub(crate) fn view_dir(a: &ViewDirArgs) -> Result<ExitCode> {
    // its errors name the directory
    let rec = rocelink_record::read::Recording::open(&a.dir)?;
    allowed(a.addr, a.public, "--addr")?;
    let stop = crate::stop::StopFlag::install()?;
    let frames = rec.len();
    let server = Server::start(
        a.addr,
        rocelink_view::recording(rec),
        Limits::default(),
        "view",
    )?;
    eprintln!(
        "rocelink view: {} ({frames} frames) at http://{}/ — Ctrl-C to stop",
        a.dir.display(),
        server.addr()
    );
    while !stop.is_set() {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(ExitCode::SUCCESS)
}
