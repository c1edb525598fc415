//! Sensor TX from the host: data for a sensor's transmit port (the board's I2S audio
//! output), sent to the device's RoCE port as HSB's audio players send it.
//!
//! * [`TxFormat::Roce`] — `audio_player.py`'s way: UC SEND to QP 2 over rocelink's
//!   transport (exact ICRC, PSNs from 0, path MTU 4096), a few buffers in flight.
//! * [`TxFormat::Linux`] — `linux_audio_player.py`'s way: the hand-built packet of
//!   [`rocelink_wire::hsb::stx::emit_linux`] from a plain UDP socket.
//!
//! [`configure_i2s`] makes the writes of HSB's `get_i2s()` for transmit, and [`play`]
//! paces a stream out in chunks.

use super::control::{Control, EcbError};
use crate::regs::i2s;
use rocelink_io::udp::{UdpConfig, UdpSocket};
use rocelink_runtime::driver::Driver;
use rocelink_transport::{
    Access, AccessError, CqId, Endpoint, EndpointConfig, Mtu, QpError, QpInit, QpType, SendOp,
    SendWr, Sge, WcStatus,
};
use rocelink_wire::hsb::stx;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The device's RoCE port (its `stx_udp_port` register after reset).
pub const DEVICE_PORT: u16 = 4791;

/// How packets are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TxFormat {
    /// RoCE v2 UC SEND with an exact ICRC (HSB's `audio_player.py`).
    Roce,
    /// HSB's `linux_audio_player.py` packet: MigReq set, a CRC-32 trailer, no ICRC.
    Linux,
}

/// Where and how to send.
#[derive(Debug, Clone)]
pub struct SensorTxConfig {
    /// The device.
    pub device: Ipv4Addr,
    /// Its RoCE port ([`DEVICE_PORT`]).
    pub port: u16,
    /// Destination QP ([`stx::AUDIO_QP`]: sensor TX port 0).
    pub qp: u32,
    /// Packet format.
    pub format: TxFormat,
    /// Largest packet payload (a chunk).
    pub max_chunk: usize,
    /// Buffers in flight (HSB's `queue_size`, 3).
    pub queue: usize,
    /// Local address to send from; `None`: the one routing to the device.
    pub local: Option<IpAddr>,
}

impl SensorTxConfig {
    /// HSB's audio player: QP 2 on port 4791, RoCE, 3 buffers, chunks up to 4096 bytes.
    pub fn new(device: Ipv4Addr) -> SensorTxConfig {
        SensorTxConfig {
            device,
            port: DEVICE_PORT,
            qp: stx::AUDIO_QP,
            format: TxFormat::Roce,
            max_chunk: 4096,
            queue: 3,
            local: None,
        }
    }
}

enum Path {
    Roce {
        ep: Box<Endpoint>,
        drv: Box<Driver>,
        qpn: u32,
        cq: CqId,
        lkey: u32,
        next: usize,
        in_flight: usize,
    },
    Linux {
        sock: std::net::UdpSocket,
        psn: u32,
        buf: Vec<u8>,
    },
}

/// A sender to one sensor TX port.
pub struct SensorTx {
    cfg: SensorTxConfig,
    path: Path,
    /// Packets sent.
    pub packets: u64,
    /// Payload bytes sent.
    pub bytes: u64,
}

impl std::fmt::Debug for SensorTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SensorTx")
            .field("device", &self.cfg.device)
            .field("format", &self.cfg.format)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

/// Why sensor TX could not start or go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SensorTxError {
    /// A chunk the packet cannot carry.
    #[error("chunk of {0} bytes: a sensor TX packet carries 1 to 4096")]
    Chunk(usize),
    /// A chunk longer than this sender's chunks, or empty.
    #[error("a chunk of {len} bytes (this sender takes 1 to {max})")]
    ChunkOver {
        /// Its length.
        len: usize,
        /// The sender's chunk size.
        max: usize,
    },
    /// No buffer to send from.
    #[error("a queue of 0 buffers sends nothing")]
    Queue,
    /// A QP that maps to no sensor TX port.
    #[error("QP {0} reaches no sensor TX port (the device maps QP q to port q/2 - 1)")]
    Qp(u32),
    /// Nothing to play.
    #[error("nothing to send: the stream is empty")]
    Empty,
    /// The local address could not be bound.
    #[error("cannot send from {local}")]
    Bind {
        /// The address.
        local: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The transport refused a verb.
    #[error("the transport refused a verb")]
    Transport(#[from] QpError),
    /// The send buffer refused a chunk (a fault in the sender).
    #[error("send buffer")]
    Buffer(#[from] AccessError),
    /// A send completed in error.
    #[error("send failed: {0:?}")]
    SendFailed(WcStatus),
    /// Sends did not leave in time.
    #[error("{0} sends did not complete (the socket stayed full)")]
    Stalled(usize),
    /// The socket (or finding the local address).
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl SensorTx {
    /// Open the sending side (nothing is sent yet). Errors name what is wrong: a chunk
    /// size or queue of 0, a QP that reaches no sensor, an address that cannot be bound.
    pub fn connect(cfg: &SensorTxConfig) -> Result<SensorTx, SensorTxError> {
        if cfg.max_chunk == 0 || cfg.max_chunk > 4096 {
            return Err(SensorTxError::Chunk(cfg.max_chunk));
        }
        if cfg.queue == 0 {
            return Err(SensorTxError::Queue);
        }
        if stx::port_for_qp(cfg.qp).is_none() {
            return Err(SensorTxError::Qp(cfg.qp));
        }
        let remote = SocketAddr::new(IpAddr::V4(cfg.device), cfg.port);
        let local_ip = match cfg.local {
            Some(ip) => ip,
            None => rocelink_io::udp::local_ip_for(remote.ip())?,
        };
        let path = match cfg.format {
            TxFormat::Roce => {
                let local = SocketAddr::new(local_ip, 0);
                let sock = UdpSocket::bind(local, &UdpConfig::default())
                    .map_err(|source| SensorTxError::Bind { local, source })?;
                let drv = Driver::new(sock);
                let mut ep = Endpoint::new(EndpointConfig::new(drv.socket().local_addr()));
                let cq = ep.create_cq();
                let qpn = ep.create_qp(QpInit {
                    send_cq: cq,
                    recv_cq: cq,
                    max_send_wr: cfg.queue,
                    ..QpInit::new(QpType::Uc)
                })?;
                ep.ready_qp(qpn, 0, Some(remote), cfg.qp, Mtu::M4096)?;
                let keys =
                    ep.register_mr(vec![0u8; cfg.queue * cfg.max_chunk], 0, Access::LOCAL_WRITE);
                Path::Roce {
                    ep: Box::new(ep),
                    drv: Box::new(drv),
                    qpn,
                    cq,
                    lkey: keys.lkey,
                    next: 0,
                    in_flight: 0,
                }
            }
            TxFormat::Linux => {
                let local = SocketAddr::new(local_ip, 0);
                let sock = std::net::UdpSocket::bind(local)
                    .map_err(|source| SensorTxError::Bind { local, source })?;
                sock.connect(remote)?;
                Path::Linux {
                    sock,
                    psn: 0,
                    buf: Vec::with_capacity(cfg.max_chunk + 16),
                }
            }
        };
        Ok(SensorTx {
            cfg: cfg.clone(),
            path,
            packets: 0,
            bytes: 0,
        })
    }

    /// Send one packet carrying `chunk` (1 to `max_chunk` bytes). With the RoCE format
    /// this waits, at most `timeout`, for a buffer whose send completed.
    pub fn send(&mut self, chunk: &[u8], timeout: Duration) -> Result<(), SensorTxError> {
        if chunk.is_empty() || chunk.len() > self.cfg.max_chunk {
            return Err(SensorTxError::ChunkOver {
                len: chunk.len(),
                max: self.cfg.max_chunk,
            });
        }
        match &mut self.path {
            Path::Linux { sock, psn, buf } => {
                buf.clear();
                stx::emit_linux(*psn, chunk, buf);
                sock.send(buf)?;
                *psn = (*psn + 1) & 0xFF_FFFF;
            }
            Path::Roce {
                ep,
                drv,
                qpn,
                cq,
                lkey,
                next,
                in_flight,
            } => {
                let deadline = Instant::now() + timeout;
                drain_to(ep, drv, *cq, in_flight, self.cfg.queue - 1, deadline)?;
                let va = (*next * self.cfg.max_chunk) as u64;
                *next = (*next + 1) % self.cfg.queue;
                ep.mr_mut(*lkey)
                    .and_then(|m| m.slice_mut(va, chunk.len() as u64, Access::NONE))?
                    .copy_from_slice(chunk);
                ep.post_send(
                    *qpn,
                    SendWr {
                        wr_id: va,
                        op: SendOp::Send,
                        sg_list: Sge {
                            lkey: *lkey,
                            va,
                            len: chunk.len() as u32,
                        }
                        .into(),
                        signaled: true,
                        solicited: false,
                        marks: 0,
                    },
                )?;
                *in_flight += 1;
                drv.transmit(ep, Instant::now())?;
                reap(ep, *cq, in_flight)?;
            }
        }
        self.packets += 1;
        self.bytes += chunk.len() as u64;
        Ok(())
    }

    /// Wait, at most `timeout`, until everything posted has left.
    pub fn finish(&mut self, timeout: Duration) -> Result<(), SensorTxError> {
        if let Path::Roce {
            ep,
            drv,
            cq,
            in_flight,
            ..
        } = &mut self.path
        {
            drain_to(ep, drv, *cq, in_flight, 0, Instant::now() + timeout)?;
        }
        Ok(())
    }
}

/// Run the endpoint until at most `most` sends are in flight, or fail at `deadline`.
fn drain_to(
    ep: &mut Endpoint,
    drv: &mut Driver,
    cq: CqId,
    in_flight: &mut usize,
    most: usize,
    deadline: Instant,
) -> Result<(), SensorTxError> {
    loop {
        reap(ep, cq, in_flight)?;
        if *in_flight <= most {
            return Ok(());
        }
        let before = ep.completions_queued();
        if !drv.run(ep, deadline, |ep| ep.completions_queued() > before)? {
            return Err(SensorTxError::Stalled(*in_flight));
        }
    }
}

/// Take completions; a failed send is an error naming its status.
fn reap(ep: &mut Endpoint, cq: CqId, in_flight: &mut usize) -> Result<(), SensorTxError> {
    while let Some(wc) = ep.poll_cq(cq) {
        *in_flight = in_flight.saturating_sub(1);
        if wc.status != WcStatus::Success {
            return Err(SensorTxError::SendFailed(wc.status));
        }
    }
    Ok(())
}

/// What [`play`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlayStats {
    /// Packets sent.
    pub packets: u64,
    /// Payload bytes sent (padding included).
    pub bytes: u64,
    /// Times the stream was sent from the start.
    pub passes: u64,
    /// Whether `stop` ended it early.
    pub stopped: bool,
}

/// Send `stream` in chunks of `chunk` bytes (the last padded with zeros to `chunk` when
/// `pad`), `passes` times (0: until `stop`), at `bytes_per_second` if given (a real I2S
/// output drains at the sample rate; HSB leaves the rest to pause frames), else as fast
/// as the socket takes them.
pub fn play(
    tx: &mut SensorTx,
    stream: &[u8],
    chunk: usize,
    pad: bool,
    passes: u64,
    bytes_per_second: Option<u64>,
    stop: &rocelink_runtime::Stopper,
) -> Result<PlayStats, SensorTxError> {
    let mut st = PlayStats::default();
    if stream.is_empty() {
        return Err(SensorTxError::Empty);
    }
    let t0 = Instant::now();
    let mut sent = 0u64;
    'outer: while passes == 0 || st.passes < passes {
        for c in crate::audio::chunks(stream, chunk, pad) {
            if stop.is_stopped() {
                st.stopped = true;
                break 'outer;
            }
            if let Some(rate) = bytes_per_second.filter(|&r| r > 0) {
                let due = t0 + Duration::from_secs_f64(sent as f64 / rate as f64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            tx.send(&c, Duration::from_secs(5))?;
            sent += c.len() as u64;
            st.packets += 1;
            st.bytes += c.len() as u64;
        }
        st.passes += 1;
    }
    tx.finish(Duration::from_secs(5))?;
    Ok(st)
}

/// I2S set-up for transmit, as HSB's `get_i2s()` does it with its defaults (MCLK/16,
/// BCLK select 3, 24-bit I2S stereo, TX FIFO thresholds 0x800/0x400) but with receive
/// off, the FIFO started and not paused afterwards: a player wants its bytes heard.
pub fn configure_i2s(ctl: &mut Control) -> Result<(), EcbError> {
    let clock = ctl.read(i2s::CLOCK_CTRL)?;
    ctl.write(i2s::CLOCK_CTRL, clock | i2s::CLOCK_ENABLE)?;
    ctl.write(i2s::CTRL0, 0)?;
    ctl.write(i2s::CTRL1, 16)?;
    ctl.write(i2s::CTRL2, 3)?;
    ctl.write(i2s::CTRL3, 0b10)?; // 24-bit, I2S format
    ctl.write(i2s::CTRL4, 0)?; // stereo, no loopback
    ctl.write(i2s::CTRL7, 0)?;
    ctl.write(i2s::CTRL8, 1)?;
    ctl.write(i2s::CTRL0, 1)?; // TX enable
    ctl.write(i2s::CTRL5, 0x40)?;
    ctl.write(i2s::TX_FIFO_ALMOST_FULL, 0x800)?;
    ctl.write(i2s::TX_FIFO_ALMOST_EMPTY, 0x400)?;
    ctl.write(i2s::TX_FIFO_CTRL, i2s::FIFO_START)?;
    Ok(())
}
