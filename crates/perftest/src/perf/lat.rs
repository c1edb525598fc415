//! The latency tests as perftest runs them: WRITE, READ and SEND ping-pong (see [`super::run`]
//! for the exchanges around them).

use super::PerfError;
use super::run::{LatEnd, RECV_ID, drive_lat, ended, failed};
use super::{Perf, lat_row};
use rocelink_io::perftest::Oob;
use rocelink_transport::*;
use rocelink_wire::perftest::KeyMsg;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

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
                    err = Some(failed("a SEND or receive", &wc));
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
