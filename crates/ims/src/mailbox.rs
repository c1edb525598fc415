//! Short messages over one QP (status packets over UD, ACK/NACKs over UC SEND): receive
//! slots kept posted, send slots reused in turn.

use rocelink_transport::{
    Access, CqId, Endpoint, QpError, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus,
};
use std::net::SocketAddr;

/// Bytes of one slot: the 40-byte GRH slot of a UD receive and a status packet fit.
pub(crate) const SLOT: usize = 128;
/// Bytes of a UD receive's GRH slot.
const GRH: usize = 40;

/// A message taken from the mailbox.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Letter {
    /// Its bytes (GRH slot removed), up to `len`.
    pub(crate) bytes: [u8; SLOT],
    /// Length.
    pub(crate) len: usize,
    /// Who sent it.
    pub(crate) src: Option<SocketAddr>,
}

impl Letter {
    pub(crate) fn data(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[derive(Debug)]
pub(crate) struct Mailbox {
    qpn: u32,
    cq: CqId,
    lkey: u32,
    recv: usize,
    send: usize,
    next_send: usize,
    ud: bool,
}

impl Mailbox {
    /// `recv` receive slots (posted now) and `send` send slots for QP `qpn`, whose
    /// completions go to `cq`. `send` must exceed the QP's send queue depth plus the
    /// driver's batch, so a slot is reused only after its datagram left.
    pub(crate) fn new(
        ep: &mut Endpoint,
        qpn: u32,
        cq: CqId,
        recv: usize,
        send: usize,
        ud: bool,
    ) -> Result<Mailbox, QpError> {
        let keys = ep.register_mr(vec![0u8; (recv + send) * SLOT], 0, Access::LOCAL_WRITE);
        let m = Mailbox {
            qpn,
            cq,
            lkey: keys.lkey,
            recv,
            send,
            next_send: 0,
            ud,
        };
        for i in 0..recv {
            m.post(ep, i)?;
        }
        Ok(m)
    }

    fn post(&self, ep: &mut Endpoint, slot: usize) -> Result<(), QpError> {
        let sge = Sge {
            lkey: self.lkey,
            va: (slot * SLOT) as u64,
            len: SLOT as u32,
        };
        ep.post_recv(self.qpn, RecvWr::new(slot as u64, sge))
    }

    /// Send `bytes` (at most [`SLOT`]) with `op`.
    pub(crate) fn send(
        &mut self,
        ep: &mut Endpoint,
        op: SendOp,
        bytes: &[u8],
    ) -> Result<(), QpError> {
        let slot = self.recv + self.next_send;
        self.next_send = (self.next_send + 1) % self.send;
        let va = (slot * SLOT) as u64;
        let len = bytes.len().min(SLOT);
        ep.mr_mut(self.lkey)
            .and_then(|m| m.slice_mut(va, len as u64, Access::NONE))
            .map_err(QpError::LocalAccess)?
            .copy_from_slice(&bytes[..len]);
        let wr = SendWr {
            wr_id: slot as u64,
            op,
            sg_list: Sge {
                lkey: self.lkey,
                va,
                len: len as u32,
            }
            .into(),
            signaled: false,
            solicited: false,
            marks: 0,
        };
        ep.post_send(self.qpn, wr)
    }

    /// The next message received, its slot posted again; `None` when there is none.
    /// Failed sends are skipped (the protocols above recover from lost messages).
    pub(crate) fn poll(&mut self, ep: &mut Endpoint) -> Option<Letter> {
        while let Some(wc) = ep.poll_cq(self.cq) {
            if wc.opcode != WcOpcode::Recv {
                continue;
            }
            let slot = wc.wr_id as usize;
            let mut l = Letter {
                bytes: [0; SLOT],
                len: 0,
                src: wc.src,
            };
            if wc.status == WcStatus::Success {
                let skip = if self.ud { GRH } else { 0 };
                let len = (wc.byte_len as usize).min(SLOT).saturating_sub(skip);
                if let Ok(m) = ep.mr(self.lkey) {
                    let at = slot * SLOT + skip;
                    if let Some(b) = m.bytes().get(at..at + len) {
                        l.bytes[..len].copy_from_slice(b);
                        l.len = len;
                    }
                }
            }
            // a flushed QP (being destroyed) takes no more receives: ignore the error
            let _ = self.post(ep, slot);
            if wc.status == WcStatus::Success {
                return Some(l);
            }
        }
        None
    }

    /// Give the slots' region back.
    pub(crate) fn close(&mut self, ep: &mut Endpoint) {
        ep.deregister_mr(self.lkey);
    }
}
