//! `rocelink bench verbs`: perftest's own binaries over `librocelink_verbs.so` against
//! `rocelink perf` running the same test, run by run in the same minute (the machine's fast
//! and slow periods move both), and what the library's progress thread costs while its
//! program waits.
//!
//! A ratio is the library's figure over `rocelink perf`'s of the same run, then the median
//! over the runs: for bandwidth above 1 is better, for latency worse.

use crate::Spread;
use crate::perf::{BenchPerfError, Ends, Plan};
use rocelink_perftest::perf::{Kind, PerfConfig};
use rocelink_runtime::Stopper;
use std::io::{self, Read as _};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What to measure: plain data.
#[derive(Debug, Clone)]
pub struct VerbsPlan {
    /// The test, its one message size, iterations and queue depth (as `rocelink perf`
    /// takes them; perftest gets the same).
    pub cfg: PerfConfig,
    /// Runs.
    pub runs: usize,
    /// Server and client addresses.
    pub ips: (IpAddr, IpAddr),
    /// Pin each server to CPU 0 and each client to CPU 1 (a program's progress thread
    /// shares its CPU).
    pub pin: bool,
    /// The `rocelink` program.
    pub rocelink: PathBuf,
    /// `librocelink_verbs.so`.
    pub library: PathBuf,
    /// The exchange's TCP port.
    pub port: u16,
}

/// Figures per run, in run order: MiB/s (average) for bandwidth, µs (t_typical) for
/// latency.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VerbsRounds {
    /// `rocelink perf`'s.
    pub rocelink: Vec<f64>,
    /// perftest's over the library.
    pub verbs: Vec<f64>,
}

impl VerbsRounds {
    /// The library's figure over `rocelink perf`'s, run by run: median and range.
    pub fn ratio(&self) -> Spread {
        let v: Vec<f64> = self
            .verbs
            .iter()
            .zip(&self.rocelink)
            .filter(|&(_, &r)| r > 0.0)
            .map(|(v, r)| v / r)
            .collect();
        Spread::of(&v)
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchVerbsError {
    /// The `rocelink perf` run.
    #[error(transparent)]
    Perf(#[from] BenchPerfError),
    /// A perftest program could not be started or waited for.
    #[error("{program}: {what}")]
    Spawn {
        /// The program.
        program: String,
        /// What was being done.
        what: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A perftest program failed or printed no result.
    #[error("{program} ({end}) under the library: {why}")]
    End {
        /// The program.
        program: String,
        /// "server" or "client" with its exit status.
        end: String,
        /// What it printed last.
        why: String,
    },
}

/// perftest's program for `cfg`'s test (`ib_write_bw`, …).
pub fn program(cfg: &PerfConfig) -> String {
    format!("ib_{}", cfg.test.name())
}

/// Measure `plan`: each run `rocelink perf`, then perftest over the library. `stop` is
/// looked at after each run.
pub fn measure(plan: &VerbsPlan, stop: &Stopper) -> Result<VerbsRounds, BenchVerbsError> {
    let mut r = VerbsRounds::default();
    let perf = Plan {
        cfg: plan.cfg.clone(),
        runs: 1,
        ips: plan.ips,
        pin: plan.pin,
        ends: Ends::Processes {
            exe: plan.rocelink.clone(),
            port: plan.port,
        },
    };
    for _ in 0..plan.runs {
        let mine = crate::perf::one_run(&perf)?;
        let verbs = perftest_run(plan)?;
        r.rocelink.push(mine);
        r.verbs.push(verbs);
        if stop.is_stopped() {
            break;
        }
    }
    Ok(r)
}

/// perftest's arguments for `plan` (both ends; the client adds the server's address).
fn args(plan: &VerbsPlan) -> Vec<String> {
    let cfg = &plan.cfg;
    let mut v: Vec<String> = vec![
        "-p".into(),
        plan.port.to_string(),
        "-s".into(),
        cfg.sizes.first().copied().unwrap_or(2).to_string(),
        "-n".into(),
        cfg.iters.to_string(),
    ];
    if cfg.test.kind == Kind::Bw {
        v.extend(["-t".into(), cfg.tx_depth.to_string()]);
    }
    v
}

/// `program` under the library with device `ip`.
fn under_library(plan: &VerbsPlan, ip: IpAddr, program: &str) -> Command {
    let mut c = Command::new(program);
    c.env("LD_PRELOAD", &plan.library)
        .env("ROCELINK_VERBS", ip.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// One run of perftest's program between two processes over the library: the client's
/// figure.
fn perftest_run(plan: &VerbsPlan) -> Result<f64, BenchVerbsError> {
    let program = program(&plan.cfg);
    let failed = |what| spawn_failed(&program, what);
    let srv = under_library(plan, plan.ips.0, &program)
        .args(args(plan))
        .spawn()
        .map_err(failed("starting the server"))?;
    if plan.pin {
        let _ = rocelink_io::cpu::pin_process(srv.id(), 0);
    }
    let end = Instant::now() + Duration::from_secs(20);
    while !rocelink_io::ports::tcp_listening(plan.port) {
        if Instant::now() > end {
            let out = finish(srv, Duration::ZERO).map_err(failed("waiting for the server"))?;
            return Err(ended(&program, "server", &out));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let cli = under_library(plan, plan.ips.1, &program)
        .args(args(plan))
        .arg(plan.ips.0.to_string())
        .spawn()
        .map_err(failed("starting the client"))?;
    if plan.pin {
        let _ = rocelink_io::cpu::pin_process(cli.id(), 1);
    }
    let c = finish(cli, Duration::from_secs(300)).map_err(failed("waiting for the client"))?;
    let s = finish(srv, Duration::from_secs(20)).map_err(failed("waiting for the server"))?;
    if !s.status.success() {
        return Err(ended(&program, "server", &s));
    }
    let text = String::from_utf8_lossy(&c.stdout);
    match (c.status.success(), figure(&text, plan.cfg.test.kind)) {
        (true, Some(f)) => Ok(f),
        _ => Err(ended(&program, "client", &c)),
    }
}

/// What a failed `what` (starting, waiting for, stopping) of `program` is.
fn spawn_failed(program: &str, what: &'static str) -> impl FnOnce(io::Error) -> BenchVerbsError {
    let program = program.to_owned();
    move |source| BenchVerbsError::Spawn {
        program,
        what,
        source,
    }
}

/// Wait for `child` up to `limit` (killing it after), with its output.
fn finish(mut child: Child, limit: Duration) -> io::Result<Output> {
    let end = Instant::now() + limit;
    while child.try_wait()?.is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let status = child.wait()?;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    if let Some(mut o) = child.stdout.take() {
        o.read_to_end(&mut stdout)?;
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_end(&mut stderr)?;
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

fn ended(program: &str, end: &str, out: &Output) -> BenchVerbsError {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    BenchVerbsError::End {
        program: program.to_owned(),
        end: format!("{end} {}", out.status),
        why: text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty() && !l.starts_with("---"))
            .unwrap_or("")
            .trim()
            .to_owned(),
    }
}

/// The figure of perftest's first result row in `text`: the average bandwidth (its fourth
/// column) or the typical latency (its fifth).
pub fn figure(text: &str, kind: Kind) -> Option<f64> {
    let row = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"))
        .nth(1)?;
    let cols: Vec<f64> = row
        .split_whitespace()
        .map_while(|w| w.parse().ok())
        .collect();
    cols.get(if kind == Kind::Bw { 3 } else { 4 }).copied()
}

/// What a program over the library costs while it waits with nothing to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdleCost {
    /// Seconds watched.
    pub seconds: f64,
    /// CPU seconds the whole process used meanwhile (its progress thread included).
    pub cpu_seconds: f64,
    /// Context switches of the process meanwhile (voluntary and not): its wake-ups.
    pub switches: u64,
}

/// Start `ibv_rc_pingpong` as a server over the library at `ip` — it creates its QP (so the
/// device's socket and progress thread) and then waits for a client that never comes —
/// and watch it for `seconds`.
pub fn idle_cost(
    library: &PathBuf,
    ip: IpAddr,
    port: u16,
    seconds: f64,
) -> Result<IdleCost, BenchVerbsError> {
    let program = "ibv_rc_pingpong".to_owned();
    let failed = |what| spawn_failed(&program, what);
    let mut c = Command::new(&program);
    c.args(["-g", "0", "-p", &port.to_string()])
        .env("LD_PRELOAD", library)
        .env("ROCELINK_VERBS", ip.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().map_err(failed("starting"))?;
    let end = Instant::now() + Duration::from_secs(20);
    while !rocelink_io::ports::tcp_listening(port) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = child.id();
    let before = proc_usage(pid);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let after = proc_usage(pid);
    let secs = t0.elapsed().as_secs_f64();
    let out = finish(child, Duration::ZERO).map_err(failed("stopping"))?;
    match (before, after) {
        (Some(b), Some(a)) => Ok(IdleCost {
            seconds: secs,
            cpu_seconds: a.0 - b.0,
            switches: a.1.saturating_sub(b.1),
        }),
        _ => Err(ended(&program, "server", &out)),
    }
}

/// A process's CPU seconds (user + system) and context switches, from `/proc`.
fn proc_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the command's closing parenthesis: utime and stime are the 12th and 13th
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let switches: u64 = status
        .lines()
        .filter(|l| l.contains("ctxt_switches"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    // threads' switches are in their own status files
    let threads: u64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum();
    Some((ticks / 100.0, switches.max(threads)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_come_from_perftests_first_row() {
        let bw = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 65536      5000             2545.94            2200.84\t\t     0.035213\n";
        assert_eq!(figure(bw, Kind::Bw), Some(2200.84));
        let lat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n 2       5000          4.62           42.27        5.49     \t       5.73\n";
        assert_eq!(figure(lat, Kind::Lat), Some(5.49));
        assert_eq!(figure("nothing", Kind::Lat), None);
        let r = VerbsRounds {
            rocelink: vec![100.0, 50.0, 0.0],
            verbs: vec![90.0, 50.0, 3.0],
        };
        let s = r.ratio();
        assert_eq!((s.min, s.median, s.max), (0.9, 1.0, 1.0));
    }
}
