//! `rocelink bench perf`: one of perftest's six tests, both ends over loopback, run by run
//! next to the UDP figure it is bounded by, measured in the same run — bandwidth against the
//! UDP ceilings (`sendmmsg` → `recvmmsg`, and GSO → GRO), latency against a bare UDP
//! ping-pong of the same datagram (one way; the round trip for `read_lat`, whose figure
//! perftest does not halve). The ends are two `rocelink perf` processes, as a user runs
//! them, or two threads of this process running the same code.
//!
//! A ratio is rocelink's figure over the baseline's of the same run (the machine's fast and
//! slow periods move both), then the median over the runs: above 1 is better for
//! bandwidth, worse for latency.

use crate::Spread;
use crate::baseline::{udp_ceiling, udp_pingpong};
use rocelink_perftest::perf::lines::Line;
use rocelink_perftest::perf::{Kind, LatStats, PerfConfig, PerfError, Verb, headline, loopback};
use rocelink_runtime::Stopper;
use std::io::{self, BufRead as _, Read as _};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

/// Where a run's two ends run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ends {
    /// Two threads of this process.
    Threads,
    /// Two processes of the `rocelink` program at `exe`: `rocelink perf` as server, then as
    /// client, exchanging keys over TCP `port`.
    Processes {
        /// The `rocelink` program.
        exe: PathBuf,
        /// The exchange's TCP port on the server's address.
        port: u16,
    },
}

/// What to measure: plain data.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The test, with its one message size (`sizes[0]`), iterations and queue depth.
    pub cfg: PerfConfig,
    /// Runs, each with its own baseline.
    pub runs: usize,
    /// Server and client addresses (RoCE port 4791 on each).
    pub ips: (IpAddr, IpAddr),
    /// Pin the server to CPU 0 and the client to CPU 1 (and the baselines' ends likewise).
    pub pin: bool,
    /// Where the ends run.
    pub ends: Ends,
}

/// What the runs measured, each figure per run in run order: perftest's MiB/s (average)
/// for bandwidth, µs (t_typical) for latency.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rounds {
    /// rocelink's figure.
    pub mine: Vec<f64>,
    /// The plain UDP baseline (`sendmmsg` → `recvmmsg`; the ping-pong for latency).
    pub udp: Vec<f64>,
    /// The GSO+GRO ceiling (bandwidth only; empty for latency).
    pub offload: Vec<f64>,
}

impl Rounds {
    /// Runs completed.
    pub fn len(&self) -> usize {
        self.mine.len()
    }

    /// None completed.
    pub fn is_empty(&self) -> bool {
        self.mine.is_empty()
    }

    /// The medians of rocelink's figure, the UDP one and (bandwidth) the GSO+GRO one.
    pub fn medians(&self) -> (f64, f64, Option<f64>) {
        let m = |v: &[f64]| crate::median(v.iter().copied());
        (
            m(&self.mine),
            m(&self.udp),
            (!self.offload.is_empty()).then(|| m(&self.offload)),
        )
    }

    /// rocelink's figure over `against`'s ([`Rounds::udp`] or [`Rounds::offload`]) run by
    /// run — each ratio between figures of the same minute — as a median and range.
    pub fn ratio(&self, against: &[f64]) -> Spread {
        let v: Vec<f64> = self
            .mine
            .iter()
            .zip(against)
            .filter(|&(_, &b)| b > 0.0)
            .map(|(m, b)| m / b)
            .collect();
        Spread::of(&v)
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchPerfError {
    /// The test on two threads failed.
    #[error("perf {test} over loopback")]
    Threads {
        /// The test's name.
        test: &'static str,
        /// Why.
        #[source]
        source: PerfError,
    },
    /// The test ran but reported no figure.
    #[error("perf {test}: no result")]
    NoResult {
        /// The test's name.
        test: &'static str,
    },
    /// A `rocelink perf` process could not be started or read.
    #[error("perf {test} as two processes: {what}")]
    Spawn {
        /// The test's name.
        test: &'static str,
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// A `rocelink perf` process failed: which, and its own error line.
    #[error("perf {test} as two processes: {end}: {why}")]
    End {
        /// The test's name.
        test: &'static str,
        /// "server" or "client", with its exit status where it has one.
        end: String,
        /// Its error line (or what it printed).
        why: String,
    },
    /// A UDP baseline failed.
    #[error("the UDP baseline")]
    Baseline(#[source] Box<crate::BenchError>),
}

impl BenchPerfError {
    /// Whether it failed because an address and port were taken (by another program, say):
    /// on two threads, the typed error's I/O kind (`AddrInUse`); from a `rocelink perf`
    /// process, its error line (a process hands back only text and a status).
    pub fn address_in_use(&self) -> bool {
        match self {
            BenchPerfError::End { why, .. } => why.contains("in use"),
            // an I/O error is transparent in PerfError: not among its sources
            BenchPerfError::Threads {
                source: PerfError::Io(e),
                ..
            } => e.kind() == io::ErrorKind::AddrInUse,
            _ => false,
        }
    }
}

/// Measure `plan`: its runs, each rocelink's figure next to its baselines. `stop` is looked
/// at after each run (and by a run on two threads): once set, the runs completed are
/// returned.
pub fn measure(plan: &Plan, stop: &Stopper) -> Result<Rounds, BenchPerfError> {
    let cfg = &plan.cfg;
    let test = cfg.test.name();
    let mut r = Rounds::default();
    for _ in 0..plan.runs {
        let mine = match &plan.ends {
            Ends::Threads => {
                let (c, _) = loopback(cfg, plan.ips, plan.pin, stop)
                    .map_err(|source| BenchPerfError::Threads { test, source })?;
                headline(&c).ok_or(BenchPerfError::NoResult { test })?
            }
            Ends::Processes { exe, port } => two_processes(plan, exe, *port)?,
        };
        if cfg.test.kind == Kind::Bw {
            // perftest's MiB/s; the UDP ceilings come in MB/s
            let mib = |mb: f64| mb * 1e6 / (1 << 20) as f64;
            let ceiling = |gso_gro| {
                udp_ceiling(plan.pin, Duration::from_secs(2), gso_gro)
                    .map(|c| mib(c.0))
                    .map_err(|e| BenchPerfError::Baseline(Box::new(e)))
            };
            r.udp.push(ceiling(false)?);
            r.offload.push(ceiling(true)?);
        } else {
            let s = udp_pingpong(lat_datagram(cfg), cfg.iters as usize, plan.pin)
                .map_err(|e| BenchPerfError::Baseline(Box::new(e)))?;
            // perftest halves WRITE and SEND round trips but reports a READ's whole (one
            // request, one response): hold it against the UDP round trip
            let k = if cfg.test.verb == Verb::Read {
                2.0
            } else {
                1.0
            };
            r.udp.push(k * LatStats::from_samples(s).t_typical);
        }
        // a run counts once all its figures are in
        r.mine.push(mine);
        if stop.is_stopped() {
            break;
        }
    }
    Ok(r)
}

/// One run of `plan`'s ends alone (no baseline): the client's figure.
pub(crate) fn one_run(plan: &Plan) -> Result<f64, BenchPerfError> {
    let test = plan.cfg.test.name();
    match &plan.ends {
        Ends::Processes { exe, port } => two_processes(plan, exe, *port),
        Ends::Threads => {
            let (c, _) = loopback(&plan.cfg, plan.ips, plan.pin, &Stopper::new())
                .map_err(|source| BenchPerfError::Threads { test, source })?;
            headline(&c).ok_or(BenchPerfError::NoResult { test })
        }
    }
}

/// The test's message size (its one size).
fn size(cfg: &PerfConfig) -> usize {
    cfg.sizes.first().copied().unwrap_or(2)
}

/// The datagram a latency test's message makes: BTH, RETH (WRITE and READ; a SEND's DETH
/// over UD is not run here), the payload, the ICRC.
fn lat_datagram(cfg: &PerfConfig) -> usize {
    size(cfg) + 12 + 16 + 4
}

/// The arguments both ends of `plan` take.
fn common_args(plan: &Plan, port: u16) -> Vec<String> {
    let cfg = &plan.cfg;
    let mut v: Vec<String> = vec![
        "perf".into(),
        cfg.test.name().into(),
        "-p".into(),
        port.to_string(),
        "-s".into(),
        size(cfg).to_string(),
        "-n".into(),
        cfg.iters.to_string(),
        "--timeout".into(),
        "30".into(),
        "--no-control".into(),
    ];
    if cfg.test.kind == Kind::Bw {
        v.extend(["-t".into(), cfg.tx_depth.to_string()]);
    }
    v
}

/// One run between a `rocelink perf` server and client, each its own process (pinned to
/// CPUs 0 and 1 if asked): the client's headline figure.
fn two_processes(plan: &Plan, exe: &Path, port: u16) -> Result<f64, BenchPerfError> {
    let test = plan.cfg.test.name();
    let spawn = |what| spawn_failed(test, what);
    let (server, client) = (plan.ips.0.to_string(), plan.ips.1.to_string());
    let mut sc = Command::new(exe);
    sc.args(common_args(plan, port)).args(["--bind", &server]);
    let (mut srv, mut out) = start_server(test, sc)?;
    if plan.pin {
        let _ = rocelink_io::cpu::pin_process(srv.id(), 0);
    }
    let cli = Command::new(exe)
        .args(common_args(plan, port))
        .args([&server, "--bind", &client, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn("starting the client"))?;
    if plan.pin {
        let _ = rocelink_io::cpu::pin_process(cli.id(), 1);
    }
    let cout = cli
        .wait_with_output()
        .map_err(spawn("waiting for the client"))?;
    // the server's rest, so it never blocks on a full pipe
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    let mut err = String::new();
    if let Some(mut e) = srv.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let st = srv.wait().map_err(spawn("waiting for the server"))?;
    // a server that failed is the culprit (a port another program holds: the client then
    // only sees its connection reset)
    if !st.success() {
        return Err(BenchPerfError::End {
            test,
            end: format!("server {st}"),
            why: culprit(&err).unwrap_or(rest.trim()).into(),
        });
    }
    if !cout.status.success() {
        let e = String::from_utf8_lossy(&cout.stderr);
        return Err(BenchPerfError::End {
            test,
            end: "client".into(),
            why: culprit(&e).unwrap_or(e.trim()).into(),
        });
    }
    figure_of(&cout.stdout, plan.cfg.test.kind).ok_or_else(|| BenchPerfError::End {
        test,
        end: "client".into(),
        why: format!(
            "no figure in its output: {}",
            String::from_utf8_lossy(&cout.stdout).trim()
        ),
    })
}

/// What a failed `what` (starting, reading or waiting for an end) of a run of `test` is.
fn spawn_failed(
    test: &'static str,
    what: &'static str,
) -> impl FnOnce(io::Error) -> BenchPerfError {
    move |source| BenchPerfError::Spawn { test, what, source }
}

/// A `rocelink perf` server, returned once it says it listens, with the rest of its
/// output to read.
fn start_server(
    test: &'static str,
    mut sc: Command,
) -> Result<(Child, io::BufReader<ChildStdout>), BenchPerfError> {
    let spawn = |what| spawn_failed(test, what);
    let mut srv = sc
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn("starting the server"))?;
    let stdout = srv.stdout.take().ok_or_else(|| BenchPerfError::Spawn {
        test,
        what: "reading the server",
        // Error::other: stdout was piped above, so this cannot happen; nothing typed to say
        source: io::Error::other("no output pipe"),
    })?;
    let mut out = io::BufReader::new(stdout);
    let mut text = String::new();
    while !text.contains("Waiting for client") {
        if out
            .read_line(&mut text)
            .map_err(spawn("reading the server"))?
            == 0
        {
            let mut err = String::new();
            if let Some(mut e) = srv.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let st = srv.wait().map_err(spawn("waiting for the server"))?;
            return Err(BenchPerfError::End {
                test,
                end: format!("server {st}"),
                why: culprit(&err).unwrap_or(text.trim()).into(),
            });
        }
    }
    Ok((srv, out))
}

/// The error line of a `rocelink` that failed, out of everything it wrote to stderr (its
/// counters come first).
fn culprit(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("rocelink:"))
        .map(|l| l.trim_start_matches("rocelink: error: ").trim())
}

/// The figure of the client's first JSON row: average bandwidth or typical latency (a
/// row of the other kind is none).
fn figure_of(stdout: &[u8], kind: Kind) -> Option<f64> {
    let line: Line = serde_json::from_slice(stdout.split(|&b| b == b'\n').next()?).ok()?;
    match (&line, kind) {
        (Line::Bw(_), Kind::Bw) | (Line::Lat(_), Kind::Lat) => Some(line.headline()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_taken_address_is_known_by_its_error_kind_not_its_text() {
        let threads = |kind, text: &str| BenchPerfError::Threads {
            test: "write_bw",
            source: PerfError::Io(io::Error::new(kind, text.to_string())),
        };
        assert!(threads(io::ErrorKind::AddrInUse, "cannot bind 127.0.0.1:4791").address_in_use());
        assert!(!threads(io::ErrorKind::Other, "something in use").address_in_use());
    }

    use super::*;

    #[test]
    fn ratios_are_taken_run_by_run() {
        // run 2 is a slow minute for both: its ratio is what counts, not the medians'
        let r = Rounds {
            mine: vec![100.0, 50.0, 90.0],
            udp: vec![200.0, 60.0, 120.0],
            offload: vec![400.0, 100.0, 150.0],
        };
        let s = r.ratio(&r.udp);
        assert_eq!((s.min, s.median, s.max), (0.5, 0.75, 50.0 / 60.0));
        assert_eq!(r.ratio(&r.offload).median, 0.5);
        // the medians' ratio would have said 90 / 120 = 0.75 against the ceiling's 150
        assert_eq!(r.medians(), (90.0, 120.0, Some(150.0)));
        // a baseline that measured nothing gives no ratio
        let z = Rounds {
            mine: vec![1.0, 2.0],
            udp: vec![0.0, 4.0],
            offload: vec![],
        };
        assert_eq!(z.ratio(&z.udp).median, 0.5);
        assert_eq!(z.medians().2, None);
    }

    #[test]
    fn both_ends_get_the_tests_settings() {
        let mut cfg = PerfConfig::new(rocelink_perftest::perf::Test::ALL[0]);
        cfg.sizes = vec![4096];
        cfg.iters = 77;
        cfg.tx_depth = 64;
        let plan = Plan {
            cfg,
            runs: 1,
            ips: ([127, 0, 0, 1].into(), [127, 0, 0, 2].into()),
            pin: false,
            ends: Ends::Threads,
        };
        let a = common_args(&plan, 19000).join(" ");
        assert_eq!(
            a,
            "perf write_bw -p 19000 -s 4096 -n 77 --timeout 30 --no-control -t 64"
        );
    }

    #[test]
    fn the_culprit_is_the_last_error_line() {
        let err = "counters: RX 0\nrocelink: error: cannot bind RoCE UDP socket 127.0.0.1:4791: Address in use\n";
        assert_eq!(
            culprit(err),
            Some("cannot bind RoCE UDP socket 127.0.0.1:4791: Address in use")
        );
        assert_eq!(culprit("nothing"), None);
    }

    #[test]
    fn the_figure_is_the_first_rows_headline_of_the_tests_kind() {
        use rocelink_perftest::perf::lines::LatLine;
        use rocelink_perftest::perf::{LatRow, LatStats};
        let row = LatRow {
            bytes: 2,
            iters: 100,
            stats: LatStats::from_samples(vec![5.5, 7.0, 4.0]),
        };
        let mut out = serde_json::to_vec(&LatLine::new(&row)).unwrap();
        out.extend_from_slice(b"\n{}");
        assert_eq!(figure_of(&out, Kind::Lat), Some(5.5));
        // a latency row is no bandwidth figure; nor is a partial row either
        assert_eq!(figure_of(&out, Kind::Bw), None);
        assert_eq!(figure_of(b"{\"t_typical\": 5.5}", Kind::Lat), None);
    }
}
