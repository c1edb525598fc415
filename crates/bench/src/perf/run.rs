//! The traffic of each test, and the exchanges after it, as perftest makes them (1 QP,
//! not duplex): WRITE/READ BW — the client runs, then a hand-shake, the bandwidth reports
//! and the close (the server waits passively through all of it); SEND BW — receives
//! posted, a hand-shake, both run, the close; WRITE LAT — both ping-pong (the server
//! writes first), no close; READ LAT — the server closes at once and serves passively;
//! SEND LAT — receives posted, a hand-shake, both ping-pong (the client sends first), the
//! close.

use super::{Kind, Outcome, Perf, Verb, bw_row, lat_row};
use rocelink_io::perftest::Oob;
use rocelink_transport::*;
use rocelink_wire::perftest::{BwReport, KeyMsg};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SEND_ID: u64 = 1;
const RECV_ID: u64 = 2;

fn failed(what: &str, wc: &WorkCompletion) -> io::Error {
    io::Error::other(format!(
        "{what} completed with {:?} (QP {:#x}): the peer refused it or stopped answering",
        wc.status, wc.qpn
    ))
}

/// How a latency loop ended: its error, Ctrl-C, or not done by its deadline (`unfinished`
/// says how far it got) — or fine.
fn ended(
    err: Option<io::Error>,
    stop: &AtomicBool,
    done: bool,
    unfinished: impl FnOnce() -> String,
) -> io::Result<()> {
    if let Some(e) = err {
        return Err(e);
    }
    if stop.load(Ordering::Relaxed) {
        return Err(stopped());
    }
    if !done {
        return Err(io::Error::new(io::ErrorKind::TimedOut, unfinished()));
    }
    Ok(())
}

fn stopped() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "stopped (Ctrl-C)")
}

pub(super) fn test(
    p: &mut Perf,
    oob: &mut Oob,
    me: &KeyMsg,
    rem: &KeyMsg,
    stop: &AtomicBool,
) -> io::Result<Outcome> {
    let client = oob.is_client();
    let sizes = p.cfg.sizes.clone();
    let t = p.cfg.test;
    match (t.verb, t.kind) {
        (Verb::Write | Verb::Read, Kind::Bw) => {
            let mut rows = Vec::new();
            if client {
                for &size in &sizes {
                    rows.push(p.bw_client(size, rem, stop)?);
                }
            }
            p.shake(oob, me, stop)?;
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
            close(p, oob, me, stop)?;
            Ok(Outcome::Bw(rows))
        }
        (Verb::Send, Kind::Bw) => {
            let mut rows = Vec::new();
            for &size in &sizes {
                if !client {
                    p.post_recvs(size, p.cfg.rx_depth)?;
                }
                p.shake(oob, me, stop)?;
                rows.push(if client {
                    p.bw_client(size, rem, stop)?
                } else {
                    p.send_bw_server(size, stop)?
                });
            }
            close(p, oob, me, stop)?;
            Ok(Outcome::Bw(rows))
        }
        (Verb::Write, Kind::Lat) => {
            let mut rows = Vec::new();
            for &size in &sizes {
                rows.push(p.write_lat(size, rem, client, stop)?);
            }
            // no close in perftest's write_lat: answer the peer's last WRITE, then go
            p.linger()?;
            Ok(Outcome::Lat(rows))
        }
        (Verb::Read, Kind::Lat) => {
            let mut rows = Vec::new();
            if client {
                for &size in &sizes {
                    rows.push(p.read_lat(size, rem, stop)?);
                }
            }
            // perftest's READ LAT server closes at once, serving until the client's close
            close(p, oob, me, stop)?;
            Ok(Outcome::Lat(rows))
        }
        (Verb::Send, Kind::Lat) => {
            let mut rows = Vec::new();
            for &size in &sizes {
                p.post_recvs(size, p.cfg.rx_depth.min(p.cfg.iters.max(1) as usize))?;
                p.shake(oob, me, stop)?;
                rows.push(p.send_lat(size, client, stop)?);
            }
            close(p, oob, me, stop)?;
            Ok(Outcome::Lat(rows))
        }
    }
}

/// perftest's close: a hand-shake, then `"done"` both ways; then the peer's last packets
/// answered.
fn close(p: &mut Perf, oob: &mut Oob, me: &KeyMsg, stop: &AtomicBool) -> io::Result<()> {
    p.shake(oob, me, stop)?;
    oob.done()?;
    p.linger()
}

impl Perf {
    fn sge(&self, off: usize, size: usize) -> Sge {
        Sge {
            lkey: self.mr.lkey,
            va: self.base + off as u64,
            len: size as u32,
        }
    }

    /// A latency run's limit: the exchange timeout, at least a minute.
    fn lat_deadline(&self) -> Instant {
        Instant::now() + self.cfg.timeout.max(Duration::from_secs(60))
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.cfg.duration.unwrap_or(Duration::from_secs(3600))
    }

    /// Keep `tx_depth` WRITEs, READs (at most the peer's outstanding-READ limit) or SENDs
    /// of `size` in flight until `iters` completed (or the duration passed).
    fn bw_client(
        &mut self,
        size: usize,
        rem: &KeyMsg,
        stop: &AtomicBool,
    ) -> io::Result<super::BwRow> {
        let verb = self.cfg.test.verb;
        let depth = match verb {
            Verb::Read => self.cfg.tx_depth.min(usize::from(rem.out_reads.max(1))),
            _ => self.cfg.tx_depth,
        } as u64;
        let timed = self.cfg.duration.is_some();
        let iters = if timed { u64::MAX } else { self.cfg.iters };
        let (mut posted, mut completed) = (Vec::new(), Vec::new());
        let mut err = None;
        let op = match verb {
            Verb::Write => SendOp::Write {
                va: rem.vaddr,
                rkey: rem.rkey,
            },
            Verb::Read => SendOp::Read {
                va: rem.vaddr,
                rkey: rem.rkey,
            },
            Verb::Send => SendOp::Send,
        };
        let wr = SendWr {
            wr_id: SEND_ID,
            op,
            sge: self.sge(0, size),
            signaled: true,
            solicited: false,
            marks: 0,
        };
        let (qpn, cq) = (self.qpn, self.cq);
        let deadline = self.deadline();
        let Perf { ep, drv, .. } = self;
        let done = drv.run(ep, deadline, |ep| {
            let now = Instant::now();
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    err = Some(failed("a send", &wc));
                    return true;
                }
                completed.push(now);
            }
            let n = completed.len() as u64;
            if n >= iters || stop.load(Ordering::Relaxed) {
                return true;
            }
            while (posted.len() as u64) < iters && posted.len() as u64 - n < depth {
                if let Err(e) = ep.post_send(qpn, wr) {
                    err = Some(io::Error::other(e));
                    return true;
                }
                posted.push(now);
            }
            false
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if !done && !timed {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the test did not finish",
            ));
        }
        if stop.load(Ordering::Relaxed) && !timed {
            return Err(stopped());
        }
        Ok(bw_row(size, &posted, &completed))
    }

    /// Post `n` receives of `size` bytes into the second half.
    fn post_recvs(&mut self, size: usize, n: usize) -> io::Result<()> {
        for _ in 0..n {
            let wr = RecvWr::new(RECV_ID, self.sge(self.half, size));
            self.ep.post_recv(self.qpn, wr).map_err(io::Error::other)?;
        }
        Ok(())
    }

    /// Count `iters` receives (re-posting each), timed from the first to the last.
    fn send_bw_server(&mut self, size: usize, stop: &AtomicBool) -> io::Result<super::BwRow> {
        let timed = self.cfg.duration.is_some();
        let iters = if timed { u64::MAX } else { self.cfg.iters };
        let (mut first, mut got) = (None, Vec::new());
        let mut err = None;
        let (qpn, cq, lkey, va) = (
            self.qpn,
            self.cq,
            self.mr.lkey,
            self.base + self.half as u64,
        );
        let deadline = self.deadline();
        let Perf { ep, drv, .. } = self;
        drv.run(ep, deadline, |ep| {
            let now = Instant::now();
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    err = Some(failed("a receive", &wc));
                    return true;
                }
                first.get_or_insert(now);
                got.push(now);
                let sge = Sge {
                    lkey,
                    va,
                    len: size as u32,
                };
                let _ = ep.post_recv(qpn, RecvWr::new(RECV_ID, sge));
            }
            got.len() as u64 >= iters || stop.load(Ordering::Relaxed)
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        let posted = vec![first.unwrap_or_else(Instant::now); got.len()];
        Ok(bw_row(size, &posted, &got))
    }

    /// A hand-shake during which the endpoint keeps answering (the peer may still be
    /// waiting for ACKs or READ responses, e.g. a WRITE/READ server all through the test).
    fn shake(&mut self, oob: &mut Oob, me: &KeyMsg, stop: &AtomicBool) -> io::Result<KeyMsg> {
        let Perf { ep, drv, .. } = self;
        oob.hand_shake_waiting(me, &mut || {
            if stop.load(Ordering::Relaxed) {
                return Err(stopped());
            }
            drv.run(ep, Instant::now() + Duration::from_millis(20), |_| false)
                .map(|_| ())
        })
    }

    /// Keep answering while the peer still sends (its last ACK or WRITE may need an
    /// answer after this side's test ended): until 50 ms pass with nothing received, at
    /// most 1 s.
    fn linger(&mut self) -> io::Result<()> {
        let end = Instant::now() + Duration::from_secs(1);
        loop {
            let before = self.ep.stats().rx_datagrams;
            let Perf { ep, drv, .. } = self;
            drv.run(ep, Instant::now() + Duration::from_millis(50), |_| false)?;
            if self.ep.stats().rx_datagrams == before || Instant::now() >= end {
                return Ok(());
            }
        }
    }

    /// perftest's WRITE ping-pong: each side writes `size` bytes whose last byte is its
    /// iteration count into the peer's buffer and waits for the peer's count in its own.
    fn write_lat(
        &mut self,
        size: usize,
        rem: &KeyMsg,
        client: bool,
        stop: &AtomicBool,
    ) -> io::Result<super::LatRow> {
        let iters = self.cfg.iters;
        let lkey = self.mr.lkey;
        let poll_at = self.half + size - 1;
        let wr = SendWr {
            wr_id: SEND_ID,
            op: SendOp::Write {
                va: rem.vaddr,
                rkey: rem.rkey,
            },
            sge: self.sge(0, size),
            signaled: true,
            solicited: false,
            marks: 0,
        };
        let (qpn, cq) = (self.qpn, self.cq);
        let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
        let mut posted = Vec::with_capacity(iters as usize);
        let mut err = None;
        let deadline = self.lat_deadline();
        let Perf { ep, drv, .. } = self;
        // the server writes first
        let mut waiting = client;
        let done = drv.run(ep, deadline, |ep| {
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    err = Some(failed("a WRITE", &wc));
                    return true;
                }
                ccnt += 1;
            }
            if stop.load(Ordering::Relaxed) {
                return true;
            }
            if waiting {
                let seen = ep.mr(lkey).map_or(0, |m| m.bytes()[poll_at]);
                if seen != (rcnt + 1) as u8 {
                    return false;
                }
                rcnt += 1;
                waiting = false;
            }
            if scnt < iters {
                scnt += 1;
                if let Ok(m) = ep.mr_mut(lkey) {
                    m.bytes_mut()[size - 1] = scnt as u8;
                }
                posted.push(Instant::now());
                if let Err(e) = ep.post_send(qpn, wr) {
                    err = Some(io::Error::other(e));
                    return true;
                }
            }
            waiting = rcnt < iters;
            scnt >= iters && rcnt >= iters && ccnt >= iters
        })?;
        ended(err, stop, done, || {
            format!("write_lat: {rcnt} of {iters} answers came")
        })?;
        Ok(lat_row(size, &posted, 2.0))
    }

    /// One READ at a time.
    fn read_lat(
        &mut self,
        size: usize,
        rem: &KeyMsg,
        stop: &AtomicBool,
    ) -> io::Result<super::LatRow> {
        let iters = self.cfg.iters;
        let wr = SendWr {
            wr_id: SEND_ID,
            op: SendOp::Read {
                va: rem.vaddr,
                rkey: rem.rkey,
            },
            sge: self.sge(0, size),
            signaled: true,
            solicited: false,
            marks: 0,
        };
        let (qpn, cq) = (self.qpn, self.cq);
        let mut posted = Vec::with_capacity(iters as usize);
        let mut ccnt = 0u64;
        let mut err = None;
        let deadline = self.lat_deadline();
        let Perf { ep, drv, .. } = self;
        let done = drv.run(ep, deadline, |ep| {
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    err = Some(failed("a READ", &wc));
                    return true;
                }
                ccnt += 1;
            }
            if ccnt >= iters || stop.load(Ordering::Relaxed) {
                return true;
            }
            if posted.len() as u64 == ccnt {
                posted.push(Instant::now());
                if let Err(e) = ep.post_send(qpn, wr) {
                    err = Some(io::Error::other(e));
                    return true;
                }
            }
            false
        })?;
        ended(err, stop, done, || "read_lat did not finish".into())?;
        Ok(lat_row(size, &posted, 1.0))
    }

    /// perftest's SEND ping-pong: the client sends first, each side answers a receive with
    /// a send.
    fn send_lat(
        &mut self,
        size: usize,
        client: bool,
        stop: &AtomicBool,
    ) -> io::Result<super::LatRow> {
        let iters = self.cfg.iters;
        let wr = SendWr {
            wr_id: SEND_ID,
            op: SendOp::Send,
            sge: self.sge(0, size),
            signaled: true,
            solicited: false,
            marks: 0,
        };
        let (qpn, cq, lkey, va) = (
            self.qpn,
            self.cq,
            self.mr.lkey,
            self.base + self.half as u64,
        );
        let depth = self.cfg.rx_depth.min(iters as usize) as u64;
        let (mut scnt, mut rcnt) = (0u64, 0u64);
        let mut posted = Vec::with_capacity(iters as usize);
        let mut err = None;
        let mut turn = client;
        let deadline = self.lat_deadline();
        let Perf { ep, drv, .. } = self;
        let done = drv.run(ep, deadline, |ep| {
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    err = Some(failed("a SEND or receive", &wc));
                    return true;
                }
                if wc.wr_id == RECV_ID {
                    rcnt += 1;
                    turn = true;
                    if rcnt + depth <= iters {
                        let sge = Sge {
                            lkey,
                            va,
                            len: size as u32,
                        };
                        let _ = ep.post_recv(qpn, RecvWr::new(RECV_ID, sge));
                    }
                }
            }
            if stop.load(Ordering::Relaxed) {
                return true;
            }
            if turn && scnt < iters {
                turn = false;
                scnt += 1;
                posted.push(Instant::now());
                if let Err(e) = ep.post_send(qpn, wr) {
                    err = Some(io::Error::other(e));
                    return true;
                }
            }
            scnt >= iters && rcnt >= iters
        })?;
        ended(err, stop, done, || {
            format!("send_lat: {rcnt} of {iters} messages came")
        })?;
        Ok(lat_row(size, &posted, 2.0))
    }
}
