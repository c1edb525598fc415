//! ECB client.

use rocelink_wire::hsb::ecb::{self, Command, RequestHeader, Response, Status};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Why a register access failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EcbError {
    /// No answer within the timeout (after resends).
    #[error("no reply from {peer} to {what} (sequence {seq:#06x}) within {timeout:?}")]
    Timeout {
        /// Device.
        peer: SocketAddr,
        /// The request.
        what: String,
        /// Sequence number.
        seq: u16,
        /// Total time waited.
        timeout: Duration,
    },
    /// The device answered with an error status.
    #[error("{peer} refused {what}: status {status}")]
    Status {
        /// Device.
        peer: SocketAddr,
        /// The request.
        what: String,
        /// Status.
        status: Status,
    },
    /// The reply did not make sense.
    #[error("bad reply from {peer} to {what}: {why}")]
    BadReply {
        /// Device.
        peer: SocketAddr,
        /// The request.
        what: String,
        /// Why.
        why: String,
    },
    /// Addresses must be 4-byte aligned.
    #[error("address {0:#x} is not 4-byte aligned")]
    Misaligned(u32),
    /// Socket error.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Counters of a control channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ControlStats {
    /// Transactions completed.
    pub transactions: u64,
    /// Resends after a silent retry period.
    pub resends: u64,
    /// Requests refused with SEQUENCE_CHECK_FAIL (another host used the device) and sent
    /// again without the check.
    pub resyncs: u64,
    /// Replies to other sequence numbers that were discarded.
    pub stale_replies: u64,
}

/// An ECB client for one device.
#[derive(Debug)]
pub struct Control {
    sock: UdpSocket,
    peer: SocketAddr,
    seq: u16,
    checked: bool,
    /// Total time per transaction (HSB: 0.5 s).
    pub timeout: Duration,
    /// Resend period (HSB: 0.1 s).
    pub retry: Duration,
    /// Counters.
    pub stats: ControlStats,
}

impl Control {
    /// Talk to the device at `peer` (normally `ip:8192`) from an ephemeral socket.
    pub fn new(peer: SocketAddr) -> io::Result<Control> {
        let sock = UdpSocket::bind(if peer.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        })?;
        Ok(Control {
            sock,
            peer,
            seq: 0x100,
            checked: false,
            timeout: Duration::from_millis(500),
            retry: Duration::from_millis(100),
            stats: ControlStats::default(),
        })
    }

    /// The device address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Use sequence checking from now on (the default after the first transaction).
    pub fn set_sequence_check(&mut self, on: bool) {
        self.checked = on;
    }

    fn transact(
        &mut self,
        cmd: Command,
        ops: &[(u32, u32)],
        what: String,
    ) -> Result<Vec<(u32, u32)>, EcbError> {
        if let Some((a, _)) = ops.iter().find(|(a, _)| a & 3 != 0) {
            return Err(EcbError::Misaligned(*a));
        }
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let check = self.checked;
        // after the first (unchecked) transaction, the device's latch is ours
        self.checked = true;
        let mk = |check: bool| request(cmd, seq, check, ops);
        let start = Instant::now();
        let mut req = mk(check);
        self.sock.send_to(&req, self.peer)?;
        let mut next_resend = start + self.retry;
        let mut buf = [0u8; 9000];
        let mut resynced = false;
        loop {
            let now = Instant::now();
            if now >= start + self.timeout {
                return Err(EcbError::Timeout {
                    peer: self.peer,
                    what,
                    seq,
                    timeout: self.timeout,
                });
            }
            if now >= next_resend {
                // same sequence, check cleared, so a request that did execute is not refused
                req = mk(false);
                self.sock.send_to(&req, self.peer)?;
                self.stats.resends += 1;
                next_resend += self.retry;
            }
            let Some((n, from)) =
                super::recv_until(&self.sock, next_resend.min(start + self.timeout), &mut buf)?
            else {
                continue;
            };
            if from != self.peer || n < 5 || u16::from_be_bytes([buf[2], buf[3]]) != seq {
                self.stats.stale_replies += 1;
                continue;
            }
            let status = Status(buf[4]);
            if status == Status::SEQUENCE_CHECK_FAIL && !resynced {
                // another host moved the device's latch: the request was refused, not
                // executed, so send it again unchecked (the device latches our sequence
                // from it) rather than fail, as HSB's host re-synchronises
                resynced = true;
                req = mk(false);
                self.sock.send_to(&req, self.peer)?;
                self.stats.resyncs += 1;
                continue;
            }
            if status != Status::SUCCESS {
                return Err(EcbError::Status {
                    peer: self.peer,
                    what,
                    status,
                });
            }
            let ops = self.reply_ops(&buf[..n], cmd, what)?;
            self.stats.transactions += 1;
            return Ok(ops);
        }
    }

    /// The operations of a successful reply to `cmd` (`what` names the request in errors).
    fn reply_ops(
        &self,
        reply: &[u8],
        cmd: Command,
        what: String,
    ) -> Result<Vec<(u32, u32)>, EcbError> {
        let r = Response::new_checked(reply).map_err(|e| EcbError::BadReply {
            peer: self.peer,
            what: what.clone(),
            why: format!("{e} ({} bytes)", reply.len()),
        })?;
        if r.command() != cmd.response() {
            return Err(EcbError::BadReply {
                peer: self.peer,
                what,
                why: format!("response command {:#04x}", r.command()),
            });
        }
        Ok((0..r.op_count()).filter_map(|i| r.op(i)).collect())
    }

    /// Read one register.
    pub fn read(&mut self, addr: u32) -> Result<u32, EcbError> {
        let what = format!("read {addr:#010x}");
        let ops = self.transact(Command::RD_DWORD, &[(addr, 0)], what.clone())?;
        match ops.first() {
            Some(&(a, v)) if a == addr => Ok(v),
            _ => Err(EcbError::BadReply {
                peer: self.peer,
                what,
                why: "reply names another address".into(),
            }),
        }
    }

    /// Write one register.
    pub fn write(&mut self, addr: u32, value: u32) -> Result<(), EcbError> {
        self.transact(
            Command::WR_DWORD,
            &[(addr, value)],
            format!("write {addr:#010x} = {value:#x}"),
        )
        .map(|_| ())
    }

    /// Write one register without asking for an acknowledgement and without waiting (HSB's
    /// host writes the reset this way: the device resets before it could answer). The
    /// next transaction goes unchecked, as the device's sequence latch is reset too.
    pub fn write_unacknowledged(&mut self, addr: u32, value: u32) -> Result<(), EcbError> {
        if addr & 3 != 0 {
            return Err(EcbError::Misaligned(addr));
        }
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        self.checked = false;
        let mut b = Vec::with_capacity(14);
        RequestHeader {
            command: Command::WR_DWORD,
            flags: 0,
            sequence: seq,
        }
        .emit(&[(addr, value)], &mut b);
        self.sock.send_to(&b, self.peer)?;
        Ok(())
    }

    /// Write several registers in one WR_BLOCK.
    pub fn write_block(&mut self, pairs: &[(u32, u32)]) -> Result<(), EcbError> {
        self.transact(
            Command::WR_BLOCK,
            pairs,
            format!("block write of {} registers", pairs.len()),
        )
        .map(|_| ())
    }

    /// Read `count` consecutive registers from `addr` in one RD_BLOCK.
    pub fn read_block(&mut self, addr: u32, count: u32) -> Result<Vec<u32>, EcbError> {
        let ops: Vec<(u32, u32)> = (0..count).map(|i| (addr + 4 * i, 0)).collect();
        let what = format!("block read of {count} registers at {addr:#010x}");
        let got = self.transact(Command::RD_BLOCK, &ops, what.clone())?;
        if got.len() != ops.len() || got.iter().zip(&ops).any(|(g, o)| g.0 != o.0) {
            return Err(EcbError::BadReply {
                peer: self.peer,
                what,
                why: "addresses do not match the request".into(),
            });
        }
        Ok(got.into_iter().map(|(_, v)| v).collect())
    }

    /// `reg &= and` (read-modify-write).
    pub fn and(&mut self, addr: u32, and: u32) -> Result<(), EcbError> {
        let v = self.read(addr)?;
        self.write(addr, v & and)
    }

    /// `reg |= or` (read-modify-write).
    pub fn or(&mut self, addr: u32, or: u32) -> Result<(), EcbError> {
        let v = self.read(addr)?;
        self.write(addr, v | or)
    }
}

/// An ECB request: `cmd` with `ops`, sequence `seq`, an ACK asked for, the sequence
/// checked when `check`.
fn request(cmd: Command, seq: u16, check: bool, ops: &[(u32, u32)]) -> Vec<u8> {
    let mut flags = ecb::FLAG_ACK_REQUEST;
    if check {
        flags |= ecb::FLAG_SEQUENCE_CHECK;
    }
    let mut b = Vec::with_capacity(6 + 8 * ops.len());
    RequestHeader {
        command: cmd,
        flags,
        sequence: seq,
    }
    .emit(ops, &mut b);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DeviceConfig, DeviceCore};
    use std::net::Ipv4Addr;
    use std::sync::{Arc, Mutex};

    /// A device on a socket that drops the replies whose sequence numbers are in `drop`.
    fn device(addr: &str, drop_replies: Vec<u16>) -> (SocketAddr, Arc<Mutex<DeviceCore>>) {
        let s = UdpSocket::bind(addr).unwrap();
        let a = s.local_addr().unwrap();
        let core = Arc::new(Mutex::new(DeviceCore::new(DeviceConfig::new(
            Ipv4Addr::LOCALHOST,
        ))));
        let c2 = core.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let mut dropped = vec![];
            while let Ok((n, from)) = s.recv_from(&mut buf) {
                let seq = u16::from_be_bytes([buf[2], buf[3]]);
                let reply = c2.lock().unwrap().handle_ecb(&buf[..n]);
                if drop_replies.contains(&seq) && !dropped.contains(&seq) {
                    dropped.push(seq);
                    continue;
                }
                if let Some(r) = reply {
                    let _ = s.send_to(&r, from);
                }
            }
        });
        (a, core)
    }

    #[test]
    fn lost_reply_is_recovered_by_resending_without_the_check() {
        // transaction 0x101's reply is lost: the write did execute, so a resend with
        // SEQUENCE_CHECK set would be refused; HSB's host clears the check on resends
        let (a, core) = device("127.0.0.1:0", vec![0x101]);
        let mut c = Control::new(a).unwrap();
        assert_eq!(c.read(crate::regs::HSB_IP_VERSION).unwrap(), 0x2606); // 0x100, unchecked
        c.write(0x1000, 0xCAF0).unwrap(); // 0x101, reply lost, resent
        assert_eq!(c.stats.resends, 1);
        assert_eq!(core.lock().unwrap().read(0x1000), Some(0xCAF0));
        assert_eq!(c.read(0x1000).unwrap(), 0xCAF0); // 0x102, checked, accepted
        assert_eq!(core.lock().unwrap().stats.sequence_failures, 0);
    }

    #[test]
    fn another_host_moving_the_latch_is_resynchronised_not_fatal() {
        let (a, core) = device("127.0.0.1:0", vec![]);
        let mut c = Control::new(a).unwrap();
        c.read(crate::regs::HSB_IP_VERSION).unwrap(); // latches 0x100
        // another host's unchecked request latches an unrelated sequence
        let other = Control::new(a).map(|mut o| {
            o.seq = 0x7000;
            o.read(crate::regs::HSB_IP_VERSION)
        });
        assert!(other.unwrap().is_ok());
        // our next checked request is refused by the device, re-sent unchecked, executed
        c.write(0x1000, 0xBEE0).unwrap();
        assert_eq!(c.stats.resyncs, 1);
        assert_eq!(core.lock().unwrap().read(0x1000), Some(0xBEE0));
        assert_eq!(core.lock().unwrap().stats.sequence_failures, 1);
        assert_eq!(c.read(0x1000).unwrap(), 0xBEE0);
    }

    #[test]
    fn silence_is_a_timeout_and_errors_name_the_status() {
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut c = Control::new(quiet.local_addr().unwrap()).unwrap();
        let t = Instant::now();
        let e = c.read(0x80).unwrap_err();
        let el = t.elapsed();
        assert!(
            el >= Duration::from_millis(450) && el < Duration::from_secs(3),
            "{el:?}"
        );
        assert!(e.to_string().contains("no reply"), "{e}");
        assert!(
            c.stats.resends >= 3,
            "resent every 0.1 s: {}",
            c.stats.resends
        );
        let (a, _) = device("127.0.0.1:0", vec![]);
        let mut c = Control::new(a).unwrap();
        let e = c.read(0x4000_0000).unwrap_err();
        assert!(e.to_string().contains("INVALID_ADDR (0x03)"), "{e}");
        assert!(matches!(c.write(0x81, 1), Err(EcbError::Misaligned(0x81))));
    }
}
