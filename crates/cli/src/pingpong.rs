//! `rocelink pingpong {rc,uc,ud}`: rdma-core's `ibv_rc_pingpong` / `ibv_uc_pingpong` /
//! `ibv_ud_pingpong` on rocelink's user-space transport — same TCP exchange (port 18515,
//! `"%04x:%06x:%06x:%s"` + NUL, then `"done"` + NUL from the client), same traffic
//! (SEND/RECV ping-pong, `rx_depth` receives), same summary lines, so either side can be the
//! real tool running over the Linux kernel's RoCE.
//!
//! Differences, all additive: UC/UD exchanges that get no answer within `--loss-timeout`
//! are counted as lost instead of hanging (the real tools hang); `--check` stamps and
//! verifies every payload; a last line reports losses and ICRC verification. Sends and
//! receives use two areas of the buffer, not one as rdma-core's: after a timeout the next
//! send is stamped while a late reply may still be arriving, and a posted receive's buffer
//! is the transport's until it completes (the wire is the same).

use crate::stats::{CounterArgs, Counters};
use anyhow::{Context, Result, anyhow, bail};
use rocelink_io::oob;
use rocelink_io::tap::Tap;
use rocelink_perftest::pingpong::{Pingpong, PingpongConfig};
use rocelink_runtime::bind_roce;
use rocelink_runtime::xdp::{XdpPort, XdpPortConfig, XdpRole};
use rocelink_transport::{Mtu, QpType};
use rocelink_wire::oob::{PingpongDest as Dest, gid_of, ip_of_gid};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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
    /// Send and receive RoCE through an AF_XDP socket on this interface (root): the
    /// steering program takes UDP --roce-port, the kernel keeps the rest (the TCP exchange,
    /// ARP); every ICRC is checked over the IPv4 header as received.
    #[arg(long, value_name = "IFACE")]
    xdp: Option<String>,
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
    /// Do not print the counters table at exit.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    counters: CounterArgs,
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

/// rdma-core's pingpong settings from the flags.
fn pingpong_config(args: &Args) -> Result<PingpongConfig> {
    let mtu = Mtu::from_bytes(args.mtu)
        .ok_or_else(|| anyhow!("MTU must be 256, 512, 1024, 2048 or 4096"))?;
    let qp_type = match args.kind {
        Kind::Rc => QpType::Rc,
        Kind::Uc => QpType::Uc,
        Kind::Ud => QpType::Ud,
    };
    let mut cfg = PingpongConfig::new(qp_type);
    cfg.mtu = mtu;
    cfg.size = match args.size {
        Some(s) => s as usize,
        None if args.kind == Kind::Ud => mtu.bytes(),
        None => 4096,
    };
    cfg.rx_depth = args.rx_depth as usize;
    cfg.iters = args.iters;
    cfg.check = args.check;
    cfg.ack_timeout = Duration::from_millis(args.timeout_ms.max(1));
    cfg.loss_timeout = args.loss_timeout;
    cfg.time_limit = args.time_limit;
    if args.kind == Kind::Ud && cfg.size > mtu.bytes() {
        bail!("Requested size larger than port MTU ({})", mtu.bytes());
    }
    Ok(cfg)
}

fn local_line(qpn: u32, psn: u32, gid: [u8; 16]) {
    println!(
        "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        0,
        qpn,
        psn,
        Ipv6Addr::from(gid)
    );
}

pub(crate) fn run(args: &Args) -> Result<ExitCode> {
    let cfg = pingpong_config(args)?;
    let counters = Counters::start(
        &format!("pingpong {:?}", args.kind).to_lowercase(),
        &args.counters,
    )?;
    // chosen now so the server can print its address before it waits, as rdma-core does
    let (my_qpn, my_psn) = rocelink_perftest::pingpong::random_qpn_psn();
    // the server listens before it says where it is, so a client started on that line
    // finds it
    let listener = match args.server {
        None => Some(listen(args)?),
        Some(_) => None,
    };
    if args.server.is_none() {
        // the GID is known now only with --bind (rdma-core prints a zero GID without -g)
        local_line(my_qpn, my_psn, args.bind.map_or([0; 16], gid_of));
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
    let mut made: Option<(Pingpong, Option<XdpPort>)> = None;
    let (me, peer, _, tcp_peer) = exchange(args, listener, |local_ip| {
        let (pp, local_ip, xdp) = open(args, cfg, my_qpn, local_ip)?;
        let dest = Dest {
            lid: 0,
            qpn: pp.qpn(),
            psn: my_psn,
            gid: gid_of(local_ip),
        };
        made = Some((pp, xdp));
        Ok(dest)
    })?;
    let (mut pp, xdp_port) = made.ok_or_else(|| anyhow!("exchange did not set up the endpoint"))?;
    if let Some(p) = &args.pcap {
        let f = rocelink_io::file::Output::create(p).context("--pcap")?;
        pp.driver_mut().set_tap(Tap::new(Box::new(f))?);
    }
    pp.driver_mut()
        .publish_to(counters.board.clone(), "pingpong");
    let remote_ip = ip_of_gid(peer.gid).unwrap_or(tcp_peer);
    let remote = SocketAddr::new(remote_ip, args.roce_port);
    if args.server.is_some() {
        local_line(my_qpn, my_psn, me.gid);
    }
    println!(
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        peer.lid,
        peer.qpn,
        peer.psn,
        Ipv6Addr::from(peer.gid)
    );
    let r = pp.run(remote, peer.qpn, peer.psn, me.psn, args.server.is_some())?;
    report(&r, xdp_port.as_ref());
    counters.print(false, args.quiet);
    Ok(if r.corrupt > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The RoCE endpoint at `local_ip`: a UDP socket, or an AF_XDP port with `--xdp`.
fn open(
    args: &Args,
    cfg: PingpongConfig,
    qpn: u32,
    local_ip: IpAddr,
) -> Result<(Pingpong, IpAddr, Option<XdpPort>)> {
    Ok(match &args.xdp {
        Some(ifname) => {
            let IpAddr::V4(ip) = local_ip else {
                bail!("--xdp: IPv4 only, not {local_ip}");
            };
            let mut x = XdpPortConfig::new(ifname, ip, XdpRole::Host);
            x.host_ports = (args.roce_port, args.roce_port);
            let port = XdpPort::open(&x).with_context(|| format!("--xdp {ifname}"))?;
            let sock = Box::new(port.socket(args.roce_port));
            (
                Pingpong::with_backend(sock, cfg, qpn)?,
                local_ip,
                Some(port),
            )
        }
        None => {
            let (sock, local_ip) = bind_roce(local_ip, args.roce_port, args.bind.is_some())?;
            for n in &sock.notes {
                eprintln!("rocelink: note: {n}");
            }
            (Pingpong::new(sock, cfg, qpn)?, local_ip, None)
        }
    })
}

/// rdma-core's two result lines, then rocelink's counters.
fn report(r: &rocelink_perftest::pingpong::PingpongReport, xdp: Option<&XdpPort>) {
    let secs = r.elapsed.as_secs_f64();
    println!(
        "{} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        r.bytes,
        r.mbit_per_s()
    );
    println!(
        "{} iters in {secs:.2} seconds = {:.2} usec/iter",
        r.iters,
        r.usec_per_iter()
    );
    let (es, qs) = (r.endpoint, r.qp);
    println!(
        "rocelink: {} received, {} lost, {} corrupt; ICRC: {} bad, {} IPv4 via recovered ID (weak); retransmissions {}, NAKs sent {}/received {}, drops {}",
        r.received,
        r.lost,
        r.corrupt,
        es.icrc_errors,
        es.icrc_unverified,
        qs.retransmissions,
        qs.naks_sent,
        qs.naks_received,
        qs.drops
    );
    if let Some(x) = xdp {
        println!("rocelink: {}", crate::sinks::xdp_summary(x));
    }
}
