//! Choosing the transmit queue of UDP datagrams by destination port, on the sending side of
//! a link: a stand-in for a NIC's flow steering (`ethtool -N … action Q`) where the link is
//! a veth pair.
//!
//! On veth a frame arrives on the peer's receive queue with the number of the transmit
//! queue it left by, and an AF_XDP socket sees only its own queue. So to give each of a
//! device's virtual ports its own receive queue (and its own receiving thread), the sender's
//! datagrams must leave by the right transmit queue. A small `tc` program on the egress hook
//! (a `tcx` BPF link, Linux 6.6+) records the queue in the packet
//! (`skb->queue_mapping = queue + 1`, which the kernel's queue choice honours for sockets
//! that have not cached one — unconnected UDP sockets, as the emulator's); this kernel has
//! no `skbedit` action, so `tc` alone cannot do it. Built as instructions here, like
//! [`super::prog`]; detached when dropped.

use super::prog::{
    ALU_END_TO_BE, ALU64_ADD_K, ALU64_MOV_K, ALU64_MOV_X, B, EXIT, H, Insn, JMP_JGT_X, JMP_JNE_K,
    LDX_MEM, W, i,
};
use std::io;
use std::os::fd::OwnedFd;

const STX_MEM: u8 = 0x63; // BPF_STX | BPF_MEM | BPF_W
const JA: u8 = 0x05;
const PROG_TYPE_SCHED_CLS: u32 = 3;
const ATTACH_TCX_EGRESS: u32 = 47;
/// Let the next program (or the kernel's default) decide the verdict.
const TCX_NEXT: i32 = -1;
/// `struct __sk_buff` offsets.
const SKB_QUEUE_MAPPING: i16 = 12;
const SKB_DATA: i16 = 76;
const SKB_DATA_END: i16 = 80;

/// The program: an untagged, option-less IPv4 UDP datagram to `ports[k].0` leaves by
/// transmit queue `ports[k].1`; everything else as the kernel chooses.
pub fn program(ports: &[(u16, u32)]) -> Vec<Insn> {
    let mut p = vec![
        i(ALU64_MOV_X, 6, 1, 0, 0),
        i(LDX_MEM | W, 2, 1, SKB_DATA, 0),
        i(LDX_MEM | W, 3, 1, SKB_DATA_END, 0),
        i(ALU64_MOV_X, 4, 2, 0, 0),
        i(ALU64_ADD_K, 4, 0, 0, 42),
    ];
    let mut to_out = vec![p.len()];
    p.push(i(JMP_JGT_X, 4, 3, 0, 0));
    // IPv4, header 20 bytes, UDP (the same checks as the XDP program)
    for (at, size, want) in [(12, H, 0x0008), (14, B, 0x45), (23, B, 17)] {
        p.push(i(LDX_MEM | size, 5, 2, at, 0));
        to_out.push(p.len());
        p.push(i(JMP_JNE_K, 5, 0, 0, want));
    }
    p.push(i(LDX_MEM | H, 5, 2, 36, 0));
    p.push(i(ALU_END_TO_BE, 5, 0, 0, 16));
    for &(port, queue) in ports {
        p.push(i(JMP_JNE_K, 5, 0, 3, i32::from(port)));
        // the kernel reads a recorded queue as queue_mapping − 1
        p.push(i(ALU64_MOV_K, 7, 0, 0, queue.saturating_add(1) as i32));
        p.push(i(STX_MEM, 6, 7, SKB_QUEUE_MAPPING, 0));
        to_out.push(p.len());
        p.push(i(JA, 0, 0, 0, 0));
    }
    let out = p.len();
    p.extend([i(ALU64_MOV_K, 0, 0, 0, TCX_NEXT), i(EXIT, 0, 0, 0, 0)]);
    for at in to_out {
        p[at].off = (out - at - 1) as i16;
    }
    p
}

/// The transmit-queue program attached to an interface's egress: detached when dropped.
#[derive(Debug)]
pub struct TxQueueSteer {
    _prog: OwnedFd,
    _link: OwnedFd,
}

impl TxQueueSteer {
    /// Send UDP datagrams leaving `ifname` to port `ports[k].0` by transmit queue
    /// `ports[k].1`. Errors name a queue the interface does not have.
    pub fn attach(ifname: &str, ports: &[(u16, u32)]) -> io::Result<TxQueueSteer> {
        let have = super::iface_tx_queues(ifname);
        if let Some((port, q)) = ports.iter().find(|(_, q)| *q >= have) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{ifname} has {have} transmit queue(s): no queue {q} for port {port}"),
            ));
        }
        let prog = super::prog::load(PROG_TYPE_SCHED_CLS, 0, &program(ports), "tc egress")?;
        let link = super::prog::link(&prog, ifname, ATTACH_TCX_EGRESS, "tc egress")?;
        Ok(TxQueueSteer {
            _prog: prog,
            _link: link,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_port_sets_its_queue_and_every_check_jumps_out() {
        let p = program(&[(5000, 0), (5001, 1)]);
        let out = p.len() - 2;
        assert_eq!(p[out], i(ALU64_MOV_K, 0, 0, 0, TCX_NEXT));
        for (at, insn) in p.iter().enumerate() {
            let target = at as i64 + 1 + i64::from(insn.off);
            if insn.code == JA || insn.code == JMP_JGT_X {
                assert_eq!(target, out as i64, "jump at {at}");
            }
            if insn.code == JMP_JNE_K && insn.dst == 5 && insn.imm >= 5000 {
                // a port's test skips exactly its three instructions
                assert_eq!(insn.off, 3);
                assert_eq!(p[at + 1].imm, insn.imm - 5000 + 1, "queue + 1");
                assert_eq!(p[at + 2], i(STX_MEM, 6, 7, SKB_QUEUE_MAPPING, 0));
            } else if insn.code == JMP_JNE_K {
                assert_eq!(target, out as i64, "jump at {at}");
            }
        }
    }
}
