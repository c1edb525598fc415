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
use rocelink_perftest::pingpong::session::{
    PingpongEvent, PingpongSession, PingpongSessionConfig, Side,
};
use rocelink_perftest::pingpong::{PingpongConfig, PingpongError};
use rocelink_runtime::BackendChoice;
use rocelink_runtime::Session;
use rocelink_runtime::xdp::XdpPort;
use rocelink_transport::{Mtu, QpType};
use rocelink_wire::oob::gid_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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
    #[command(flatten)]
    pfc: crate::args::PfcArgs,
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
    let stop = crate::stop::StopFlag::install()?;
    let session = PingpongSession::start(session_config(args, cfg)?, Some(counters.board.clone()))?;
    // chosen now so the server can print its address before it waits, as rdma-core does
    let (qpn, psn) = session.qpn_psn();
    let server = args.server.is_none();
    if server {
        // the GID is known now only with --bind (rdma-core prints a zero GID without -g)
        local_line(qpn, psn, args.bind.map_or([0; 16], gid_of));
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
    loop {
        match session.next_event(Duration::from_millis(50)) {
            Some(PingpongEvent::Addresses { me, peer }) => {
                if !server {
                    local_line(qpn, psn, me.gid);
                }
                println!(
                    "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
                    peer.lid,
                    peer.qpn,
                    peer.psn,
                    Ipv6Addr::from(peer.gid)
                );
            }
            Some(_) => {}
            None if session.is_finished() => break,
            None if stop.is_set() => session.stopper().stop(),
            None => {}
        }
    }
    let sum = match session.wait() {
        Ok(s) => s,
        // Ctrl-C: said, as perf says a stop, and not an error
        Err(e @ PingpongError::Stopped { .. }) => {
            eprintln!("rocelink pingpong: {e} (Ctrl-C)");
            counters.print(false, args.quiet);
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    let r = sum.report;
    report(&r, sum.xdp.as_ref());
    counters.print(false, args.quiet);
    Ok(if r.corrupt > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The session's settings from the flags.
fn session_config(args: &Args, pingpong: PingpongConfig) -> Result<PingpongSessionConfig> {
    let side = match &args.server {
        Some(server) => Side::Client(
            std::net::ToSocketAddrs::to_socket_addrs(&(server.as_str(), args.port))
                .with_context(|| format!("cannot resolve {server}"))?
                .next()
                .ok_or_else(|| anyhow!("no address for {server}"))?,
        ),
        None => Side::Server(SocketAddr::new(
            args.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            args.port,
        )),
    };
    Ok(PingpongSessionConfig {
        pingpong,
        side,
        bind: args.bind,
        roce_port: args.roce_port,
        backend: BackendChoice::xdp_or_socket(args.xdp.as_deref()).with_pfc(args.pfc.config()),
        pcap: args.pcap.clone(),
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
        crate::sinks::pfc_lines("pingpong", x);
    }
}
