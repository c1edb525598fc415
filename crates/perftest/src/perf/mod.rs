//! perftest's six tests — `ib_write_bw`, `ib_read_bw`, `ib_send_bw`, `ib_write_lat`,
//! `ib_read_lat`, `ib_send_lat` — between two processes, each of which may be rocelink or
//! perftest itself (over Linux rxe or a NIC): perftest's out-of-band exchange over TCP
//! ([`rocelink_io::perftest::Oob`], in the order each test makes it, `docs/perf.md`), its
//! QP attributes and buffer layout, and its measurements.
//!
//! [`Perf::new`] makes the endpoint, region and QP; [`Perf::run`] exchanges, connects and
//! runs the test as the client (a server name given) or the server.

mod error;
mod lat;
pub mod lines;
mod loopback;
mod run;
pub mod session;
mod stats;

pub use error::{PerfError, Setting};
pub use loopback::{headline, higher_is_better, loopback};
pub use stats::{BwRow, LatRow, LatStats, bw_row, lat_row};

use rocelink_io::backend::Backend;
use rocelink_io::perftest::Oob;
use rocelink_io::udp::{RecvBatch, UdpSocket};
use rocelink_runtime::Driver;
use rocelink_runtime::counters::{Board, Link};
use rocelink_transport::sim::Rng;
use rocelink_transport::*;
use rocelink_wire::oob::{gid_of, ip_of_gid};
use rocelink_wire::perftest::{self as pt, KeyMsg};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The work request ID of every send a test posts.
const SEND_ID: u64 = 1;
/// The work request ID of every receive a test posts.
const RECV_ID: u64 = 2;

/// Which operation a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Verb {
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// SEND.
    Send,
}

/// Bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    /// `*_bw`.
    Bw,
    /// `*_lat`.
    Lat,
}

/// One of the six tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Test {
    /// The operation.
    pub verb: Verb,
    /// Bandwidth or latency.
    pub kind: Kind,
}

/// The connection type's code in rocelink's version tag.
fn conn_code(c: QpType) -> u8 {
    match c {
        QpType::Rc => 1,
        QpType::Uc => 2,
        QpType::Ud => 3,
    }
}

fn conn_name(code: u8) -> &'static str {
    match code {
        1 => "RC",
        2 => "UC",
        3 => "UD",
        _ => "another connection type",
    }
}

/// How long a test keeps polling after the last datagram before it sleeps.
const SPIN: std::time::Duration = std::time::Duration::from_millis(1);

impl Test {
    /// Its code in rocelink's version tag (`rocelink_wire::perftest::encode_version_tagged`).
    pub fn code(self) -> u8 {
        let v = match self.verb {
            Verb::Write => 1,
            Verb::Read => 2,
            Verb::Send => 3,
        };
        let k = match self.kind {
            Kind::Bw => 0x10,
            Kind::Lat => 0x20,
        };
        v | k
    }

    /// The test with code `c`, if any.
    pub fn from_code(c: u8) -> Option<Test> {
        Test::ALL.into_iter().find(|t| t.code() == c)
    }

    /// The six tests, in perftest's usual order.
    pub const ALL: [Test; 6] = [
        Test {
            verb: Verb::Write,
            kind: Kind::Bw,
        },
        Test {
            verb: Verb::Read,
            kind: Kind::Bw,
        },
        Test {
            verb: Verb::Send,
            kind: Kind::Bw,
        },
        Test {
            verb: Verb::Write,
            kind: Kind::Lat,
        },
        Test {
            verb: Verb::Read,
            kind: Kind::Lat,
        },
        Test {
            verb: Verb::Send,
            kind: Kind::Lat,
        },
    ];

    /// perftest's name (`write_bw`, …).
    pub fn name(&self) -> &'static str {
        match (self.verb, self.kind) {
            (Verb::Write, Kind::Bw) => "write_bw",
            (Verb::Read, Kind::Bw) => "read_bw",
            (Verb::Send, Kind::Bw) => "send_bw",
            (Verb::Write, Kind::Lat) => "write_lat",
            (Verb::Read, Kind::Lat) => "read_lat",
            (Verb::Send, Kind::Lat) => "send_lat",
        }
    }

    /// Parse perftest's name.
    pub fn parse(s: &str) -> Option<Test> {
        let (verb, kind) = s.split_once('_')?;
        let verb = match verb {
            "write" => Verb::Write,
            "read" => Verb::Read,
            "send" => Verb::Send,
            _ => return None,
        };
        let kind = match kind {
            "bw" => Kind::Bw,
            "lat" => Kind::Lat,
            _ => return None,
        };
        Some(Test { verb, kind })
    }

    /// The title perftest prints ("RDMA_Write BW Test").
    pub fn title(&self) -> String {
        let v = match self.verb {
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
            Verb::Send => "Send",
        };
        let k = match self.kind {
            Kind::Bw => "BW",
            Kind::Lat => "Latency",
        };
        format!("{v} {k} Test")
    }
}

/// How a test runs (perftest's options).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct PerfConfig {
    /// The test.
    pub test: Test,
    /// RC, UC (WRITE and SEND only) or UD (SEND only), as perftest allows.
    pub conn: QpType,
    /// QPs (`-q`, bandwidth tests): each runs `iters` messages, posted round robin.
    pub qps: usize,
    /// Run until stopped, one row per `duration` (`--run_infinitely`, bandwidth tests).
    pub infinite: bool,
    /// With a duration: measure only between this long after the start and this long
    /// before the end (`-f`; perftest's default a quarter of the duration, whole seconds).
    pub margin: Option<Duration>,
    /// Message sizes: one (`-s`), or every power of two 2..2^23 (`-a`).
    pub sizes: Vec<usize>,
    /// Iterations per size (`-n`).
    pub iters: u64,
    /// Run each size this long instead (`-D`); iterations are what completed.
    pub duration: Option<Duration>,
    /// Send queue depth (`-t`).
    pub tx_depth: usize,
    /// Receive queue depth (`-r`, SEND tests).
    pub rx_depth: usize,
    /// Path MTU (`-m`); the smaller of both sides wins.
    pub mtu: Mtu,
    /// Outstanding READs this side accepts (`-o`).
    pub out_reads: u16,
    /// The RoCE UDP port packets go to (4791; another only between two rocelink sides
    /// that both use it).
    pub roce_port: u16,
    /// Give up on a silent peer after this long.
    pub timeout: Duration,
    /// Send runs of equal packets as one segmented send (UDP GSO).
    pub gso: bool,
}

impl PerfConfig {
    /// perftest's defaults for `test`: 65536 bytes (BW) or 2 (LAT), 5000 iterations for
    /// WRITE BW and 1000 otherwise, TX depth 128 (BW) or 1, RX depth 512, MTU 4096, 16
    /// outstanding READs.
    pub fn new(test: Test) -> PerfConfig {
        let bw = test.kind == Kind::Bw;
        PerfConfig {
            test,
            conn: QpType::Rc,
            qps: 1,
            infinite: false,
            margin: None,
            sizes: vec![if bw { 65_536 } else { 2 }],
            iters: if bw && test.verb == Verb::Write {
                5000
            } else {
                1000
            },
            duration: None,
            tx_depth: if bw { 128 } else { 1 },
            rx_depth: 512,
            mtu: Mtu::M4096,
            out_reads: 16,
            roce_port: rocelink_wire::ROCE_V2_PORT,
            timeout: Duration::from_secs(10),
            gso: true,
        }
    }

    /// Every size perftest's `-a` runs: 2, 4, … 2^23.
    pub fn all_sizes() -> Vec<usize> {
        (1..24).map(|i| 1usize << i).collect()
    }

    /// Refuse what perftest refuses, before anything is bound.
    pub fn check(&self) -> Result<(), Setting> {
        if self.sizes.is_empty() || self.sizes.iter().any(|&s| s == 0 || s > 1 << 30) {
            return Err(Setting::Size);
        }
        if self.conn == QpType::Ud && self.test.verb != Verb::Send {
            return Err(Setting::UdNotSend);
        }
        if !(1..=MAX_QPS).contains(&self.qps) {
            return Err(Setting::Qps);
        }
        if self.qps > 1 && self.test.kind != Kind::Bw {
            return Err(Setting::QpsNotBw);
        }
        if let Some(d) = self.duration
            && !self.infinite
            && d <= 2 * self.margin()
        {
            return Err(Setting::Duration);
        }
        if self.infinite && self.test.kind != Kind::Bw {
            return Err(Setting::InfiniteNotBw);
        }
        if self.conn == QpType::Uc && self.test.verb == Verb::Read {
            return Err(Setting::ReadNotRc);
        }
        if self.iters == 0 && self.duration.is_none() {
            return Err(Setting::Iters);
        }
        if self.test.kind == Kind::Lat && self.test.verb == Verb::Write && self.sizes.contains(&1) {
            return Err(Setting::WriteLatSize);
        }
        if !(1..=8192).contains(&self.tx_depth) || !(1..=8192).contains(&self.rx_depth) {
            return Err(Setting::Depth);
        }
        Ok(())
    }

    fn max_size(&self) -> usize {
        self.sizes.iter().copied().max().unwrap_or(1)
    }

    /// The sizes a run at path MTU `mtu` makes: UD messages fit in one packet, so (as
    /// perftest) a larger size becomes the MTU and `-a` stops at it.
    pub fn sizes_at(&self, mtu: Mtu) -> Vec<usize> {
        if self.conn != QpType::Ud {
            return self.sizes.clone();
        }
        let m = mtu.bytes();
        let mut v: Vec<usize> = self.sizes.iter().map(|&s| s.min(m)).collect();
        v.dedup();
        v
    }

    /// The margin of a timed run: `-f`, else a quarter of the duration in whole seconds.
    pub fn margin(&self) -> Duration {
        self.margin
            .unwrap_or_else(|| Duration::from_secs(self.duration.map_or(0, |d| d.as_secs() / 4)))
    }

    /// The period of a row: `-D`, else perftest's 5 s for `--run_infinitely`.
    fn period(&self) -> Option<Duration> {
        match (self.duration, self.infinite) {
            (Some(d), _) => Some(d),
            (None, true) => Some(Duration::from_secs(5)),
            (None, false) => None,
        }
    }
}

/// Most QPs one test makes.
pub const MAX_QPS: usize = 1024;

/// UD receives start with the 40-byte GRH slot.
const GRH: usize = 40;

/// perftest's ACK timeout, attribute 14: 4.096 µs × 2¹⁴.
const ACK_TIMEOUT: Duration = Duration::from_micros(67_109);

/// perftest's cycle buffer (a page) and cache line.
const CYCLE_BUFFER: usize = 4096;
const CACHE_LINE: usize = 64;

/// One side of a test: the RoCE socket's endpoint, its QPs (one CQ for all, as perftest)
/// and a buffer per QP — two halves of `BUFF_SIZE` each as perftest lays them out: the
/// first sends from (and READs into), the second is where the peer WRITEs (its address goes
/// in the key string) and SENDs land.
pub struct Perf {
    cfg: PerfConfig,
    ep: Endpoint,
    drv: Driver<Box<dyn Backend + Send>>,
    qps: Vec<Side>,
    cq: CqId,
    mr: MrKeys,
    half: usize,
    base: u64,
    ip: IpAddr,
}

/// One QP of this side.
#[derive(Debug, Clone, Copy)]
struct Side {
    qpn: u32,
    psn: u32,
    /// Where its two halves start in the region.
    off: usize,
    /// The peer QP (UD sends name it in every work request).
    dest: Option<UdDest>,
}

/// What a finished run measured: one row per size (this side's), and the peer's
/// bandwidth report where perftest exchanges one.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub enum Outcome {
    /// Bandwidth rows (a WRITE/READ server's are the client's, as perftest prints them).
    Bw(Vec<BwRow>),
    /// Latency rows (the client's; a passive READ server has none).
    Lat(Vec<LatRow>),
}

/// What a run reports while it runs.
#[derive(Debug)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// The exchange is done: perftest prints its address lines now.
    Addresses(&'a Addresses),
    /// One period of `--run_infinitely` passed.
    Row(&'a BwRow),
    /// The client closed the exchange instead of coming to the report: it ran until
    /// stopped (`--run_infinitely`, on its side at least). A server's run ends there.
    PeerClosed,
}

impl std::fmt::Debug for Perf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Perf")
            .field("test", &self.cfg.test)
            .field("qps", &self.qps.len())
            .field("ip", &self.ip)
            .finish_non_exhaustive()
    }
}

impl Perf {
    /// The endpoint on `sock` (whose address goes in the key string's GID), the QPs and
    /// the buffer for the largest size.
    pub fn new(cfg: PerfConfig, sock: UdpSocket) -> Result<Perf, PerfError> {
        let size = if sock.gro() { 65_536 } else { 9_216 };
        Perf::make(cfg, Box::new(sock), RecvBatch::new(64, size))
    }

    /// As [`Perf::new`], over any backend (an AF_XDP port's socket, say).
    pub fn with_backend(cfg: PerfConfig, sock: Box<dyn Backend + Send>) -> Result<Perf, PerfError> {
        // with GRO one receive holds up to 64 KiB
        let gro = sock.as_udp().is_some_and(UdpSocket::gro);
        let batch = RecvBatch::new(64, if gro { 65_536 } else { 9_216 });
        Perf::make(cfg, sock, batch)
    }

    fn make(
        cfg: PerfConfig,
        sock: Box<dyn Backend + Send>,
        batch: RecvBatch,
    ) -> Result<Perf, PerfError> {
        cfg.check()?;
        let local = Backend::local_addr(&sock);
        let mut ecfg = EndpointConfig::new(local).random_keys();
        // a kernel peer (rxe, a NIC) numbers its IPv4 IDs, which a UDP socket does not show:
        // recover them from the ICRC (a weaker check, counted as `icrc_unverified`)
        ecfg.icrc = IcrcPolicy::RecoverIpv4Id;
        let mut ep = Endpoint::new(ecfg);
        let grh = if cfg.conn == QpType::Ud { GRH } else { 0 };
        let half = (cfg.max_size() + grh)
            .max(CYCLE_BUFFER)
            .next_multiple_of(CACHE_LINE);
        let base = 0x5_0000_0000u64;
        let mr = ep.register_mr(
            vec![0u8; 2 * half * cfg.qps].into_boxed_slice(),
            base,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        );
        let cq = ep.create_cq();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let mut rng = Rng::new(seed);
        let mut qps = Vec::with_capacity(cfg.qps);
        for i in 0..cfg.qps {
            let qpn = ep.create_qp(QpInit {
                max_send_wr: cfg.tx_depth.max(16),
                max_recv_wr: cfg.rx_depth.max(16),
                send_cq: cq,
                recv_cq: cq,
                ..QpInit::new(cfg.conn)
            })?;
            ep.modify_qp(qpn, Modify::Init { qkey: pt::UD_QKEY })?;
            qps.push(Side {
                qpn,
                psn: (rng.next_u64() & 0xFF_FFFF) as u32,
                off: 2 * half * i,
                dest: None,
            });
        }
        let mut drv = Driver::with_backend(sock, batch);
        drv.set_gso(cfg.gso);
        // perftest polls its completion queue without sleeping; so does this side while
        // datagrams flow (a millisecond after the last one, then it sleeps)
        drv.set_spin(SPIN);
        Ok(Perf {
            cfg,
            ep,
            drv,
            qps,
            cq,
            mr,
            half,
            base,
            ip: local.ip(),
        })
    }

    /// The key string of QP `i`.
    fn key(&self, i: usize) -> KeyMsg {
        let q = &self.qps[i];
        KeyMsg {
            lid: 0,
            out_reads: self.cfg.out_reads,
            qpn: q.qpn,
            psn: q.psn,
            rkey: self.mr.rkey,
            vaddr: self.base + (q.off + self.half) as u64,
            gid: Some(gid_of(self.ip)),
            srqn: 0,
        }
    }

    /// This side's key strings, one per QP.
    pub fn keys(&self) -> Vec<KeyMsg> {
        (0..self.qps.len()).map(|i| self.key(i)).collect()
    }

    /// The endpoint (counters).
    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    /// Publish the counters to `board` (link "perf") while the test runs.
    pub fn publish_to(&mut self, board: Board) {
        self.drv.publish_to(board, "perf");
    }

    /// The counters now.
    pub fn link(&self) -> Link {
        self.drv.link("perf", &self.ep)
    }

    /// The QPs.
    pub fn qp_numbers(&self) -> Vec<u32> {
        self.qps.iter().map(|q| q.qpn).collect()
    }

    /// Bring QP `i` to RTS towards `rem` at the negotiated MTU, with perftest's attributes
    /// (ACK timeout 14 ≈ 67 ms, 7 retries, RNR timer 12).
    fn connect(&mut self, i: usize, rem: &KeyMsg, mtu: Mtu) -> Result<(), PerfError> {
        let ip = rem.gid.and_then(ip_of_gid).ok_or(PerfError::NoGid)?;
        let remote = SocketAddr::new(ip, self.cfg.roce_port);
        let q = &mut self.qps[i];
        if self.cfg.conn == QpType::Ud {
            q.dest = Some(UdDest {
                addr: remote,
                qpn: rem.qpn,
                qkey: pt::UD_QKEY,
            });
        }
        let (qpn, psn) = (q.qpn, q.psn);
        self.ep.modify_qp(
            qpn,
            Modify::Rtr {
                remote: Some(remote),
                dest_qpn: rem.qpn,
                rq_psn: rem.psn,
                mtu,
                min_rnr_timer: 12,
            },
        )?;
        self.ep.modify_qp(
            qpn,
            Modify::Rts {
                sq_psn: psn,
                timeout: ACK_TIMEOUT,
                retry_cnt: 7,
                rnr_retry: 7,
            },
        )?;
        Ok(())
    }

    /// Exchange with the peer over `oob` (connected, or accepted: that decides who is the
    /// client), connect, and run the test; `progress` gets the address lines once they are
    /// known (and, running infinitely, each period's row); `stop` (Ctrl-C) ends the test
    /// early.
    pub fn run(
        &mut self,
        mut oob: Oob,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Outcome, PerfError> {
        let tag = (self.cfg.test.code(), conn_code(self.cfg.conn));
        oob.my_tag = Some(tag);
        oob.versions()?;
        if let Some(theirs) = oob.peer_tag.filter(|&t| t != tag) {
            return Err(PerfError::Mismatch {
                peer: Test::from_code(theirs.0).map_or("another test", |t| t.name()),
                peer_conn: conn_name(theirs.1),
                test: self.cfg.test.name(),
                conn: conn_name(tag.1),
            });
        }
        oob.sys_data(CYCLE_BUFFER as i32, CACHE_LINE as i32)?;
        let mine = mtu_enum(self.cfg.mtu);
        let mtu = mtu_of(oob.mtu(mine)?);
        let me = self.keys();
        let n = me.len();
        let test = self.cfg.test;
        // the key strings, one per QP: write_lat and read_lat make one hand-shake more first
        if test.kind == Kind::Lat && test.verb != Verb::Send {
            oob.hand_shake(&me[0])?;
        }
        let mut rem = Vec::with_capacity(n);
        for k in &me {
            rem.push(oob.hand_shake(k)?);
        }
        for (i, r) in rem.iter().enumerate() {
            self.connect(i, r, mtu)?;
        }
        if test.kind == Kind::Lat {
            // one datagram at a time each way: received and sent the cheapest way
            self.drv.socket().set_ping_pong()?;
        }
        // send tests hand-shake once after RTR, then print; the others print, then make
        // their "remote address" hand-shakes (one per QP) and one after RTR
        if test.verb == Verb::Send {
            oob.hand_shake(&me[0])?;
        }
        let mut rem = Vec::with_capacity(n);
        for k in &me {
            rem.push(oob.hand_shake(k)?);
        }
        progress(Progress::Addresses(&Addresses {
            local: me.clone(),
            remote: rem.clone(),
            mtu,
            peer_version: oob.peer_version_str.clone(),
            peer_rocelink: oob.peer_tag.is_some(),
        }));
        if test.verb != Verb::Send {
            oob.hand_shake(&me[0])?;
        }
        let sizes = self.cfg.sizes_at(mtu);
        run::test(self, &mut oob, &sizes, &rem, stop, progress)
    }
}

/// What both sides learnt in the exchange, for perftest's address lines.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Addresses {
    /// This side's key strings, one per QP.
    pub local: Vec<KeyMsg>,
    /// The peer's.
    pub remote: Vec<KeyMsg>,
    /// The MTU both use.
    pub mtu: Mtu,
    /// The peer's perftest version string.
    pub peer_version: String,
    /// The peer is rocelink (it said so after its version string).
    pub peer_rocelink: bool,
}

fn mtu_enum(m: Mtu) -> u8 {
    pt::mtu_enum(m.bytes()).unwrap_or(5)
}

fn mtu_of(e: u8) -> Mtu {
    pt::mtu_bytes(e)
        .and_then(Mtu::from_bytes)
        .unwrap_or(Mtu::M4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_test_parses_back_from_its_name() {
        let names: Vec<&str> = Test::ALL.iter().map(Test::name).collect();
        assert_eq!(
            names,
            [
                "write_bw",
                "read_bw",
                "send_bw",
                "write_lat",
                "read_lat",
                "send_lat"
            ]
        );
        for t in Test::ALL {
            assert_eq!(Test::parse(t.name()), Some(t));
        }
        assert_eq!(Test::parse("write_foo"), None);
        assert_eq!(Test::parse("atomic_bw"), None);
    }
}
