//! perftest's out-of-band connection over TCP (messages in [`rocelink_wire::perftest`]):
//! every exchange is symmetric — the client writes then reads, the server reads then
//! writes — with fixed sizes and no framing, so both sides must make the same exchanges in
//! the same order. [`Oob`] makes each one; a role strings them together as the test it
//! runs requires.

use rocelink_wire::perftest::{self as pt, BwReport, KeyMsg, VERSION_LEN};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// One side of a perftest connection.
#[derive(Debug)]
pub struct Oob {
    s: TcpStream,
    client: bool,
    /// The peer's version (after [`Oob::versions`]; 0 before).
    pub peer_version: f64,
    /// The peer's version string.
    pub peer_version_str: String,
    /// What a rocelink peer said it runs: (test, connection type); `None` for perftest.
    pub peer_tag: Option<(u8, u8)>,
    /// The features a rocelink peer said it has (`rocelink_wire::perftest::FEATURES`); 0
    /// for perftest.
    pub peer_features: u8,
    /// What this side says it runs (sent with the version).
    pub my_tag: Option<(u8, u8)>,
}

fn ctx(e: io::Error, what: &str) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        return io::Error::new(
            io::ErrorKind::ConnectionAborted,
            format!("perftest exchange ({what}): the peer closed the connection"),
        );
    }
    io::Error::new(e.kind(), format!("perftest exchange ({what}): {e}"))
}

impl Oob {
    /// Connect to a server at `server` (from `bind`, if given), waiting up to `timeout` for
    /// the connection and for each message.
    pub fn connect(server: SocketAddr, bind: Option<IpAddr>, timeout: Duration) -> io::Result<Oob> {
        let s = crate::oob::connect(server, bind, timeout, "the perftest server at ")?;
        s.set_nodelay(true)?;
        Ok(Oob {
            s,
            client: true,
            peer_version: 0.0,
            peer_version_str: String::new(),
            peer_tag: None,
            peer_features: 0,
            my_tag: None,
        })
    }

    /// Accept one client on `listener`; each message then waits up to `timeout`.
    pub fn accept(listener: &TcpListener, timeout: Option<Duration>) -> io::Result<Oob> {
        let (s, _) = listener.accept()?;
        Oob::accepted(s, timeout)
    }

    /// As [`Oob::accept`], but give up with `ErrorKind::Interrupted` once `stop` is set
    /// (looked at every 50 ms), so Ctrl-C ends a server still waiting for its client.
    pub fn accept_until(
        listener: &TcpListener,
        timeout: Option<Duration>,
        stop: &std::sync::atomic::AtomicBool,
    ) -> io::Result<Oob> {
        let s = crate::oob::accept_until(listener, stop)?;
        Oob::accepted(s, timeout)
    }

    fn accepted(s: TcpStream, timeout: Option<Duration>) -> io::Result<Oob> {
        s.set_read_timeout(timeout)?;
        s.set_nodelay(true)?;
        Ok(Oob {
            s,
            client: false,
            peer_version: 0.0,
            peer_version_str: String::new(),
            peer_tag: None,
            peer_features: 0,
            my_tag: None,
        })
    }

    /// Is this the client side?
    pub fn is_client(&self) -> bool {
        self.client
    }

    /// This side's and the peer's addresses on the TCP connection.
    pub fn addrs(&self) -> io::Result<(SocketAddr, SocketAddr)> {
        Ok((self.s.local_addr()?, self.s.peer_addr()?))
    }

    /// How long a read may wait (`None`: forever).
    pub fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.s.set_read_timeout(t)
    }

    /// One symmetric exchange: `mine` goes out, as many bytes come back.
    pub fn xchg(&mut self, mine: &[u8], what: &str) -> io::Result<Vec<u8>> {
        self.xchg_inner(mine, what, None)
    }

    /// [`Oob::xchg`], calling `wait` until the peer's message has started to arrive (so a
    /// caller keeps its RoCE endpoint answering meanwhile: `wait` should return after a
    /// few milliseconds).
    pub fn xchg_waiting(
        &mut self,
        mine: &[u8],
        what: &str,
        wait: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<Vec<u8>> {
        self.xchg_inner(mine, what, Some(wait))
    }

    fn xchg_inner(
        &mut self,
        mine: &[u8],
        what: &str,
        mut wait: Option<&mut dyn FnMut() -> io::Result<()>>,
    ) -> io::Result<Vec<u8>> {
        let mut theirs = vec![0u8; mine.len()];
        if self.client {
            self.s.write_all(mine).map_err(|e| ctx(e, what))?;
        }
        if let Some(w) = wait.as_mut() {
            while !self.readable()? {
                w()?;
            }
        }
        self.s.read_exact(&mut theirs).map_err(|e| ctx(e, what))?;
        if !self.client {
            self.s.write_all(mine).map_err(|e| ctx(e, what))?;
        }
        Ok(theirs)
    }

    /// Exchange versions ([`pt::VERSION`] goes out); a peer older than 5.70 is refused, as
    /// perftest refuses it.
    pub fn versions(&mut self) -> io::Result<f64> {
        let mine = match self.my_tag {
            Some((test, conn)) => pt::encode_version_tagged(pt::VERSION, test, conn),
            None => pt::encode_version(pt::VERSION),
        };
        let theirs = self.xchg(&mine, "version")?;
        self.peer_tag = pt::parse_tag(&theirs);
        self.peer_features = pt::parse_features(&theirs);
        let end = theirs.iter().position(|&b| b == 0).unwrap_or(VERSION_LEN);
        self.peer_version_str = String::from_utf8_lossy(&theirs[..end]).into_owned();
        self.peer_version = pt::parse_version(&theirs);
        if self.peer_version < 5.70 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the peer's perftest version {:?} is older than 5.70, which perftest itself refuses",
                    self.peer_version_str
                ),
            ));
        }
        Ok(self.peer_version)
    }

    /// Exchange the system data (peers ≥ 5.32); the larger of each wins.
    pub fn sys_data(&mut self, cycle_buffer: i32, cache_line: i32) -> io::Result<(i32, i32)> {
        if self.peer_version < 5.32 {
            return Ok((cycle_buffer, cache_line));
        }
        let [c, l] = pt::encode_sys_data(cycle_buffer, cache_line);
        let rc = self.xchg(&c, "cycle buffer")?;
        let rl = self.xchg(&l, "cache line size")?;
        let be = |b: Vec<u8>| i32::from_be_bytes(b.try_into().unwrap_or_default());
        Ok((cycle_buffer.max(be(rc)), cache_line.max(be(rl))))
    }

    /// Exchange MTUs (verbs enum); the smaller valid one wins.
    pub fn mtu(&mut self, mine: u8) -> io::Result<u8> {
        let Some(m) = pt::encode_mtu(mine, self.peer_version) else {
            return Ok(mine);
        };
        let theirs = self.xchg(&m, "MTU")?;
        Ok(match pt::parse_mtu(&theirs) {
            Some(r) if pt::mtu_bytes(r).is_some() && r < mine => r,
            _ => mine,
        })
    }

    /// Exchange key strings (the GID form when `mine` has a GID).
    pub fn hand_shake(&mut self, mine: &KeyMsg) -> io::Result<KeyMsg> {
        let theirs = self.xchg(&mine.encode(), "key string")?;
        KeyMsg::decode(&theirs).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// [`Oob::hand_shake`], calling `wait` while the peer's message has not come (see
    /// [`Oob::xchg_waiting`]).
    pub fn hand_shake_waiting(
        &mut self,
        mine: &KeyMsg,
        wait: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<KeyMsg> {
        let theirs = self.xchg_waiting(&mine.encode(), "key string", wait)?;
        KeyMsg::decode(&theirs).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Exchange bandwidth reports.
    pub fn bw_reports(&mut self, mine: &BwReport) -> io::Result<BwReport> {
        let out = mine.encode(self.peer_version);
        let mut back: [Vec<u8>; 5] = Default::default();
        for (i, m) in out.iter().enumerate() {
            back[i] = self.xchg(m, "bandwidth report")?;
        }
        BwReport::decode(&back).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The `"done"` (and its NUL) that both sides write after the last hand-shake of
    /// perftest's `ctx_close_connection`; the connection closes when this side drops it.
    pub fn done(&mut self) -> io::Result<()> {
        self.s.write_all(b"done\0").map_err(|e| ctx(e, "done"))
    }

    /// Has the peer closed the connection (or reset it)? Something it wrote and this side
    /// has not read yet is no close. Never waits.
    pub fn peer_closed(&self) -> bool {
        match self.peek() {
            Ok(n) => n == 0,
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        }
    }

    /// Has the peer written something (or closed)? Never waits.
    pub fn readable(&self) -> io::Result<bool> {
        match self.peek() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Peek at one byte without waiting (`WouldBlock` when there is none); the socket is
    /// left blocking, as the exchanges need it.
    fn peek(&self) -> io::Result<usize> {
        self.s.set_nonblocking(true)?;
        let mut b = [0u8; 1];
        let r = self.s.peek(&mut b);
        self.s.set_nonblocking(false)?;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(qpn: u32) -> KeyMsg {
        KeyMsg {
            lid: 0,
            out_reads: 16,
            qpn,
            psn: 0x42,
            rkey: 9,
            vaddr: 0x1000,
            gid: Some(rocelink_wire::oob::gid_of("127.0.0.1".parse().unwrap())),
            srqn: 0,
        }
    }

    #[test]
    fn a_whole_sequence_over_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let t = Duration::from_secs(5);
        let srv = std::thread::spawn(move || {
            let mut o = Oob::accept(&l, Some(t)).unwrap();
            assert_eq!(o.versions().unwrap(), 6.27);
            assert_eq!(o.sys_data(4096, 64).unwrap(), (8192, 64));
            assert_eq!(o.mtu(5).unwrap(), 3);
            assert_eq!(o.hand_shake(&key(0x22)).unwrap(), key(0x11));
            let r = o.bw_reports(&BwReport::default()).unwrap();
            assert_eq!(r.iters, 5000);
            // the last hand-shake waits for the client, doing other work meanwhile
            let mut waited = 0;
            let k = o
                .hand_shake_waiting(&key(0x22), &mut || {
                    waited += 1;
                    std::thread::sleep(Duration::from_millis(1));
                    Ok(())
                })
                .unwrap();
            assert_eq!(k, key(0x11));
            assert!(waited < 5000);
            o.done().unwrap();
        });
        let mut o = Oob::connect(a, None, t).unwrap();
        o.versions().unwrap();
        assert_eq!(o.sys_data(8192, 32).unwrap(), (8192, 64));
        assert_eq!(o.mtu(3).unwrap(), 3);
        assert_eq!(o.hand_shake(&key(0x11)).unwrap(), key(0x22));
        let mine = BwReport {
            size: 65536,
            iters: 5000,
            ..BwReport::default()
        };
        assert_eq!(o.bw_reports(&mine).unwrap(), BwReport::default());
        o.hand_shake(&key(0x11)).unwrap();
        o.done().unwrap();
        srv.join().unwrap();
    }

    #[test]
    fn a_peer_that_leaves_is_told_from_one_that_writes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let o = Oob::connect(l.local_addr().unwrap(), None, Duration::from_secs(5)).unwrap();
        let (mut peer, _) = l.accept().unwrap();
        assert!(!o.peer_closed(), "a quiet peer is there");
        peer.write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!o.peer_closed(), "a peer that wrote is there");
        let mut b = [0u8; 1];
        (&o.s).read_exact(&mut b).unwrap();
        drop(peer);
        let t0 = std::time::Instant::now();
        while !o.peer_closed() {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the close never showed"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // and looking leaves the socket blocking, as the exchanges need it
        let mut b = [0u8; 1];
        assert_eq!((&o.s).read(&mut b).unwrap(), 0);
    }

    #[test]
    fn an_old_or_silent_peer_is_a_clear_error() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let srv = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut v = [0u8; VERSION_LEN];
            s.read_exact(&mut v).unwrap();
            s.write_all(&pt::encode_version("5.60")).unwrap();
        });
        let mut o = Oob::connect(a, None, Duration::from_secs(5)).unwrap();
        let e = o.versions().unwrap_err();
        assert!(e.to_string().contains("5.60"), "{e}");
        srv.join().unwrap();
        // a peer that closes: the exchange is named
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let srv = std::thread::spawn(move || drop(l.accept().unwrap()));
        let mut o = Oob::connect(a, None, Duration::from_secs(5)).unwrap();
        srv.join().unwrap();
        let e = o.versions().unwrap_err();
        assert!(e.to_string().contains("version"), "{e}");
    }
}
