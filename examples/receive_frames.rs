//! Receive frames from an HSB device — or `rocelink emulate` — into memory this program
//! allocated, and hand each verified frame to our own code.
//!
//! ```text
//! rocelink emulate &                                   # a device at 127.0.0.2
//! cargo run -p rocelink-examples --example receive_frames -- [DEVICE] [HOST] [FRAMES]
//! ```
//!
//! DEVICE (default 127.0.0.2) is the device's IP, HOST (default 127.0.0.1) the local IP it
//! sends to, FRAMES (default 10) how many good frames to wait for. Exits 0 once they have
//! arrived, 1 if they do not within 10 s.

use rocelink_hsb::host::control::Control;
use rocelink_hsb::host::receiver::{Receiver, ReceiverConfig};
use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The application's own frame memory. Anything `AsRef<[u8]> + AsMut<[u8]> + Send` will do:
/// a `Vec`, a hugepage mapping, a buffer pinned for a GPU copy.
struct MyRing(Vec<u8>);

impl AsRef<[u8]> for MyRing {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl AsMut<[u8]> for MyRing {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// The application's processing of a verified frame: here, a sum of its bytes.
fn process(frame_number: u64, data: &[u8]) -> u64 {
    let sum = data.iter().map(|&b| u64::from(b)).sum();
    println!("frame {frame_number}: {} bytes, byte sum {sum}", data.len());
    sum
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("receive_frames: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let device: Ipv4Addr = args.next().as_deref().unwrap_or("127.0.0.2").parse()?;
    let host: Ipv4Addr = args.next().as_deref().unwrap_or("127.0.0.1").parse()?;
    let want: u64 = args.next().as_deref().unwrap_or("10").parse()?;
    let frame_size = 1 << 20;

    // Receive at HOST (any free port) from DEVICE, into a ring in our memory.
    let cfg = ReceiverConfig::new(SocketAddr::new(host.into(), 0), device, frame_size);
    let ring = MyRing(vec![0; Receiver::ring_len(&cfg)]);
    let mut rx = Receiver::with_memory(cfg, ring)?;

    // Program the device's data channel over ECB (QP, R_Key, ring geometry, our address)
    // and enable it, as HSB's host software does.
    let mut ctl = Control::new(SocketAddr::new(
        device.into(),
        rocelink_wire::hsb::CONTROL_PORT,
    ))?;
    rx.configure(&mut ctl)?;

    let deadline = Instant::now() + Duration::from_secs(10);
    let mut good = 0;
    while good < want && Instant::now() < deadline {
        // The frame borrows the receiver: its bytes stay put until the next call.
        let Some(frame) = rx.next(Duration::from_millis(500))? else {
            continue;
        };
        if frame.report.good() {
            process(frame.report.frame_number, frame.data);
            good += 1;
        } else {
            // Never passed off as good: lost packets, a CRC mismatch, a short frame.
            eprintln!(
                "frame {} damaged: {:?}",
                frame.report.frame_number, frame.report
            );
        }
    }
    rx.stop(&mut ctl)?;
    println!("{good} good frames of {want}");
    // The memory is ours again.
    let ring = rx.into_memory().ok_or("the ring was not given back")?;
    println!("ring of {} bytes returned", ring.bytes().len());
    Ok(good == want)
}
