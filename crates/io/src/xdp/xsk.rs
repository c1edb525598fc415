//! One AF_XDP socket with its own UMEM: frames the XDP program redirects to the socket's
//! queue land in the UMEM (copied by the kernel in copy mode, DMA'd by the NIC in zero-copy
//! mode) and are read in place; frames to send are written into UMEM frames and handed to
//! the TX ring.
//!
//! The UMEM is split in two: the first half keeps the fill ring stocked for receive, the
//! second half is the pool of transmit frames, recycled through the completion ring.
//!
//! ```no_run
//! use rocelink_io::xdp::{Steer, XdpProgram, Xsk, XskConfig};
//! # fn main() -> std::io::Result<()> {
//! let mut xsk = Xsk::open("veth0", &XskConfig::default())?;
//! let prog = XdpProgram::attach("veth0", Steer::UdpPorts { first: 4791, last: 4791 }, 1)?;
//! prog.register(0, &xsk)?;
//! let mut frames = 0;
//! xsk.recv(64, |frame| frames += frame.len())?;
//! # Ok(()) }
//! ```

use super::ring::{Desc, Mapping, Ring, RingOffset};
use crate::sys;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

const AF_XDP: i32 = 44;
const SOL_XDP: i32 = 283;
const XDP_MMAP_OFFSETS: i32 = 1;
const XDP_RX_RING: i32 = 2;
const XDP_TX_RING: i32 = 3;
const XDP_UMEM_REG: i32 = 4;
const XDP_UMEM_FILL_RING: i32 = 5;
const XDP_UMEM_COMPLETION_RING: i32 = 6;
const XDP_STATISTICS: i32 = 7;
const XDP_OPTIONS: i32 = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const PGOFF_RX: i64 = 0;
const PGOFF_TX: i64 = 0x8000_0000;
const PGOFF_FILL: i64 = 0x1_0000_0000;
const PGOFF_COMPLETION: i64 = 0x1_8000_0000;
const SO_BUSY_POLL: i32 = 46;
const SO_PREFER_BUSY_POLL: i32 = 69;
const SO_BUSY_POLL_BUDGET: i32 = 70;

#[repr(C)]
#[derive(Debug, Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

#[repr(C)]
#[derive(Debug, Default)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Debug, Default)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// The kernel's counters for one socket (`struct xdp_statistics`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames dropped for other reasons than a full ring.
    pub rx_dropped: u64,
    /// Bad descriptors on the fill ring.
    pub rx_invalid_descs: u64,
    /// Bad descriptors on the TX ring.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full (we were too slow).
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame came.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was found empty.
    pub tx_ring_empty_descs: u64,
}

/// Copy or zero-copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum XdpMode {
    /// Zero-copy where the driver has it, else copy.
    #[default]
    Auto,
    /// The kernel copies frames into the UMEM (any driver, veth included).
    Copy,
    /// The NIC writes into the UMEM; fails where the driver cannot.
    ZeroCopy,
}

/// How to set up an [`Xsk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskConfig {
    /// The interface's receive queue to bind to.
    pub queue: u32,
    /// UMEM frames (half for receive, half for transmit).
    pub frames: u32,
    /// Bytes per frame (2048 or 4096; 4096 holds a 4 KiB RoCE payload with its headers).
    pub frame_size: u32,
    /// Entries of the RX and fill rings.
    pub rx_size: u32,
    /// Entries of the TX and completion rings.
    pub tx_size: u32,
    /// Copy or zero-copy.
    pub mode: XdpMode,
    /// Let the kernel say when it needs a system call to go on (need_wakeup).
    pub need_wakeup: bool,
    /// Busy-poll the queue for this many microseconds (0: off).
    pub busy_poll_us: u32,
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig {
            queue: 0,
            frames: 8192,
            frame_size: 4096,
            rx_size: 4096,
            tx_size: 2048,
            mode: XdpMode::Auto,
            need_wakeup: true,
            busy_poll_us: 0,
        }
    }
}

/// Counters kept in user space.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskCounters {
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Frames not sent for want of a free frame or TX slot.
    pub tx_full: u64,
    /// Wake-up calls made.
    pub wakeups: u64,
}

/// An AF_XDP socket bound to one queue of an interface (see the module documentation).
#[derive(Debug)]
pub struct Xsk {
    fd: OwnedFd,
    umem: Mapping,
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<Desc>,
    tx: Ring<Desc>,
    /// Transmit frames not in flight.
    free: Vec<u64>,
    frame_size: u32,
    zero_copy: bool,
    need_wakeup: bool,
    ifname: String,
    queue: u32,
    /// TX descriptors pushed but not yet published.
    tx_pushed: u32,
    /// Counters.
    pub counters: XskCounters,
}

fn err(what: &str, e: io::Error) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (AF_XDP needs CAP_NET_RAW and CAP_NET_ADMIN: run as root)"
        }
        Some(libc::EAFNOSUPPORT) => " (this kernel has no AF_XDP: CONFIG_XDP_SOCKETS)",
        Some(libc::EBUSY) => " (another AF_XDP socket holds this queue)",
        Some(libc::EOPNOTSUPP) => " (the driver has no zero-copy: use copy mode)",
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}

impl XskConfig {
    /// Whether the kernel can take it: ring and UMEM sizes powers of two, frames of 2 or
    /// 4 KiB.
    fn check(&self) -> io::Result<()> {
        for (what, v) in [
            ("frames", self.frames),
            ("rx_size", self.rx_size),
            ("tx_size", self.tx_size),
        ] {
            if !v.is_power_of_two() || v < 2 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("AF_XDP {what} must be a power of two ≥ 2, not {v}"),
                ));
            }
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "AF_XDP frame size must be 2048 or 4096, not {}",
                    self.frame_size
                ),
            ));
        }
        Ok(())
    }
}

/// Bind the socket `raw` to `cfg.queue` of `ifname` in the mode asked for, and set its
/// busy polling; whether the driver gave zero-copy.
fn bind(raw: RawFd, ifname: &str, ifindex: u32, cfg: &XskConfig) -> io::Result<bool> {
    let mode_flags = match cfg.mode {
        XdpMode::Auto => 0,
        XdpMode::Copy => XDP_COPY,
        XdpMode::ZeroCopy => XDP_ZEROCOPY,
    };
    let wake = if cfg.need_wakeup {
        XDP_USE_NEED_WAKEUP
    } else {
        0
    };
    let addr = SockaddrXdp {
        family: AF_XDP as u16,
        flags: mode_flags | wake,
        ifindex,
        queue_id: cfg.queue,
        shared_umem_fd: 0,
    };
    sys::bind_raw(raw, &addr).map_err(|e| {
        err(
            &format!("cannot bind AF_XDP to {ifname} queue {}", cfg.queue),
            e,
        )
    })?;
    let mut opts = 0u32;
    sys::getsockopt_raw(raw, SOL_XDP, XDP_OPTIONS, &mut opts)
        .map_err(|e| err("AF_XDP options", e))?;
    if cfg.busy_poll_us > 0 {
        // best effort: older kernels lack the preference and budget
        let _ = sys::setsockopt_raw(raw, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, &1i32);
        sys::setsockopt_raw(
            raw,
            libc::SOL_SOCKET,
            SO_BUSY_POLL,
            &(cfg.busy_poll_us as i32),
        )
        .map_err(|e| err("busy poll", e))?;
        let _ = sys::setsockopt_raw(raw, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, &64i32);
    }
    Ok(opts & XDP_OPTIONS_ZEROCOPY != 0)
}

fn setopt<T>(fd: RawFd, name: i32, v: &T) -> io::Result<()> {
    sys::setsockopt_raw(fd, SOL_XDP, name, v)
}

impl Xsk {
    /// Create the socket and its UMEM and bind it to `cfg.queue` of `ifname`.
    pub fn open(ifname: &str, cfg: &XskConfig) -> io::Result<Xsk> {
        cfg.check()?;
        let ifindex = sys::if_index(ifname).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface named {ifname:?}"),
            )
        })?;
        // SAFETY: socket(2) with constant arguments; the result is checked and owned below.
        let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(err(
                "cannot create an AF_XDP socket",
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = cfg.frames as usize * cfg.frame_size as usize;
        let umem = Mapping::new(-1, len, 0).map_err(|e| err("cannot allocate the UMEM", e))?;
        let reg = UmemReg {
            addr: umem.as_ptr() as u64,
            len: len as u64,
            chunk_size: cfg.frame_size,
            ..UmemReg::default()
        };
        setopt(raw, XDP_UMEM_REG, &reg).map_err(|e| err("cannot register the UMEM", e))?;
        let half = cfg.frames / 2;
        setopt(raw, XDP_UMEM_FILL_RING, &cfg.rx_size).map_err(|e| err("fill ring", e))?;
        setopt(raw, XDP_UMEM_COMPLETION_RING, &cfg.tx_size)
            .map_err(|e| err("completion ring", e))?;
        setopt(raw, XDP_RX_RING, &cfg.rx_size).map_err(|e| err("RX ring", e))?;
        setopt(raw, XDP_TX_RING, &cfg.tx_size).map_err(|e| err("TX ring", e))?;
        let mut off = MmapOffsets::default();
        sys::getsockopt_raw(raw, SOL_XDP, XDP_MMAP_OFFSETS, &mut off)
            .map_err(|e| err("ring offsets", e))?;
        let mut fill = Ring::<u64>::map(raw, off.fr, cfg.rx_size, PGOFF_FILL)?;
        let comp = Ring::<u64>::map(raw, off.cr, cfg.tx_size, PGOFF_COMPLETION)?;
        let rx = Ring::<Desc>::map(raw, off.rx, cfg.rx_size, PGOFF_RX)?;
        let tx = Ring::<Desc>::map(raw, off.tx, cfg.tx_size, PGOFF_TX)?;
        // the first half of the frames to the fill ring (as many as it holds), the rest to send
        let fs = u64::from(cfg.frame_size);
        let to_fill = half.min(fill.free(half));
        for f in 0..to_fill {
            fill.push(u64::from(f) * fs);
        }
        fill.publish();
        let free: Vec<u64> = (to_fill..cfg.frames)
            .rev()
            .map(|f| u64::from(f) * fs)
            .collect();
        let zero_copy = bind(raw, ifname, ifindex, cfg)?;
        Ok(Xsk {
            fd,
            umem,
            fill,
            comp,
            rx,
            tx,
            free,
            frame_size: cfg.frame_size,
            zero_copy,
            need_wakeup: cfg.need_wakeup,
            ifname: ifname.to_owned(),
            queue: cfg.queue,
            tx_pushed: 0,
            counters: XskCounters::default(),
        })
    }

    /// The interface and queue it is bound to.
    pub fn bound(&self) -> (&str, u32) {
        (&self.ifname, self.queue)
    }

    /// Whether the driver gave zero-copy.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The largest frame it sends or receives.
    pub fn frame_size(&self) -> usize {
        self.frame_size as usize
    }

    fn frame(&self, addr: u64, len: u32) -> &[u8] {
        let start = addr as usize;
        let end = (start + len as usize).min(self.umem.len());
        // SAFETY: the range is clamped to the UMEM mapping, which lives as long as `self`;
        // the kernel does not write this frame until it comes back through the fill ring,
        // which happens only after the borrow ends (in `recv`).
        unsafe {
            std::slice::from_raw_parts(self.umem.as_ptr().add(start), end.saturating_sub(start))
        }
    }

    /// Take up to `max` received frames, calling `each` on each in place, then give their
    /// UMEM frames back to the fill ring. Returns how many.
    pub fn recv(&mut self, max: usize, mut each: impl FnMut(&[u8])) -> io::Result<usize> {
        self.recv_while(max, |f| {
            each(f);
            true
        })
    }

    /// As [`Xsk::recv`], stopping early once `each` returns false: the frame it was given
    /// counts as taken, the rest stay in the RX ring for the next call.
    pub fn recv_while(
        &mut self,
        max: usize,
        mut each: impl FnMut(&[u8]) -> bool,
    ) -> io::Result<usize> {
        let ready = self.rx.ready().min(max as u32);
        let mut n = 0;
        while n < ready {
            let d = self.rx.get(n);
            self.counters.rx_bytes += u64::from(d.len);
            n += 1;
            if !each(self.frame(d.addr, d.len)) {
                break;
            }
        }
        if n > 0 {
            self.counters.rx_frames += u64::from(n);
            // the frames go back to the kernel: the chunk's base (aligned mode)
            let mask = !(u64::from(self.frame_size) - 1);
            let room = self.fill.free(n).min(n);
            for i in 0..room {
                self.fill.push(self.rx.get(i).addr & mask);
            }
            for i in room..n {
                self.free.push(self.rx.get(i).addr & mask);
            }
            self.fill.publish();
            self.rx.release(n);
        }
        if n == 0 && self.need_wakeup && self.fill.needs_wakeup() {
            self.wake_rx()?;
        }
        Ok(n as usize)
    }

    /// Sleep until a frame is ready or `timeout` passes.
    pub fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        if self.rx.ready() > 0 {
            return Ok(true);
        }
        sys::poll_fds(&[self.fd.as_raw_fd()], libc::POLLIN, timeout)
    }

    fn wake_rx(&mut self) -> io::Result<()> {
        self.counters.wakeups += 1;
        sys::poll_fds(&[self.fd.as_raw_fd()], libc::POLLIN, Some(Duration::ZERO)).map(|_| ())
    }

    /// Take back transmit frames the kernel is done with.
    pub fn reap(&mut self) {
        let n = self.comp.ready();
        for i in 0..n {
            self.free.push(self.comp.get(i));
        }
        if n > 0 {
            self.comp.release(n);
        }
    }

    /// Whether a frame can be queued now (a free UMEM frame and a TX slot).
    pub fn can_push(&mut self) -> bool {
        if self.free.is_empty() {
            self.reap();
        }
        !self.free.is_empty() && self.tx.free(1) > 0
    }

    /// Write one frame of up to `len` bytes with `fill` (which returns the length it wrote;
    /// 0 takes the frame back) into a free UMEM frame and queue it; seen by the kernel at
    /// [`Xsk::flush`]. False when nothing was queued: no frame or TX slot free (see
    /// [`Xsk::can_push`]; reap, flush and try again), or `fill` wrote nothing.
    pub fn push(&mut self, len: usize, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if len > self.frame_size as usize {
            return false;
        }
        if !self.can_push() {
            self.counters.tx_full += 1;
            return false;
        }
        let Some(addr) = self.free.pop() else {
            return false;
        };
        // SAFETY: `addr` is a frame of the UMEM owned by user space (in the free pool, not
        // on any ring), `len` is at most the frame size and the frame lies inside the mapping;
        // the borrow ends before the frame is handed to the kernel.
        let buf =
            unsafe { std::slice::from_raw_parts_mut(self.umem.as_ptr().add(addr as usize), len) };
        let wrote = fill(buf).min(len);
        if wrote == 0 {
            self.free.push(addr);
            return false;
        }
        self.tx.push(Desc {
            addr,
            len: wrote as u32,
            options: 0,
        });
        self.tx_pushed += 1;
        self.counters.tx_frames += 1;
        true
    }

    /// Sleep until the TX ring has room or `timeout` passes.
    pub fn wait_writable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        if self.can_push() {
            return Ok(true);
        }
        self.flush()?;
        sys::poll_fds(&[self.fd.as_raw_fd()], libc::POLLOUT, timeout)?;
        Ok(self.can_push())
    }

    /// Send a frame (copied into the UMEM). False when full.
    pub fn send(&mut self, frame: &[u8]) -> bool {
        self.push(frame.len(), |b| {
            b.copy_from_slice(frame);
            frame.len()
        })
    }

    /// Hand queued frames to the kernel and kick it when it asks.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.tx_pushed > 0 {
            self.tx.publish();
            self.tx_pushed = 0;
        }
        if self.tx.outstanding() > 0 && (!self.need_wakeup || self.tx.needs_wakeup()) {
            self.counters.wakeups += 1;
            match sys::send_empty(self.fd.as_raw_fd()) {
                Ok(()) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EAGAIN)
                            | Some(libc::EBUSY)
                            | Some(libc::ENOBUFS)
                            | Some(libc::ENETDOWN)
                    ) => {}
                Err(e) => return Err(err("AF_XDP send", e)),
            }
        }
        self.reap();
        Ok(())
    }

    /// Frames sent but not yet completed.
    pub fn in_flight(&mut self) -> u32 {
        self.reap();
        self.tx.outstanding()
    }

    /// The kernel's counters for this socket.
    pub fn stats(&self) -> io::Result<XskStats> {
        let mut s = XskStats::default();
        sys::getsockopt_raw(self.fd.as_raw_fd(), SOL_XDP, XDP_STATISTICS, &mut s)?;
        Ok(s)
    }

    /// The socket's descriptor (for the XSKMAP and `poll`).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A handle that reads how full the RX ring is, from any thread.
    pub fn rx_level(&self) -> super::ring::Level {
        self.rx.level()
    }

    /// Entries of the RX ring.
    pub fn rx_size(&self) -> u32 {
        self.rx.size()
    }
}
