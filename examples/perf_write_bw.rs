//! perftest's `ib_write_bw` with both ends in this program, each a session on its own
//! address over loopback: the server waits for the client on the exchange, the client
//! WRITEs, both print perftest's row. Either end also runs against perftest itself
//! (`ib_write_bw` over Linux rxe) or `rocelink perf write_bw`.
//!
//! ```text
//! cargo run --release -p rocelink-examples --example perf_write_bw -- 2000
//! ```
#![forbid(unsafe_code)]

use rocelink_examples::summary_line;
use rocelink_perftest::perf::session::Session;
use rocelink_perftest::perf::session::{Peer, PerfEvent, PerfSession, PerfSessionConfig};
use rocelink_perftest::perf::{Outcome, PerfConfig, Test};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iters: u64 = std::env::args().nth(1).map_or(Ok(2000), |s| s.parse())?;
    let test = Test::parse("write_bw").ok_or("no such test")?;
    let mut cfg = PerfConfig::new(test);
    cfg.iters = iters;
    let (server_ip, client_ip) = (ip(175), ip(176));
    let server = PerfSession::start(
        PerfSessionConfig {
            peer: Peer::Listen(SocketAddr::new(server_ip, 0)), // any free exchange port
            bind: Some(server_ip),
            ..PerfSessionConfig::client(cfg.clone(), server_ip)
        },
        None,
    )?;
    println!("server waiting at {}", server.exchange_addr());
    let client = PerfSession::start(
        PerfSessionConfig {
            peer: Peer::Server(server.exchange_addr()),
            bind: Some(client_ip),
            ..PerfSessionConfig::client(cfg, server_ip)
        },
        None,
    )?;
    // the client ends by its iterations; the exchange's addresses are its event
    let c = rocelink_runtime::follow(client, |e| {
        if let PerfEvent::Addresses(a) = e {
            println!(
                "client QPN {:#08x} -> server QPN {:#08x}, MTU {}",
                a.local[0].qpn,
                a.remote[0].qpn,
                a.mtu.bytes()
            );
        }
    });
    let s = server.wait();
    for (who, sum) in [("client", c?), ("server", s?)] {
        println!("{}", summary_line(&format!("perf {who}"), &sum));
        let Outcome::Bw(rows) = &sum.outcome else {
            return Err("a bandwidth test gives bandwidth rows".into());
        };
        for r in rows {
            println!(
                "{who}: {} bytes x {} iterations, {:.2} MiB/s average, {} packets sent",
                r.bytes,
                r.iters,
                r.avg_bps / (1 << 20) as f64,
                sum.link.net.get("tx_packets").copied().unwrap_or(0)
            );
        }
    }
    Ok(())
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}
