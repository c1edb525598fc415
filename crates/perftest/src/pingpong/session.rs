//! rdma-core's pingpong as a session: the TCP exchange of QP addresses, the endpoint (a
//! socket or AF_XDP) and the exchanges on a thread of their own; the addresses as events,
//! the report at the end.

use super::{Pingpong, PingpongConfig, PingpongError, PingpongReport, random_qpn_psn};
use rocelink_io::oob;
use rocelink_io::tap::Tap;
pub use rocelink_runtime::Session;
use rocelink_runtime::counters::{Board, Snapshot};
use rocelink_runtime::xdp::XdpPort;
use rocelink_runtime::{BackendChoice, SessionThread, Stopper};
use rocelink_wire::oob::{PingpongDest, gid_of, ip_of_gid};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;

/// Which end of the exchange this side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Side {
    /// The client: connect to the server's exchange at this address; it sends first.
    Client(SocketAddr),
    /// The server: wait for a client at this TCP address.
    Server(SocketAddr),
}

/// What a pingpong is: plain data.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PingpongSessionConfig {
    /// The exchanges.
    pub pingpong: PingpongConfig,
    /// Which end.
    pub side: Side,
    /// The local address (RoCE and the exchange); default: the address the exchange used.
    pub bind: Option<IpAddr>,
    /// The RoCE UDP port (4791).
    pub roce_port: u16,
    /// A socket, or AF_XDP.
    pub backend: BackendChoice,
    /// Record every RoCE datagram here.
    pub pcap: Option<PathBuf>,
}

impl PingpongSessionConfig {
    /// `pingpong` as `side`, on the address the exchange uses, RoCE on port 4791 over a
    /// socket, no capture.
    pub fn new(pingpong: PingpongConfig, side: Side) -> PingpongSessionConfig {
        PingpongSessionConfig {
            pingpong,
            side,
            bind: None,
            roce_port: rocelink_wire::ROCE_V2_PORT,
            backend: BackendChoice::Socket,
            pcap: None,
        }
    }
}

/// What a running pingpong reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub enum PingpongEvent {
    /// The exchange is done: this side's address and the peer's, as rdma-core prints them.
    Addresses {
        /// This side.
        me: PingpongDest,
        /// The peer.
        peer: PingpongDest,
    },
}

/// What a pingpong did.
#[derive(Debug, serde::Serialize)]
pub struct PingpongSummary {
    /// rdma-core's figures.
    pub report: PingpongReport,
    /// The AF_XDP port it ran on, if any (its counters).
    pub xdp: Option<XdpPort>,
}

/// A running pingpong.
#[derive(Debug)]
pub struct PingpongSession {
    exchange: SocketAddr,
    qpn: u32,
    psn: u32,
    events: Receiver<PingpongEvent>,
    board: Board,
    thread: SessionThread<Ended>,
}

/// How the thread ended.
type Ended = Result<PingpongSummary, PingpongError>;

impl PingpongSession {
    /// Check the settings, choose the QP number and first PSN (a server can print them
    /// before it waits), bind a server's listener, then exchange and run on a thread of
    /// its own. Counters go to `board` (link `pingpong`), or to a board of the session's
    /// own.
    pub fn start(
        cfg: PingpongSessionConfig,
        board: Option<Board>,
    ) -> Result<PingpongSession, PingpongError> {
        let p = &cfg.pingpong;
        if p.qp_type == rocelink_transport::QpType::Ud && p.size > p.mtu.bytes() {
            return Err(PingpongError::SizeOverMtu(p.mtu.bytes()));
        }
        if p.rx_depth == 0 {
            return Err(PingpongError::NoRxDepth);
        }
        let (listener, exchange) = match cfg.side {
            Side::Server(at) => {
                let l = TcpListener::bind(at).map_err(|e| {
                    PingpongError::Exchange(io::Error::new(
                        e.kind(),
                        format!("cannot listen on port {}: {e}", at.port()),
                    ))
                })?;
                let a = l.local_addr()?;
                (Some(l), a)
            }
            Side::Client(at) => (None, at),
        };
        let (qpn, psn) = random_qpn_psn();
        let (tx, events) = std::sync::mpsc::sync_channel(4);
        let board = board.unwrap_or_else(|| Board::new("pingpong"));
        let b = board.clone();
        let thread = SessionThread::spawn("pingpong", move |stop| {
            run(&cfg, listener.as_ref(), (qpn, psn), (b, stop), &tx)
        })?;
        Ok(PingpongSession {
            exchange,
            qpn,
            psn,
            events,
            board,
            thread,
        })
    }

    /// The exchange's address: where a server listens, or the server a client reaches.
    pub fn exchange_addr(&self) -> SocketAddr {
        self.exchange
    }

    /// This side's QP number and first PSN.
    pub fn qpn_psn(&self) -> (u32, u32) {
        (self.qpn, self.psn)
    }
}

/// Its progress is the link's counters as last published (link `pingpong`); its event is
/// the exchange's addresses. It ends by its iterations or time limit, as rdma-core's, or a
/// stop: a server still waiting gives up, exchanges under way end
/// ([`PingpongError::Stopped`]).
impl Session for PingpongSession {
    type Progress = Snapshot;
    type Event = PingpongEvent;
    type Summary = PingpongSummary;
    type Error = PingpongError;

    fn stopper(&self) -> Stopper {
        self.thread.stopper()
    }

    fn progress(&self) -> Snapshot {
        self.board.snapshot()
    }

    fn next_event(&self, timeout: Duration) -> Option<PingpongEvent> {
        self.events.recv_timeout(timeout).ok()
    }

    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    fn wait(self) -> Result<PingpongSummary, PingpongError> {
        self.thread.join()
    }
}

fn run(
    cfg: &PingpongSessionConfig,
    listener: Option<&TcpListener>,
    (qpn, psn): (u32, u32),
    (board, stop): (Board, &Stopper),
    tx: &SyncSender<PingpongEvent>,
) -> Ended {
    let mut made: Option<(Pingpong, Option<XdpPort>)> = None;
    let make = |local_ip: IpAddr| -> io::Result<PingpongDest> {
        let b = cfg
            .backend
            .open(local_ip, cfg.roce_port, cfg.bind.is_some())?;
        let pp = Pingpong::with_backend(b.backend, cfg.pingpong, qpn)
            // the session's opening speaks io::Error; the pingpong's typed error rides inside
            .map_err(io::Error::other)?;
        let dest = PingpongDest {
            lid: 0,
            qpn: pp.qpn(),
            psn,
            gid: gid_of(b.ip),
        };
        made = Some((pp, b.xdp));
        Ok(dest)
    };
    let timeout = cfg.pingpong.time_limit;
    let x = match (cfg.side, listener) {
        (Side::Client(at), _) => oob::client(at, cfg.bind, timeout, make),
        (Side::Server(_), Some(l)) => oob::server(l, cfg.bind, timeout, stop.flag(), make),
        (Side::Server(_), None) => Err(io::ErrorKind::NotConnected.into()),
    };
    let x = x.map_err(|e| match e.kind() {
        // a stop while the server waited for its client
        io::ErrorKind::Interrupted => PingpongError::Stopped {
            received: 0,
            sent: 0,
        },
        _ => PingpongError::Exchange(e),
    })?;
    let Some((mut pp, xdp)) = made else {
        return Err(PingpongError::Exchange(io::ErrorKind::NotConnected.into()));
    };
    let _ = tx.try_send(PingpongEvent::Addresses {
        me: x.me,
        peer: x.peer,
    });
    if let Some(p) = &cfg.pcap {
        let tap = rocelink_io::file::Output::create(p).and_then(|f| Tap::new(Box::new(f)));
        pp.driver_mut().set_tap(tap?);
    }
    pp.driver_mut().publish_to(board, "pingpong");
    pp.stop_with(stop.clone());
    let remote = SocketAddr::new(ip_of_gid(x.peer.gid).unwrap_or(x.peer_ip), cfg.roce_port);
    let client = matches!(cfg.side, Side::Client(_));
    let report = pp.run(remote, x.peer.qpn, x.peer.psn, x.me.psn, client)?;
    Ok(PingpongSummary { report, xdp })
}
