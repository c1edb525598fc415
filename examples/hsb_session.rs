//! An HSB device emulated from code and a host receiving it as a session, both in this
//! program, over loopback: the host configures the device over ECB, receives two virtual
//! ports on their own threads and hands every frame to this program's code, which checks
//! it against the sensor's pattern.
//!
//! ```text
//! cargo run --release -p rocelink-examples --example hsb_session -- 50
//! ```
#![forbid(unsafe_code)]

use rocelink_examples::summary_line;
use rocelink_hsb::device::DeviceConfig;
use rocelink_hsb::emulator::{EmulatorConfig, EmulatorSession, Handles, Pacing};
use rocelink_hsb::sensor::Sensor;
use rocelink_hsb_host::session::{Device, HostConfig, HostSession, Session};
use rocelink_hsb_host::{Delivered, Limits, SessionError};
use std::net::{Ipv4Addr, SocketAddr};

const FRAME: usize = 100_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let want: u64 = std::env::args().nth(1).map_or(Ok(20), |s| s.parse())?;
    let dev = Ipv4Addr::new(127, 0, 76, 2);
    let mut emu = EmulatorConfig::new(DeviceConfig::new(dev));
    emu.bootp_target = None; // nobody to announce to
    emu.sensor = Sensor::Pattern;
    emu.pacing = Pacing::Fps(500.0);
    let emu = EmulatorSession::start(&emu, Handles::default())?; // its own counters, no notes
    println!("device at {dev}, ECB on {}", emu.control_addr());

    let local = SocketAddr::from(([127, 0, 76, 1], 0));
    let mut cfg = HostConfig::new(Device::ecb(dev), local, FRAME);
    cfg.vps = vec![0, 1];
    cfg.limits = Limits::frames(want);
    // a sink per virtual port: any closure that takes a frame
    let sink = |vp: u32| {
        let mut expected = Vec::new();
        move |d: &Delivered<'_>| -> Result<(), SessionError> {
            Sensor::Pattern.frame(d.report.frame_number, FRAME, &mut expected);
            if d.report.frame_number < 2 {
                println!(
                    "vp {vp} frame {}: {} bytes, good {}, as sent {}",
                    d.report.frame_number,
                    d.data.len(),
                    d.report.good(),
                    d.data == &expected[..]
                );
            }
            if d.report.good() && d.data != &expected[..] {
                // a sink's error ends its port: the summary says why
                return Err(SessionError::Sink {
                    sink: "pattern check".into(),
                    message: format!("frame {} differs", d.report.frame_number),
                });
            }
            Ok(())
        }
    };
    let host = HostSession::start(cfg, vec![sink(0), sink(1)], None, &mut |note| {
        println!("{note}");
    })?;
    // the host ends by its frame count (it reports no events: notes went to the closure
    // above); the emulator runs until stopped
    let Ok(sum) = rocelink_runtime::follow(host, |e| match e {});
    let sent = emu.stop()?;
    println!("{}", summary_line("hsb host", &sum));
    println!("{}", summary_line("hsb emulator", &sent));
    let mut bad = 0;
    for p in &sum.ports {
        let out = p.outcome.as_ref().map_err(|e| e.to_string())?;
        let s = &p.stats;
        println!(
            "vp {}: {} frames, {} good, {} damaged ({:?})",
            p.vp, out.frames, s.good, s.damaged, out.stopped
        );
        bad += s.damaged + (want - s.good.min(want));
    }
    println!("the device sent {} packets", sent.packets);
    if bad > 0 {
        return Err("a frame was damaged or missing".into());
    }
    Ok(())
}
