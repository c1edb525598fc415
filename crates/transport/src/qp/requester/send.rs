//! Building the next request packet: segmentation, PSNs, AckReq, the retransmission
//! cursor, gather of region payloads.

use super::*;

impl Qp {
    /// Write the next request packet into `buf`; returns its destination and length.
    pub(crate) fn poll_request(
        &mut self,
        now: Instant,
        mrs: &MrTable,
        buf: &mut Vec<u8>,
        sinks: &mut Sinks,
        gather: bool,
    ) -> Option<(SocketAddr, usize, Option<crate::Gather>)> {
        if self.state != QpState::Rts || self.req.rnr_deadline.is_some() {
            return None;
        }
        if gather
            && self.qp_type == QpType::Ud
            && let Some(out) = self.ud_send_gathered(mrs, buf, sinks)
        {
            return Some(out);
        }
        let (idx, p) = self.req.cursor()?;
        if self.qp_type == QpType::Rc && psn::diff(p, self.req.una) >= self.req.allowed() as i32 {
            return None;
        }
        let w = self.req.sq[idx].clone();
        let mut ib = IbRepr {
            bth: BthRepr {
                dest_qp: self.dest_qpn,
                psn: p,
                pkey: self.pkey,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut dst = self.remote;
        // (offset, len) of the payload in the SGE
        let (off, plen);
        match w.wr.op {
            op @ (SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }) => {
                self.one_packet_request(&w, op, &mut ib);
                (off, plen) = (0, 0);
            }
            SendOp::UdSend { dest, imm } => {
                self.ud_headers(dest, imm, &mut ib);
                dst = Some(dest.addr);
                (off, plen) = (0, w.len as usize);
            }
            op => (off, plen) = self.message_packet(&w, op, p, &mut ib),
        }
        let dst = dst?;
        ib.payload_len = plen;
        ib.bth.pad_count = rocelink_wire::ib::pad_for(plen);
        let src = match &w.inline {
            Some(d) => Body::Slice(&d[off..off + plen], None),
            None => Body::of(mrs, &w.wr.sg_list, off as u64, plen, Access::NONE),
        };
        let built = build_datagram(buf, &ib, src, gather, self.route(dst));
        let Ok((n, g)) = built else {
            // the region went away after posting
            let wc = self.wc_send(&w.wr, WcStatus::LocalProtectionError);
            sinks.cqs.push(self.send_cq, wc);
            self.req.sq.remove(idx);
            self.enter_error(sinks, crate::ErrorCause::Completion);
            return None;
        };
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += plen as u64;
        self.sent(now, idx, sinks)?;
        Some((dst, n, g))
    }

    /// The headers of a READ request (what is still to be read) or an atomic: one packet,
    /// AckReq set.
    fn one_packet_request(&self, w: &SendWqe, op: SendOp, ib: &mut IbRepr) {
        match op {
            SendOp::Read { va, rkey } => {
                let done = u64::from(w.read_pkts) * self.mtu.bytes() as u64;
                ib.bth.opcode = Opcode::RC_RDMA_READ_REQUEST;
                ib.reth = Some(RethRepr {
                    va: va.wrapping_add(done),
                    rkey,
                    dma_len: (u64::from(w.len) - done.min(u64::from(w.len))) as u32,
                });
            }
            SendOp::CompareSwap {
                va,
                rkey,
                compare,
                swap,
            } => {
                ib.bth.opcode = Opcode::RC_COMPARE_SWAP;
                ib.atomic_eth = Some(AtomicEthRepr {
                    va,
                    rkey,
                    swap_add: swap,
                    compare,
                });
            }
            SendOp::FetchAdd { va, rkey, add } => {
                ib.bth.opcode = Opcode::RC_FETCH_ADD;
                ib.atomic_eth = Some(AtomicEthRepr {
                    va,
                    rkey,
                    swap_add: add,
                    compare: 0,
                });
            }
            _ => return,
        }
        ib.bth.ack_req = true;
    }

    /// The headers of a UD SEND to `dest`: its QP, the Q_Key (the QP's own where the WR's
    /// has the high bit set), the immediate.
    pub(super) fn ud_headers(&self, dest: crate::wr::UdDest, imm: Option<u32>, ib: &mut IbRepr) {
        ib.bth.opcode = if imm.is_some() {
            Opcode::UD_SEND_ONLY_WITH_IMMEDIATE
        } else {
            Opcode::UD_SEND_ONLY
        };
        ib.bth.dest_qp = dest.qpn & psn::MASK;
        let qkey = if dest.qkey & 0x8000_0000 != 0 {
            self.qkey
        } else {
            dest.qkey
        };
        ib.deth = Some(DethRepr {
            qkey,
            src_qp: self.qpn,
        });
        ib.immdt = imm;
    }

    /// The headers of packet `w.next_pkt` of a SEND or WRITE message at PSN `p`: its
    /// opcode (first, middle, last or only; with immediate), the RETH on a WRITE's first,
    /// the immediate, solicited event and marks on the last, AckReq where due. Returns the
    /// payload's (offset, length) in the message.
    fn message_packet(
        &mut self,
        w: &SendWqe,
        op: SendOp,
        p: u32,
        ib: &mut IbRepr,
    ) -> (usize, usize) {
        let mtu = self.mtu.bytes();
        let k = w.next_pkt;
        let total = w.len as usize;
        let off = k as usize * mtu;
        let plen = (total - off.min(total)).min(mtu);
        let (first, last) = (k == 0, k + 1 == w.npkts);
        let (is_write, imm) = match op {
            SendOp::Send => (false, None),
            SendOp::SendImm(i) => (false, Some(i)),
            SendOp::Write { .. } => (true, None),
            SendOp::WriteImm { imm, .. } => (true, Some(imm)),
            _ => (false, None),
        };
        let transport = match self.qp_type {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
        };
        let base = opcode_base(is_write, first, last, imm.is_some());
        ib.bth.opcode = Opcode::with_transport(transport, base);
        if let (SendOp::Write { va, rkey } | SendOp::WriteImm { va, rkey, .. }, true) = (op, first)
        {
            ib.reth = Some(RethRepr {
                va,
                rkey,
                dma_len: w.len,
            });
        }
        if last {
            ib.immdt = imm;
            ib.bth.solicited = w.wr.solicited;
            ib.bth.resv7 = w.wr.marks & 0x7F;
        }
        self.req.since_ackreq += 1;
        // the packet that fills the window asks too: nothing more goes out until
        // an ACK comes, and none would come before the timer otherwise
        let fills = psn::diff(psn::add(p, 1), self.req.una) >= self.req.allowed() as i32;
        if self.qp_type == QpType::Rc
            && (last || fills || self.req.since_ackreq >= self.req.ack_every)
        {
            ib.bth.ack_req = true;
            self.req.since_ackreq = 0;
        }
        (off, plen)
    }

    /// A packet of WQE `idx` left at `now`: its cursor moves on (a packet sent again counts
    /// as a retransmission), an RC QP's timer runs, an unreliable message whose last packet
    /// left completes.
    fn sent(&mut self, now: Instant, idx: usize, sinks: &mut Sinks) -> Option<()> {
        let wq = self.req.sq.get_mut(idx)?;
        wq.sent_at.get_or_insert(now);
        if wq.is_read() {
            if wq.max_sent > 0 {
                self.stats.retransmissions += 1;
                wq.resent = true;
            }
            wq.next_pkt = 1;
            wq.max_sent = 1;
        } else {
            if wq.next_pkt < wq.max_sent {
                self.stats.retransmissions += 1;
                wq.resent = true;
            }
            wq.next_pkt += 1;
            wq.max_sent = wq.max_sent.max(wq.next_pkt);
        }
        match self.qp_type {
            QpType::Rc => {
                if self.req.retry_deadline.is_none() {
                    self.req.retry_deadline = Some(now + self.req.rto());
                }
            }
            // unreliable: done once the last packet left
            QpType::Uc | QpType::Ud => {
                if wq.next_pkt >= wq.npkts {
                    let w = self.req.sq.remove(idx).map(|w| w.wr);
                    self.req.una = self.req.next_psn;
                    if let Some(wr) = w
                        && wr.signaled
                    {
                        let wc = self.wc_send(&wr, WcStatus::Success);
                        sinks.cqs.push(self.send_cq, wc);
                    }
                }
            }
        }
        Some(())
    }
}

/// The low five bits of a SEND or WRITE packet's opcode: its place in the message and
/// whether it carries an immediate.
fn opcode_base(is_write: bool, first: bool, last: bool, imm: bool) -> u8 {
    match (is_write, first, last, imm) {
        (false, true, true, false) => 0x04,
        (false, true, true, true) => 0x05,
        (false, true, false, _) => 0x00,
        (false, false, false, _) => 0x01,
        (false, false, true, false) => 0x02,
        (false, false, true, true) => 0x03,
        (true, true, true, false) => 0x0A,
        (true, true, true, true) => 0x0B,
        (true, true, false, _) => 0x06,
        (true, false, false, _) => 0x07,
        (true, false, true, false) => 0x08,
        (true, false, true, true) => 0x09,
    }
}
