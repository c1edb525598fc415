//! A perftest test as a session: the exchange with the peer, the endpoint and the run on a
//! thread of its own; the address lines and (running infinitely) each period's row as
//! events; the rows at the end.

use super::{Addresses, BwRow, Outcome, Perf, PerfConfig, PerfError, Progress};
use rocelink_io::perftest::Oob;
pub use rocelink_runtime::Session;
use rocelink_runtime::counters::{Board, Link, Snapshot};
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
#[derive(Debug, Clone, serde::Serialize)]
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
#[derive(Debug, Clone, serde::Serialize)]
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
    /// The AF_XDP port it ran on, if any (its counters).
    pub xdp: Option<XdpPort>,
}

/// A running test.
#[derive(Debug)]
pub struct PerfSession {
    exchange: SocketAddr,
    events: Receiver<PerfEvent>,
    board: Board,
    thread: SessionThread<Ended>,
}

/// How the thread ended.
type Ended = Result<PerfSummary, PerfError>;

impl PerfSession {
    /// Check the settings; a server binds its exchange's listener now (a client can
    /// connect once this returns); then exchange, connect and run on a thread of its own.
    /// Counters go to `board` (link `perf`), or to a board of the session's own.
    pub fn start(cfg: PerfSessionConfig, board: Option<Board>) -> Result<PerfSession, PerfError> {
        let board = board.unwrap_or_else(|| Board::new("perf"));
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
        let b = board.clone();
        let thread =
            SessionThread::spawn("perf", move |stop| run(cfg, listener, early, b, stop, &tx))?;
        Ok(PerfSession {
            exchange,
            events,
            board,
            thread,
        })
    }

    /// The exchange's address: where a server listens, or the server a client reaches.
    pub fn exchange_addr(&self) -> SocketAddr {
        self.exchange
    }
}

/// Its progress is the link's counters as last published (link `perf`; at the end also
/// when the test failed: they say why); its events are the exchange's addresses, the rows
/// of a run that goes on until stopped, and a client closing early. A stop makes a server
/// still waiting give up, a test running report the rows it completed.
impl Session for PerfSession {
    type Progress = Snapshot;
    type Event = PerfEvent;
    type Summary = PerfSummary;
    type Error = PerfError;

    fn stopper(&self) -> Stopper {
        self.thread.stopper()
    }

    fn progress(&self) -> Snapshot {
        self.board.snapshot()
    }

    fn next_event(&self, timeout: Duration) -> Option<PerfEvent> {
        self.events.recv_timeout(timeout).ok()
    }

    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    fn wait(self) -> Result<PerfSummary, PerfError> {
        self.thread.join()
    }
}

fn run(
    cfg: PerfSessionConfig,
    listener: Option<TcpListener>,
    early: Option<RoceBackend>,
    board: Board,
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
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(PerfError::NoPeer),
        Err(e) => return Err(e.into()),
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
    let (mut p, xdp) = opened?;
    p.publish_to(board.clone());
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
    // the counters as they ended, also when the test failed
    board.set_link(link.clone());
    out.map(|outcome| PerfSummary {
        outcome,
        addresses,
        test,
        link,
        peer_closed,
        xdp,
    })
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
