//! UD SEND: Q_Key, the 40-byte GRH slot and the payload scattered together.

use super::*;

impl Qp {
    pub(super) fn ud_request(
        &mut self,
        src: SocketAddr,
        net_header: &[u8],
        ib: &IbRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        sinks: &mut Sinks,
    ) {
        let op = ib.bth.opcode;
        if op != Opcode::UD_SEND_ONLY && op != Opcode::UD_SEND_ONLY_WITH_IMMEDIATE {
            self.stats.drops += 1;
            return;
        }
        let deth = ib.deth.unwrap_or_default();
        let want = if self.qpn == 1 { GSI_QKEY } else { self.qkey };
        if deth.qkey != want {
            self.stats.drops += 1;
            self.stats.access_violations += 1;
            return;
        }
        let Some(recv) = self.rq.pop_front() else {
            self.stats.drops += 1;
            return;
        };
        let need = grh::SLOT_LEN + payload.len();
        if need as u64 > recv.sg_list.total_len() {
            let wc = self.recv_failed(recv, WcStatus::LocalLengthError, deth.src_qp, src);
            sinks.cqs.push(self.recv_cq, wc);
            return;
        }
        // the GRH slot and the payload, checked together before either is written
        let mut slot = [0u8; grh::SLOT_LEN];
        if grh::fill(&mut slot, net_header).is_err() {
            slot = [0; grh::SLOT_LEN];
        }
        let placed = mrs
            .check_scatter(&recv.sg_list, 0, need as u64)
            .and_then(|()| mrs.scatter(&recv.sg_list, 0, &slot))
            .and_then(|()| mrs.scatter(&recv.sg_list, grh::SLOT_LEN as u64, payload));
        match placed {
            Ok(()) => {
                self.stats.rx_bytes += payload.len() as u64;
                let wc = self.complete_recv(
                    recv,
                    WcStatus::Success,
                    WcOpcode::Recv,
                    need as u32,
                    ib.immdt,
                    deth.src_qp,
                    src,
                );
                sinks.cqs.push(self.recv_cq, wc);
            }
            Err(_) => {
                let wc = self.recv_failed(recv, WcStatus::LocalProtectionError, deth.src_qp, src);
                sinks.cqs.push(self.recv_cq, wc);
            }
        }
    }
}
