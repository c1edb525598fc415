//! A perf test with both ends in this process over loopback — the same [`Perf`] a
//! `rocelink perf` process runs, each end on its own thread (pinned to CPUs 0 and 1 on
//! request), its own sockets and its own TCP exchange — and the UDP ceiling it is held
//! against, measured in the same run (`rocelink bench perf`).

use super::{Kind, Outcome, Perf, PerfConfig, PerfError};
use rocelink_io::cpu::pin_current_thread;
use rocelink_io::perftest::Oob;
use rocelink_runtime::bind_roce;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};

/// Run `cfg` between a server at `ips.0` and a client at `ips.1` (both on RoCE's port 4791
/// of their address; the TCP exchange on a free port). Returns the client's outcome, then
/// the server's.
pub fn loopback(
    cfg: &PerfConfig,
    ips: (IpAddr, IpAddr),
    pin: bool,
    stop: &rocelink_runtime::Stopper,
) -> Result<(Outcome, Outcome), PerfError> {
    let listener = TcpListener::bind((ips.0, 0))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen at {}: {e}", ips.0)))?;
    let tcp = listener.local_addr()?;
    let (ssock, _) = bind_roce(ips.0, rocelink_wire::ROCE_V2_PORT, true)?;
    let (csock, _) = bind_roce(ips.1, rocelink_wire::ROCE_V2_PORT, true)?;
    let mut server = Perf::new(cfg.clone(), ssock)?;
    let mut client = Perf::new(cfg.clone(), csock)?;
    let timeout = cfg.timeout;
    std::thread::scope(|s| {
        let srv = s.spawn(move || {
            if pin {
                let _ = pin_current_thread(0);
            }
            let oob = Oob::accept(&listener, Some(timeout))?;
            server.run(oob, stop.flag(), &mut |_| {})
        });
        if pin {
            let _ = pin_current_thread(1);
        }
        let c = Oob::connect(SocketAddr::new(tcp.ip(), tcp.port()), Some(ips.1), timeout)
            .map_err(PerfError::from)
            .and_then(|oob| client.run(oob, stop.flag(), &mut |_| {}));
        let sv = srv.join().map_err(|_| PerfError::Panicked)?;
        Ok((c?, sv?))
    })
}

/// The figure a test is judged by: MiB/s average for bandwidth, t_typical µs for latency
/// (the first row).
pub fn headline(o: &Outcome) -> Option<f64> {
    match o {
        Outcome::Bw(r) => r.first().map(|r| r.avg_bps / (1 << 20) as f64),
        Outcome::Lat(r) => r.first().map(|r| r.stats.t_typical),
    }
}

/// Whether bigger is better for this kind of test.
pub fn higher_is_better(k: Kind) -> bool {
    k == Kind::Bw
}
