//! rdma-core pingpong's out-of-band exchange over TCP: the client connects, writes its
//! address, reads the server's and writes `"done"` + NUL; the server reads, answers, and
//! reads `"done"` (older tools just close). The messages are [`PingpongDest`]s.

use rocelink_wire::oob::{PINGPONG_MSG_LEN, PingpongDest};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// One side's view of a finished exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchanged {
    /// What this side sent.
    pub me: PingpongDest,
    /// What the peer sent.
    pub peer: PingpongDest,
    /// This side's IP on the TCP connection.
    pub local_ip: IpAddr,
    /// The peer's IP on the TCP connection.
    pub peer_ip: IpAddr,
}

fn read_msg(s: &mut TcpStream) -> io::Result<PingpongDest> {
    let mut b = [0u8; PINGPONG_MSG_LEN];
    s.read_exact(&mut b)
        .map_err(|e| io::Error::new(e.kind(), format!("peer closed the exchange early ({e})")))?;
    PingpongDest::decode(&b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// A TCP connection to `server` (from `bind`, if given) within `timeout`, reads waiting up to
/// `timeout`; errors name the address (`what` goes before it: "the perftest server at ").
pub(crate) fn connect(
    server: SocketAddr,
    bind: Option<IpAddr>,
    timeout: Duration,
    what: &str,
) -> io::Result<TcpStream> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        None,
    )?;
    if let Some(ip) = bind {
        sock.bind(&SocketAddr::new(ip, 0).into())
            .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {ip}: {e}")))?;
    }
    sock.connect_timeout(&server.into(), timeout)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {what}{server}: {e}")))?;
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(timeout))?;
    Ok(s)
}

/// The client side: connect to `server` (from `bind`, if given), then `make_local` (given
/// this side's IP on the connection) builds the address to send.
pub fn client(
    server: SocketAddr,
    bind: Option<IpAddr>,
    timeout: Duration,
    make_local: impl FnOnce(IpAddr) -> io::Result<PingpongDest>,
) -> io::Result<Exchanged> {
    let mut s = connect(server, bind, timeout, "")?;
    let local_ip = s.local_addr()?.ip();
    let me = make_local(local_ip)?;
    s.write_all(&me.encode())?;
    let peer = read_msg(&mut s)?;
    s.write_all(b"done\0")?;
    Ok(Exchanged {
        me,
        peer,
        local_ip,
        peer_ip: s.peer_addr()?.ip(),
    })
}

/// The server side on `listener`: accept one client, read its address, answer with what
/// `make_local` builds (given `bind` or this side's IP on the connection).
pub fn server(
    listener: &TcpListener,
    bind: Option<IpAddr>,
    timeout: Duration,
    stop: &AtomicBool,
    make_local: impl FnOnce(IpAddr) -> io::Result<PingpongDest>,
) -> io::Result<Exchanged> {
    let mut s = accept_until(listener, stop)?;
    s.set_read_timeout(Some(timeout))?;
    let local_ip = bind.unwrap_or(s.local_addr()?.ip());
    let peer = read_msg(&mut s)?;
    let me = make_local(local_ip)?;
    s.write_all(&me.encode())?;
    let mut done = [0u8; 5];
    let _ = s.read(&mut done); // "done\0"; older tools close without it
    Ok(Exchanged {
        me,
        peer,
        local_ip,
        peer_ip: s.peer_addr()?.ip(),
    })
}

/// The next connection to `listener`, or `ErrorKind::Interrupted` once `stop` is set
/// (looked at every 50 ms), so Ctrl-C ends a server still waiting for its client. The
/// connection is blocking.
pub fn accept_until(listener: &TcpListener, stop: &AtomicBool) -> io::Result<TcpStream> {
    listener.set_nonblocking(true)?;
    let got = loop {
        match listener.accept() {
            Ok((s, _)) => break Ok(s),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::Relaxed) {
                    break Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        "stopped before a client connected",
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => break Err(e),
        }
    };
    listener.set_nonblocking(false)?;
    let s = got?;
    s.set_nonblocking(false)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_and_server_exchange_over_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = Duration::from_secs(5);
        let dest = |qpn| {
            move |ip| {
                Ok(PingpongDest {
                    lid: 0,
                    qpn,
                    psn: 7,
                    gid: rocelink_wire::oob::gid_of(ip),
                })
            }
        };
        let srv = std::thread::spawn(move || {
            server(&l, None, t, &AtomicBool::new(false), dest(0x22)).unwrap()
        });
        let c = client(addr, None, t, dest(0x11)).unwrap();
        let s = srv.join().unwrap();
        assert_eq!((c.me, c.peer), (s.peer, s.me));
        assert_eq!((c.peer.qpn, s.peer.qpn), (0x22, 0x11));
        // a peer that sends garbage is an error naming it, not a panic
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let bad = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(&[0xFF; PINGPONG_MSG_LEN]).unwrap();
        });
        let e = client(addr, None, t, dest(1)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        bad.join().unwrap();
    }
}
