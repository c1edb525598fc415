//! The HSB frame receiver: a page ring registered as a memory region at VA 0, a UC QP on
//! rocelink's transport, and per-frame verification — ICRC of every packet (the transport
//! drops failures), R_Key and bounds before placement (the transport), PSN continuity
//! across the whole frame, byte count, and the frame CRC computed as packets land, checked
//! against the metadata record.
//!
//! A slow consumer holds the receiver (it borrows it while it looks at a frame), so
//! packets wait in the socket buffer and, if that overflows, are lost — counted as dropped
//! packets of a damaged frame, never passed off as good.
//!
//! # Frames
//!
//! - The ring is one memory region at VA 0 (as HSB's receivers program base 0); the device
//!   writes page *p* at `p × page_size`, metadata at `p × page_size + round_up(frame, 128)`.
//! - Per frame: PSNs of the `Placed` events must be continuous from the previous frame-end PSN
//!   plus one to the metadata PSN; the frame CRC is computed from the region as each packet lands
//!   (in order) or, if packets were reordered but none is missing, in one pass at the end;
//!   `complete` = no PSN gap, byte count = metadata `bytes_written`, immediate PSN bits match;
//!   `good` = complete and CRC equal. Frame numbers are extended from 16 bits.
//! - The consumer looks at a frame while holding `&mut Receiver`: nothing is placed meanwhile,
//!   so a frame can never change under the consumer; a slow consumer makes the socket buffer
//!   overflow, which shows up as dropped packets of damaged frames.
//! - One frame per `next_frame` call: once a frame ends, the rest of the received batch waits
//!   (in the driver, `run_each` resumes the batch on the next call; in the fast path, a cursor
//!   over the sorted batch). Before this, a batch holding several small frames could overwrite
//!   the page of a frame already queued for the caller.
//!
//! # The fast path
//!
//! The stream is predictable, so the kernel's copy can be the only one. The receiver does
//! not receive by itself: it tells the runtime's landing receive (`runtime::LandingRx`, the
//! one every landing role goes through, below) where the stream goes, and hands what comes
//! back to its frame tracker.
//!
//! - `io::scatter::ScatterRx` calls `recvmmsg` with a *plan*: per predicted segment its headers
//!   (scratch), its payload (a range of the ring region) and its pad + ICRC (scratch), plus a
//!   spill buffer per message for anything longer. A segment's pad + ICRC and the next
//!   segment's headers are adjacent in scratch and share one iovec, so the kernel imports and
//!   walks two iovecs per segment rather than three. With `UDP_GRO` one message holds up to
//!   ⌊65 535 / segment⌋ segments; the receiver's `LandingRx` adapts (`adapting`): a plan names
//!   the larger of what the last two receives brought, plus 8 (all of them again after a
//!   receive that filled it; the larger of two, so a frame's lone metadata packet does not
//!   shrink the plan the next frame's first run needs); then one message per call, because a
//!   second message's plan cannot know where the first ended. Without GRO, 64 messages of one
//!   segment each. `crates/hsb/tests/instructions.rs` counts the whole user-space path per
//!   packet with callgrind, on a stream sent beforehand so every run gets the same batches.
//! - `hsb::host::predict` fills the plan from the page being filled and its high-water mark:
//!   WRITE ONLY slots of the learned packet size up to the window end, each naming the VA its
//!   RETH must carry (`Plan::expect_at`), then the metadata slot, then the next page, never
//!   wrapping the ring inside one plan (bodies must be increasing and disjoint, which
//!   `ScatterRx` checks before the call — a plan can never name bytes outside the region).
//!   A data slot may be moved forward within its page's data area (`movable_to`).
//! - After the call `LandingRx` matches each segment against its slot (size, header layout,
//!   pad, the planned VA or one shifted by lost packets); what the packet may do is the
//!   transport's to decide. Matching segments are handed to `Endpoint::handle_landed`
//!   (below), which verifies and accounts them exactly as whole datagrams. Nothing above the
//!   transport checks a key or writes a region byte: the kernel writes into the region's
//!   landing zone that the transport lends (`Endpoint::landing_zone`), and a run of segments
//!   shifted by lost packets is moved by the transport (`Endpoint::move_landed`, last first)
//!   before it is handed over.
//! - The first segment that does not match, and every later one of that batch, is copied out
//!   (`gather`) before anything is applied, then given to the generic endpoint in arrival
//!   order. Applying a segment never clobbers bytes a later one must still be read from.
//! - What a mispredicted segment wrote stays where the plan put it, so the plan only names
//!   bytes nobody needs: at or above the page's high-water mark (the highest byte any packet
//!   wrote there since the page's last frame end — by either path, including a next frame's
//!   packet that overtook the previous frame end), never in a page the application holds,
//!   and only after every earlier report has been handed out. A damaged frame may hold such
//!   bytes in a lost packet's place; its CRC is informative only. A frame whose packets
//!   strayed is checked by a CRC over the page itself.
//! - Tested against the generic path: the same stream with seeded drops, duplicates, swaps and
//!   corrupted payloads, sent to both, must give equal reports and equal bytes for every good
//!   frame (`crates/hsb/tests/fast_path.rs`, `ROCELINK_FAST_SEEDS=N` for more schedules; 200
//!   passed locally). Matching a slot without its VA, or not moving a shifted run, fails it.

use super::lent::LentFrame;
use super::predict::{Geometry, Prediction};
pub use super::tracker::{FrameReport, ReceiverStats, page_layout};
use super::tracker::{Tracker, TrackerConfig};
use rocelink_io::backend::Backend;
use rocelink_io::shared::{Lender, SharedBuf};
use rocelink_io::tap::Tap;
use rocelink_io::udp::{RecvBatch, UdpConfig, UdpSocket};
use rocelink_runtime::counters::{Board, Link};
use rocelink_runtime::driver::PUBLISH_EVERY;
use rocelink_runtime::{Driver, Handled, LandingRx};
use rocelink_transport::{
    Access, Endpoint, EndpointConfig, Holds, IcrcPolicy, Modify, MrKeys, Mtu, QpInit, QpType,
    RecvWr, RegionMemory, Sge,
};
use rocelink_wire::hsb::metadata::StreamLayout;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Receiver settings.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// Where the device sends (our IP and UDP port).
    pub local: SocketAddr,
    /// The device's IP (packets from elsewhere are refused).
    pub device_ip: Ipv4Addr,
    /// Frame (sensor window) size in bytes.
    pub frame_size: usize,
    /// Pages (frame buffers) in the ring (≤ 4096).
    pub pages: u32,
    /// Link MTU used to size packets (HSB: `(mtu - 74) / 128` pages per packet).
    pub mtu: u32,
    /// Virtual port and data plane.
    pub vp: u32,
    /// Data plane (Ethernet port) of the device.
    pub data_plane: u32,
    /// Immediate and metadata layout.
    pub layout: StreamLayout,
    /// Ask for no separate metadata packet (`md_disable`).
    pub md_disable: bool,
    /// Use this QP number and R_Key (passive mode, for a device configured elsewhere).
    pub qp_rkey: Option<(u32, u32)>,
    /// Socket receive buffer.
    pub recv_buffer: usize,
    /// Receive with `UDP_GRO` (the kernel hands over runs of same-size datagrams at once
    /// instead of segmenting them; the driver splits them again).
    pub gro: bool,
    /// Record every datagram.
    pub pcap: Option<std::path::PathBuf>,
    /// Let the kernel copy predicted payloads straight into the ring (the fast path: the
    /// runtime's landing receive, told where by `host::predict`); off, or with `pcap`, every datagram goes through the generic
    /// endpoint.
    pub fast_path: bool,
    /// Messages per `recvmmsg` on the fast path (with GRO each holds up to 64 KiB).
    pub batch: usize,
    /// Spin on the socket instead of sleeping in `poll` when it is empty (lower latency,
    /// a whole core).
    pub busy_poll: bool,
    /// Receive coalescing on the socket path: while datagrams keep coming, look at the
    /// socket again after this long instead of sleeping until the kernel wakes the thread
    /// for the next one — fewer, larger batches for at most this much added latency (an
    /// AF_XDP port has its own, `XdpPortConfig::rx_coalesce`). Zero (the default): off.
    pub rx_coalesce: Duration,
    /// Receive through this AF_XDP port (a socket on it at `local`'s port) instead of a
    /// UDP socket: every ICRC checked exactly with the real IPv4 header. No fast path,
    /// GRO or socket buffer then.
    pub xdp: Option<rocelink_runtime::xdp::XdpPort>,
    /// Refuse frame ends from the past (a replayed stream: valid ICRCs, old PSNs and
    /// timestamps) instead of reporting them again. On by default; a benchmark that
    /// cycles through pre-built frames turns it off.
    pub reject_stale: bool,
}

impl ReceiverConfig {
    /// What the frame tracker needs of these settings.
    pub(super) fn tracker(&self) -> TrackerConfig {
        TrackerConfig {
            frame_size: self.frame_size,
            pages: self.pages,
            md_disable: self.md_disable,
            layout: self.layout,
            reject_stale: self.reject_stale,
        }
    }

    /// Receive `frame_size`-byte frames from `device_ip` at `local`: 4 pages, MTU 1500, GRO.
    pub fn new(local: SocketAddr, device_ip: Ipv4Addr, frame_size: usize) -> ReceiverConfig {
        ReceiverConfig {
            local,
            device_ip,
            frame_size,
            pages: 4,
            mtu: 1500,
            vp: 0,
            data_plane: 0,
            layout: StreamLayout::default(),
            md_disable: false,
            qp_rkey: None,
            recv_buffer: 32 << 20,
            gro: true,
            pcap: None,
            fast_path: true,
            batch: 0,
            busy_poll: false,
            rx_coalesce: Duration::ZERO,
            xdp: None,
            reject_stale: true,
        }
    }
}

/// The receiver.
#[derive(Debug)]
pub struct Receiver {
    ep: Endpoint,
    drv: RxDriver,
    qpn: u32,
    mr: MrKeys,
    cfg: ReceiverConfig,
    t: Tracker,
    /// The landing receive and where it is told the stream goes (the fast path).
    fast: Option<(LandingRx, Prediction)>,
    /// Pages lent out, and views of the ring for lending (when the receiver owns it).
    holds: Arc<Holds>,
    lender: Option<Lender>,
    posted: usize,
    /// Where the network counters go, and when next.
    publish: Option<(Board, Instant, String)>,
    /// What the socket's setup noticed (buffers capped, …).
    notes: Vec<String>,
    /// Counters.
    pub stats: ReceiverStats,
}

const RECVS: usize = 256;

/// A received frame: the verdict, and the bytes in the ring (borrowed from the receiver
/// until its next call).
#[derive(Debug)]
#[non_exhaustive]
pub struct Frame<'a> {
    /// The verdict and what the device said about the frame.
    pub report: FrameReport,
    /// The frame's bytes in the ring: `bytes_expected` of them (or what arrived, if more),
    /// at most the page's data area.
    pub data: &'a [u8],
}

/// Why a receiver could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiverError {
    /// The socket, the AF_XDP port, the pcap file or the settings.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The transport refused the QP or a step of bringing it up.
    #[error("the receiver's QP")]
    Qp(#[from] rocelink_transport::QpError),
    /// The ring's region refused its page holds.
    #[error("the ring's region")]
    Region(#[from] rocelink_transport::AccessError),
    /// The fixed R_Key asked for is taken or not a key.
    #[error("R_Key {0:#x} is unusable")]
    RKey(u32),
    /// Ring pages of no bytes.
    #[error("a ring page holds no bytes")]
    EmptyPage,
    /// The application's ring memory is smaller than the ring.
    #[error("ring memory of {have} bytes is too small: {pages} pages of {page} bytes need {need}")]
    RingTooSmall {
        /// Bytes given.
        have: usize,
        /// Pages of the ring.
        pages: u32,
        /// Bytes per page.
        page: usize,
        /// Bytes needed.
        need: usize,
    },
}

impl ReceiverError {
    /// The I/O error's kind where it is one (an address in use, say).
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            ReceiverError::Io(e) => Some(e.kind()),
            _ => None,
        }
    }
}

impl From<ReceiverError> for io::Error {
    /// For a caller that speaks io::Error: an I/O error as it was, the others carried
    /// whole inside (`get_ref` and `downcast` recover them).
    fn from(e: ReceiverError) -> io::Error {
        match e {
            ReceiverError::Io(e) => e,
            other => io::Error::other(other),
        }
    }
}

fn check_config(cfg: &ReceiverConfig) -> io::Result<()> {
    if cfg.frame_size == 0 || cfg.pages == 0 || cfg.pages > 4096 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "frame size must be > 0 and pages in 1..=4096",
        ));
    }
    Ok(())
}

impl Receiver {
    /// Bytes of ring memory `cfg` needs: its pages, each the frame rounded up to 128
    /// bytes plus the 128-byte metadata slot (see [`page_layout`]).
    pub fn ring_len(cfg: &ReceiverConfig) -> usize {
        page_layout(cfg.frame_size)
            .1
            .saturating_mul(cfg.pages as usize)
    }

    /// Set up the socket, the QP and a ring the receiver allocates.
    pub fn new(cfg: ReceiverConfig) -> Result<Receiver, ReceiverError> {
        check_config(&cfg)?;
        // page-aligned: every payload offset the device uses (multiples of 64) is then a
        // cache-line boundary for the kernel's copy; in huge pages where the kernel gives
        // them (one TLB entry per 2 MiB for the copy and the ICRC pass), faulted in here
        let mem = SharedBuf::new(rocelink_io::aligned::AlignedBuf::huge_zeroed(
            Receiver::ring_len(&cfg),
        ));
        let lender = mem.lender();
        let mut rx = Receiver::with_memory(cfg, mem)?;
        rx.lender = Some(lender);
        Ok(rx)
    }

    /// Set up the socket and the QP, with the ring in memory the application allocated
    /// (anything that is `AsRef<[u8]> + AsMut<[u8]> + Send`: a `Vec`, a hugepage or
    /// pinned buffer…). It must hold at least [`Receiver::ring_len`] bytes; frames land
    /// in it page by page, and [`Receiver::into_memory`] gives it back.
    pub fn with_memory(
        cfg: ReceiverConfig,
        mem: impl RegionMemory,
    ) -> Result<Receiver, ReceiverError> {
        check_config(&cfg)?;
        let need = Receiver::ring_len(&cfg);
        if mem.bytes().len() < need {
            return Err(ReceiverError::RingTooSmall {
                have: mem.bytes().len(),
                pages: cfg.pages,
                page: page_layout(cfg.frame_size).1,
                need,
            });
        }
        let (drv, notes) = open_driver(&cfg)?;
        let (mut ep, mr, qpn, cq) = uc_endpoint(&cfg, drv.socket().local_addr(), mem)?;
        let (md_offset, page_size) = page_layout(cfg.frame_size);
        let fast = fast_path(&cfg, &drv, &mr, (page_size, md_offset));
        let holds = Arc::new(
            Holds::new(page_size as u64, cfg.pages as usize).ok_or(ReceiverError::EmptyPage)?,
        );
        ep.set_holds(mr.lkey, holds.clone())?;
        let fast = fast.map(|(rx, g)| (rx, Prediction::new(g).with_holds(holds.clone())));
        let t = Tracker::new(cfg.tracker(), qpn, cq, mr.lkey);
        let mut r = Receiver {
            ep,
            drv,
            qpn,
            mr,
            cfg,
            t,
            fast,
            holds,
            lender: None,
            posted: 0,
            publish: None,
            notes,
            stats: ReceiverStats::default(),
        };
        r.replenish()?;
        Ok(r)
    }

    fn replenish(&mut self) -> io::Result<()> {
        while self.posted < RECVS {
            self.ep
                .post_recv(
                    self.qpn,
                    RecvWr::new(
                        0,
                        Sge {
                            lkey: self.mr.lkey,
                            va: 0,
                            len: 0,
                        },
                    ),
                )
                // the receiver speaks its socket's io::Error; the transport's typed refusal
                // rides inside it (`get_ref` and `downcast` recover it)
                .map_err(io::Error::other)?;
            self.posted += 1;
        }
        Ok(())
    }

    /// QP number the device must send to.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
    /// R_Key of the ring.
    pub fn rkey(&self) -> u32 {
        self.mr.rkey
    }
    /// The settings it was made with.
    pub fn config(&self) -> &ReceiverConfig {
        &self.cfg
    }
    /// Bytes per page (frame rounded up to 128, plus the 128-byte metadata slot).
    pub fn page_size(&self) -> usize {
        self.t.page_size
    }
    /// The address the device must send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.drv.socket().local_addr()
    }

    /// Wait up to `timeout` for the next frame.
    pub fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<FrameReport>> {
        if let Some(f) = self.t.ready.pop_front() {
            self.stats = self.t.stats;
            return Ok(Some(f));
        }
        let deadline = Instant::now() + timeout;
        if self.fast.is_some() {
            self.run_fast(deadline)?;
        } else {
            self.run_generic(deadline)?;
        }
        self.posted = self.posted.saturating_sub(std::mem::take(&mut self.t.ends));
        let es = self.ep.stats();
        let qs = self.ep.qp_stats(self.qpn).unwrap_or_default();
        self.t.stats.icrc_errors = es.icrc_errors;
        self.t.stats.refused = es.unknown_qp + qs.access_violations + es.malformed + es.pkey_errors;
        self.t.stats.in_place = self
            .fast
            .as_ref()
            .map_or(0, |(f, _)| f.stats.in_place + f.stats.moved);
        self.t.stats.datagrams = es.rx_datagrams;
        self.stats = self.t.stats;
        self.replenish()?;
        if let Some((board, next, name)) = &self.publish
            && Instant::now() >= *next
        {
            board.set_link(self.link(name));
            self.publish = self
                .publish
                .take()
                .map(|(b, _, n)| (b, Instant::now() + PUBLISH_EVERY, n));
        }
        Ok(self.t.ready.pop_front())
    }

    /// Every datagram through the generic endpoint (the pcap tap, or no fast path).
    fn run_generic(&mut self, deadline: Instant) -> io::Result<()> {
        let Receiver { ep, drv, t, .. } = self;
        let ended = std::cell::Cell::new(false);
        // account for each datagram right after it is placed: a later packet may reuse the
        // page (ring wrap) and must not be seen by this frame's CRC or metadata read
        drv.run_each(
            ep,
            deadline,
            &mut |ep| {
                if t.drain(ep, None) {
                    ended.set(true);
                }
            },
            |_| ended.get(),
        )?;
        Ok(())
    }

    /// Predicted payloads land in place (see [`super::predict`]) and are handed to the
    /// transport as landed; the rest goes through the endpoint as datagrams. Returns once a
    /// frame ended or at `deadline`.
    fn run_fast(&mut self, deadline: Instant) -> io::Result<()> {
        let Receiver {
            ep,
            drv,
            t,
            fast,
            cfg,
            ..
        } = self;
        let Some((landing, predict)) = fast.as_mut() else {
            return Ok(());
        };
        let local = drv.socket().local_addr();
        let busy = cfg.busy_poll;
        let coalesce = cfg.rx_coalesce;
        let mut now = Instant::now();
        let mut undrained = false;
        // the last receive brought datagrams (receive coalescing)
        let mut flowing = false;
        loop {
            // one frame per call: the page of a reported frame is not written again until
            // the caller is done with it (it holds the report until its next call)
            if !t.ready.is_empty() {
                return Ok(());
            }
            match landing.handle_run(ep, now, local) {
                Some(Handled::Run(_)) => {
                    let run = landing.placed();
                    t.placed_run(run);
                    predict.note_run(run);
                    undrained = true;
                    continue;
                }
                Some(Handled::Landed(l, opcode)) => {
                    // accounted as handed over (the transport returns the placement rather
                    // than queueing it), so before any completion a later drain takes
                    if let Some(p) = l.placement() {
                        t.placed(p.psn, p.va, p.len, p.crc);
                        predict.note_placed(p.va, p.len);
                    }
                    // a frame's end: its completion next
                    undrained = !opcode.has_immediate();
                    if !undrained {
                        t.drain(ep, Some(predict));
                    }
                    continue;
                }
                // a datagram, or nothing left after payloads not drained yet
                h @ (Some(Handled::Datagram) | None) if h.is_some() || undrained => {
                    t.drain(ep, Some(predict));
                    undrained = false;
                    continue;
                }
                _ => {}
            }
            // spin, or sleep inside the receive call until a datagram or the deadline
            now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            // while datagrams were coming, look without sleeping, and when there are none
            // yet, wait a while rather than be woken for the next one
            let coalescing = flowing && !busy && !coalesce.is_zero();
            let wait = (!busy && !coalescing).then(|| deadline - now);
            let Some(sock) = drv.socket().as_udp() else {
                return Ok(());
            };
            predict.fill(landing.plan_mut(), t.page());
            if landing.recv_any(sock, ep, wait)? == 0 {
                idle(busy, coalescing.then(|| coalesce.min(deadline - now)));
                flowing = false;
                continue;
            }
            flowing = true;
            now = Instant::now();
        }
    }

    /// Wait up to `timeout` for the next frame: its verdict and its bytes in the ring,
    /// borrowed until the next call (the borrow keeps the receiver from writing that page).
    ///
    /// ```no_run
    /// # use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
    /// # fn f(rx: &mut Receiver) -> std::io::Result<()> {
    /// while let Some(frame) = rx.next(std::time::Duration::from_secs(1))? {
    ///     if frame.report.good() {
    ///         println!("frame {}: {} bytes", frame.report.frame_number, frame.data.len());
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn next(&mut self, timeout: Duration) -> io::Result<Option<Frame<'_>>> {
        let Some(report) = self.next_frame(timeout)? else {
            return Ok(None);
        };
        let data = self.frame_data(&report);
        Ok(Some(Frame { report, data }))
    }

    /// Close the QP and give the ring memory back (as registered: downcast it, or read
    /// it through [`RegionMemory::bytes`]).
    pub fn into_memory(mut self) -> Option<Box<dyn RegionMemory>> {
        let _ = self.ep.destroy_qp(self.qpn);
        self.ep.deregister_mr(self.mr.lkey)
    }

    /// The network counters as link `name`: the backend's datagrams (through the driver or
    /// the scatter receive), the endpoint's and the QP's.
    pub fn link(&self, name: &str) -> Link {
        let mut l = self.drv.link(name, &self.ep);
        if let Some((f, _)) = &self.fast {
            let s = f.stats;
            let rx = l.get("rx_packets") + s.in_place + s.moved + s.gathered + s.refused;
            l.set("rx_packets", rx);
            l.set("landed", s.in_place);
            l.set("landed_elsewhere", s.moved);
        }
        if let Some(p) = self.cfg.xdp.as_ref().and_then(|x| x.pfc_stats()) {
            l.set_pfc(&p);
        }
        l
    }

    /// Publish the network counters to `board` (link "data") about every
    /// [`PUBLISH_EVERY`] while frames are taken.
    pub fn publish_to(&mut self, board: Board) {
        self.publish_as(board, "data");
    }

    /// [`Receiver::publish_to`] under another link name (one per virtual port: "vp0", …).
    pub fn publish_as(&mut self, board: Board, name: &str) {
        board.set_link(self.link(name));
        self.publish = Some((board, Instant::now() + PUBLISH_EVERY, name.to_string()));
    }

    /// What setting up the socket noticed (a receive buffer capped below what was asked,
    /// with the sysctl that raises it), for the front end to show.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Fast-path counters (`None` when every datagram goes through the endpoint).
    pub fn fast_stats(&self) -> Option<super::FastStats> {
        self.fast.as_ref().map(|(f, _)| f.stats)
    }

    /// Lend a reported frame to the application without a copy ([`LentFrame`]): its page
    /// is held until the frame is dropped, so nothing overwrites it; a frame the device
    /// sends into the page meanwhile is lost (counted in `held_packets`). `None` if the
    /// ring is the application's own memory ([`Receiver::with_memory`]).
    pub fn lend(&self, f: &FrameReport) -> Option<LentFrame> {
        let base = f.page as usize * self.t.page_size;
        let n = (f.bytes_expected.max(f.bytes) as usize).min(self.t.md_offset);
        let view = self.lender.as_ref()?.view(base..base + n)?;
        self.holds
            .hold(f.page as usize)
            .then(|| LentFrame::new(f.clone(), view, self.holds.clone()))
    }

    /// Pages lent out now ([`Receiver::lend`]).
    pub fn pages_lent(&self) -> usize {
        self.holds.held()
    }

    /// The bytes of a reported frame (valid until the next call to `next_frame`).
    pub fn frame_data(&self, f: &FrameReport) -> &[u8] {
        let base = f.page as usize * self.t.page_size;
        let n = (f.bytes_expected.max(f.bytes) as usize).min(self.t.md_offset);
        self.ep
            .mr(self.mr.lkey)
            .map_or(&[][..], |m| &m.bytes()[base..base + n])
    }

    /// Transport counters of the QP and endpoint.
    pub fn transport_stats(
        &self,
    ) -> (
        rocelink_transport::EndpointStats,
        rocelink_transport::QpStats,
    ) {
        (
            self.ep.stats(),
            self.ep.qp_stats(self.qpn).unwrap_or_default(),
        )
    }
}
/// The driver a receiver runs: over any backend.
type RxDriver = Driver<Box<dyn Backend + Send>>;

/// After a receive that brought nothing: spin once (`busy`), or sleep `coalescing` long
/// (datagrams were coming: look again after a while rather than be woken for each).
fn idle(busy: bool, coalescing: Option<Duration>) {
    if busy {
        std::hint::spin_loop();
    }
    if let Some(d) = coalescing {
        std::thread::sleep(d);
    }
}

/// The receiver's driver: over its AF_XDP port, or a UDP socket bound at `cfg.local`
/// (an error naming the address and the process holding the port), with a pcap tap when
/// asked for; and what the socket's setup noticed.
fn open_driver(cfg: &ReceiverConfig) -> io::Result<(RxDriver, Vec<String>)> {
    let mut notes = Vec::new();
    let mut drv = match &cfg.xdp {
        Some(port) => Driver::with_backend(
            Box::new(port.socket(cfg.local.port())) as Box<dyn Backend + Send>,
            RecvBatch::new(64, 9_216),
        ),
        None => {
            let udp = UdpConfig {
                recv_buffer: cfg.recv_buffer,
                gro: cfg.gro,
                ..UdpConfig::default()
            };
            let sock = UdpSocket::bind(cfg.local, &udp).map_err(|e| {
                let holder = (e.kind() == io::ErrorKind::AddrInUse)
                    .then(|| rocelink_io::ports::udp_port_holder(cfg.local))
                    .flatten()
                    .map(|h| format!(" (held by {h})"))
                    .unwrap_or_default();
                io::Error::new(
                    e.kind(),
                    format!("cannot receive at {}: {e}{holder}", cfg.local),
                )
            })?;
            notes.clone_from(&sock.notes);
            let size = if sock.gro() { 65_536 } else { 9_216 };
            Driver::with_backend(
                Box::new(sock) as Box<dyn Backend + Send>,
                RecvBatch::new(64, size),
            )
        }
    };
    if let Some(p) = &cfg.pcap {
        drv.set_tap(Tap::new(Box::new(rocelink_io::file::Output::create(p)?))?);
    }
    Ok((drv, notes))
}

/// The endpoint at `local` with the ring registered and a UC QP ready to receive from
/// the device: (endpoint, region keys, QP number, CQ). QPN and R_Key differ every session,
/// as with verbs, unless the configuration fixes them: a stale or blind sender cannot hit
/// the ring.
fn uc_endpoint(
    cfg: &ReceiverConfig,
    local: SocketAddr,
    mem: impl RegionMemory,
) -> Result<(Endpoint, MrKeys, u32, rocelink_transport::CqId), ReceiverError> {
    let mut ecfg = EndpointConfig::new(local).random_keys();
    ecfg.icrc = IcrcPolicy::Strict; // HSB devices send IP ID 0: every ICRC is exact
    let mut ep = Endpoint::new(ecfg);
    let access = Access::REMOTE_WRITE | Access::LOCAL_WRITE;
    let cq = ep.create_cq();
    let init = QpInit {
        report_writes: true,
        send_cq: cq,
        recv_cq: cq,
        max_recv_wr: RECVS,
        // the device's first PSN is wherever it is: not a gap
        learn_first_psn: true,
        ..QpInit::new(QpType::Uc)
    };
    let (mr, qpn) = match cfg.qp_rkey {
        Some((qp, rkey)) => {
            let mr = ep
                .register_mr_keyed(mem, 0, access, rkey)
                .ok_or(ReceiverError::RKey(rkey))?;
            (mr, ep.create_qp_numbered(qp, init)?)
        }
        None => (ep.register_mr(mem, 0, access), ep.create_qp(init)?),
    };
    let remote = SocketAddr::new(
        IpAddr::V4(cfg.device_ip),
        rocelink_wire::hsb::DATA_SOURCE_PORT,
    );
    ep.modify_qp(qpn, Modify::Init { qkey: 0 })?;
    let rtr = Modify::Rtr {
        remote: Some(remote),
        dest_qpn: 0,
        rq_psn: 0,
        // HSB sends one WRITE ONLY per packet of up to (link MTU − 74) bytes, past 4096
        // on jumbo links; the region bounds are what limit a write
        mtu: Mtu::Jumbo(65_532),
        min_rnr_timer: 0,
    };
    ep.modify_qp(qpn, rtr)?;
    Ok((ep, mr, qpn, cq))
}

/// The landing receive and the ring's geometry (pages of `page_size` bytes, the metadata
/// at `md_offset` of each), where the fast path may run: asked for, over an IPv4 UDP
/// socket, with no pcap tap.
fn fast_path(
    cfg: &ReceiverConfig,
    drv: &RxDriver,
    mr: &MrKeys,
    (page_size, md_offset): (usize, usize),
) -> Option<(LandingRx, Geometry)> {
    let local = drv.socket().local_addr();
    let gro = drv.socket().as_udp().is_some_and(|s| s.gro());
    let udp = drv.socket().as_udp().is_some();
    if !(cfg.fast_path && udp && cfg.pcap.is_none() && local.is_ipv4()) {
        return None;
    }
    let batch = match cfg.batch {
        0 if cfg.gro => 1,
        0 => 64,
        b => b,
    };
    let g = Geometry {
        lkey: mr.lkey,
        page_size: page_size as u64,
        md_offset: md_offset as u64,
        frame_size: cfg.frame_size as u64,
        pages: cfg.pages,
        md_disable: cfg.md_disable,
    };
    Some((LandingRx::new(gro, batch).adapting(), g))
}
