//! rdma-core's pingpong as a session: the TCP exchange of QP addresses, the endpoint (a
//! socket or AF_XDP) and the exchanges on a thread of their own; the addresses as events,
//! the report at the end.

use super::{Pingpong, PingpongConfig, PingpongError, PingpongReport, random_qpn_psn};
use rocelink_io::oob;
use rocelink_io::tap::Tap;
use rocelink_runtime::counters::Board;
use rocelink_runtime::xdp::XdpPort;
use rocelink_runtime::{BackendChoice, SessionThread};
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

/// What a running pingpong reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// A running pingpong.
#[derive(Debug)]
pub struct PingpongSession {
    exchange: SocketAddr,
    qpn: u32,
    psn: u32,
    events: Receiver<PingpongEvent>,
    thread: SessionThread<Ended>,
}

/// How the thread ended: the report (or why not), and the AF_XDP port it ran on.
type Ended = (Result<PingpongReport, PingpongError>, Option<XdpPort>);

impl PingpongSession {
    /// Check the settings, choose the QP number and first PSN (a server can print them
    /// before it waits), bind a server's listener, then exchange and run on a thread of
    /// its own. Counters go to `board` (link `pingpong`) when given.
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
        // rdma-core's pingpong has no stop: it ends by its iterations or its time limit
        let thread = SessionThread::spawn("pingpong", move |_| {
            run(&cfg, listener.as_ref(), (qpn, psn), board, &tx)
        })?;
        Ok(PingpongSession {
            exchange,
            qpn,
            psn,
            events,
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

    /// The next event, waiting at most `timeout`.
    pub fn next_event(&self, timeout: Duration) -> Option<PingpongEvent> {
        self.events.recv_timeout(timeout).ok()
    }

    /// Whether it has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Wait until it ends: the report (or why not), and the AF_XDP port it ran on.
    pub fn wait(self) -> Ended {
        self.thread.join()
    }
}

fn run(
    cfg: &PingpongSessionConfig,
    listener: Option<&TcpListener>,
    (qpn, psn): (u32, u32),
    board: Option<Board>,
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
        (Side::Server(_), Some(l)) => oob::server(l, cfg.bind, timeout, make),
        (Side::Server(_), None) => Err(io::ErrorKind::NotConnected.into()),
    };
    let x = match x {
        Ok(x) => x,
        Err(e) => return (Err(PingpongError::Exchange(e)), made.and_then(|m| m.1)),
    };
    let Some((mut pp, xdp)) = made else {
        return (
            Err(PingpongError::Exchange(io::ErrorKind::NotConnected.into())),
            None,
        );
    };
    let _ = tx.try_send(PingpongEvent::Addresses {
        me: x.me,
        peer: x.peer,
    });
    if let Some(p) = &cfg.pcap {
        let tap = rocelink_io::file::Output::create(p).and_then(|f| Tap::new(Box::new(f)));
        match tap {
            Ok(t) => pp.driver_mut().set_tap(t),
            Err(e) => return (Err(e.into()), xdp),
        }
    }
    if let Some(b) = board {
        pp.driver_mut().publish_to(b, "pingpong");
    }
    let remote = SocketAddr::new(ip_of_gid(x.peer.gid).unwrap_or(x.peer_ip), cfg.roce_port);
    let client = matches!(cfg.side, Side::Client(_));
    let r = pp.run(remote, x.peer.qpn, x.peer.psn, x.me.psn, client);
    (r, xdp)
}
