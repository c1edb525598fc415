//! Queue pairs: state, attributes, and the shared pieces of the requester and responder.

mod requester;
mod responder;

pub use responder::{Faults, MessageOutcome};

use crate::mr::{Access, MrTable};
use crate::prefix::PrefixCache;
use crate::stats::QpStats;
use crate::wr::{RecvWr, SendWr, SgList, WcOpcode, WcStatus, WorkCompletion};
use crate::{AccessError, Event, QpError};
use rocelink_wire::ib::{IbRepr, psn};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub(crate) use requester::Requester;
pub(crate) use responder::{Payload, Responder};

/// Transport service of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum QpType {
    /// Reliable connection.
    Rc,
    /// Unreliable connection.
    Uc,
    /// Unreliable datagram.
    Ud,
}

/// QP state (`ibv_qp_state`, without SQD/SQE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Just created or reset.
    Reset,
    /// Receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Broken; every WR is flushed.
    Error,
}

/// Path MTU: payload bytes per packet.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Mtu {
    /// 256 bytes.
    M256,
    /// 512 bytes.
    M512,
    /// 1024 bytes.
    M1024,
    /// 2048 bytes.
    M2048,
    /// 4096 bytes.
    M4096,
    /// Not an InfiniBand MTU: payloads up to this many bytes (FIRST and MIDDLE packets of
    /// exactly this many), for peers that go past 4096 or between the InfiniBand sizes. An
    /// HSB device on a jumbo-frame link sends `(link MTU − 74) / 128` pages per packet (up
    /// to 8832 bytes at 9000); an IMS worker sends 64..4096 bytes in steps of 64.
    Jumbo(u16),
}

impl Mtu {
    /// Payload bytes.
    pub fn bytes(self) -> usize {
        match self {
            Mtu::M256 => 256,
            Mtu::M512 => 512,
            Mtu::M1024 => 1024,
            Mtu::M2048 => 2048,
            Mtu::M4096 => 4096,
            Mtu::Jumbo(n) => usize::from(n).max(4),
        }
    }
    /// From a byte count (256..=4096, power of two).
    pub fn from_bytes(n: usize) -> Option<Mtu> {
        Some(match n {
            256 => Mtu::M256,
            512 => Mtu::M512,
            1024 => Mtu::M1024,
            2048 => Mtu::M2048,
            4096 => Mtu::M4096,
            _ => return None,
        })
    }
    /// The active MTU Linux rxe gives a port over a link of `link_mtu` bytes: the largest
    /// InfiniBand MTU that fits once 80 bytes of headers (rxe's `RXE_MAX_HDR_LENGTH`) are
    /// taken off, 256 at the least — 1024 at 1500, 4096 at 9000 and on loopback.
    ///
    /// ```
    /// use rocelink_transport::Mtu;
    /// assert_eq!(Mtu::for_link(1500), Mtu::M1024);
    /// assert_eq!(Mtu::for_link(2127), Mtu::M1024);
    /// assert_eq!(Mtu::for_link(2128), Mtu::M2048);
    /// assert_eq!(Mtu::for_link(9000), Mtu::M4096);
    /// assert_eq!(Mtu::for_link(65_536), Mtu::M4096);
    /// assert_eq!(Mtu::for_link(576), Mtu::M256);
    /// ```
    pub fn for_link(link_mtu: usize) -> Mtu {
        let room = link_mtu.saturating_sub(80);
        [Mtu::M4096, Mtu::M2048, Mtu::M1024, Mtu::M512]
            .into_iter()
            .find(|m| m.bytes() <= room)
            .unwrap_or(Mtu::M256)
    }
    /// The IB enum value 1..=5 (perftest's `MTU_SIZE(i) = 1 << (7 + i)`); 5 for `Jumbo`.
    pub fn ib_enum(self) -> u8 {
        match self {
            Mtu::Jumbo(_) => 5,
            m => (m.bytes().trailing_zeros() - 7) as u8,
        }
    }
    /// Packets a message of `len` bytes needs (at least one).
    pub fn packets(self, len: usize) -> u32 {
        len.div_ceil(self.bytes()).max(1) as u32
    }
}

/// Attributes given at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QpInit {
    /// Service type.
    pub qp_type: QpType,
    /// Most outstanding send WRs.
    pub max_send_wr: usize,
    /// Most posted receive WRs.
    pub max_recv_wr: usize,
    /// Partition key (default 0xFFFF).
    pub pkey: u16,
    /// Emit [`crate::Event::Placed`] for every WRITE payload placed from a datagram (for
    /// receivers that check data as it lands, e.g. a frame CRC). A payload handed over
    /// with [`crate::Endpoint::handle_landed`] is never queued: its [`crate::Placement`]
    /// is returned, whatever this says.
    pub report_writes: bool,
    /// Emit [`crate::Event::WriteMessage`] for every WRITE message that ends here,
    /// delivered or not (for protocols that acknowledge messages themselves, e.g. IMS).
    pub report_messages: bool,
    /// What a responder further requires of incoming WRITEs (none by default).
    pub write_rules: WriteRules,
    /// Where send completions go.
    pub send_cq: crate::CqId,
    /// Where receive completions go.
    pub recv_cq: crate::CqId,
    /// RC/UC: once a packet from the peer's IP was accepted in sequence, take packets only
    /// from the UDP source port it came from (RoCE v2 peers choose their source port, so it
    /// is learnt, not configured). On by default.
    pub pin_peer_port: bool,
    /// UC: accept a request only if its PSN is at most this many ahead of the one expected
    /// (a packet behind it, or further ahead, is dropped and counted in
    /// [`crate::QpStats::psn_refused`]) — for a channel whose peer's PSNs are known to
    /// start where this QP expects them (0: InfiniBand's rule, any PSN resynchronises).
    pub psn_window: u32,
    /// UC: the peer's first PSN is not known (an HSB device starts wherever it is): the
    /// first request sets the PSN expected, and is no gap.
    pub learn_first_psn: bool,
    /// The protection domain (0 by default): the QP reaches only regions of the same one
    /// ([`crate::Endpoint::set_mr_pd`]), locally and for its peer.
    pub pd: u32,
    /// The traffic class of what it sends (the GRH's, which RoCE v2 carries as the IP
    /// header's DSCP << 2 | ECN): how a service level reaches the network. 0 by default;
    /// [`crate::Endpoint::set_traffic_class`] changes it.
    pub traffic_class: u8,
    /// The shared receive queue it takes its receives from ([`crate::Endpoint::create_srq`];
    /// `None`: its own).
    pub srq: Option<u32>,
    /// What its peer may do to this QP's regions (the QP's `qp_access_flags`): RDMA WRITE,
    /// READ and atomics each need their right here as well as the region's. All three by
    /// default; [`crate::Endpoint::set_remote_access`] changes it.
    pub remote_access: Access,
}

impl QpInit {
    /// Defaults: 1024 send and receive WRs, P_Key 0xFFFF.
    pub fn new(qp_type: QpType) -> QpInit {
        QpInit {
            qp_type,
            max_send_wr: 1024,
            max_recv_wr: 1024,
            pkey: rocelink_wire::ib::DEFAULT_PKEY,
            report_writes: false,
            report_messages: false,
            write_rules: WriteRules::NONE,
            send_cq: crate::CqId::DEFAULT,
            recv_cq: crate::CqId::DEFAULT,
            pin_peer_port: true,
            psn_window: 0,
            learn_first_psn: false,
            pd: 0,
            traffic_class: 0,
            srq: None,
            remote_access: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        }
    }
}

/// What a responder requires of incoming RDMA WRITEs beyond the InfiniBand rules — the
/// limits of a device's DMA engine, e.g. the IMS buffer unit's (payloads of at least 64
/// bytes, messages starting 64-byte aligned) and the marks its senders set on bad data. A
/// WRITE that breaks one is refused whole and reported ([`crate::MessageOutcome::Length`],
/// [`crate::MessageOutcome::Misaligned`], [`crate::MessageOutcome::Marked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteRules {
    /// Fewest payload bytes in any packet of a WRITE (0: no limit).
    pub min_packet: u32,
    /// A WRITE's VA must be a multiple of this (0 or 1: any).
    pub va_align: u64,
    /// FIRST and MIDDLE packets may carry any length up to the MTU (at least
    /// `min_packet`), not exactly the MTU: the sender's packet size need not be agreed.
    pub variable_packets: bool,
    /// FIRST and MIDDLE payloads must be a multiple of this (0 or 1: any) — e.g. IMS's
    /// packets of 64 to 4096 bytes in steps of 64; the LAST is any length the rest allow.
    pub packet_step: u32,
    /// Reserved BTH bits (`resv7`) that mark a packet bad ([`crate::SendWr::marks`]): a WRITE
    /// packet carrying any of them is refused with its message. Other reserved bits are
    /// ignored, as InfiniBand requires (0: honour none).
    pub marks: u8,
}

impl WriteRules {
    /// No rule beyond InfiniBand's.
    pub const NONE: WriteRules = WriteRules {
        min_packet: 0,
        va_align: 0,
        variable_packets: false,
        packet_step: 0,
        marks: 0,
    };

    /// True when a FIRST or MIDDLE payload of `len` bytes is a whole number of steps.
    pub(crate) fn stepped(&self, len: u64) -> bool {
        self.packet_step <= 1 || len.is_multiple_of(u64::from(self.packet_step))
    }

    /// True when `va` starts a WRITE as required.
    pub(crate) fn aligned(&self, va: u64) -> bool {
        self.va_align <= 1 || va.is_multiple_of(self.va_align)
    }
}

impl Default for WriteRules {
    fn default() -> Self {
        WriteRules::NONE
    }
}

/// A state transition with the attributes it sets (`ibv_modify_qp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Modify {
    /// RESET → INIT. `qkey` is used by UD QPs.
    Init {
        /// Q_Key (UD).
        qkey: u32,
    },
    /// INIT → RTR.
    Rtr {
        /// Peer address (IP and UDP port, normally 4791). Ignored for UD.
        remote: Option<SocketAddr>,
        /// Peer QPN (RC/UC).
        dest_qpn: u32,
        /// First PSN expected from the peer.
        rq_psn: u32,
        /// Path MTU.
        mtu: Mtu,
        /// RNR timer code advertised in RNR NAKs (perftest uses 12 = 0.64 ms).
        min_rnr_timer: u8,
    },
    /// RTR → RTS.
    Rts {
        /// First PSN this QP sends.
        sq_psn: u32,
        /// Local ACK timeout (RC).
        timeout: Duration,
        /// Transport retries (7 = retry forever, as Linux rxe).
        retry_cnt: u8,
        /// RNR retries (7 = retry forever).
        rnr_retry: u8,
    },
    /// Any state → ERROR (flushes every WR).
    Error,
    /// Any state → RESET.
    Reset,
}

/// UC/RC/UD queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) state: QpState,
    pub(crate) pkey: u16,
    pub(crate) qkey: u32,
    pub(crate) max_send_wr: usize,
    pub(crate) max_recv_wr: usize,
    pub(crate) report_writes: bool,
    pub(crate) report_messages: bool,
    pub(crate) write_rules: WriteRules,
    /// CRC-32 of the payload of the packet being handled (from the ICRC pass).
    pub(crate) rx_payload_crc: u32,
    /// The solicited-event bit of the request being handled.
    pub(crate) rx_solicited: bool,
    /// Its protection domain.
    pub(crate) pd_id: u32,
    /// The traffic class of what it sends ([`QpInit::traffic_class`]).
    pub(crate) traffic_class: u8,
    /// What its peer may do ([`QpInit::remote_access`]).
    pub(crate) remote_access: Access,
    /// Its shared receive queue ([`QpInit::srq`]).
    pub(crate) srq: Option<u32>,
    /// How long an ACK may wait for a request to ride with
    /// ([`crate::EndpointConfig::ack_delay`]).
    pub(crate) ack_delay: Duration,
    /// A response was passed over for a request: it goes first next time.
    pub(crate) response_turn: bool,
    /// Our address as the peer sees it (IP of the endpoint, UDP source port of this QP).
    pub(crate) local: SocketAddr,
    pub(crate) remote: Option<SocketAddr>,
    /// The peer's UDP source port, once learnt ([`QpInit::pin_peer_port`]).
    pub(crate) peer_port: Option<u16>,
    pub(crate) pin_peer_port: bool,
    pub(crate) psn_window: u32,
    pub(crate) learn_first_psn: bool,
    /// No request taken yet (for `learn_first_psn`).
    pub(crate) psn_unknown: bool,
    pub(crate) dest_qpn: u32,
    pub(crate) mtu: Mtu,
    /// `mtu.bytes()`, kept: the per-packet checks read it.
    pub(crate) mtu_bytes: usize,
    pub(crate) min_rnr_timer: u8,
    pub(crate) req: Requester,
    pub(crate) resp: Responder,
    pub(crate) rq: VecDeque<RecvWr>,
    pub(crate) stats: QpStats,
    pub(crate) send_cq: crate::CqId,
    pub(crate) recv_cq: crate::CqId,
    /// The ICRC prefixes of what this QP sends (its flow, per datagram length).
    pub(crate) tx_prefixes: PrefixCache,
}

/// Shared output sinks of a QP operation.
#[derive(Debug, Default)]
pub(crate) struct Sinks {
    pub(crate) cqs: crate::cq::Cqs,
    /// Shared receive queues (a QP created on one takes its receives there).
    pub(crate) srqs: crate::srq::Srqs,
    pub(crate) events: crate::events::EventQueue,
    /// Set when a landed payload was accepted (see `Endpoint::handle_landed`).
    pub(crate) landing: Option<crate::Landing>,
}

impl Qp {
    /// The next receive for a message arriving now: its own queue's, or its shared
    /// queue's (which may say it ran below its limit).
    pub(crate) fn take_recv(&mut self, sinks: &mut Sinks) -> Option<RecvWr> {
        let Some(id) = self.srq else {
            return self.rq.pop_front();
        };
        let (r, low) = sinks.srqs.take(id);
        if low {
            sinks.events.push_back(crate::Event::SrqLimit {
                qpn: self.qpn,
                srq: id,
            });
        }
        r
    }

    /// A receive taken for a message that was then refused: back to the front of the
    /// queue it came from.
    pub(crate) fn put_back_recv(&mut self, sinks: &mut Sinks, r: RecvWr) {
        match self.srq {
            Some(id) => sinks.srqs.put_back(id, r),
            None => self.rq.push_front(r),
        }
    }

    pub(crate) fn new(qpn: u32, init: QpInit, local: SocketAddr) -> Qp {
        Qp {
            qpn,
            qp_type: init.qp_type,
            state: QpState::Reset,
            pkey: init.pkey,
            qkey: 0,
            max_send_wr: init.max_send_wr,
            max_recv_wr: init.max_recv_wr,
            report_writes: init.report_writes,
            report_messages: init.report_messages,
            write_rules: init.write_rules,
            rx_payload_crc: 0,
            rx_solicited: false,
            ack_delay: Duration::ZERO,
            pd_id: init.pd,
            traffic_class: init.traffic_class,
            remote_access: init.remote_access,
            srq: init.srq,
            response_turn: false,
            local,
            remote: None,
            peer_port: None,
            pin_peer_port: init.pin_peer_port,
            psn_window: init.psn_window,
            learn_first_psn: init.learn_first_psn,
            psn_unknown: init.learn_first_psn,
            dest_qpn: 0,
            mtu: Mtu::M1024,
            mtu_bytes: Mtu::M1024.bytes(),
            min_rnr_timer: 12,
            req: Requester::default(),
            resp: Responder::default(),
            rq: VecDeque::new(),
            stats: QpStats::default(),
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            tx_prefixes: PrefixCache::default(),
        }
    }

    pub(crate) fn modify(&mut self, m: Modify, sinks: &mut Sinks) -> Result<(), QpError> {
        use QpState::*;
        match (self.state, m) {
            (Reset, Modify::Init { qkey }) => {
                self.qkey = qkey;
                self.state = Init;
            }
            (
                Init,
                Modify::Rtr {
                    remote,
                    dest_qpn,
                    rq_psn,
                    mtu,
                    min_rnr_timer,
                },
            ) => {
                if self.qp_type != QpType::Ud {
                    self.remote =
                        Some(remote.ok_or(QpError::InvalidAttr("RC/UC need a remote address"))?);
                    if let (Some(r), l) = (self.remote, self.local)
                        && r.is_ipv4() != l.is_ipv4()
                    {
                        return Err(QpError::InvalidAttr(
                            "remote and local address families differ",
                        ));
                    }
                }
                self.dest_qpn = dest_qpn & psn::MASK;
                self.peer_port = None;
                self.psn_unknown = self.learn_first_psn;
                self.resp.epsn = rq_psn & psn::MASK;
                self.mtu = mtu;
                self.mtu_bytes = mtu.bytes();
                self.min_rnr_timer = min_rnr_timer & 0x1F;
                self.state = Rtr;
            }
            (
                Rtr,
                Modify::Rts {
                    sq_psn,
                    timeout,
                    retry_cnt,
                    rnr_retry,
                },
            ) => {
                self.req
                    .configure(sq_psn & psn::MASK, timeout, retry_cnt, rnr_retry);
                self.state = Rts;
            }
            (_, Modify::Error) => self.enter_error(sinks, crate::ErrorCause::Modified),
            (_, Modify::Reset) => {
                let (qpn, local) = (self.qpn, self.local);
                let init = QpInit {
                    qp_type: self.qp_type,
                    max_send_wr: self.max_send_wr,
                    max_recv_wr: self.max_recv_wr,
                    pkey: self.pkey,
                    report_writes: self.report_writes,
                    report_messages: self.report_messages,
                    write_rules: self.write_rules,
                    send_cq: self.send_cq,
                    recv_cq: self.recv_cq,
                    pin_peer_port: self.pin_peer_port,
                    psn_window: self.psn_window,
                    learn_first_psn: self.learn_first_psn,
                    pd: self.pd_id,
                    traffic_class: self.traffic_class,
                    srq: self.srq,
                    remote_access: self.remote_access,
                };
                let ack_delay = self.ack_delay;
                *self = Qp::new(qpn, init, local);
                self.ack_delay = ack_delay;
            }
            (from, _) => return Err(QpError::BadTransition(from)),
        }
        Ok(())
    }

    /// Whether a packet from `src` may be this connected QP's peer's: its IP, and once
    /// learnt its UDP source port.
    #[inline]
    pub(crate) fn is_peer(&self, src: SocketAddr) -> bool {
        self.remote.is_some_and(|r| r.ip() == src.ip())
            && self.peer_port.is_none_or(|p| p == src.port())
    }

    /// Whether `ib` is where the peer's stream is: a request at the PSN expected next, or
    /// an ACK, NAK or READ response for a packet outstanding.
    pub(crate) fn in_sequence(&self, ib: &IbRepr) -> bool {
        let op = ib.bth.opcode;
        let p = ib.bth.psn;
        if op == rocelink_wire::ib::Opcode::RC_ACKNOWLEDGE
            || op == rocelink_wire::ib::Opcode::RC_ATOMIC_ACKNOWLEDGE
            || op.is_read_response()
        {
            self.req.ack_in_range(p)
        } else {
            p == self.resp.epsn
        }
    }

    /// Learn the peer's source port from a packet it accepted in sequence, if it pins one.
    #[inline]
    pub(crate) fn learn_peer_port(&mut self, src: SocketAddr) {
        if self.pin_peer_port && self.peer_port.is_none() && self.state != QpState::Error {
            self.peer_port = Some(src.port());
        }
    }

    /// Enter ERROR: flush every send and receive WR with `WrFlushError`.
    pub(crate) fn enter_error(&mut self, sinks: &mut Sinks, why: crate::ErrorCause) {
        if self.state == QpState::Error {
            return;
        }
        self.state = QpState::Error;
        for w in self.req.drain() {
            let wc = self.wc_send(&w, WcStatus::WrFlushError);
            sinks.cqs.push(self.send_cq, wc);
        }
        while let Some(r) = self.rq.pop_front() {
            sinks.cqs.push(self.recv_cq, self.recv_flushed(&r));
        }
        self.resp.clear();
        sinks
            .events
            .push_back(Event::QpError { qpn: self.qpn, why });
    }

    /// The completion of receive `r`, flushed.
    pub(crate) fn recv_flushed(&self, r: &RecvWr) -> WorkCompletion {
        WorkCompletion {
            wr_id: r.wr_id,
            status: WcStatus::WrFlushError,
            opcode: WcOpcode::Recv,
            qpn: self.qpn,
            byte_len: 0,
            imm: None,
            src_qp: 0,
            src: None,
            solicited: false,
        }
    }

    pub(crate) fn wc_send(&self, wr: &SendWr, status: WcStatus) -> WorkCompletion {
        use crate::wr::SendOp::*;
        let opcode = match wr.op {
            Send | SendImm(_) | UdSend { .. } => WcOpcode::Send,
            Write { .. } | WriteImm { .. } => WcOpcode::RdmaWrite,
            Read { .. } => WcOpcode::RdmaRead,
            CompareSwap { .. } => WcOpcode::CompareSwap,
            FetchAdd { .. } => WcOpcode::FetchAdd,
        };
        WorkCompletion {
            wr_id: wr.wr_id,
            status,
            opcode,
            qpn: self.qpn,
            byte_len: wr.sg_list.total_len() as u32,
            imm: None,
            src_qp: 0,
            src: None,
            solicited: false,
        }
    }

    /// Where a datagram to `dst` goes, with this QP's kept ICRC prefixes.
    pub(crate) fn route(&mut self, dst: SocketAddr) -> Route<'_> {
        Route {
            src: self.local,
            dst,
            prefixes: &mut self.tx_prefixes,
        }
    }

    /// A response (ACK, NAK, READ response) is waiting to be sent.
    pub(crate) fn has_response(&self) -> bool {
        self.resp.has_output()
    }

    /// Earliest timer of this QP.
    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        match (self.req.next_timeout(), self.resp.held_until()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Run this QP's timers that are due.
    pub(crate) fn handle_timeout(&mut self, now: Instant, sinks: &mut Sinks) {
        self.held_ack_due(now);
        if self.req.next_timeout().is_some_and(|t| t <= now) {
            self.handle_request_timeout(now, sinks);
        }
    }
}

/// Payloads from this size on are left in their region by `poll_transmit_gather` (a
/// request's, a READ response's).
pub(crate) const GATHER_MIN: usize = 512;

/// Where a packet's payload comes from.
pub(crate) enum Body<'a> {
    /// Contiguous bytes — of a region the endpoint owns (with its key and the offset, so a
    /// gather send may leave them there), or inline data.
    Slice(&'a [u8], Option<(u32, usize)>),
    /// `len` bytes at `off` of a gather list whose pieces are copied into the packet one by
    /// one: several pieces, or a region over shared memory (never lent as a slice).
    Pieces {
        mrs: &'a MrTable,
        sg: SgList,
        off: u64,
        len: usize,
        need: Access,
    },
}

impl<'a> Body<'a> {
    /// The `len` bytes at `off` of the message gathered from `sg` (each piece needing
    /// `need`): one slice when they lie in one piece of an owned region, else pieces.
    pub(crate) fn of(mrs: &'a MrTable, sg: &SgList, off: u64, len: usize, need: Access) -> Self {
        if len == 0 {
            return Body::Slice(&[], None);
        }
        if let Some(mut p) = sg.pieces(off, len as u64)
            && let (Some((s, o, n)), None) = (p.next(), p.next())
            && let Ok(r) = mrs.get(s.lkey)
            && let Ok((b, at)) = r.slice_at(s.va + o, n, need)
        {
            return Body::Slice(b, Some((s.lkey, at)));
        }
        Body::Pieces {
            mrs,
            sg: *sg,
            off,
            len,
            need,
        }
    }

    /// Copy the bytes into `dst` (exactly their length); what failed when a piece's
    /// region is gone or refuses.
    fn copy_to(&self, dst: &mut [u8]) -> Result<(), AccessError> {
        match *self {
            Body::Slice(b, _) => {
                dst.copy_from_slice(b);
                Ok(())
            }
            Body::Pieces {
                mrs,
                sg,
                off,
                len,
                need,
            } => {
                let oob = AccessError::OutOfBounds {
                    va: off,
                    len: len as u64,
                };
                let mut at = 0usize;
                for (s, o, n) in sg.pieces(off, len as u64).ok_or(oob)? {
                    let n = n as usize;
                    mrs.get(s.lkey)?
                        .read(s.va + o, &mut dst[at..at + n], need)?;
                    at += n;
                }
                Ok(())
            }
        }
    }
}

/// Build a datagram of `ib` carrying `body` along `route`. With `gather` — for a sender
/// that gathers — and a payload in one region worth it, only the headers go into `buf` and
/// the payload stays where it is (the returned gather says where, with the tail);
/// otherwise the whole packet is written. Returns the bytes written to `buf`, or why a
/// piece of the payload could not be read.
pub(crate) fn build_datagram(
    buf: &mut Vec<u8>,
    ib: &IbRepr,
    body: Body<'_>,
    gather: bool,
    route: Route<'_>,
) -> Result<(usize, Option<crate::Gather>), AccessError> {
    match body {
        // small payloads are cheaper copied than sent as separate iovecs
        Body::Slice(payload, Some((lkey, offset))) if gather && payload.len() >= GATHER_MIN => {
            let (n, tail, tail_len) = build_headers(buf, ib, payload, route);
            let g = crate::Gather {
                lkey,
                offset,
                len: payload.len(),
                tail,
                tail_len,
            };
            Ok((n, Some(g)))
        }
        Body::Slice(payload, _) => Ok((build_packet(buf, ib, payload, route), None)),
        pieces => build_packet_with(buf, ib, &pieces, route).map(|n| (n, None)),
    }
}

/// Where a datagram of this QP goes and how its ICRC starts: our address, the peer's, and
/// the QP's kept ICRC prefixes.
pub(crate) struct Route<'a> {
    pub(crate) src: SocketAddr,
    pub(crate) dst: SocketAddr,
    pub(crate) prefixes: &'a mut PrefixCache,
}

impl Route<'_> {
    /// The ICRC of a datagram of `ib_len` bytes (BTH … ICRC) whose headers are `headers`
    /// and whose other covered bytes are `rest`, in order. `None` for mixed families or
    /// headers shorter than a BTH (a bug: the caller leaves the ICRC zero, not panics).
    fn icrc(&mut self, ib_len: usize, headers: &[u8], rest: [&[u8]; 2]) -> Option<u32> {
        let (bth, ext) = headers.split_first_chunk::<{ rocelink_wire::ib::BTH_LEN }>()?;
        let mut hs = self.prefixes.get(&self.src, &self.dst, ib_len)?;
        hs.update_headers(bth, ext);
        for r in rest {
            hs.update(r);
        }
        Some(hs.finalize())
    }
}

/// Write only the headers of `ib` into `buf`, and return their length with the tail (zero
/// pad, then the ICRC computed over headers + `payload` + pad for a datagram along `route`)
/// — for a gather send that takes `payload` from where it is.
pub(crate) fn build_headers(
    buf: &mut Vec<u8>,
    ib: &IbRepr,
    payload: &[u8],
    mut route: Route<'_>,
) -> (usize, [u8; 8], usize) {
    let h = ib.header_len();
    buf.resize(h, 0);
    ib.emit_headers(buf);
    let pad = ib.buffer_len() - h - payload.len() - rocelink_wire::ib::ICRC_LEN;
    let mut tail = [0u8; 8];
    // as in build_packet, a failure would be a bug: leave the ICRC zero rather than panic
    if let Some(c) = route.icrc(ib.buffer_len(), &buf[..h], [payload, &tail[..pad]]) {
        tail[pad..pad + 4].copy_from_slice(&c.to_le_bytes());
    }
    (h, tail, pad + 4)
}

/// Write `ib` (headers from the repr, `payload`, zero pad) and its ICRC for a datagram
/// along `route` into `buf`. Returns the datagram length.
pub(crate) fn build_packet(
    buf: &mut Vec<u8>,
    ib: &IbRepr,
    payload: &[u8],
    mut route: Route<'_>,
) -> usize {
    let n = ib.buffer_len();
    let h = ib.header_len();
    // emit writes every byte (headers, payload, zero pad, ICRC placeholder): a reused
    // buffer only needs the right length, not zeroing
    buf.resize(n, 0);
    ib.emit(buf, payload);
    // Addresses of one family and a length that fits UDP are guaranteed by the QP setup
    // and the MTU; a failure here would be a bug, so leave the ICRC zero rather than panic.
    let body = n - rocelink_wire::ib::ICRC_LEN;
    if let Some(c) = route.icrc(n, &buf[..h], [&buf[h..body], &[]]) {
        buf[body..].copy_from_slice(&c.to_le_bytes());
    }
    n
}

/// As [`build_packet`], the payload copied from `body` into place.
fn build_packet_with(
    buf: &mut Vec<u8>,
    ib: &IbRepr,
    body: &Body<'_>,
    mut route: Route<'_>,
) -> Result<usize, AccessError> {
    let n = ib.buffer_len();
    let h = ib.header_len();
    let body_end = h + ib.payload_len;
    buf.resize(n, 0);
    ib.emit_headers(buf);
    body.copy_to(&mut buf[h..body_end])?;
    let crc_at = n - rocelink_wire::ib::ICRC_LEN;
    buf[body_end..].fill(0);
    if let Some(c) = route.icrc(n, &buf[..h], [&buf[h..crc_at], &[]]) {
        buf[crc_at..].copy_from_slice(&c.to_le_bytes());
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocelink_wire::ib::{BthRepr, Opcode, RethRepr};

    /// Datagrams built with kept prefixes (a miss, then hits, across lengths, flows and
    /// both address families) carry the ICRC that the wire crate computes from scratch.
    #[test]
    fn kept_prefixes_give_the_icrc_computed_from_scratch() {
        let mut cache = PrefixCache::default();
        let flows = [
            ("10.0.0.1:4791", "10.0.0.2:4791"),
            ("10.0.0.1:4791", "10.0.0.3:50000"),
            ("[fd00::1]:4791", "[fd00::2]:4791"),
        ];
        let payload: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 253) as u8).collect();
        let mut buf = Vec::new();
        for round in 0..3 {
            for (f, (a, b)) in flows.iter().enumerate() {
                let (src, dst) = (a.parse().unwrap(), b.parse().unwrap());
                for (k, len) in [4096usize, 1, 4095, 0, 4096].into_iter().enumerate() {
                    let mut ib = IbRepr {
                        bth: BthRepr {
                            opcode: Opcode::RC_RDMA_WRITE_MIDDLE,
                            dest_qp: 0x11,
                            psn: (round * 100 + k) as u32,
                            pkey: 0xFFFF,
                            pad_count: rocelink_wire::ib::pad_for(len),
                            ..Default::default()
                        },
                        payload_len: len,
                        ..Default::default()
                    };
                    if k == 1 {
                        ib.bth.opcode = Opcode::RC_RDMA_WRITE_FIRST;
                        ib.reth = Some(RethRepr {
                            va: 0x1000,
                            rkey: 7,
                            dma_len: 9000,
                        });
                    }
                    let prefixes = &mut cache;
                    let n =
                        build_packet(&mut buf, &ib, &payload[..len], Route { src, dst, prefixes });
                    let c = rocelink_wire::icrc::check_socket(src, dst, &buf[..n]).unwrap();
                    assert!(c.ok(), "round {round}, flow {f}, packet {k}: {c:?}");
                    assert_ne!(c.received, 0);
                    // the gathered form: headers, then the tail after the payload
                    let prefixes = &mut cache;
                    let (h, tail, tl) =
                        build_headers(&mut buf, &ib, &payload[..len], Route { src, dst, prefixes });
                    let mut whole = buf[..h].to_vec();
                    whole.extend_from_slice(&payload[..len]);
                    whole.extend_from_slice(&tail[..tl]);
                    assert_eq!(whole.len(), n);
                    assert!(
                        rocelink_wire::icrc::check_socket(src, dst, &whole)
                            .unwrap()
                            .ok()
                    );
                }
            }
        }
    }
}
