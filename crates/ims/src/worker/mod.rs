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
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// A buffer unit that answers nothing for this long while frames are unanswered is
    /// gone: the stream ends with [`Error::Silent`].
    pub silence: Duration,
    /// Answers are taken only with a PSN at most this many ahead of the next one expected
    /// from the unit (the unit's UC SEND stream starts at 0 and counts one per answer; a
    /// lost answer leaves a gap). Others are dropped and counted
    /// ([`rocelink_transport::QpStats::psn_refused`]).
    pub answer_window: u32,
    /// The UDP port the unit's data QP answers from, if not the one its DATA_RES came from
    /// (a unit whose QPs each send from their own port). Answers from any other port are
    /// dropped ([`rocelink_transport::QpStats::foreign_port`]).
    pub unit_data_port: Option<u16>,
    /// The DSCP of status requests and of WRITEs (SL0 and SL1 by default).
    #[serde(default)]
    pub levels: crate::ServiceLevels,
}

/// Which frames a worker marks bad ([`WorkerConfig::mark_bad`]): every `every`-th frame
/// (frames `every - 1`, `2 * every - 1`, …) goes out the first time with `marks`
/// ([`rocelink_wire::ims::marks`]) on its last packet; the buffer unit NACKs it and the
/// worker sends it again unmarked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
            silence: Duration::from_secs(60),
            answer_window: 1024,
            unit_data_port: None,
            levels: crate::ServiceLevels::default(),
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
            return Err(Error::PacketSize(p));
        }
        let last = match frame_len % p {
            0 => p,
            r => r,
        };
        if frame_len < align || last < align || frame_len > 1 << 31 {
            return Err(Error::FrameSize {
                frame: frame_len,
                packet: p,
                last,
            });
        }
        if self.in_flight == 0 {
            return Err(Error::InFlight);
        }
        let bytes = (self.in_flight as u64).saturating_mul(frame_len as u64);
        if bytes > MAX_SEND_BUFFER {
            return Err(Error::SendBuffer {
                frames: self.in_flight,
                frame: frame_len,
                bytes,
            });
        }
        if self.answer_window == 0 || self.answer_window > 1 << 22 {
            return Err(Error::AnswerWindow(self.answer_window));
        }
        if let Some(m) = self.mark_bad
            && (m.every == 0 || m.marks & !marks::ALL != 0 || m.marks == 0)
        {
            return Err(Error::MarkBad {
                every: m.every,
                marks: m.marks,
            });
        }
        self.levels.check()
    }
}

/// The most send buffer a worker allocates (frames in flight × frame size).
pub const MAX_SEND_BUFFER: u64 = 16 << 30;

/// Where a worker is.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
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
    /// Stopped for good (serialised as the error's text with its sources).
    Failed(#[serde(serialize_with = "crate::error::serialize_text")] Error),
}

/// Counters of a worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerStats {
    /// Frames ACKed.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// ACKs received (late duplicates included).
    pub acked: u64,
    /// NACK packets received.
    pub nacks: u64,
    /// NACK causes received (a NACK with two causes counts under each).
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
    /// ACKs refused: for a frame none of whose transmissions had completely left, so no
    /// buffer unit can have received it whole (forged, or not about this stream).
    pub early_acks: u64,
    /// The unit never confirmed the status channel's end (every STAT_DOWN lost, or the
    /// unit gone after closing the data channel). Nothing is at stake: every frame was
    /// ACKed and the data channel is down; a unit forgets a silent worker.
    pub leave_unconfirmed: bool,
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
    /// The frame's length (at most the worker's frame length).
    len: usize,
    state: SlotState,
    /// Transmissions posted and not yet completed (the bytes must stay until then).
    queued: u32,
    /// A transmission of this frame has completely left (only then can an ACK be true).
    sent_whole: bool,
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
    /// The source had no frame yet: ask it again then.
    source_retry: Option<Instant>,
    stop: bool,
    seq: u64,
    /// When the unit last answered a frame (or the data channel opened).
    last_answer: Option<Instant>,
    /// Why the stream failed, while the channels are being closed before it ends.
    failing: Option<Error>,
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
            traffic_class: cfg.levels.status_tc(),
            ..QpInit::new(QpType::Ud)
        })?;
        ep.ready_qp(status_qpn, cfg.status_qkey, None, 0, Mtu::M4096)?;
        let status = Mailbox::new(ep, status_qpn, scq, 16, 64 + 256, true)?;
        let (rcq, send_cq) = (ep.create_cq(), ep.create_cq());
        let data_qpn = ep.create_qp(QpInit {
            send_cq,
            recv_cq: rcq,
            // answers only from the unit's data QP as it first answered, in its PSN order
            pin_peer_port: true,
            psn_window: cfg.answer_window,
            traffic_class: cfg.levels.data_tc(),
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
                len: frame_len,
                state: SlotState::Free,
                queued: 0,
                sent_whole: false,
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
            source_retry: None,
            stop: false,
            seq: 0,
            last_answer: None,
            failing: None,
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
        // frames are sent again only while streaming (not while closing after a failure)
        let streaming = self.state == WorkerState::Streaming;
        let frames = self.slots.iter().filter_map(|s| match s.state {
            SlotState::Sent { deadline, .. } if streaming => Some(deadline),
            SlotState::Waiting { until } if streaming => Some(until),
            _ => None,
        });
        let status = self
            .asked
            .map(|(first, last)| (last + self.cfg.retry).min(first + self.cfg.setup_timeout));
        let waiting = self
            .slots
            .iter()
            .any(|s| matches!(s.state, SlotState::Sent { .. } | SlotState::Waiting { .. }));
        let silence = self
            .last_answer
            .filter(|_| waiting && self.state == WorkerState::Streaming)
            .map(|t| t + self.cfg.silence);
        let source = self.source_retry.filter(|_| streaming && !self.stop);
        frames.chain(status).chain(silence).chain(source).min()
    }

    /// Act on what arrived and on what is due; send frames from `source` while fewer
    /// than the configured number are in flight.
    pub fn poll(&mut self, ep: &mut Endpoint, now: Instant, source: &mut dyn FrameSource) {
        if self.finished() {
            return;
        }
        if let Err(e) = self.step(ep, now, source) {
            self.fail(ep, now, e);
        }
    }

    /// End the stream with `e`: first, as the specification's worker does, take the
    /// channels the unit holds for it down (DATA_TERM, STAT_TERM); the frames still in
    /// flight stay unanswered. A unit that does not answer that ends it at once.
    fn fail(&mut self, ep: &mut Endpoint, now: Instant, e: Error) {
        let next = match (&self.state, self.failing.is_some()) {
            // already closing after a failure: the unit did not answer that either; or it
            // answers nothing at all
            (_, true) => None,
            _ if matches!(e, Error::Silent { .. }) => None,
            // the unit answered STAT_REQ (with a version this worker refuses): it holds an
            // entry for us
            (WorkerState::Introducing, _) if matches!(e, Error::Version { .. }) => {
                Some((WorkerState::Leaving, Method::StatTerm))
            }
            // no data channel for us, or no DATA_RES: the status channel is still ours
            (WorkerState::Connecting, _)
                if matches!(e, Error::Full { .. } | Error::NoAnswer { .. }) =>
            {
                Some((WorkerState::Leaving, Method::StatTerm))
            }
            (WorkerState::Connecting | WorkerState::Streaming, _) => {
                Some((WorkerState::Closing, Method::DataTerm))
            }
            _ => None,
        };
        let Some((state, method)) = next else {
            self.state = WorkerState::Failed(self.failing.take().unwrap_or(e));
            return;
        };
        self.failing = Some(e);
        self.state = state;
        if self.ask(ep, now, method, true).is_err() {
            let e = self.failing.take().unwrap_or(Error::Closing);
            self.state = WorkerState::Failed(e);
        }
    }

    /// The VAs of the frames sent and never acknowledged (in the order they were taken).
    pub fn unacknowledged(&self) -> Vec<u64> {
        let mut v: Vec<(u64, u64)> = self
            .slots
            .iter()
            .filter(|s| matches!(s.state, SlotState::Sent { .. } | SlotState::Waiting { .. }))
            .map(|s| (s.index, s.va))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, va)| va).collect()
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
                s.sent_whole |= wc.status == WcStatus::Success;
                if s.queued == 0 && s.state == SlotState::Acked {
                    s.state = SlotState::Free;
                }
            }
            if wc.status != WcStatus::Success && wc.status != WcStatus::WrFlushError {
                return Err(Error::SendFailed(wc.status));
            }
        }
        while let Some(l) = self.data.poll(ep) {
            if let Ok(a) = AckRepr::parse(l.data()) {
                self.answer(ep, now, a)?;
            }
        }
        if let Some((first, last)) = self.asked {
            if now >= first + self.cfg.setup_timeout {
                if self.state == WorkerState::Leaving && self.failing.is_none() {
                    // every frame ACKed, the data channel down: only the goodbye is missing
                    self.stats.leave_unconfirmed = true;
                    self.state = WorkerState::Done;
                    self.asked = None;
                    return Ok(());
                }
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
        self.check_silence(now)?;
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
        if p.lid != self.lid || p.qpn != self.status_qpn || src.ip() != self.cfg.server.ip() {
            return Ok(()); // not about us, or not from the unit
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
            (WorkerState::Introducing, Method::StatDown) => {
                return Err(Error::Full {
                    server: self.cfg.server,
                    what: "worker",
                });
            }
            (WorkerState::Connecting, Method::DataDown) => {
                return Err(Error::Full {
                    server: self.cfg.server,
                    what: "data channel",
                });
            }
            (WorkerState::Connecting, Method::DataRes) => {
                let mtu = Mtu::from_bytes(self.cfg.packet_bytes)
                    .unwrap_or(Mtu::Jumbo(self.cfg.packet_bytes as u16));
                // RoCE v2: every packet goes to the unit's RoCE port, whatever port its
                // status QP answered from
                let to = SocketAddr::new(src.ip(), self.cfg.server.port());
                ep.connect_qp(self.data_qpn, Some(to), p.qkey_or_qpnd, mtu)?;
                // answers come from the unit as it set the channel up, not from whoever
                // sends first
                let port = self.cfg.unit_data_port.unwrap_or(src.port());
                ep.set_peer_port(self.data_qpn, port)?;
                self.rkey = p.rkey;
                self.next_va = align_up(p.va);
                self.first_va = self.next_va;
                self.state = WorkerState::Streaming;
                self.asked = None;
                self.last_answer = Some(now);
            }
            (WorkerState::Closing, Method::DataDown) => {
                self.state = WorkerState::Leaving;
                self.ask(ep, now, Method::StatTerm, true)?;
            }
            (WorkerState::Leaving, Method::StatDown) => {
                self.state = match self.failing.take() {
                    Some(e) => WorkerState::Failed(e),
                    None => WorkerState::Done,
                };
                self.asked = None;
            }
            _ => {} // a repeated answer
        }
        Ok(())
    }

    /// Its data QPN (the UC QP it sends frames from and takes answers on).
    pub fn data_qpn(&self) -> u32 {
        self.data_qpn
    }

    /// Its status QPN (with its LID, its identity at the buffer unit).
    pub fn status_qpn(&self) -> u32 {
        self.status_qpn
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
