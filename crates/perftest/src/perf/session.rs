//! A perftest test as a session: the exchange with the peer, the endpoint and the run on a
//! thread of its own; the address lines and (running infinitely) each period's row as
//! events; the rows at the end.

use super::{Addresses, BwRow, Outcome, Perf, PerfConfig, PerfError, Progress};
use rocelink_io::perftest::Oob;
use rocelink_runtime::counters::{Board, Link};
use rocelink_runtime::xdp::XdpPort;
use rocelink_runtime::{BackendChoice, RoceBackend, SessionThread, Stopper};
use rocelink_transport::Mtu;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;

/// Which end of perftest's exchange this side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Peer {
    /// The client: connect to the server's exchange at this address.
    Server(SocketAddr),
    /// The server: wait for a client at this TCP address.
    Listen(SocketAddr),
}

/// What a test is: plain data.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PerfSessionConfig {
    /// The test and its settings.
    pub test: PerfConfig,
    /// Which end of the exchange.
    pub peer: Peer,
    /// The local address (RoCE and the client's exchange); default: the address the
    /// exchange used.
    pub bind: Option<IpAddr>,
    /// A socket, or AF_XDP.
    pub backend: BackendChoice,
    /// Take the MTU from the local interface, as perftest takes the port's active MTU
    /// (otherwise `test.mtu`).
    pub link_mtu: bool,
}

impl PerfSessionConfig {
    /// `test` as perftest's client of `server` (its exchange port: 18515).
    pub fn client(test: PerfConfig, server: IpAddr) -> PerfSessionConfig {
        PerfSessionConfig {
            test,
            peer: Peer::Server(SocketAddr::new(
                server,
                rocelink_wire::perftest::DEFAULT_PORT,
            )),
            bind: None,
            backend: BackendChoice::Socket,
            link_mtu: true,
        }
    }
}

/// What a running test reports.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PerfEvent {
    /// The exchange is done: perftest prints its address lines now.
    Addresses(Addresses),
    /// One period of `--run_infinitely` passed.
    Row(BwRow),
    /// The client closed the exchange instead of coming to the report: it ran until
    /// stopped. The server's run ends with the rows it has.
    PeerClosed,
}

/// What a test measured.
#[derive(Debug, Clone)]
pub struct PerfSummary {
    /// The rows.
    pub outcome: Outcome,
    /// What the exchange said.
    pub addresses: Option<Addresses>,
    /// The test's settings as run (the MTU the link gave).
    pub test: PerfConfig,
    /// The link's counters.
    pub link: Link,
    /// The client closed the exchange instead of reporting (it ran until stopped): the
    /// rows are this side's own, if it measured any.
    pub peer_closed: bool,
}

/// A running test.
#[derive(Debug)]
pub struct PerfSession {
    exchange: SocketAddr,
    events: Receiver<PerfEvent>,
    thread: SessionThread<Ended>,
}

/// How the thread ended: the summary or the error, the AF_XDP port, the counters.
type Ended = (
    Result<PerfSummary, PerfError>,
    Option<XdpPort>,
    Option<Link>,
);

impl PerfSession {
    /// Check the settings; a server binds its exchange's listener now (a client can
    /// connect once this returns); then exchange, connect and run on a thread of its own.
    /// Counters go to `board` (link `perf`) when given.
    pub fn start(cfg: PerfSessionConfig, board: Option<Board>) -> Result<PerfSession, PerfError> {
        cfg.test.check()?;
        let (listener, exchange) = match cfg.peer {
            Peer::Listen(at) => {
                let l = TcpListener::bind(at)
                    .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {at}: {e}")))?;
                let a = l.local_addr()?;
                (Some(l), a)
            }
            Peer::Server(s) => (None, s),
        };
        // a server told its address takes its RoCE port now, so a port another program
        // holds is an error before any client comes
        let early = match (&listener, cfg.bind) {
            (Some(_), Some(ip)) => Some(cfg.backend.open(ip, cfg.test.roce_port, true)?),
            _ => None,
        };
        let (tx, events) = std::sync::mpsc::sync_channel(1024);
        let thread = SessionThread::spawn("perf", move |stop| {
            run(cfg, listener, early, board, stop, &tx)
        })?;
        Ok(PerfSession {
            exchange,
            events,
            thread,
        })
    }

    /// The exchange's address: where a server listens, or the server a client reaches.
    pub fn exchange_addr(&self) -> SocketAddr {
        self.exchange
    }

    /// A handle that stops the test from any thread: a server still waiting gives up, a
    /// test running reports the rows it completed.
    pub fn stopper(&self) -> Stopper {
        self.thread.stopper()
    }

    /// The next event, waiting at most `timeout`.
    pub fn next_event(&self, timeout: Duration) -> Option<PerfEvent> {
        self.events.recv_timeout(timeout).ok()
    }

    /// Whether it has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Wait until it ends: the summary (or why it failed), the AF_XDP port it ran on, and
    /// the counters as they were (also when it failed: they say why).
    pub fn wait(self) -> Ended {
        self.thread.join()
    }
}

fn run(
    cfg: PerfSessionConfig,
    listener: Option<TcpListener>,
    early: Option<RoceBackend>,
    board: Option<Board>,
    stop: &Stopper,
    tx: &SyncSender<PerfEvent>,
) -> Ended {
    let oob = match (&listener, cfg.peer) {
        (Some(l), _) => Oob::accept_until(l, Some(cfg.test.timeout), stop.flag()),
        (None, Peer::Server(at)) => Oob::connect(at, cfg.bind, cfg.test.timeout),
        (None, Peer::Listen(_)) => Err(io::ErrorKind::NotConnected.into()),
    };
    let oob = match oob {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {
            return (Err(PerfError::NoPeer), None, None);
        }
        Err(e) => return (Err(e.into()), None, None),
    };
    let mut test = cfg.test.clone();
    let local = match cfg.bind {
        Some(ip) => ip,
        None => oob
            .addrs()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.0.ip()),
    };
    if cfg.link_mtu {
        // as perftest takes the port's active MTU: rxe's rule over the interface's MTU
        test.mtu = Mtu::for_link(rocelink_io::net::mtu_for_ip(local).unwrap_or(1500));
    }
    let opened = early
        .map_or_else(
            || cfg.backend.open(local, test.roce_port, cfg.bind.is_some()),
            Ok,
        )
        .map_err(PerfError::from)
        .and_then(|b| Ok((Perf::with_backend(test.clone(), b.backend)?, b.xdp)));
    let (mut p, xdp) = match opened {
        Ok(x) => x,
        Err(e) => return (Err(e), None, None),
    };
    if let Some(b) = board {
        p.publish_to(b);
    }
    let mut addresses = None;
    let mut peer_closed = false;
    let out = p.run(oob, stop.flag(), &mut |e| {
        let ev = match e {
            Progress::Addresses(a) => {
                addresses = Some(a.clone());
                PerfEvent::Addresses(a.clone())
            }
            Progress::Row(r) => PerfEvent::Row(*r),
            Progress::PeerClosed => {
                peer_closed = true;
                PerfEvent::PeerClosed
            }
        };
        // a reader that falls behind loses events, never the test
        let _ = tx.try_send(ev);
    });
    let link = p.link();
    let r = out.map(|outcome| PerfSummary {
        outcome,
        addresses,
        test,
        link: link.clone(),
        peer_closed,
    });
    (r, xdp, Some(link))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::Test;

    #[test]
    fn a_config_is_plain_data_that_round_trips_through_json() {
        let mut test = PerfConfig::new(Test::parse("send_lat").unwrap());
        test.sizes = vec![2, 64];
        let mut cfg = PerfSessionConfig::client(test, IpAddr::V4(Ipv4Addr::LOCALHOST));
        cfg.backend = BackendChoice::Xdp {
            ifname: "veth0".into(),
            pfc: Some(rocelink_runtime::xdp::PfcConfig::new(25.0)),
        };
        let v = serde_json::to_value(&cfg).unwrap();
        let back: PerfSessionConfig = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), v);
        assert_eq!(back.test.sizes, [2, 64]);
        assert_eq!(back.peer, Peer::Server("127.0.0.1:18515".parse().unwrap()));
    }
}
