//! Work requests and completions between verbs.h's form and the transport's.

use crate::abi::*;
use rocelink_transport::{QpType, SendOp, UdDest, WcOpcode, WcStatus, WorkCompletion};
use std::ffi::CStr;
use std::net::SocketAddr;

/// The `ibv_wc_status` of a completion status.
pub fn status_code(s: WcStatus) -> u32 {
    match s {
        WcStatus::Success => IBV_WC_SUCCESS,
        WcStatus::LocalLengthError => IBV_WC_LOC_LEN_ERR,
        WcStatus::LocalQpError => IBV_WC_LOC_QP_OP_ERR,
        WcStatus::LocalProtectionError => IBV_WC_LOC_PROT_ERR,
        WcStatus::WrFlushError => IBV_WC_WR_FLUSH_ERR,
        WcStatus::BadResponse => IBV_WC_BAD_RESP_ERR,
        WcStatus::RemoteInvalidRequest => IBV_WC_REM_INV_REQ_ERR,
        WcStatus::RemoteAccessError => IBV_WC_REM_ACCESS_ERR,
        WcStatus::RemoteOperationalError => IBV_WC_REM_OP_ERR,
        WcStatus::RetryExceeded => IBV_WC_RETRY_EXC_ERR,
        WcStatus::RnrRetryExceeded => IBV_WC_RNR_RETRY_EXC_ERR,
        _ => IBV_WC_GENERAL_ERR,
    }
}

/// A completion as `ibv_poll_cq` returns it (`ud`: of a UD QP, whose receives carry a GRH).
pub fn wc_of(wc: &WorkCompletion, ud: bool) -> ibv_wc {
    let opcode = match wc.opcode {
        WcOpcode::Send => IBV_WC_SEND,
        WcOpcode::RdmaWrite => IBV_WC_RDMA_WRITE,
        WcOpcode::RdmaRead => IBV_WC_RDMA_READ,
        WcOpcode::CompareSwap => IBV_WC_COMP_SWAP,
        WcOpcode::FetchAdd => IBV_WC_FETCH_ADD,
        WcOpcode::Recv => IBV_WC_RECV,
        WcOpcode::RecvRdmaWithImm => IBV_WC_RECV_RDMA_WITH_IMM,
        _ => IBV_WC_SEND,
    };
    let mut flags = 0;
    if wc.imm.is_some() {
        flags |= IBV_WC_WITH_IMM;
    }
    let recv = opcode & IBV_WC_RECV != 0;
    let mut sl = 0;
    if ud && recv && wc.status == WcStatus::Success {
        flags |= IBV_WC_GRH;
        sl = network_type(wc.src);
    }
    ibv_wc {
        wr_id: wc.wr_id,
        status: status_code(wc.status),
        opcode,
        vendor_err: 0,
        byte_len: wc.byte_len,
        // network byte order, as the header says
        imm_data: wc.imm.unwrap_or(0).to_be(),
        qp_num: wc.qpn,
        src_qp: wc.src_qp,
        wc_flags: flags,
        pkey_index: 0,
        slid: 0,
        sl,
        dlid_path_bits: 0,
    }
}

/// A UD receive's `sl` as ConnectX devices report it on RoCE: the network header the GRH
/// slot holds — bit 3 set for a UDP-carried (RoCE v2) packet, bits 2:0 2 for IPv4 and 1
/// for IPv6. RoCE v2 carries no service level, and UCX's UD transport reads these bits to
/// know which bytes of the slot are the destination GID (see `docs/verbs.md`).
fn network_type(src: Option<SocketAddr>) -> u8 {
    const ROCE_V2: u8 = 0x8;
    match src {
        Some(SocketAddr::V4(_)) => ROCE_V2 | 0x2,
        Some(SocketAddr::V6(a)) if a.ip().to_ipv4_mapped().is_some() => ROCE_V2 | 0x2,
        Some(SocketAddr::V6(_)) => ROCE_V2 | 0x1,
        None => 0,
    }
}

/// The text of an `ibv_wc_status`, as libibverbs words it.
pub fn status_str(s: u32) -> &'static CStr {
    const TEXT: [&CStr; 24] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    TEXT.get(s as usize).copied().unwrap_or(c"unknown")
}

/// The transport operation of a send WR on a QP of type `t`; `ah` is the destination
/// of a UD send's address handle. EINVAL for an opcode the QP type does not have,
/// EOPNOTSUPP for one this device does not offer (memory windows, TSO, …).
pub fn send_op(wr: &ibv_send_wr, t: QpType, ah: Option<SocketAddr>) -> Result<SendOp, i32> {
    let imm = u32::from_be(wr.imm_data);
    let (va, rkey) = (wr.remote_addr(), wr.rdma_rkey());
    let op = match (t, wr.opcode) {
        (QpType::Ud, IBV_WR_SEND | IBV_WR_SEND_WITH_IMM) => SendOp::UdSend {
            dest: UdDest {
                addr: ah.ok_or(libc::EINVAL)?,
                qpn: wr.ud_remote_qpn(),
                qkey: wr.ud_remote_qkey(),
            },
            imm: (wr.opcode == IBV_WR_SEND_WITH_IMM).then_some(imm),
        },
        (QpType::Ud, IBV_WR_RDMA_WRITE..=IBV_WR_ATOMIC_FETCH_AND_ADD) => return Err(libc::EINVAL),
        (_, IBV_WR_SEND) => SendOp::Send,
        (_, IBV_WR_SEND_WITH_IMM) => SendOp::SendImm(imm),
        (_, IBV_WR_RDMA_WRITE) => SendOp::Write { va, rkey },
        (_, IBV_WR_RDMA_WRITE_WITH_IMM) => SendOp::WriteImm { va, rkey, imm },
        (QpType::Rc, IBV_WR_RDMA_READ) => SendOp::Read { va, rkey },
        (_, IBV_WR_RDMA_READ) => return Err(libc::EINVAL),
        (QpType::Rc, IBV_WR_ATOMIC_CMP_AND_SWP) => SendOp::CompareSwap {
            va,
            rkey: wr.atomic_rkey(),
            compare: wr.atomic_compare_add(),
            swap: wr.atomic_swap(),
        },
        (QpType::Rc, IBV_WR_ATOMIC_FETCH_AND_ADD) => SendOp::FetchAdd {
            va,
            rkey: wr.atomic_rkey(),
            add: wr.atomic_compare_add(),
        },
        (_, IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD) => return Err(libc::EINVAL),
        // local invalidate, memory windows, send with invalidate, TSO, …
        _ => return Err(libc::EOPNOTSUPP),
    };
    Ok(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wr(opcode: u32) -> ibv_send_wr {
        ibv_send_wr {
            wr_id: 1,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            opcode,
            send_flags: 0,
            imm_data: 0x1234_5678u32.to_be(),
            wr: [0x1000, 0x77, 0, 0],
            qp_type: 0,
            _bind_mw_or_tso: [0; 6],
        }
    }

    #[test]
    fn opcodes_map_by_qp_type() {
        assert_eq!(
            send_op(&wr(IBV_WR_RDMA_WRITE_WITH_IMM), QpType::Rc, None),
            Ok(SendOp::WriteImm {
                va: 0x1000,
                rkey: 0x77,
                imm: 0x1234_5678
            })
        );
        assert_eq!(
            send_op(&wr(IBV_WR_RDMA_READ), QpType::Uc, None),
            Err(libc::EINVAL)
        );
        assert_eq!(
            send_op(&wr(IBV_WR_RDMA_WRITE), QpType::Ud, None),
            Err(libc::EINVAL)
        );
        // the atomic union: remote_addr, compare_add, swap, rkey
        let mut a = wr(IBV_WR_ATOMIC_CMP_AND_SWP);
        a.wr = [0x2000, 7, 9, 0x55];
        assert_eq!(
            send_op(&a, QpType::Rc, None),
            Ok(SendOp::CompareSwap {
                va: 0x2000,
                rkey: 0x55,
                compare: 7,
                swap: 9
            })
        );
        a.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        assert_eq!(
            send_op(&a, QpType::Rc, None),
            Ok(SendOp::FetchAdd {
                va: 0x2000,
                rkey: 0x55,
                add: 7
            })
        );
        assert_eq!(send_op(&a, QpType::Uc, None), Err(libc::EINVAL));
        assert_eq!(send_op(&wr(7), QpType::Rc, None), Err(libc::EOPNOTSUPP));
        assert_eq!(
            send_op(&wr(IBV_WR_SEND), QpType::Ud, None),
            Err(libc::EINVAL)
        );
        let mut u = wr(IBV_WR_SEND);
        u.wr[1] = 0x0011_2233_0000_0042;
        let to = "10.0.0.9:4791".parse().unwrap();
        assert_eq!(
            send_op(&u, QpType::Ud, Some(to)),
            Ok(SendOp::UdSend {
                dest: UdDest {
                    addr: to,
                    qpn: 0x42,
                    qkey: 0x0011_2233
                },
                imm: None
            })
        );
    }

    #[test]
    fn completions_carry_immediates_in_network_order_and_grh_on_ud_receives() {
        let wc = WorkCompletion {
            wr_id: 9,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            qpn: 0x11,
            byte_len: 140,
            imm: Some(0xC0FFEE),
            src_qp: 0x22,
            src: None,
            solicited: false,
        };
        let w = wc_of(&wc, true);
        assert_eq!(w.imm_data.to_ne_bytes(), [0, 0xC0, 0xFF, 0xEE]);
        assert_eq!(w.wc_flags, IBV_WC_WITH_IMM | IBV_WC_GRH);
        assert_eq!((w.opcode, w.src_qp, w.byte_len), (IBV_WC_RECV, 0x22, 140));
        assert_eq!(wc_of(&wc, false).wc_flags, IBV_WC_WITH_IMM);
        assert_eq!(
            status_str(IBV_WC_WR_FLUSH_ERR),
            c"Work Request Flushed Error"
        );
        assert_eq!(status_str(999), c"unknown");
    }
}
