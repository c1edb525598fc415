//! An ultrasound probe and a host receiving its shots, both in this program, over
//! loopback: the host triggers the probe, every shot lands contiguous and is checked byte
//! for byte against the probe's echoes, and Ctrl-C (or the shot count) ends it.
//!
//! ```text
//! cargo run --release -p rocelink-examples --example ultrasound_shots -- 200
//! ```
#![forbid(unsafe_code)]

use rocelink_examples::summary_line;
use rocelink_ultrasound::Geometry;
use rocelink_ultrasound::session::LinkAddrs;
use rocelink_ultrasound::session::Session;
use rocelink_ultrasound::session::probe::{ProbeSession, ProbeSessionConfig};
use rocelink_ultrasound::session::shots::{ShotsConfig, ShotsSession};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let want: u64 = std::env::args().nth(1).map_or(Ok(100), |s| s.parse())?;
    let g = Geometry::new(1000, 96); // 144 000 bytes a shot, 36 UD messages
    let at = |ip: [u8; 4]| LinkAddrs {
        addrs: vec![ip.into()],
        port: 4791,
        chosen: false, // move to a free 127/8 address if 4791 is taken
    };
    let probe = ProbeSession::start(
        ProbeSessionConfig {
            links: at([127, 0, 0, 171]),
            trigger_hz: 2000.0,
            ..ProbeSessionConfig::new(g)
        },
        None,
    )?;
    let p = probe.links()[0];
    println!(
        "probe at {} (QPN {:#x}), triggers on {}",
        p.local, p.qpn, p.triggers
    );
    let host = ShotsSession::start(
        ShotsConfig {
            links: LinkAddrs {
                port: p.local.port(),
                ..at([127, 0, 0, 172])
            },
            probes: vec![p.triggers],
            shots: Some(want),
            verify_seed: Some(1),
            duration: Some(Duration::from_secs(30)),
            ..ShotsConfig::new(g)
        },
        None,
    )?;
    let mut shown = 0;
    // the host ends by its shot count; each shot handed on is an event
    let sum = rocelink_runtime::follow(host, |e| {
        if shown < 3 || e.report.shot + 1 == want {
            shown += 1;
            let r = &e.report;
            println!(
                "shot {}: {} bytes in {} messages, complete {}, verified {:?}",
                r.shot, r.bytes, r.messages, r.complete, e.outcome.verified
            );
        }
    })?;
    // the probe runs until stopped
    let sent = probe.stop()?;
    println!("{}", summary_line("shots host", &sum));
    println!("{}", summary_line("probe", &sent));
    println!(
        "{} shots, {} complete, {} verified, {} corrupt",
        sum.sink(|s| s.shots),
        sum.sink(|s| s.complete),
        sum.sink(|s| s.verified),
        sum.sink(|s| s.corrupt)
    );
    if sum.sink(|s| s.corrupt) > 0 {
        return Err("a shot differed from the probe's echoes".into());
    }
    Ok(())
}
