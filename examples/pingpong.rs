//! rdma-core's `ibv_rc_pingpong` with both ends in this program, each a session on its own
//! loopback address: the server waits on the TCP exchange, the client connects, both print
//! the exchange's addresses and rdma-core's figures. Either end also runs against
//! `ibv_rc_pingpong` itself (over Linux rxe) or `rocelink pingpong`.
//!
//! ```text
//! cargo run --release -p rocelink-examples --example pingpong -- 1000
//! ```
#![forbid(unsafe_code)]

use rocelink_examples::summary_line;
use rocelink_perftest::pingpong::PingpongConfig;
use rocelink_perftest::pingpong::session::{
    PingpongEvent, PingpongSession, PingpongSessionConfig, Side,
};
use rocelink_transport::QpType;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iters: u32 = std::env::args().nth(1).map_or(Ok(1000), |s| s.parse())?;
    let mut pingpong = PingpongConfig::new(QpType::Rc);
    pingpong.iters = iters;
    let (server_ip, client_ip) = (ip(177), ip(178));
    let config = |side, bind| PingpongSessionConfig {
        bind: Some(bind),
        ..PingpongSessionConfig::new(pingpong, side)
    };
    // any free exchange port
    let server = PingpongSession::start(
        config(Side::Server(SocketAddr::new(server_ip, 0)), server_ip),
        None,
    )?;
    println!("server waiting at {}", server.exchange_addr());
    let client = PingpongSession::start(
        config(Side::Client(server.exchange_addr()), client_ip),
        None,
    )?;
    // each side ends by its iterations; the exchange's addresses are its event
    let show = |who: &'static str| {
        move |e: PingpongEvent| {
            if let PingpongEvent::Addresses { me, peer } = e {
                println!("{who}: QPN {:#08x} <-> QPN {:#08x}", me.qpn, peer.qpn);
            }
        }
    };
    let c = rocelink_runtime::follow(client, show("client"))?;
    let s = rocelink_runtime::follow(server, show("server"))?;
    for (who, sum) in [("client", &c), ("server", &s)] {
        let r = &sum.report;
        println!(
            "{who}: {} bytes in {:.3} s, {} answers, {} corrupt",
            r.bytes,
            r.elapsed.as_secs_f64(),
            r.received,
            r.corrupt
        );
        println!("{}", summary_line(&format!("pingpong {who}"), sum));
    }
    if c.report.received != iters || s.report.received != iters {
        return Err("an exchange went unanswered".into());
    }
    Ok(())
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}
