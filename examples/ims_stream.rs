//! An IMS buffer unit and a worker, both in this program, over loopback: the worker
//! streams checkable frames, the unit ACKs each, hands them on in order and checks their
//! §4 header; every frame the worker saw ACKed was consumed intact.
//!
//! ```text
//! cargo run --release -p rocelink-examples --example ims_stream -- 2000
//! ```
#![forbid(unsafe_code)]

use rocelink_examples::summary_line;
use rocelink_ims::session::Session;
use rocelink_ims::session::unit::{UnitSession, UnitSessionConfig};
use rocelink_ims::session::worker::{Frames, WorkerSession, WorkerSessionConfig};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let want: u64 = std::env::args().nth(1).map_or(Ok(1000), |s| s.parse())?;
    let mut cfg = UnitSessionConfig::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 173)));
    cfg.unit.ring_bytes = 64 << 20;
    cfg.frames = Some(want);
    cfg.duration = Some(Duration::from_secs(60));
    let unit = UnitSession::start(cfg, None)?;
    println!("buffer unit at {}", unit.local());
    let mut send = WorkerSessionConfig::new(unit.local(), Frames::Pattern { len: 256 << 10 });
    send.count = Some(want);
    send.local = Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 174)));
    let worker = WorkerSession::start(send, None)?;
    let (mut consumed, mut intact) = (0u64, 0u64);
    // the unit ends by its frame count; each frame it hands on is an event
    let served = rocelink_runtime::follow(unit, |f| {
        consumed += 1;
        intact += u64::from(f.intact);
        if consumed <= 2 || consumed == want {
            println!(
                "frame {consumed}: {} bytes at VA {:#x} from worker {:?}, intact {}",
                f.len, f.va, f.worker, f.intact
            );
        }
    })?;
    let sent = worker.wait()?;
    println!("{}", summary_line("ims unit", &served));
    println!("{}", summary_line("ims worker", &sent));
    println!(
        "{} frames ACKed to the worker at {}; {consumed} consumed at {}, {intact} intact, {} NACKs",
        sent.stats.frames, sent.local, served.local, served.stats.nacks
    );
    if let Some(why) = sent.failure() {
        return Err(why.into());
    }
    if consumed != sent.stats.frames || intact != consumed {
        return Err("a frame ACKed was not consumed intact".into());
    }
    Ok(())
}
