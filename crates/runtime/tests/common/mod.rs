//! What the landing tests share: a sender thread putting a faulty wire on loopback while
//! the driver receives, landing or copying.

use rocelink_io::udp::UdpSocket;
use rocelink_runtime::{Driver, LandingStats, Predictor};
use rocelink_testkit::faults::send_runs;
use rocelink_transport::Endpoint;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Send `wire` from `from` to `to` in runs `pause` apart while `drv` receives into `ep`,
/// straight to where `predict` says (`Some`) or the copying way; then take what is still
/// queued for 300 ms.
pub(crate) fn receive_wire(
    drv: &mut Driver,
    ep: &mut Endpoint,
    mut predict: Option<&mut Predictor<'_>>,
    (from, to): (UdpSocket, SocketAddr),
    wire: &[Vec<u8>],
    pause: Duration,
) {
    let sent = AtomicBool::new(false);
    let mut run = |drv: &mut Driver, ep: &mut Endpoint, until, done: &dyn Fn() -> bool| {
        match predict.as_deref_mut() {
            Some(p) => drv.run_landing(ep, until, p, |_| done()),
            None => drv.run(ep, until, |_| done()),
        }
        .unwrap();
    };
    std::thread::scope(|s| {
        let sent = &sent;
        s.spawn(move || {
            send_runs(&from, to, wire, pause);
            sent.store(true, Ordering::Relaxed);
        });
        let end = Instant::now() + Duration::from_secs(20);
        run(drv, ep, end, &|| sent.load(Ordering::Relaxed));
    });
    run(
        drv,
        ep,
        Instant::now() + Duration::from_millis(300),
        &|| false,
    );
}

/// The landing path was taken (more than `least` segments in place) and left (a
/// corrupted payload refused where it landed; a segment that did not fit its slot
/// gathered, or one in another's place moved).
pub(crate) fn assert_taken_and_left(took: LandingStats, least: usize, what: &str) {
    assert!(took.in_place as usize > least, "{what}: {took:?}");
    assert!(took.refused > 0, "{what}: {took:?}");
    assert!(took.gathered + took.moved > 0, "{what}: {took:?}");
}
