//! The latency tests as perftest runs them: WRITE, READ and SEND ping-pong (see [`super::run`]
//! for the exchanges around them).

use super::PerfError;
use super::{Perf, RECV_ID, lat_row};
use rocelink_io::backend::Backend;
use rocelink_io::perftest::Oob;
use rocelink_runtime::Driver;
use rocelink_transport::*;
use rocelink_wire::perftest::KeyMsg;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a latency loop ended, when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LatEnd {
    /// Every iteration ran.
    Done,
    /// Ctrl-C: the row covers what completed.
    Stopped,
    /// The peer's exchange connection closed (the peer was stopped, or crashed): the row
    /// covers what completed.
    PeerLeft,
}

/// Where [`drive_lat`] left a latency loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Drove {
    /// The loop's step said it was done (or stopped).
    Held,
    /// Its deadline passed first.
    Deadline,
    /// The peer left first.
    PeerLeft,
}

/// Drive a latency loop's `step` (true once done or stopped) until it holds or `deadline`
/// passes, in slices of 100 ms between which the peer's exchange connection is looked at:
/// a peer that has gone (Ctrl-C, a crash) ends the loop then, not at the deadline.
pub(super) fn drive_lat(
    drv: &mut Driver<Box<dyn Backend + Send>>,
    ep: &mut Endpoint,
    oob: &Oob,
    deadline: Instant,
    mut step: impl FnMut(&mut Endpoint) -> bool,
) -> io::Result<Drove> {
    loop {
        let until = deadline.min(Instant::now() + Duration::from_millis(100));
        if drv.run(ep, until, &mut step)? {
            return Ok(Drove::Held);
        }
        if Instant::now() >= deadline {
            return Ok(Drove::Deadline);
        }
        if oob.peer_closed() {
            return Ok(Drove::PeerLeft);
        }
    }
}

/// How a latency loop ended: its error, Ctrl-C or the peer's leaving (a row of what
/// completed once two messages were posted, an error before), not done by its deadline
/// (`unfinished` says how far it got) — or done.
pub(super) fn ended(
    err: Option<PerfError>,
    stop: &AtomicBool,
    drove: Drove,
    posted: usize,
    unfinished: impl FnOnce() -> String,
) -> Result<LatEnd, PerfError> {
    if let Some(e) = err {
        return Err(e);
    }
    let measured = posted >= 2;
    if stop.load(Ordering::Relaxed) {
        return if measured {
            Ok(LatEnd::Stopped)
        } else {
            Err(PerfError::Stopped)
        };
    }
    match drove {
        Drove::Held => Ok(LatEnd::Done),
        Drove::PeerLeft if measured => Ok(LatEnd::PeerLeft),
        Drove::PeerLeft => Err(PerfError::Unfinished(format!(
            "{}: the peer left",
            unfinished()
        ))),
        Drove::Deadline => Err(PerfError::Unfinished(unfinished())),
    }
}

impl Perf {
    /// perftest's WRITE ping-pong: each side writes `size` bytes whose last byte is its
    /// iteration count into the peer's buffer and waits for the peer's count in its own.
    pub(super) fn write_lat(
        &mut self,
        size: usize,
        rem: &KeyMsg,
        client: bool,
        oob: &Oob,
        stop: &AtomicBool,
    ) -> Result<(super::LatRow, LatEnd), PerfError> {
        let iters = self.cfg.iters;
        let lkey = self.mr.lkey;
        let poll_at = self.half + size - 1;
        let wr = self.signaled_wr(
            0,
            SendOp::Write {
                va: rem.vaddr,
                rkey: rem.rkey,
            },
            size,
        );
        let (qpn, cq) = (self.qps[0].qpn, self.cq);
        let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
        let mut posted = Vec::with_capacity(iters as usize);
        let mut err = None;
        let deadline = self.lat_deadline();
        let Perf { ep, drv, .. } = self;
        // the server writes first
        let mut waiting = client;
        let drove = drive_lat(drv, ep, oob, deadline, |ep| {
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    err = Some(PerfError::completion("a WRITE", &wc));
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
                    err = Some(PerfError::from(e));
                    return true;
                }
            }
            waiting = rcnt < iters;
            scnt >= iters && rcnt >= iters && ccnt >= iters
        })?;
        let end = ended(err, stop, drove, posted.len(), || {
            format!("write_lat: {rcnt} of {iters} answers came")
        })?;
        Ok((lat_row(size, &posted, 2.0), end))
    }

    /// One READ at a time.
    pub(super) fn read_lat(
        &mut self,
        size: usize,
        rem: &KeyMsg,
        oob: &Oob,
        stop: &AtomicBool,
    ) -> Result<(super::LatRow, LatEnd), PerfError> {
        let iters = self.cfg.iters;
        let wr = self.signaled_wr(
            0,
            SendOp::Read {
                va: rem.vaddr,
                rkey: rem.rkey,
            },
            size,
        );
        let (qpn, cq) = (self.qps[0].qpn, self.cq);
        let mut posted = Vec::with_capacity(iters as usize);
        let mut ccnt = 0u64;
        let mut err = None;
        let deadline = self.lat_deadline();
        let Perf { ep, drv, .. } = self;
        let drove = drive_lat(drv, ep, oob, deadline, |ep| {
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    err = Some(PerfError::completion("a READ", &wc));
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
                    err = Some(PerfError::from(e));
                    return true;
                }
            }
            false
        })?;
        let end = ended(err, stop, drove, posted.len(), || {
            format!("read_lat: {ccnt} of {iters} READs completed")
        })?;
        Ok((lat_row(size, &posted, 1.0), end))
    }

    /// perftest's SEND ping-pong: the client sends first, each side answers a receive with
    /// a send.
    pub(super) fn send_lat(
        &mut self,
        size: usize,
        client: bool,
        oob: &Oob,
        stop: &AtomicBool,
    ) -> Result<(super::LatRow, LatEnd), PerfError> {
        let iters = self.cfg.iters;
        let wr = self.signaled_wr(0, self.send_op(0), size);
        let cq = self.cq;
        let (qpn, rwr) = self.recv_wr(0, size);
        let depth = self.cfg.rx_depth.min(iters as usize) as u64;
        let (mut scnt, mut rcnt) = (0u64, 0u64);
        let mut posted = Vec::with_capacity(iters as usize);
        let mut err = None;
        let mut turn = client;
        let deadline = self.lat_deadline();
        let Perf { ep, drv, .. } = self;
        let drove = drive_lat(drv, ep, oob, deadline, |ep| {
            while let Some(wc) = ep.poll_cq(cq) {
                if wc.status != WcStatus::Success {
                    err = Some(PerfError::completion("a SEND or receive", &wc));
                    return true;
                }
                if wc.wr_id == RECV_ID {
                    rcnt += 1;
                    turn = true;
                    if rcnt + depth <= iters {
                        let _ = ep.post_recv(qpn, rwr);
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
                    err = Some(PerfError::from(e));
                    return true;
                }
            }
            scnt >= iters && rcnt >= iters
        })?;
        let end = ended(err, stop, drove, posted.len(), || {
            format!("send_lat: {rcnt} of {iters} messages came")
        })?;
        Ok((lat_row(size, &posted, 2.0), end))
    }
}
