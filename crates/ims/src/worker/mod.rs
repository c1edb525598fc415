//! The worker (rasterizer): introduces itself on the status channel, opens a data channel,
//! streams frames as UC RDMA WRITEs with a bounded number in flight, and acts on each
//! answer as Table 3.4 says — done on ACK, again on a receive-error NACK, again after a
//! wait on an outside-window NACK, stop on an invalid R_Key or VA, again on a timeout.

use crate::mailbox::Mailbox;
use crate::nack::NackCounts;
use crate::source::FrameSource;
use crate::{ALIGN, Error, MAX_PACKET, STATUS_QKEY, STATUS_QPN, VERSION, align_up, lid_of};
use rocelink_transport::{
    Access, CqId, Endpoint, MrKeys, Mtu, QpInit, QpType, SendOp, SendWr, Sge, UdDest, WcStatus,
};
use rocelink_wire::ims::{
    AckRepr, AckType, Events, Method, SenderAction, StatusRepr, marks, status,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod data;

/// How a worker is set up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerConfig {
    /// The buffer unit (IP and UDP port 4791).
    pub server: SocketAddr,
    /// Its status QPN.
    pub status_qpn: u32,
    /// Its status Q_Key (also this worker's own).
    pub status_qkey: u32,
    /// Payload bytes per packet: 64 to 4096 in steps of 64.
    pub packet_bytes: usize,
    /// Most frames sent and not yet answered.
    pub in_flight: usize,
    /// A frame with no answer this long is sent again (20 s in the specification).
    pub timeout: Duration,
    /// After an outside-window NACK, wait this long before sending the frame again.
    pub wait: Duration,
    /// Status requests with no answer are repeated this often...
    pub retry: Duration,
    /// ...until this long has passed.
    pub setup_timeout: Duration,
    /// The protocol major version this worker speaks (a buffer unit announcing another is
    /// refused).
    pub major: u8,
    /// Mark frames bad on their first transmission, to exercise a buffer unit's EBF/EBP
    /// handling (none by default: this worker only sends frames it holds whole).
    pub mark_bad: Option<MarkBad>,
}

/// Which frames a worker marks bad ([`WorkerConfig::mark_bad`]): every `every`-th frame
/// (frames `every - 1`, `2 * every - 1`, …) goes out the first time with `marks`
/// ([`rocelink_wire::ims::marks`]) on its last packet; the buffer unit NACKs it and the
/// worker sends it again unmarked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkBad {
    /// 1 marks every frame, 100 every hundredth.
    pub every: u64,
    /// [`marks::EBF`] and/or [`marks::EBP`].
    pub marks: u8,
}

impl WorkerConfig {
    /// Defaults for a buffer unit at `server`: 4096-byte packets, 4 frames in flight (what
    /// a receiver's socket buffer holds of 1 MiB frames), the specification's 20 s timeout,
    /// 1 ms outside-window wait.
    pub fn new(server: SocketAddr) -> WorkerConfig {
        WorkerConfig {
            server,
            status_qpn: STATUS_QPN,
            status_qkey: STATUS_QKEY,
            packet_bytes: MAX_PACKET,
            in_flight: 4,
            timeout: Duration::from_secs(20),
            wait: Duration::from_millis(1),
            retry: Duration::from_millis(250),
            setup_timeout: Duration::from_secs(5),
            major: VERSION.0,
            mark_bad: None,
        }
    }

    /// Frames in flight for frames of `frame_len` bytes when none is chosen: as many as
    /// make 4 MiB (what a receiver's socket buffer typically holds; more are lost in it
    /// and cost retransmissions), 1 to 64.
    pub fn in_flight_for(frame_len: usize) -> usize {
        ((4 << 20) / frame_len.max(1)).clamp(1, 64)
    }

    /// Why frames of `frame_len` bytes cannot be sent with this configuration, if so.
    pub fn check(&self, frame_len: usize) -> Result<(), Error> {
        let p = self.packet_bytes;
        let align = ALIGN as usize;
        if !(align..=MAX_PACKET).contains(&p) || !p.is_multiple_of(align) {
            return Err(Error::Config(format!(
                "packet size {p}: must be 64 to 4096 bytes in steps of 64"
            )));
        }
        let last = match frame_len % p {
            0 => p,
            r => r,
        };
        if frame_len < align || last < align || frame_len > 1 << 31 {
            return Err(Error::Config(format!(
                "frame size {frame_len}: must be 64 bytes to 2 GiB, and its last {p}-byte packet at least 64 bytes (it would be {last})"
            )));
        }
        if self.in_flight == 0 {
            return Err(Error::Config("frames in flight: at least 1".into()));
        }
        if let Some(m) = self.mark_bad
            && (m.every == 0 || m.marks & !marks::ALL != 0 || m.marks == 0)
        {
            return Err(Error::Config(format!(
                "marking every {} frame(s) with {:#x}: at least every frame, and EBF (0x2) and/or EBP (0x1)",
                m.every, m.marks
            )));
        }
        Ok(())
    }
}

/// Where a worker is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum WorkerState {
    /// STAT_REQ sent, waiting for STAT_RES.
    Introducing,
    /// DATA_REQ sent, waiting for DATA_RES.
    Connecting,
    /// Sending frames.
    Streaming,
    /// Every frame answered; DATA_TERM sent, waiting for DATA_DOWN.
    Closing,
    /// STAT_TERM sent, waiting for STAT_DOWN.
    Leaving,
    /// Both channels are down.
    Done,
    /// Stopped for good.
    Failed(Error),
}

/// Counters of a worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Frames ACKed.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// ACKs received (late duplicates included).
    pub acked: u64,
    /// NACKs received, per cause.
    pub nacked: NackCounts,
    /// Frames sent again (after a NACK or a timeout).
    pub retransmissions: u64,
    /// Of those, after a timeout.
    pub timeouts: u64,
    /// Outside-window NACKs (each one a wait).
    pub window_stalls: u64,
    /// Answers for no frame in flight (a late answer to a frame already ACKed).
    pub stale: u64,
    /// Frames sent marked bad ([`WorkerConfig::mark_bad`]).
    pub marked: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SlotState {
    Free,
    /// Sent; no answer yet. `seq` orders transmissions.
    Sent {
        deadline: Instant,
        seq: u64,
    },
    /// NACKed outside the window: send again at `until`.
    Waiting {
        until: Instant,
    },
    /// ACKed, but a transmission is still queued: free once it left.
    Acked,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    index: u64,
    va: u64,
    state: SlotState,
    /// Transmissions posted and not yet completed (the bytes must stay until then).
    queued: u32,
}

/// A worker over an endpoint.
#[derive(Debug)]
pub struct Worker {
    cfg: WorkerConfig,
    lid: u32,
    status_qpn: u32,
    status: Mailbox,
    data_qpn: u32,
    data: Mailbox,
    send_cq: CqId,
    frames: MrKeys,
    frame_len: usize,
    state: WorkerState,
    asked: Option<(Instant, Instant)>,
    rkey: u32,
    first_va: u64,
    next_va: u64,
    next_index: u64,
    slots: Vec<Slot>,
    source_done: bool,
    stop: bool,
    seq: u64,
    stats: WorkerStats,
}

impl Worker {
    /// A worker for frames of `frame_len` bytes on `ep` (whose address is what the buffer
    /// unit sees); the STAT_REQ goes out on the first [`Worker::poll`].
    pub fn new(ep: &mut Endpoint, cfg: WorkerConfig, frame_len: usize) -> Result<Worker, Error> {
        cfg.check(frame_len)?;
        let lid = lid_of(ep.config().local);
        let scq = ep.create_cq();
        let status_qpn = ep.create_qp(QpInit {
            send_cq: scq,
            recv_cq: scq,
            ..QpInit::new(QpType::Ud)
        })?;
        ep.ready_qp(status_qpn, cfg.status_qkey, None, 0, Mtu::M4096)?;
        let status = Mailbox::new(ep, status_qpn, scq, 16, 64 + 256, true)?;
        let (rcq, send_cq) = (ep.create_cq(), ep.create_cq());
        let data_qpn = ep.create_qp(QpInit {
            send_cq,
            recv_cq: rcq,
            ..QpInit::new(QpType::Uc)
        })?;
        // receives may be posted from INIT on; connected at DATA_RES
        ep.modify_qp(data_qpn, rocelink_transport::Modify::Init { qkey: 0 })?;
        let data = Mailbox::new(ep, data_qpn, rcq, 512, 1, false)?;
        let frames = ep.register_mr(vec![0u8; cfg.in_flight * frame_len], 0, Access::NONE);
        let slots = vec![
            Slot {
                index: 0,
                va: 0,
                state: SlotState::Free,
                queued: 0,
            };
            cfg.in_flight
        ];
        Ok(Worker {
            cfg,
            lid,
            status_qpn,
            status,
            data_qpn,
            data,
            send_cq,
            frames,
            frame_len,
            state: WorkerState::Introducing,
            asked: None,
            rkey: 0,
            first_va: 0,
            next_va: 0,
            next_index: 0,
            slots,
            source_done: false,
            stop: false,
            seq: 0,
            stats: WorkerStats::default(),
        })
    }

    /// Where it is.
    pub fn state(&self) -> &WorkerState {
        &self.state
    }

    /// Counters.
    pub fn stats(&self) -> WorkerStats {
        self.stats
    }

    /// Frames sent and not yet ACKed.
    pub fn in_flight(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.state != SlotState::Free)
            .count()
    }

    /// Send no new frame; close both channels once every frame sent was ACKed.
    pub fn stop(&mut self) {
        self.stop = true;
    }

    /// True once both channels are down or it failed.
    pub fn finished(&self) -> bool {
        matches!(self.state, WorkerState::Done | WorkerState::Failed(_))
    }

    /// When [`Worker::poll`] must run again though nothing arrives.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.finished() {
            return None;
        }
        let frames = self.slots.iter().filter_map(|s| match s.state {
            SlotState::Sent { deadline, .. } => Some(deadline),
            SlotState::Waiting { until } => Some(until),
            _ => None,
        });
        let status = self
            .asked
            .map(|(first, last)| (last + self.cfg.retry).min(first + self.cfg.setup_timeout));
        frames.chain(status).min()
    }

    /// Act on what arrived and on what is due; send frames from `source` while fewer
    /// than the configured number are in flight.
    pub fn poll(&mut self, ep: &mut Endpoint, now: Instant, source: &mut dyn FrameSource) {
        if self.finished() {
            return;
        }
        if let Err(e) = self.step(ep, now, source) {
            self.state = WorkerState::Failed(e);
        }
    }

    fn step(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        source: &mut dyn FrameSource,
    ) -> Result<(), Error> {
        if self.asked.is_none() && self.state == WorkerState::Introducing {
            self.ask(ep, now, Method::StatReq, true)?;
        }
        while let Some(l) = self.status.poll(ep) {
            if let (Ok(p), Some(src)) = (StatusRepr::parse(l.data()), l.src) {
                self.status_answer(ep, now, p, src)?;
            }
        }
        while let Some(wc) = ep.poll_cq(self.send_cq) {
            if let Some(s) = self.slots.get_mut(wc.wr_id as usize) {
                s.queued = s.queued.saturating_sub(1);
                if s.queued == 0 && s.state == SlotState::Acked {
                    s.state = SlotState::Free;
                }
            }
            if wc.status != WcStatus::Success && wc.status != WcStatus::WrFlushError {
                return Err(Error::Source(format!("frame send failed: {:?}", wc.status)));
            }
        }
        while let Some(l) = self.data.poll(ep) {
            if let Ok(a) = AckRepr::parse(l.data()) {
                self.answer(ep, now, a)?;
            }
        }
        if let Some((first, last)) = self.asked {
            if now >= first + self.cfg.setup_timeout {
                let what = match self.state {
                    WorkerState::Introducing => "STAT_RES",
                    WorkerState::Connecting => "DATA_RES",
                    WorkerState::Closing => "DATA_DOWN",
                    _ => "STAT_DOWN",
                };
                return Err(Error::NoAnswer {
                    what,
                    server: self.cfg.server,
                    secs: self.cfg.setup_timeout.as_secs_f64(),
                });
            }
            if now >= last + self.cfg.retry {
                let method = match self.state {
                    WorkerState::Introducing => Method::StatReq,
                    WorkerState::Connecting => Method::DataReq,
                    WorkerState::Closing => Method::DataTerm,
                    _ => Method::StatTerm,
                };
                self.ask(ep, now, method, false)?;
            }
        }
        if self.state != WorkerState::Streaming {
            return Ok(());
        }
        self.resend_due(ep, now)?;
        self.send_new(ep, now, source)?;
        if (self.stop || self.source_done) && self.in_flight() == 0 {
            self.state = WorkerState::Closing;
            self.ask(ep, now, Method::DataTerm, true)?;
        }
        Ok(())
    }

    /// Send a status request (`first`: a new one, its setup clock restarts).
    fn ask(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        method: Method,
        first: bool,
    ) -> Result<(), Error> {
        let p = StatusRepr {
            major: self.cfg.major,
            minor: VERSION.1,
            method,
            lid: self.lid,
            qpn: self.status_qpn,
            qkey_or_qpnd: if method == Method::DataReq {
                self.data_qpn
            } else {
                self.cfg.status_qkey
            },
            va: 0,
            rkey: 0,
        };
        let mut b = [0u8; status::PACKET_LEN];
        p.emit(&mut b);
        let op = SendOp::UdSend {
            dest: UdDest {
                addr: self.cfg.server,
                qpn: self.cfg.status_qpn,
                qkey: self.cfg.status_qkey,
            },
            imm: None,
        };
        self.status.send(ep, op, &b)?;
        let since = match self.asked {
            Some((f, _)) if !first => f,
            _ => now,
        };
        self.asked = Some((since, now));
        Ok(())
    }

    fn status_answer(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        p: StatusRepr,
        src: SocketAddr,
    ) -> Result<(), Error> {
        if p.lid != self.lid || p.qpn != self.status_qpn {
            return Ok(()); // not about us
        }
        if p.major != self.cfg.major {
            return Err(Error::Version {
                major: p.major,
                minor: p.minor,
            });
        }
        match (&self.state, p.method) {
            (WorkerState::Introducing, Method::StatRes) => {
                self.state = WorkerState::Connecting;
                self.ask(ep, now, Method::DataReq, true)?;
            }
            (WorkerState::Connecting, Method::DataRes) => {
                let mtu = Mtu::from_bytes(self.cfg.packet_bytes)
                    .unwrap_or(Mtu::Jumbo(self.cfg.packet_bytes as u16));
                ep.connect_qp(self.data_qpn, Some(src), p.qkey_or_qpnd, mtu)?;
                self.rkey = p.rkey;
                self.next_va = align_up(p.va);
                self.first_va = self.next_va;
                self.state = WorkerState::Streaming;
                self.asked = None;
            }
            (WorkerState::Closing, Method::DataDown) => {
                self.state = WorkerState::Leaving;
                self.ask(ep, now, Method::StatTerm, true)?;
            }
            (WorkerState::Leaving, Method::StatDown) => {
                self.state = WorkerState::Done;
                self.asked = None;
            }
            _ => {} // a repeated answer
        }
        Ok(())
    }

    /// The data channel once it is open: (local data QPN, the ring's R_Key, first VA).
    pub fn data_channel(&self) -> Option<(u32, u32, u64)> {
        matches!(self.state, WorkerState::Streaming | WorkerState::Closing).then_some((
            self.data_qpn,
            self.rkey,
            self.first_va,
        ))
    }

    /// The index of the frame at `va` among those in flight (for tests and reports).
    pub fn frame_index(&self, va: u64) -> Option<u64> {
        self.slots
            .iter()
            .find(|s| s.state != SlotState::Free && s.va == va)
            .map(|s| s.index)
    }
}
