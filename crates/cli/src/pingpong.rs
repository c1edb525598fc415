//! `rocelink pingpong {rc,uc,ud}`: rdma-core's `ibv_rc_pingpong` / `ibv_uc_pingpong` /
//! `ibv_ud_pingpong` on rocelink's user-space transport — same TCP exchange (port 18515,
//! `"%04x:%06x:%06x:%s"` + NUL, then `"done"` + NUL from the client), same traffic
//! (SEND/RECV ping-pong, one buffer, `rx_depth` receives), same summary lines, so either side
//! can be the real tool running over the Linux kernel's RoCE.
//!
//! Differences, all additive: UC/UD exchanges that get no answer within `--loss-timeout`
//! are counted as lost instead of hanging (the real tools hang); `--check` stamps and
//! verifies every payload; a last line reports losses and ICRC verification.

use anyhow::{Context, Result, anyhow, bail};
use rocelink_io::oob;
use rocelink_io::tap::Tap;
use rocelink_io::udp::{UdpConfig, UdpSocket};
use rocelink_runtime::Driver;
use rocelink_transport::sim::Rng;
use rocelink_transport::*;
use rocelink_wire::oob::{PingpongDest as Dest, gid_of, ip_of_gid};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// perftest / ibv_ud_pingpong Q_Key.
const QKEY: u32 = 0x1111_1111;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Rc,
    Uc,
    Ud,
}

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Transport: rc, uc or ud.
    #[arg(value_enum)]
    kind: Kind,
    /// Server to connect to; without it, wait for a client.
    server: Option<String>,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    port: u16,
    /// Message size (default 4096; UD: the path MTU, as the MTU bounds a UD message).
    #[arg(short = 's', long, value_parser = clap::value_parser!(u64).range(1..=(1 << 30)))]
    size: Option<u64>,
    /// Exchanges.
    #[arg(short = 'n', long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Path MTU (256..4096).
    #[arg(short = 'm', long, default_value_t = 1024)]
    mtu: usize,
    /// GID index (accepted for compatibility: rocelink's GID is always the bound IP).
    #[arg(short = 'g', long)]
    gid_idx: Option<i32>,
    /// Receives posted at a time.
    #[arg(short = 'r', long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=65536))]
    rx_depth: u64,
    /// Local IP for RoCE and TCP (default: the address the peer is reached from / at).
    #[arg(long)]
    bind: Option<IpAddr>,
    /// UDP port of RoCE v2 (4791; change only between two rocelink processes).
    #[arg(long, default_value_t = 4791)]
    roce_port: u16,
    /// Record every RoCE datagram to this pcap.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// UC/UD: seconds without an answer before an exchange counts as lost (server: before
    /// it stops waiting).
    #[arg(long, default_value = "1", value_parser = crate::args::secs)]
    loss_timeout: Duration,
    /// Stamp every payload with its exchange number and verify what arrives.
    #[arg(long)]
    check: bool,
    /// RC local ACK timeout in milliseconds (rdma-core's timeout 14 ≈ 67 ms).
    #[arg(long, default_value_t = 67, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    timeout_ms: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value = "120", value_parser = crate::args::secs)]
    time_limit: Duration,
}

/// Exchange QP addresses (rdma-core's TCP exchange, `rocelink_io::oob`).
fn exchange(
    args: &Args,
    listener: Option<TcpListener>,
    make_local: impl FnOnce(IpAddr) -> Result<Dest>,
) -> Result<(Dest, Dest, IpAddr, IpAddr)> {
    let timeout = args.time_limit;
    // our own side's error (e.g. the RoCE socket) keeps its whole message
    let make = |ip| make_local(ip).map_err(|e| std::io::Error::other(format!("{e:#}")));
    let x = if let Some(server) = &args.server {
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&(server.as_str(), args.port))
            .with_context(|| format!("cannot resolve {server}"))?
            .next()
            .ok_or_else(|| anyhow!("no address for {server}"))?;
        oob::client(addr, args.bind, timeout, make)
    } else {
        let l = match listener {
            Some(l) => l,
            None => listen(args)?,
        };
        oob::server(&l, args.bind, timeout, make)
    }
    .context("QP exchange")?;
    Ok((x.me, x.peer, x.local_ip, x.peer_ip))
}

/// The server's TCP listener for the exchange.
fn listen(args: &Args) -> Result<TcpListener> {
    let listen_ip = args.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    TcpListener::bind((listen_ip, args.port))
        .with_context(|| format!("cannot listen on port {}", args.port))
}

/// The RoCE socket at `ip:port`. On one host the rdma-core idiom runs both ends on the
/// loopback address; when its port is taken by the other end and no address was asked for,
/// the next free 127/8 address is used (the peer learns it from the GID).
fn bind_roce(ip: IpAddr, port: u16, chosen: bool) -> Result<(UdpSocket, IpAddr)> {
    let first = UdpSocket::bind(SocketAddr::new(ip, port), &UdpConfig::default());
    let e = match first {
        Ok(s) => return Ok((s, ip)),
        Err(e) => e,
    };
    if chosen || !ip.is_loopback() || e.kind() != std::io::ErrorKind::AddrInUse {
        return Err(anyhow!(e).context(format!("cannot bind RoCE UDP socket {ip}:{port}")));
    }
    for k in 2..=254u8 {
        let alt = IpAddr::V4(Ipv4Addr::new(127, 0, 0, k));
        if alt == ip {
            continue;
        }
        if let Ok(s) = UdpSocket::bind(SocketAddr::new(alt, port), &UdpConfig::default()) {
            return Ok((s, alt));
        }
    }
    Err(anyhow!(e).context(format!(
        "cannot bind RoCE UDP socket {ip}:{port}, nor port {port} on 127.0.0.2..254"
    )))
}

/// Stamp `buf` for exchange `seq`.
fn stamp(buf: &mut [u8], seq: u64) {
    let mut r = Rng::new(seq);
    for chunk in buf.chunks_mut(8) {
        let v = r.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
    if buf.len() >= 8 {
        buf[..8].copy_from_slice(&seq.to_le_bytes());
    }
}

/// True when `buf` is a correctly stamped payload.
fn stamped_ok(buf: &[u8]) -> bool {
    if buf.len() < 8 {
        return true;
    }
    let seq = u64::from_le_bytes([
        buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6], buf[7],
    ]);
    let mut want = vec![0u8; buf.len()];
    stamp(&mut want, seq);
    want == buf
}

pub(crate) fn run(args: &Args) -> Result<ExitCode> {
    let mtu = Mtu::from_bytes(args.mtu)
        .ok_or_else(|| anyhow!("MTU must be 256, 512, 1024, 2048 or 4096"))?;
    let size = match args.size {
        Some(s) => s as usize,
        None if args.kind == Kind::Ud => mtu.bytes(),
        None => 4096,
    };
    let rx_depth = args.rx_depth as usize;
    if args.kind == Kind::Ud && size > mtu.bytes() {
        bail!("Requested size larger than port MTU ({})", mtu.bytes());
    }
    let qp_type = match args.kind {
        Kind::Rc => QpType::Rc,
        Kind::Uc => QpType::Uc,
        Kind::Ud => QpType::Ud,
    };
    let grh = if args.kind == Kind::Ud { 40 } else { 0 };
    let mut rng = Rng::new(
        std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64 ^ seed_time(),
    );
    let mut my_psn = (rng.next_u64() & 0xFF_FFFF) as u32;
    if my_psn == 0 {
        my_psn = 1;
    }
    // chosen now so the server can print its address before it waits, as rdma-core does
    let my_qpn = 0x100 + (rng.next_u64() % 0xFE_FF00) as u32;
    let local_line = |gid: [u8; 16]| {
        println!(
            "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
            0,
            my_qpn,
            my_psn,
            Ipv6Addr::from(gid)
        );
    };
    // the server listens before it says where it is, so a client started on that line
    // finds it
    let listener = if args.server.is_none() {
        Some(listen(args)?)
    } else {
        None
    };
    if args.server.is_none() {
        // the GID is known now only with --bind (rdma-core prints a zero GID without -g)
        local_line(args.bind.map_or([0; 16], gid_of));
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
    let mut state: Option<(Endpoint, u32, u32, Driver)> = None;
    let (me, peer, local_ip, tcp_peer) = exchange(args, listener, |local_ip| {
        let (sock, local_ip) = bind_roce(local_ip, args.roce_port, args.bind.is_some())?;
        let local = sock.local_addr();
        for n in &sock.notes {
            eprintln!("rocelink: note: {n}");
        }
        let mut cfg = EndpointConfig::new(local);
        cfg.icrc = IcrcPolicy::RecoverIpv4Id;
        let mut ep = Endpoint::new(cfg);
        let mr = ep.register_mr(
            vec![0x7b; size + grh].into_boxed_slice(),
            0,
            Access::LOCAL_WRITE,
        );
        let qpn = ep.create_qp_numbered(
            my_qpn,
            QpInit {
                max_recv_wr: rx_depth,
                ..QpInit::new(qp_type)
            },
        )?;
        ep.modify_qp(qpn, Modify::Init { qkey: QKEY })?;
        let dest = Dest {
            lid: 0,
            qpn,
            psn: my_psn,
            gid: gid_of(local_ip),
        };
        state = Some((ep, qpn, mr.lkey, Driver::new(sock)));
        Ok(dest)
    })?;
    let (mut ep, qpn, lkey, mut drv) =
        state.ok_or_else(|| anyhow!("exchange did not set up the endpoint"))?;
    if let Some(p) = &args.pcap {
        let f =
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?;
        drv.set_tap(Tap::new(Box::new(std::io::BufWriter::new(f)))?);
    }
    let remote_ip = ip_of_gid(peer.gid).unwrap_or(tcp_peer);
    let remote = SocketAddr::new(remote_ip, args.roce_port);
    if args.server.is_some() {
        local_line(me.gid);
    }
    println!(
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        peer.lid,
        peer.qpn,
        peer.psn,
        Ipv6Addr::from(peer.gid)
    );
    let _ = local_ip;
    // post receives, then connect (the server's QP is ready before it answers the exchange;
    // RECVs are posted before any SEND can arrive)
    let recv_sge = Sge {
        lkey,
        va: 0,
        len: (size + grh) as u32,
    };

    ep.modify_qp(
        qpn,
        Modify::Rtr {
            remote: Some(remote),
            dest_qpn: peer.qpn,
            rq_psn: peer.psn,
            mtu,
            min_rnr_timer: 12,
        },
    )?;
    for _ in 0..rx_depth {
        ep.post_recv(qpn, RecvWr::new(RECV_WRID, recv_sge))?;
    }
    ep.modify_qp(
        qpn,
        Modify::Rts {
            sq_psn: me.psn,
            timeout: Duration::from_millis(args.timeout_ms.max(1)),
            retry_cnt: 7,
            rnr_retry: 7,
        },
    )?;

    let send_sge = Sge {
        lkey,
        va: grh as u64,
        len: size as u32,
    };
    let op = if args.kind == Kind::Ud {
        SendOp::UdSend {
            dest: UdDest {
                addr: remote,
                qpn: peer.qpn,
                qkey: QKEY,
            },
            imm: None,
        }
    } else {
        SendOp::Send
    };
    let client = args.server.is_some();
    let iters = args.iters;
    let mut seq = 0u64;
    let post_send = |ep: &mut Endpoint, seq: &mut u64| -> Result<()> {
        if args.check {
            let m = ep.mr_mut(lkey)?.bytes_mut();
            stamp(&mut m[grh..grh + size], *seq);
        }
        *seq += 1;
        ep.post_send(
            qpn,
            SendWr {
                wr_id: SEND_WRID,
                op,
                sge: send_sge,
                signaled: true,
                solicited: false,
            },
        )?;
        Ok(())
    };
    let mut pending = RECV_WRID;
    if client {
        post_send(&mut ep, &mut seq)?;
        pending |= SEND_WRID;
    }
    let (mut rcnt, mut scnt, mut routs, mut lost, mut corrupt) = (0u32, 0u32, rx_depth, 0u32, 0u32);
    let start = Instant::now();
    let end = start + args.time_limit;
    let loss_timeout = args.loss_timeout;
    let reliable = args.kind == Kind::Rc;
    let mut last_progress = Instant::now();
    while rcnt < iters || scnt < iters {
        let wait_until = if reliable {
            end
        } else {
            (last_progress + loss_timeout).min(end)
        };
        let got = drv.run(&mut ep, wait_until, |ep| ep.peek_completion().is_some())?;
        if !got {
            if Instant::now() >= end {
                bail!("time limit reached after {rcnt} receives and {scnt} sends");
            }
            // UC/UD: nothing came back in time
            if !client {
                break; // the client stopped, or everything it sends is lost
            }
            lost += 1;
            rcnt += 1;
            last_progress = Instant::now();
            if scnt < iters {
                post_send(&mut ep, &mut seq)?;
                pending = RECV_WRID | SEND_WRID;
            }
            continue;
        }
        while let Some(wc) = ep.poll_completion() {
            if wc.status != WcStatus::Success {
                bail!("Failed status {:?} for wr_id {}", wc.status, wc.wr_id);
            }
            last_progress = Instant::now();
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    if args.check {
                        let m = ep.mr(lkey)?.bytes();
                        let got = wc.byte_len as usize - grh;
                        if got != size || !stamped_ok(&m[grh..grh + size]) {
                            corrupt += 1;
                        }
                    }
                    routs -= 1;
                    if routs <= 1 {
                        while routs < rx_depth {
                            ep.post_recv(qpn, RecvWr::new(RECV_WRID, recv_sge))?;
                            routs += 1;
                        }
                    }
                    rcnt += 1;
                }
                other => bail!("Completion for unknown wr_id {other}"),
            }
            pending &= !wc.wr_id;
            if scnt < iters && pending == 0 {
                post_send(&mut ep, &mut seq)?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    // the exchanges are timed, as rdma-core does; then the last ACKs and responses go out
    let usec = start.elapsed().as_secs_f64() * 1e6;
    let linger = Instant::now() + Duration::from_millis(if reliable { 200 } else { 20 });
    drv.run(&mut ep, linger, |_| false)?;
    let bytes = size as u64 * u64::from(iters) * 2;
    println!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
        usec / 1e6,
        bytes as f64 * 8.0 / usec
    );
    println!(
        "{iters} iters in {:.2} seconds = {:.2} usec/iter",
        usec / 1e6,
        usec / f64::from(iters)
    );
    let es = ep.stats();
    let qs = ep.qp_stats(qpn).unwrap_or_default();
    if !client && rcnt < iters {
        lost = iters - rcnt;
    }
    println!(
        "rocelink: {} received, {lost} lost, {corrupt} corrupt; ICRC: {} bad, {} IPv4 via recovered ID (weak); retransmissions {}, NAKs sent {}/received {}, drops {}",
        rcnt - lost.min(rcnt),
        es.icrc_errors,
        es.icrc_unverified,
        qs.retransmissions,
        qs.naks_sent,
        qs.naks_received,
        qs.drops
    );
    if corrupt > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn seed_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps() {
        let mut b = vec![0u8; 100];
        stamp(&mut b, 42);
        assert!(stamped_ok(&b));
        b[50] ^= 1;
        assert!(!stamped_ok(&b));
    }
}
