//! `--view` (a live view of a running command in the browser) and `rocelink view DIR` (the
//! same page over a finished recording).

use crate::stats::{allowed, metrics_addr};
use anyhow::{Context, Result};
use rocelink_runtime::counters::Board;
use rocelink_view::Served;
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

impl ViewArgs {
    /// Serve the view `serve` makes at the address asked for, if one was (checked against
    /// --view-public, and bound now: a taken port is an error before anything starts).
    pub(crate) fn start(
        &self,
        command: &str,
        serve: impl FnOnce(SocketAddr) -> std::io::Result<Served>,
    ) -> Result<Option<Served>> {
        let Some(addr) = self.view else {
            return Ok(None);
        };
        allowed(addr, self.view_public, "--view")?;
        let served = serve(addr).context("--view")?;
        eprintln!("rocelink {command}: live view at http://{}/", served.addr());
        Ok(Some(served))
    }
}

/// The view of a camera stream from `sensor` (pictures when it is an image sensor).
pub(crate) fn camera(
    a: &ViewArgs,
    command: &str,
    sensor: Option<&rocelink_hsb::catalogue::SensorSpec>,
    frame_size: usize,
    board: &Board,
) -> Result<Option<Served>> {
    a.start(command, |addr| {
        rocelink_hsb_host::view::serve(addr, command, sensor, frame_size, Some(board.clone()))
    })
}

/// End the view of an HSB host session, if there is one, with its ports' counts.
pub(crate) fn end_session<S>(v: Option<Served>, sum: &rocelink_hsb_host::session::HostSummary<S>) {
    end(v, || rocelink_hsb_host::view::summary(sum));
}

/// End the view if there is one (see [`Served::end`]).
pub(crate) fn end(v: Option<Served>, summary: impl FnOnce() -> serde_json::Value) {
    if let Some(v) = v {
        v.end(summary());
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
