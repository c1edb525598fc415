//! `rocelink perf TEST [SERVER]`: perftest's `ib_write_bw`, `ib_read_bw`, `ib_send_bw`,
//! `ib_write_lat`, `ib_read_lat` and `ib_send_lat` on rocelink's transport, with perftest's
//! options, exchange (TCP 18515) and output, so either side may be perftest itself.

use crate::stats::{CounterArgs, Counters};
use anyhow::{Context, Result, anyhow, bail};
use rocelink_bench::perf::{Addresses, Kind, Outcome, Perf, PerfConfig, Test};
use rocelink_bench::pingpong::bind_roce;
use rocelink_io::perftest::Oob;
use rocelink_transport::{Mtu, QpType};
use std::net::{IpAddr, Ipv4Addr, TcpListener, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

const LINE: &str =
    "---------------------------------------------------------------------------------------";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conn {
    #[value(name = "RC", alias = "rc")]
    Rc,
    #[value(name = "UC", alias = "uc")]
    Uc,
    #[value(name = "UD", alias = "ud")]
    Ud,
}

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The test: write_bw, read_bw, send_bw, write_lat, read_lat or send_lat.
    #[arg(value_parser = parse_test)]
    test: Test,
    /// Server to connect to; without it, wait for a client.
    server: Option<String>,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    port: u16,
    /// Message size in bytes (default 65536 for bandwidth, 2 for latency).
    #[arg(short = 's', long, value_parser = clap::value_parser!(u64).range(1..=(1 << 30)))]
    size: Option<u64>,
    /// Every size from 2 to 2^23 bytes.
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Iterations (default 5000 for write_bw, 1000 otherwise).
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    iters: Option<u64>,
    /// Run each size for this many seconds instead of a number of iterations (bandwidth).
    #[arg(short = 'D', long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: Option<u64>,
    /// Path MTU (256..4096; the smaller of both sides is used). Default: the port's active
    /// MTU as Linux rxe derives it from the interface's (1024 at 1500, 4096 at 9000 and on
    /// loopback).
    #[arg(short = 'm', long)]
    mtu: Option<usize>,
    /// Send queue depth (default 128 for bandwidth, 1 for latency).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u64).range(1..=8192))]
    tx_depth: Option<u64>,
    /// Receive queue depth (SEND tests).
    #[arg(short = 'r', long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=8192))]
    rx_depth: u64,
    /// Outstanding READs this side accepts as responder.
    #[arg(short = 'o', long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    outs: u16,
    /// Connection type.
    #[arg(short = 'c', long, value_enum, default_value = "RC")]
    connection: Conn,
    /// Number of QPs (only 1 so far).
    #[arg(short = 'q', long, default_value_t = 1)]
    qp: u32,
    /// Bandwidth in Gb/sec instead of MiB/sec.
    #[arg(long = "report_gbits", alias = "report-gbits")]
    report_gbits: bool,
    /// Device (accepted for compatibility: rocelink's device is the bound address).
    #[arg(short = 'd', long = "ib-dev")]
    ib_dev: Option<String>,
    /// Port of the device (accepted for compatibility).
    #[arg(short = 'i', long = "ib-port")]
    ib_port: Option<u32>,
    /// GID index (accepted for compatibility: the GID is the bound IP).
    #[arg(short = 'x', long = "gid-index")]
    gid_index: Option<i32>,
    /// Do not fail on CPU frequency differences (accepted: rocelink measures with the
    /// monotonic clock).
    #[arg(short = 'F', long = "CPU-freq")]
    cpu_freq: bool,
    /// Local IP for RoCE and TCP (default: the address the peer is reached from / at).
    #[arg(long)]
    bind: Option<IpAddr>,
    /// UDP port of RoCE v2 (4791; change only between two rocelink processes).
    #[arg(long, default_value_t = 4791)]
    roce_port: u16,
    /// Seconds to wait for the peer at each exchange step.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
    /// Send packet by packet (sendmmsg) instead of segmented runs (UDP GSO).
    #[arg(long)]
    no_gso: bool,
    /// Print each result row (and the counters) as one JSON line instead of perftest's text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    counters: CounterArgs,
}

pub(crate) fn parse_test(s: &str) -> Result<Test, String> {
    Test::parse(s).ok_or_else(|| {
        format!("unknown test {s:?}: write_bw, read_bw, send_bw, write_lat, read_lat or send_lat")
    })
}

fn config(a: &Args) -> Result<PerfConfig> {
    let mut c = PerfConfig::new(a.test);
    c.conn = match a.connection {
        Conn::Rc => QpType::Rc,
        Conn::Uc => QpType::Uc,
        Conn::Ud => QpType::Ud,
    };
    if a.all && a.size.is_some() {
        bail!("-a and -s exclude each other");
    }
    if a.all {
        c.sizes = PerfConfig::all_sizes();
    } else if let Some(s) = a.size {
        c.sizes = vec![s as usize];
    }
    if let Some(n) = a.iters {
        c.iters = n;
    }
    if let Some(d) = a.duration {
        if a.test.kind == Kind::Lat {
            bail!("-D is supported for bandwidth tests only");
        }
        c.duration = Some(Duration::from_secs(d));
    }
    if let Some(m) = a.mtu {
        c.mtu = Mtu::from_bytes(m)
            .filter(|m| m.bytes() <= 4096)
            .ok_or_else(|| anyhow!("MTU must be 256, 512, 1024, 2048 or 4096"))?;
    }
    if let Some(t) = a.tx_depth {
        c.tx_depth = t as usize;
    }
    c.rx_depth = a.rx_depth as usize;
    c.out_reads = a.outs;
    c.timeout = Duration::from_secs(a.timeout);
    c.gso = !a.no_gso;
    if a.qp != 1 {
        bail!("-q {}: only one QP per test so far", a.qp);
    }
    c.check().map_err(|e| anyhow!(e))?;
    Ok(c)
}

pub(crate) fn run(a: &Args, stop: &crate::stop::StopFlag) -> Result<ExitCode> {
    let mut cfg = config(a)?;
    let counters = Counters::start(&format!("perf {}", cfg.test.name()), &a.counters)?;
    let oob = if let Some(server) = &a.server {
        let addr = (server.as_str(), a.port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {server}"))?
            .next()
            .ok_or_else(|| anyhow!("no address for {server}"))?;
        Oob::connect(addr, a.bind, cfg.timeout)?
    } else {
        let ip = a.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let l = TcpListener::bind((ip, a.port))
            .with_context(|| format!("cannot listen on {ip} port {}", a.port))?;
        if !a.json {
            println!("\n************************************");
            println!("* Waiting for client to connect... *");
            println!("************************************");
        }
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        match Oob::accept_until(&l, Some(cfg.timeout), &stop.arc()) {
            Ok(o) => o,
            // Ctrl-C before anyone came: nothing ran, nothing to report
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                eprintln!("rocelink perf: {e}");
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => return Err(e).context("waiting for the client"),
        }
    };
    let local_ip = a.bind.unwrap_or(oob.addrs()?.0.ip());
    if a.mtu.is_none() {
        // as perftest takes the port's active MTU: rxe's rule over the interface's MTU
        let link = rocelink_io::net::mtu_for_ip(local_ip).unwrap_or(1500);
        cfg.mtu = Mtu::for_link(link);
    }
    let (sock, _) = bind_roce(local_ip, a.roce_port, a.bind.is_some())?;
    let mut p = Perf::new(cfg.clone(), sock)?;
    p.publish_to(counters.board.clone());
    let json = a.json;
    let gbits = a.report_gbits;
    let gid_index = a.gid_index;
    let mut show = |x: &Addresses| {
        if !json {
            header(&cfg, x, gid_index);
        }
    };
    let out = p.run(oob, &stop.arc(), &mut show);
    // the counters also when the test failed: they say why (retransmissions, refusals)
    counters.board.set_link(p.link());
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            counters.print(false, false);
            return Err(e).context(format!("perf {}", cfg.test.name()));
        }
    };
    print_rows(&out, gbits, json);
    counters.print(json, false);
    Ok(ExitCode::SUCCESS)
}

/// C's `%#0Nx`: zero-padded to `width` with `0x` counted in it, no prefix for zero.
fn alt_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$}", 0)
    } else {
        format!("0x{v:0w$x}", w = width.saturating_sub(2))
    }
}

fn header(cfg: &PerfConfig, x: &Addresses, gid_index: Option<i32>) {
    let t = cfg.test;
    println!("{LINE}");
    println!("                    {}", t.title());
    println!(" Number of qps   : 1\t\tTransport type : IB");
    println!(
        " Connection type : {}\t\tUsing SRQ      : OFF",
        format!("{:?}", cfg.conn).to_uppercase()
    );
    println!(" TX depth        : {}", cfg.tx_depth);
    if t.verb == rocelink_bench::perf::Verb::Send {
        println!(" RX depth        : {}", cfg.rx_depth);
    }
    println!(" Mtu             : {}[B]", x.mtu.bytes());
    println!(" Link type       : Ethernet");
    println!(" GID index       : {}", gid_index.unwrap_or(0));
    println!(" Max inline data : 0[B]");
    println!(" rdma_cm QPs\t : OFF");
    println!(
        " Data ex. method : Ethernet (peer perftest {})",
        x.peer_version
    );
    println!("{LINE}");
    for (side, k) in [("local", &x.local), ("remote", &x.remote)] {
        let mut l = format!(
            " {side} address: LID {} QPN {} PSN {}",
            alt_hex(u64::from(k.lid), 4),
            alt_hex(u64::from(k.qpn), 6),
            alt_hex(u64::from(k.psn), 6)
        );
        if t.verb == rocelink_bench::perf::Verb::Read {
            l += &format!(" OUT {}", alt_hex(u64::from(k.out_reads), 4));
        }
        if t.verb != rocelink_bench::perf::Verb::Send {
            l += &format!(
                " RKey {} VAddr {}",
                alt_hex(u64::from(k.rkey), 8),
                alt_hex(k.vaddr, 16)
            );
        }
        println!("{l}");
        if let Some(g) = k.gid {
            let g: Vec<String> = g.iter().map(|b| format!("{b:02}")).collect();
            println!(" GID: {}", g.join(":"));
        }
    }
    println!("{LINE}");
    if t.kind == Kind::Bw {
        println!(
            " #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]",
            u = "MiB/sec"
        );
    } else {
        println!(
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
        );
    }
}

fn print_rows(out: &Outcome, gbits: bool, json: bool) {
    let unit = |bps: f64| {
        if gbits {
            bps * 8.0 / 1e9
        } else {
            bps / 1_048_576.0
        }
    };
    match out {
        Outcome::Bw(rows) => {
            for r in rows {
                if json {
                    println!(
                        "{{\"bytes\":{},\"iterations\":{},\"bw_peak\":{:.2},\"bw_average\":{:.2},\"unit\":\"{}\",\"msg_rate_mpps\":{:.6}}}",
                        r.bytes,
                        r.iters,
                        unit(r.peak_bps),
                        unit(r.avg_bps),
                        if gbits { "Gb/sec" } else { "MiB/sec" },
                        r.msg_rate_mpps
                    );
                } else {
                    println!(
                        " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t     {:<7.6}",
                        r.bytes,
                        r.iters,
                        unit(r.peak_bps),
                        unit(r.avg_bps),
                        r.msg_rate_mpps
                    );
                }
            }
        }
        Outcome::Lat(rows) => {
            for r in rows {
                let s = &r.stats;
                if json {
                    println!(
                        "{{\"bytes\":{},\"iterations\":{},\"t_min\":{:.2},\"t_max\":{:.2},\"t_typical\":{:.2},\"t_avg\":{:.2},\"t_stdev\":{:.2},\"p99\":{:.2},\"p99_9\":{:.2}}}",
                        r.bytes,
                        r.iters,
                        s.t_min,
                        s.t_max,
                        s.t_typical,
                        s.t_avg,
                        s.t_stdev,
                        s.p99,
                        s.p999
                    );
                } else {
                    println!(
                        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
                        r.bytes,
                        r.iters,
                        s.t_min,
                        s.t_max,
                        s.t_typical,
                        s.t_avg,
                        s.t_stdev,
                        s.p99,
                        s.p999
                    );
                }
            }
        }
    }
    if !json {
        println!("{LINE}");
    }
}
