//! Network counters of the commands that move packets: the options every such command
//! takes (`--metrics`, `--no-control`), the table printed at exit, and `rocelink stats`,
//! which reads a running process's counters from its control socket.

use anyhow::{Context, Result, bail};
use rocelink_runtime::control::{self, ControlSocket};
use rocelink_runtime::counters::{Board, Snapshot};
use rocelink_web::{Exposure, Limits, Server, check_addr};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of every command that moves packets.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct CounterArgs {
    /// Serve the network counters in Prometheus' text format over HTTP (GET /metrics) at
    /// ADDR: a port (on 127.0.0.1), or IP:PORT. A wildcard address (0.0.0.0, ::) needs
    /// --metrics-public; another interface's address is served with a warning.
    #[arg(long, value_name = "ADDR", value_parser = metrics_addr)]
    metrics: Option<SocketAddr>,
    /// Let --metrics serve every interface (0.0.0.0 or ::).
    #[arg(long, requires = "metrics")]
    metrics_public: bool,
    /// Do not open the control socket `rocelink stats PID` reads.
    #[arg(long)]
    no_control: bool,
}

/// `--metrics`, `--view`: `PORT` (on 127.0.0.1) or `IP:PORT`.
pub(crate) fn metrics_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| {
        format!("{s:?}: an HTTP address is PORT or IP:PORT (e.g. 9464, 127.0.0.1:9464)")
    })
}

/// Whether `flag`'s server may listen at `addr` (a wildcard only with `public`); a warning
/// printed for one interface's address.
pub(crate) fn allowed(addr: SocketAddr, public: bool, flag: &str) -> Result<()> {
    let exposure = if public {
        Exposure::Public
    } else {
        Exposure::Local
    };
    if let Some(warning) = check_addr(addr, exposure, flag).map_err(anyhow::Error::msg)? {
        eprintln!("rocelink: warning: {warning}");
    }
    Ok(())
}

/// A command's counters while it runs: the board its drivers publish to, and the control
/// socket and metrics endpoint serving it (both go with it).
#[derive(Debug)]
pub(crate) struct Counters {
    /// Where drivers publish.
    pub(crate) board: Board,
    _control: Option<ControlSocket>,
    _metrics: Option<Server>,
}

impl Counters {
    /// Start serving the counters of `command`. A metrics address that cannot be bound is
    /// an error (before anything else happens); a control socket that cannot be made is a
    /// note.
    pub(crate) fn start(command: &str, a: &CounterArgs) -> Result<Counters> {
        let board = Board::new(command);
        let metrics = match a.metrics {
            Some(addr) => {
                allowed(addr, a.metrics_public, "--metrics")?;
                let app = rocelink_web::metrics(board.clone());
                let server = Server::start(addr, app, Limits::default(), "metrics")?;
                eprintln!("rocelink: metrics at http://{}/metrics", server.addr());
                Some(server)
            }
            None => None,
        };
        let control = if a.no_control {
            None
        } else {
            match ControlSocket::serve(board.clone(), &control::socket_path(std::process::id())) {
                Ok(c) => Some(c),
                Err(e) => {
                    eprintln!("rocelink: note: no control socket (rocelink stats): {e}");
                    None
                }
            }
        };
        Ok(Counters {
            board,
            _control: control,
            _metrics: metrics,
        })
    }

    /// A board nobody serves (tests, library-style callers).
    #[allow(dead_code)]
    pub(crate) fn unserved(command: &str) -> Counters {
        Counters {
            board: Board::new(command),
            _control: None,
            _metrics: None,
        }
    }

    /// At exit: `link`'s final counters on the board, one line of those that moved on
    /// stderr (unless `quiet`), and the snapshot for a JSON summary.
    pub(crate) fn finish(
        &self,
        command: &str,
        link: rocelink_runtime::counters::Link,
        quiet: bool,
    ) -> Snapshot {
        self.board.set_link(link);
        self.summary(command, quiet)
    }

    /// At exit, once every link was set: [`Counters::finish`] without a link.
    pub(crate) fn summary(&self, command: &str, quiet: bool) -> Snapshot {
        let s = self.board.snapshot();
        if !quiet {
            eprintln!("rocelink {command}: counters: {}", s.line());
        }
        s
    }

    /// Print the counters at exit: the table on stderr, or one JSON line on stdout with
    /// `json`; nothing when `quiet`.
    pub(crate) fn print(&self, json: bool, quiet: bool) {
        print_snapshot(&self.board.snapshot(), json, quiet);
    }
}

/// The counters on stderr as Coyote's table, or as a `{"counters": …}` JSON line on stdout.
pub(crate) fn print_snapshot(s: &Snapshot, json: bool, quiet: bool) {
    if json {
        println!("{}", serde_json::json!({ "counters": s }));
    } else if !quiet {
        eprint!("{}", s.table());
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct StatsArgs {
    /// A process id, or the path of a control socket; without it, every rocelink process
    /// of this user.
    target: Option<String>,
    /// Print JSON (one object per process).
    #[arg(long, conflicts_with = "prometheus")]
    json: bool,
    /// Print Prometheus' text format.
    #[arg(long)]
    prometheus: bool,
    /// Print again every SECS seconds until Ctrl-C: the first time the whole table, then
    /// only the counters that moved, each with its rate per second.
    #[arg(long, value_name = "SECS", value_parser = crate::args::secs)]
    watch: Option<Duration>,
}

/// The control socket a `PID` or a socket path names.
fn target(t: &str) -> Result<PathBuf> {
    let Ok(pid) = t.parse::<u32>() else {
        return Ok(PathBuf::from(t));
    };
    let p = control::socket_path(pid);
    if !p.exists() {
        bail!(
            "process {pid} has no control socket at {} (not a rocelink command that moves packets, started with --no-control, or gone)",
            p.display()
        );
    }
    Ok(p)
}

/// Every running rocelink process's control socket (the stale ones removed).
fn live_targets() -> Result<Vec<PathBuf>> {
    let mut live = Vec::new();
    for (pid, p) in control::list() {
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            live.push(p);
        } else {
            // left by a process killed before it could remove it
            let _ = std::fs::remove_file(&p);
        }
    }
    if live.is_empty() {
        bail!(
            "no running rocelink process has a control socket in {}",
            control::socket_dir().display()
        );
    }
    Ok(live)
}

/// `rocelink stats [PID|SOCKET]`.
pub(crate) fn stats(a: &StatsArgs, stop: &crate::stop::StopFlag) -> Result<ExitCode> {
    let targets = match &a.target {
        Some(t) => vec![target(t)?],
        None => live_targets()?,
    };
    let mut before: Vec<Option<(Snapshot, std::time::Instant)>> = vec![None; targets.len()];
    loop {
        for (p, was) in targets.iter().zip(before.iter_mut()) {
            let s = control::query(p).with_context(|| "cannot read the counters")?;
            let at = std::time::Instant::now();
            if a.json {
                println!("{}", serde_json::to_string(&s)?);
            } else if a.prometheus {
                print!("{}", s.prometheus());
            } else {
                match was {
                    Some((b, then)) => print!("{}", s.changes(b, at - *then)),
                    None => print!("{}", s.table()),
                }
            }
            *was = Some((s, at));
        }
        let Some(every) = a.watch else {
            return Ok(ExitCode::SUCCESS);
        };
        let until = std::time::Instant::now() + every;
        while std::time::Instant::now() < until {
            if stop.is_set() {
                return Ok(ExitCode::SUCCESS);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !a.json && !a.prometheus {
            println!();
        }
    }
}
