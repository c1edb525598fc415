//! The ultrasound trigger round trip with both ends in this program: a probe session, and
//! a round-trip session that triggers it one shot at a time and times each from the
//! trigger leaving to the shot's last message taken — a row per shot size, each shot
//! checked against the probe's echoes.
//!
//! ```text
//! cargo run --release -p rocelink-examples --example trigger_rtt -- 200
//! ```
#![forbid(unsafe_code)]

use rocelink_examples::summary_line;
use rocelink_ultrasound::Geometry;
use rocelink_ultrasound::session::LinkAddrs;
use rocelink_ultrasound::session::Session;
use rocelink_ultrasound::session::probe::{ProbeSession, ProbeSessionConfig};
use rocelink_ultrasound::session::round_trip::{RoundTrip, RoundTripConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: usize = std::env::args().nth(1).map_or(Ok(100), |s| s.parse())?;
    let sizes = vec![Geometry::new(100, 96), Geometry::new(1000, 96)];
    let probe = ProbeSession::start(
        ProbeSessionConfig {
            links: LinkAddrs {
                addrs: vec![[127, 0, 0, 179].into()],
                port: 4791,
                chosen: false, // move to a free 127/8 address if 4791 is taken
            },
            ..ProbeSessionConfig::new(sizes[0])
        },
        None,
    )?;
    let p = probe.links()[0];
    println!("probe at {}, triggers on {}", p.local, p.triggers);
    let rtt = RoundTrip::start(RoundTripConfig {
        probe: p.triggers,
        bind: [127, 0, 0, 180].into(),
        port: p.local.port(),
        count,
        warmup: 5,
        verify_seed: Some(ProbeSessionConfig::new(sizes[0]).seed),
        ..RoundTripConfig::new(sizes)
    })?;
    // the measurement ends when every size is measured; each size's row is an event
    let rows = rocelink_runtime::follow(rtt, |r| {
        println!(
            "{} bytes: {} round trips, median {:.1} µs, {} lost, {} corrupt",
            r.geometry.bytes(),
            r.rtt_us.len(),
            r.quantile(0.5),
            r.lost,
            r.corrupt
        );
    })?;
    // the probe runs until stopped
    let sent = probe.stop()?;
    println!("{}", summary_line("round trip", &rows));
    println!("{}", summary_line("probe", &sent));
    if rows
        .iter()
        .any(|r| r.corrupt > 0 || r.rtt_us.len() != count)
    {
        return Err("a shot was lost or differed from the probe's echoes".into());
    }
    Ok(())
}
