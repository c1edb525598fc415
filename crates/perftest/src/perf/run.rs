//! The traffic of each test, and the exchanges after it, as perftest makes them (1 QP,
//! not duplex): WRITE/READ BW — the client runs, then a hand-shake, the bandwidth reports
//! and the close (the server waits passively through all of it); SEND BW — receives
//! posted, a hand-shake, both run, the close; WRITE LAT — both ping-pong (the server
//! writes first), no close with perftest (the close between two rocelink ends); READ LAT —
//! the server closes at once and serves passively; SEND LAT — receives posted, a
//! hand-shake, both ping-pong (the client sends first), the close.

use super::lat::LatEnd;
use super::{BwRow, Kind, Outcome, Perf, PerfError, Progress, RECV_ID, SEND_ID, Verb, bw_row};
use rocelink_io::perftest::Oob;
use rocelink_runtime::{Driver, Plan};
use rocelink_transport::*;
use rocelink_wire::perftest::{BwReport, KeyMsg};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Run the test of `p` over `sizes` as perftest does (see the module documentation).
pub(super) fn test(
    p: &mut Perf,
    oob: &mut Oob,
    sizes: &[usize],
    rem: &[KeyMsg],
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Outcome, PerfError> {
    let t = p.cfg.test;
    match (t.verb, t.kind) {
        (Verb::Write | Verb::Read, Kind::Bw) => one_sided_bw(p, oob, sizes, rem, stop, progress),
        (Verb::Send, Kind::Bw) => send_bw(p, oob, sizes, rem, stop, progress),
        (Verb::Write, Kind::Lat) => write_lat(p, oob, sizes, rem, stop),
        (Verb::Read, Kind::Lat) => read_lat(p, oob, sizes, rem, stop),
        (Verb::Send, Kind::Lat) => send_lat(p, oob, sizes, stop),
    }
}

/// WRITE or READ BW: the client runs each size, then a hand-shake, one report each way
/// (a server prints the client's) and the close; a client run indefinitely ends there.
fn one_sided_bw(
    p: &mut Perf,
    oob: &mut Oob,
    sizes: &[usize],
    rem: &[KeyMsg],
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Outcome, PerfError> {
    let client = oob.is_client();
    let infinite = p.cfg.infinite;
    let mut rows = Vec::new();
    if client {
        for &size in sizes {
            rows.push(p.bw_client(size, rem, stop, progress)?);
        }
        if infinite {
            // perftest's client runs until it is killed: no report, no close
            return Ok(Outcome::Bw(Vec::new()));
        }
    }
    let (since, moved) = (Instant::now(), p.payload_moved());
    if client_gone(p, oob, stop, progress)? {
        // no report comes: the server's row is what it saw land (WRITE) or sent
        // (READ) while the client ran
        let size = sizes.last().copied().unwrap_or(0).max(1);
        let n = (p.payload_moved() - moved) / size as u64;
        rows.push(period_row(size, n, since, Instant::now()));
        return Ok(Outcome::Bw(rows));
    }
    // one report (the last size's) as perftest exchanges it; a server prints the
    // client's
    let mine = rows.last().map_or(BwReport::default(), |r| BwReport {
        size: r.bytes,
        iters: r.iters,
        bw_peak: r.peak_bps / 1_048_576.0,
        bw_avg: r.avg_bps / 1_048_576.0,
        msg_rate: r.msg_rate_mpps,
    });
    let theirs = oob.bw_reports(&mine)?;
    if !client {
        rows.push(super::BwRow {
            bytes: theirs.size,
            iters: theirs.iters,
            peak_bps: theirs.bw_peak * 1_048_576.0,
            avg_bps: theirs.bw_avg * 1_048_576.0,
            msg_rate_mpps: theirs.msg_rate,
        });
    }
    close(p, oob, stop)?;
    Ok(Outcome::Bw(rows))
}

/// SEND BW: per size, receives posted, a hand-shake and both ends run; the close.
fn send_bw(
    p: &mut Perf,
    oob: &mut Oob,
    sizes: &[usize],
    rem: &[KeyMsg],
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Outcome, PerfError> {
    let client = oob.is_client();
    let infinite = p.cfg.infinite;
    let mut rows = Vec::new();
    let all = sizes.len() > 1;
    for &size in sizes {
        if !client {
            for i in 0..p.qps.len() {
                p.post_recvs(i, size, p.recv_depth())?;
            }
        }
        p.shake(oob, stop)?;
        rows.push(if client {
            p.bw_client(size, rem, stop, progress)?
        } else {
            p.send_bw_server(size, oob, stop, progress)?
        });
        if infinite {
            if !client && !stop.load(Ordering::Relaxed) {
                progress(Progress::PeerClosed);
            }
            return Ok(Outcome::Bw(Vec::new()));
        }
        // perftest's -a hand-shakes after each size too
        if all && client_gone(p, oob, stop, progress)? {
            return Ok(Outcome::Bw(rows));
        }
    }
    if !client_gone(p, oob, stop, progress)? {
        oob.done()?;
        p.linger(Duration::from_millis(50))?;
    }
    Ok(Outcome::Bw(rows))
}

/// WRITE LAT: both ends ping-pong each size (the server writes first); a close only
/// between two rocelink ends.
fn write_lat(
    p: &mut Perf,
    oob: &mut Oob,
    sizes: &[usize],
    rem: &[KeyMsg],
    stop: &AtomicBool,
) -> Result<Outcome, PerfError> {
    let client = oob.is_client();
    let mut rows = Vec::new();
    for &size in sizes {
        let (row, end) = p.write_lat(size, &rem[0], client, oob, stop)?;
        rows.push(row);
        if end != LatEnd::Done {
            // the peer is gone, or finds this end gone when its connection closes
            return Ok(Outcome::Lat(rows));
        }
    }
    if oob.peer_features & rocelink_wire::perftest::CLOSES_WRITE_LAT != 0 {
        // two rocelink ends close as the other tests do: each came here only once
        // its own WRITEs were acknowledged, and answers the peer's retries until
        // the peer comes too, so a lost last acknowledgement cannot strand it
        return closed_after(p, oob, stop, rows);
    } else {
        // perftest's write_lat has no close: answer the peer's last WRITE, and
        // over RC its retries should this end's acknowledgement be lost (a retry
        // and two doublings of the timeout: 1 + 2 + 4 of them), then go
        let quiet = if p.cfg.conn == QpType::Rc {
            super::ACK_TIMEOUT * 7
        } else {
            Duration::from_millis(50)
        };
        p.linger(quiet)?;
    }
    Ok(Outcome::Lat(rows))
}

/// READ LAT: the client reads each size; the server closes at once and serves passively.
fn read_lat(
    p: &mut Perf,
    oob: &mut Oob,
    sizes: &[usize],
    rem: &[KeyMsg],
    stop: &AtomicBool,
) -> Result<Outcome, PerfError> {
    let client = oob.is_client();
    let mut rows = Vec::new();
    if client {
        for &size in sizes {
            let (row, end) = p.read_lat(size, &rem[0], oob, stop)?;
            rows.push(row);
            match end {
                LatEnd::Done => {}
                // the passive server waits in the close: close with it
                LatEnd::Stopped => break,
                LatEnd::PeerLeft => return Ok(Outcome::Lat(rows)),
            }
        }
    }
    // perftest's READ LAT server closes at once, serving until the client's close
    closed_after(p, oob, stop, rows)
}

/// SEND LAT: per size, receives posted, a hand-shake, both ping-pong (the client sends
/// first); the close.
fn send_lat(
    p: &mut Perf,
    oob: &mut Oob,
    sizes: &[usize],
    stop: &AtomicBool,
) -> Result<Outcome, PerfError> {
    let client = oob.is_client();
    let mut rows = Vec::new();
    for &size in sizes {
        p.post_recvs(0, size, p.cfg.rx_depth.min(p.cfg.iters.max(1) as usize))?;
        p.shake(oob, stop)?;
        let (row, end) = p.send_lat(size, client, oob, stop)?;
        rows.push(row);
        if end != LatEnd::Done {
            return Ok(Outcome::Lat(rows));
        }
    }
    closed_after(p, oob, stop, rows)
}

/// A latency test's close after its loops: once this end has rows, the peer leaving (or
/// Ctrl-C here) during the close itself takes nothing measured away, and the rows stand.
/// An end with none (the passive READ LAT server) still fails.
fn closed_after(
    p: &mut Perf,
    oob: &mut Oob,
    stop: &AtomicBool,
    rows: Vec<super::LatRow>,
) -> Result<Outcome, PerfError> {
    match close(p, oob, stop) {
        Err(e) if !rows.is_empty() && (e.peer_closed() || stop.load(Ordering::Relaxed)) => {
            Ok(Outcome::Lat(rows))
        }
        r => r.map(|()| Outcome::Lat(rows)),
    }
}

/// perftest's close: a hand-shake, then `"done"` both ways; then the peer's last packets
/// answered.
fn close(p: &mut Perf, oob: &mut Oob, stop: &AtomicBool) -> Result<(), PerfError> {
    p.shake(oob, stop)?;
    oob.done()?;
    p.linger(Duration::from_millis(50))
}

impl Perf {
    /// The payload bytes this side's QPs took in (a WRITE responder) or sent (a READ
    /// responder) so far: a passive server's own measure.
    fn payload_moved(&self) -> u64 {
        let read = self.cfg.test.verb == Verb::Read;
        self.qps
            .iter()
            .filter_map(|q| self.ep.qp_stats(q.qpn))
            .map(|s| if read { s.tx_bytes } else { s.rx_bytes })
            .sum()
    }
}

/// A bandwidth test's hand-shake after the measurement; true when a server finds the
/// client gone there. A client that ran until stopped (`--run_infinitely`, on its side at
/// least) closes the connection instead of reporting: the server's run ends with the rows
/// it has, as the closed connection ends perftest's.
fn client_gone(
    p: &mut Perf,
    oob: &mut Oob,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<bool, PerfError> {
    match p.shake(oob, stop) {
        Ok(_) => Ok(false),
        Err(e) if !oob.is_client() && e.peer_closed() => {
            progress(Progress::PeerClosed);
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// A `--run_infinitely` period's row: perftest measures no peak then.
fn period_row(bytes: usize, n: u64, since: Instant, now: Instant) -> BwRow {
    let t = now.saturating_duration_since(since).as_secs_f64().max(1e-9);
    BwRow {
        bytes: bytes as u64,
        iters: n,
        peak_bps: 0.0,
        avg_bps: (bytes as u64 * n) as f64 / t,
        msg_rate_mpps: n as f64 / t / 1e6,
    }
}

/// A `--run_infinitely` loop: one row per period of what `ndone` counted, until the step
/// failed, Ctrl-C, or `more` says the peer is gone.
struct Periods<'a> {
    size: usize,
    ndone: &'a Cell<u64>,
    failed: &'a dyn Fn() -> bool,
    stop: &'a AtomicBool,
    progress: &'a mut dyn FnMut(Progress<'_>),
}

/// Run `step`: running infinitely (`periods`), period by period until stopped; else until
/// it finishes or the duration (an hour, untimed) passes. Returns when the measured time
/// began and whether `step` finished.
fn drive(
    periods: Option<Periods<'_>>,
    drv: &mut Driver<Box<dyn rocelink_io::backend::Backend + Send>>,
    ep: &mut Endpoint,
    step: &mut dyn FnMut(&mut Endpoint) -> bool,
    period: Option<Duration>,
    more: &mut dyn FnMut() -> Result<bool, PerfError>,
) -> Result<(Instant, bool), PerfError> {
    match periods {
        Some(each) => Ok((each.run(drv, ep, step, period, more)?, true)),
        None => {
            let since = Instant::now();
            let deadline = since + period.unwrap_or(Duration::from_secs(3600));
            Ok((since, drv.run(ep, deadline, step)?))
        }
    }
}

impl<'a> Periods<'a> {
    /// Periods of a run that goes on indefinitely (`None` for one that does not).
    fn when(
        infinite: bool,
        size: usize,
        ndone: &'a Cell<u64>,
        failed: &'a dyn Fn() -> bool,
        stop: &'a AtomicBool,
        progress: &'a mut dyn FnMut(Progress<'_>),
    ) -> Option<Periods<'a>> {
        infinite.then_some(Periods {
            size,
            ndone,
            failed,
            stop,
            progress,
        })
    }

    /// Returns when the last, unreported period began.
    fn run(
        self,
        drv: &mut Driver<Box<dyn rocelink_io::backend::Backend + Send>>,
        ep: &mut Endpoint,
        step: &mut dyn FnMut(&mut Endpoint) -> bool,
        period: Option<Duration>,
        more: &mut dyn FnMut() -> Result<bool, PerfError>,
    ) -> Result<Instant, PerfError> {
        let period = period.unwrap_or(Duration::from_secs(5));
        let mut since = Instant::now();
        loop {
            drv.run(ep, since + period, &mut *step)?;
            if (self.failed)() || self.stop.load(Ordering::Relaxed) {
                return Ok(since);
            }
            let now = Instant::now();
            let row = period_row(self.size, self.ndone.get(), since, now);
            (self.progress)(Progress::Row(&row));
            self.ndone.set(0);
            since = now;
            if !more()? {
                return Ok(since);
            }
        }
    }
}

/// A timed run's row, as perftest's duration mode: the messages completed between
/// `margin` after the start and `margin` before the end (or until now, stopped early), over
/// that time; no peak.
fn sampled(
    bytes: usize,
    done: &[Instant],
    start: Instant,
    run: Duration,
    margin: Duration,
) -> BwRow {
    let to = (start + run.saturating_sub(margin)).min(Instant::now());
    let from = (start + margin).min(to);
    let n = done.iter().filter(|&&t| t >= from && t < to).count() as u64;
    period_row(bytes, n, from, to)
}

/// How many messages a QP has posted and completed, and how many it may have in flight.
#[derive(Debug, Clone, Copy, Default)]
struct Flow {
    posted: u64,
    done: u64,
    depth: u64,
}

impl Perf {
    pub(super) fn sge(&self, off: usize, size: usize) -> Sge {
        Sge {
            lkey: self.mr.lkey,
            va: self.base + off as u64,
            len: size as u32,
        }
    }

    /// A signaled work request of `size` bytes from QP `i`'s part of the buffer.
    pub(super) fn signaled_wr(&self, i: usize, op: SendOp, size: usize) -> SendWr {
        SendWr {
            wr_id: SEND_ID,
            op,
            sg_list: self.sge(self.qps[i].off, size).into(),
            signaled: true,
            solicited: false,
            marks: 0,
        }
    }

    /// The index of the QP a completion names.
    fn qp_index(&self) -> HashMap<u32, usize> {
        self.qps
            .iter()
            .enumerate()
            .map(|(i, q)| (q.qpn, i))
            .collect()
    }

    /// A SEND, as the connection type wants it.
    pub(super) fn send_op(&self, i: usize) -> SendOp {
        match self.qps[i].dest {
            Some(dest) => SendOp::UdSend { dest, imm: None },
            None => SendOp::Send,
        }
    }

    /// A latency run's limit: the exchange timeout, at least a minute.
    pub(super) fn lat_deadline(&self) -> Instant {
        Instant::now() + self.cfg.timeout.max(Duration::from_secs(60))
    }

    /// Keep `tx_depth` WRITEs, READs (at most the peer's outstanding-READ limit) or SENDs
    /// of `size` in flight on every QP (posting round robin) until each completed `iters`
    /// (or the duration passed; running infinitely, a row per period until stopped).
    fn bw_client(
        &mut self,
        size: usize,
        rem: &[KeyMsg],
        stop: &AtomicBool,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<BwRow, PerfError> {
        let period = self.cfg.period();
        let infinite = self.cfg.infinite;
        let iters = self.iters_per_qp();
        let total = iters.saturating_mul(self.qps.len() as u64);
        let (mut flows, wrs) = self.client_work(size, rem);
        let index = self.qp_index();
        // running infinitely only counts: the vectors would grow without end
        let (mut posted, mut completed) = (Vec::new(), Vec::new());
        let ndone = Cell::new(0u64);
        let err = RefCell::new(None);
        let cq = self.cq;
        let Perf { ep, drv, .. } = self;
        let mut step = |ep: &mut Endpoint| {
            let now = Instant::now();
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    *err.borrow_mut() = Some(PerfError::completion("a send", &wc));
                    return true;
                }
                if let Some(&i) = index.get(&wc.qpn) {
                    flows[i].done += 1;
                }
                ndone.set(ndone.get() + 1);
                if !infinite {
                    completed.push(now);
                }
            }
            if ndone.get() >= total || stop.load(Ordering::Relaxed) {
                return true;
            }
            for (f, &(qpn, wr)) in flows.iter_mut().zip(&wrs) {
                while f.posted < iters && f.posted - f.done < f.depth {
                    if let Err(e) = ep.post_send(qpn, wr) {
                        *err.borrow_mut() = Some(PerfError::from(e));
                        return true;
                    }
                    f.posted += 1;
                    if !infinite {
                        posted.push(now);
                    }
                }
            }
            false
        };
        let failed = || err.borrow().is_some();
        let periods = Periods::when(infinite, size, &ndone, &failed, stop, progress);
        let (since, done) = drive(periods, drv, ep, &mut step, period, &mut || Ok(true))?;
        if let Some(e) = err.into_inner() {
            return Err(e);
        }
        if infinite {
            return Ok(period_row(size, 0, since, Instant::now()));
        }
        if !done && period.is_none() {
            return Err(PerfError::Unfinished("the test did not finish".into()));
        }
        // Ctrl-C: what completed so far is the row (nothing: the run failed)
        if stop.load(Ordering::Relaxed) && completed.is_empty() {
            return Err(PerfError::Stopped);
        }
        Ok(self.timed_row(size, (&posted, &completed), since))
    }

    /// A finished run's row: sampled over the duration when it was timed, else from every
    /// message's post and completion times (perftest's #iterations counts every QP's).
    fn timed_row(
        &self,
        size: usize,
        (posted, completed): (&[Instant], &[Instant]),
        since: Instant,
    ) -> BwRow {
        match self.cfg.period() {
            Some(d) => sampled(size, completed, since, d, self.cfg.margin()),
            None => bw_row(size, posted, completed),
        }
    }

    /// What a bandwidth client keeps in flight on each QP — `tx_depth`, for READs at most
    /// the peer's outstanding-READ limit — and the WR it posts there.
    fn client_work(&self, size: usize, rem: &[KeyMsg]) -> (Vec<Flow>, Vec<(u32, SendWr)>) {
        let verb = self.cfg.test.verb;
        let flows = rem
            .iter()
            .map(|r| Flow {
                depth: match verb {
                    Verb::Read => self.cfg.tx_depth.min(usize::from(r.out_reads.max(1))),
                    _ => self.cfg.tx_depth,
                } as u64,
                ..Flow::default()
            })
            .collect();
        let wrs = (0..self.qps.len())
            .map(|i| {
                let op = match verb {
                    Verb::Write => SendOp::Write {
                        va: rem[i].vaddr,
                        rkey: rem[i].rkey,
                    },
                    Verb::Read => SendOp::Read {
                        va: rem[i].vaddr,
                        rkey: rem[i].rkey,
                    },
                    Verb::Send => self.send_op(i),
                };
                (self.qps[i].qpn, self.signaled_wr(i, op, size))
            })
            .collect();
        (flows, wrs)
    }

    /// Messages each QP runs: the iterations, or without end when the run is timed.
    fn iters_per_qp(&self) -> u64 {
        match self.cfg.period() {
            Some(_) => u64::MAX,
            None => self.cfg.iters,
        }
    }

    /// Receives a SEND bandwidth server keeps posted per QP: `-r`, at most the
    /// iterations (perftest's rule) unless the run is timed.
    fn recv_depth(&self) -> usize {
        match self.cfg.period() {
            Some(_) => self.cfg.rx_depth,
            None => self.cfg.rx_depth.min(self.cfg.iters.max(1) as usize),
        }
    }

    /// Post `n` receives of `size` bytes into QP `i`'s second half (after the GRH slot
    /// for UD).
    fn post_recvs(&mut self, i: usize, size: usize, n: usize) -> Result<(), PerfError> {
        let (qpn, wr) = self.recv_wr(i, size);
        for _ in 0..n {
            self.ep.post_recv(qpn, wr)?;
        }
        Ok(())
    }

    pub(super) fn recv_wr(&self, i: usize, size: usize) -> (u32, RecvWr) {
        let grh = if self.cfg.conn == QpType::Ud {
            super::GRH
        } else {
            0
        };
        let q = &self.qps[i];
        (
            q.qpn,
            RecvWr::new(RECV_ID, self.sge(q.off + self.half, size + grh)),
        )
    }

    /// Count `iters` receives on every QP (re-posting each), timed from the first to the
    /// last. UC and UD lose what finds no receive: there the run also ends when nothing
    /// came for a second (as perftest's check-alive timer, which waits a minute).
    /// Running infinitely, a row per period until stopped or the client is gone.
    fn send_bw_server(
        &mut self,
        size: usize,
        oob: &Oob,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<BwRow, PerfError> {
        let period = self.cfg.period();
        let infinite = self.cfg.infinite;
        let iters = self.iters_per_qp();
        let total = iters.saturating_mul(self.qps.len() as u64);
        let lossy = self.cfg.conn != QpType::Rc;
        let idle = Duration::from_secs(1);
        let wrs: Vec<(u32, RecvWr)> = (0..self.qps.len()).map(|i| self.recv_wr(i, size)).collect();
        // as perftest, a QP re-posts only what its remaining messages need: none is left
        // posted for the next size
        let depth = self.recv_depth() as u64;
        let mut per_qp = vec![0u64; wrs.len()];
        let index = self.qp_index();
        let (mut first, mut last, mut got) = (None, Instant::now(), Vec::new());
        let mut looked = Instant::now();
        let ndone = Cell::new(0u64);
        let err = RefCell::new(None);
        let cq = self.cq;
        let Perf { ep, drv, .. } = self;
        let mut step = |ep: &mut Endpoint| {
            let now = Instant::now();
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    *err.borrow_mut() = Some(PerfError::completion("a receive", &wc));
                    return true;
                }
                first.get_or_insert(now);
                last = now;
                ndone.set(ndone.get() + 1);
                if !infinite {
                    got.push(now);
                }
                if let Some(&i) = index.get(&wc.qpn) {
                    per_qp[i] += 1;
                    if per_qp[i].saturating_add(depth) <= iters {
                        let (qpn, wr) = wrs[i];
                        let _ = ep.post_recv(qpn, wr);
                    }
                }
            }
            let silent = lossy && !infinite && first.is_some() && now - last >= idle;
            // a client that stopped early (Ctrl-C) comes to the next exchange, or closes it
            // (running infinitely): look every 100 ms
            let mut gone = false;
            if now - looked >= Duration::from_millis(100) {
                looked = now;
                gone = oob.readable().unwrap_or(true);
            }
            ndone.get() >= total || silent || gone || stop.load(Ordering::Relaxed)
        };
        let failed = || err.borrow().is_some();
        let periods = Periods::when(infinite, size, &ndone, &failed, stop, progress);
        // running infinitely, the client runs until it is stopped: its closed connection
        // ends this; a lossy run may never see them all: it ends a second after the last
        let more = &mut || Ok(!oob.readable()?);
        let (since, _) = drive(periods, drv, ep, &mut step, period, more)?;
        if let Some(e) = err.into_inner() {
            return Err(e);
        }
        if infinite {
            return Ok(period_row(size, 0, since, Instant::now()));
        }
        // a receiver knows no post times: all count from the first arrival, and perftest
        // measures no peak there
        let posted = vec![first.unwrap_or_else(Instant::now); got.len()];
        let mut row = self.timed_row(size, (&posted, &got), since);
        if period.is_none() {
            row.peak_bps = 0.0;
        }
        Ok(row)
    }

    /// A hand-shake during which the endpoint keeps answering (the peer may still be
    /// waiting for ACKs or READ responses, e.g. a WRITE/READ server all through the test).
    fn shake(&mut self, oob: &mut Oob, stop: &AtomicBool) -> Result<KeyMsg, PerfError> {
        let me = self.key(0);
        // a WRITE bandwidth server waits here all through the test: the rest of each
        // message lands where its first packet says (the first is taken alone, copied)
        let t = self.cfg.test;
        let writes: Vec<u32> = if (t.verb, t.kind) == (Verb::Write, Kind::Bw) {
            self.qps.iter().map(|q| q.qpn).collect()
        } else {
            Vec::new()
        };
        let mut predict = |ep: &Endpoint, plan: &mut Plan| {
            if !writes.iter().any(|&q| plan.expect_write(ep, q)) {
                plan.next_alone();
            }
            true
        };
        let Perf { ep, drv, .. } = self;
        // after Ctrl-C the peer still gets two seconds to come to the exchange (a run
        // stopped early reports what it measured)
        let mut stopped_at = None;
        let r = oob.hand_shake_waiting(&me, &mut || {
            if stop.load(Ordering::Relaxed)
                && stopped_at.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(2)
            {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let until = Instant::now() + Duration::from_millis(20);
            if writes.is_empty() {
                drv.run(ep, until, |_| false)
            } else {
                drv.run_landing(ep, until, &mut predict, |_| false)
            }
            .map(|_| ())
        });
        r.map_err(|e| match stopped_at {
            Some(_) if e.kind() == io::ErrorKind::Interrupted => PerfError::Stopped,
            _ => e.into(),
        })
    }

    /// Keep answering while the peer still sends (its last ACK or WRITE may need an
    /// answer after this side's test ended): until `quiet` passes with nothing received,
    /// at most 3 s.
    fn linger(&mut self, quiet: Duration) -> Result<(), PerfError> {
        let end = Instant::now() + Duration::from_secs(3);
        loop {
            let before = self.ep.stats().rx_datagrams;
            let Perf { ep, drv, .. } = self;
            drv.run(ep, Instant::now() + quiet, |_| false)?;
            if self.ep.stats().rx_datagrams == before || Instant::now() >= end {
                return Ok(());
            }
        }
    }
}
