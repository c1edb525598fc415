//! UD SEND: Q_Key, the 40-byte GRH slot and the payload scattered together. A payload a
//! backend landed in the region (see [`crate::Endpoint::handle_landed`]) is left where it
//! is when that is where the receive puts it, and copied there otherwise.

use super::*;

impl Qp {
    pub(super) fn ud_request(
        &mut self,
        src: SocketAddr,
        net_header: &[u8],
        ib: &IbRepr,
        payload: Payload<'_>,
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
        let Some(recv) = self.take_recv(sinks) else {
            self.stats.drops += 1;
            return;
        };
        let len = payload.len();
        let need = grh::SLOT_LEN + len;
        if need as u64 > recv.sg_list.total_len() {
            let wc = self.recv_failed(recv.wr_id, WcStatus::LocalLengthError, deth.src_qp, src);
            sinks.cqs.push(self.recv_cq, wc);
            return;
        }
        // the GRH slot and the payload, checked together before either is written
        let mut slot = [0u8; grh::SLOT_LEN];
        if grh::fill(&mut slot, net_header).is_err() {
            slot = [0; grh::SLOT_LEN];
        }
        // (checked once, written without checking the range again)
        let checked = mrs.check_scatter(&recv.sg_list, 0, need as u64);
        let mut in_place = false;
        let placed = checked.and_then(|()| {
            mrs.scatter_within(&recv.sg_list, 0, &slot)?;
            in_place = place_checked(mrs, &recv.sg_list, grh::SLOT_LEN as u64, payload)?;
            Ok(())
        });
        match placed {
            Ok(()) => {
                self.stats.rx_bytes += len as u64;
                if let Payload::Landed { .. } = payload {
                    sinks.landing = Some(crate::Landing::Received { in_place });
                }
                let wc = self.complete_recv(
                    recv.wr_id,
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
                let wc =
                    self.recv_failed(recv.wr_id, WcStatus::LocalProtectionError, deth.src_qp, src);
                sinks.cqs.push(self.recv_cq, wc);
            }
        }
    }
}
