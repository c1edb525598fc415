//! A process's network counters, in the shape of Coyote's `nstats` table: per link (one
//! endpoint over one backend) the packets the backend moved, the RoCE packets the endpoint
//! saw, the verbs-level packets of its QPs, PSN drops, retransmissions and every kind of
//! refusal; then the same per QP.
//!
//! A [`Snapshot`] renders as that table ([`Snapshot::table`]), as JSON (serde) and in
//! Prometheus' text format ([`Snapshot::prometheus`]). A [`Board`] holds the latest snapshot
//! of a running process: drivers publish to it ([`crate::Driver::publish_to`]) and the
//! control socket and metrics endpoint ([`crate::control`]) read it.
//!
//! ```
//! use rocelink_runtime::counters::{Board, Link};
//! use rocelink_transport::{Endpoint, EndpointConfig};
//! let ep = Endpoint::new(EndpointConfig::new("127.0.0.1:4791".parse().unwrap()));
//! let board = Board::new("example");
//! board.set_link(Link::of("data", &ep, 10, 4));
//! let snap = board.snapshot();
//! assert_eq!(snap.links[0].net["rx_packets"], 10);
//! assert!(snap.table().contains("RX pkgs: 10"));
//! assert!(snap.prometheus().contains("rocelink_rx_packets_total{link=\"data\""));
//! ```

use rocelink_transport::{Endpoint, QpStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

/// What a counter is: its key (JSON and Prometheus), its line in the table, its help text.
#[derive(Debug, Clone, Copy)]
pub struct Desc {
    /// Key in JSON; Prometheus metric `rocelink_<key>_total` (QP ones `rocelink_qp_…`).
    pub key: &'static str,
    /// The table's label (Coyote's where Coyote has one).
    pub label: &'static str,
    /// One line of help.
    pub help: &'static str,
}

const fn d(key: &'static str, label: &'static str, help: &'static str) -> Desc {
    Desc { key, label, help }
}

/// Link counters, in table order.
pub const LINK: &[Desc] = &[
    d(
        "rx_packets",
        "RX pkgs",
        "datagrams or frames the backend received",
    ),
    d(
        "tx_packets",
        "TX pkgs",
        "datagrams or frames the backend sent",
    ),
    d(
        "arp_rx",
        "ARP RX pkgs",
        "ARP packets received (raw backends only)",
    ),
    d(
        "arp_tx",
        "ARP TX pkgs",
        "ARP packets sent (raw backends only)",
    ),
    d(
        "icmp_rx",
        "ICMP RX pkgs",
        "ICMP packets received (raw backends only)",
    ),
    d(
        "icmp_tx",
        "ICMP TX pkgs",
        "ICMP packets sent (raw backends only)",
    ),
    d(
        "roce_rx",
        "ROCE RX pkgs",
        "RoCE v2 packets handed to the endpoint",
    ),
    d(
        "roce_tx",
        "ROCE TX pkgs",
        "RoCE v2 packets the endpoint sent",
    ),
    d("ibv_rx", "IBV RX pkgs", "packets that reached a QP"),
    d(
        "ibv_tx",
        "IBV TX pkgs",
        "packets QPs sent, retransmissions included",
    ),
    d(
        "psn_drops",
        "PSN drop cnt",
        "packets out of PSN sequence or duplicated",
    ),
    d("retransmissions", "Retrans cnt", "packets retransmitted"),
    d("timeouts", "Retrans timeouts", "retransmit timer expiries"),
    d(
        "icrc_errors",
        "ICRC errors",
        "packets whose ICRC did not match (dropped)",
    ),
    d(
        "icrc_unverified",
        "ICRC unverified",
        "IPv4 packets whose ICRC could only be checked with a recovered IP ID",
    ),
    d(
        "malformed",
        "Malformed",
        "datagrams that are not valid RoCE v2 (dropped)",
    ),
    d(
        "unknown_qp",
        "Unknown QP",
        "packets for a QP that does not exist or is not ready",
    ),
    d(
        "pkey_errors",
        "P_Key errors",
        "packets with a foreign P_Key",
    ),
    d(
        "access_violations",
        "R_Key/bounds refusals",
        "packets refused for their R_Key, access rights or bounds",
    ),
    d(
        "held_refusals",
        "Held-page refusals",
        "writes refused: the page was still held by the application",
    ),
    d("naks_sent", "NAKs sent", "NAKs sent"),
    d("naks_received", "NAKs received", "NAKs received"),
    d(
        "rnr_naks_received",
        "RNR NAKs received",
        "receiver-not-ready NAKs received",
    ),
    d(
        "qp_drops",
        "QP drops",
        "packets a QP dropped (opcode sequence, UC drop state, no receive posted)",
    ),
    d(
        "damaged_messages",
        "Damaged messages",
        "UC messages discarded because of a gap",
    ),
    d(
        "foreign_port",
        "Other-port refusals",
        "packets from a peer's address but not its UDP port, dropped",
    ),
    d(
        "psn_refused",
        "PSN refusals",
        "ACKs/NAKs for nothing outstanding and requests outside the PSN window, dropped",
    ),
    d("tx_stalls", "TX stalls", "times the backend was full"),
    d(
        "landed",
        "Landed in place",
        "payloads the kernel received straight to where they belong, verified there",
    ),
    d(
        "landed_elsewhere",
        "Landed elsewhere",
        "payloads received into a place predicted for another: copied to their own",
    ),
    d(
        "stx_bytes",
        "Sensor TX bytes",
        "bytes the host sent to an emulated device's sensors",
    ),
    d(
        "stx_lost",
        "Sensor TX lost",
        "sensor TX packets lost (PSN gaps at the emulated device)",
    ),
    d(
        "stx_icrc_errors",
        "Sensor TX ICRC errors",
        "sensor TX packets whose ICRC did not match (dropped)",
    ),
];

/// Link counters a backend may be unable to see: the table marks them `-` when absent
/// (ARP and ICMP over a UDP socket are answered by the kernel). Other absent counters
/// are left out of the table.
const SHOWN_ABSENT: &[&str] = &["arp_rx", "arp_tx", "icmp_rx", "icmp_tx"];

/// QP counters, in table order.
pub const QP: &[Desc] = &[
    d(
        "rx_packets",
        "RX pkgs",
        "packets received for the QP, before any check",
    ),
    d("rx_bytes", "RX bytes", "payload bytes accepted"),
    d(
        "tx_packets",
        "TX pkgs",
        "packets sent, retransmissions included",
    ),
    d("tx_bytes", "TX bytes", "payload bytes sent"),
    d(
        "psn_gaps",
        "PSN out of sequence",
        "PSN gaps seen (RC: out of sequence; UC: lost)",
    ),
    d(
        "duplicates",
        "PSN duplicates",
        "packets whose PSN was behind the expected one",
    ),
    d("retransmissions", "Retrans cnt", "packets retransmitted"),
    d("timeouts", "Retrans timeouts", "retransmit timer expiries"),
    d(
        "window_cuts",
        "Window cuts",
        "times the RC congestion window was cut",
    ),
    d("acks_sent", "ACKs sent", "ACKs sent"),
    d("naks_sent", "NAKs sent", "NAKs sent"),
    d(
        "naks_received",
        "NAKs received",
        "NAKs received (RNR included)",
    ),
    d(
        "rnr_naks_received",
        "RNR NAKs received",
        "receiver-not-ready NAKs received",
    ),
    d(
        "access_violations",
        "R_Key/bounds refusals",
        "R_Key, access or bounds violations by the peer",
    ),
    d(
        "held_refusals",
        "Held-page refusals",
        "writes refused: the page was still held by the application",
    ),
    d("drops", "QP drops", "packets dropped by the QP"),
    d(
        "damaged_messages",
        "Damaged messages",
        "UC messages discarded because of a gap",
    ),
    d(
        "foreign_port",
        "Other-port refusals",
        "packets from the peer's address but not its UDP port, dropped",
    ),
    d(
        "psn_refused",
        "PSN refusals",
        "ACKs/NAKs for nothing outstanding and requests outside the PSN window, dropped",
    ),
];

/// Priority flow control counters, per class, in table order.
pub const PFC: &[Desc] = &[
    d(
        "pauses_in",
        "Pauses received",
        "PFC pause frames received for the class",
    ),
    d(
        "resumes_in",
        "Resumes received",
        "PFC frames with quanta 0 received for the class",
    ),
    d(
        "paused_us",
        "Paused (us)",
        "microseconds the class was paused by the peer",
    ),
    d(
        "held",
        "Held pkgs",
        "datagrams held while the class was paused",
    ),
    d(
        "dropped",
        "Dropped pkgs",
        "datagrams dropped: the class's hold queue was full",
    ),
    d(
        "pauses_out",
        "Pauses sent",
        "PFC pauses sent for the class (the receive ring filling)",
    ),
    d(
        "resumes_out",
        "Resumes sent",
        "PFC resumes sent for the class (the ring drained)",
    ),
    d(
        "asked_us",
        "Peer paused (us)",
        "microseconds this port kept the peer's class paused",
    ),
];

/// One PFC class's counters on an owned port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PfcCounters {
    /// The class (0–7).
    pub class: u8,
    /// Counters by key ([`PFC`]).
    pub counters: BTreeMap<String, u64>,
}

impl PfcCounters {
    /// The counters of `class`.
    pub fn of(class: u8, s: &crate::xdp::PfcClassStats) -> PfcCounters {
        let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let pairs = [
            ("pauses_in", s.pauses_in),
            ("resumes_in", s.resumes_in),
            ("paused_us", us(s.paused)),
            ("held", s.held),
            ("dropped", s.dropped),
            ("pauses_out", s.pauses_out),
            ("resumes_out", s.resumes_out),
            ("asked_us", us(s.asked)),
        ];
        PfcCounters {
            class,
            counters: pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect(),
        }
    }
}

/// One QP's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QpCounters {
    /// The QP number.
    pub qpn: u32,
    /// Counters by key ([`QP`]).
    pub counters: BTreeMap<String, u64>,
}

impl QpCounters {
    /// A QP's counters.
    pub fn of(qpn: u32, s: &QpStats) -> QpCounters {
        let pairs = [
            ("rx_packets", s.rx_packets),
            ("rx_bytes", s.rx_bytes),
            ("tx_packets", s.tx_packets),
            ("tx_bytes", s.tx_bytes),
            ("psn_gaps", s.psn_gaps),
            ("duplicates", s.duplicates),
            ("retransmissions", s.retransmissions),
            ("timeouts", s.timeouts),
            ("window_cuts", s.window_cuts),
            ("acks_sent", s.acks_sent),
            ("naks_sent", s.naks_sent),
            ("naks_received", s.naks_received),
            ("rnr_naks_received", s.rnr_naks_received),
            ("access_violations", s.access_violations),
            ("held_refusals", s.held_refusals),
            ("drops", s.drops),
            ("damaged_messages", s.damaged_messages),
            ("foreign_port", s.foreign_port),
            ("psn_refused", s.psn_refused),
        ];
        QpCounters {
            qpn,
            counters: pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect(),
        }
    }
}

/// One link: an endpoint over one backend.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Link {
    /// What the link is for ("data", "status", "perf", …).
    pub name: String,
    /// Its local address.
    pub local: String,
    /// Counters by key ([`LINK`]); ARP and ICMP only where the backend sees them.
    pub net: BTreeMap<String, u64>,
    /// Per QP.
    pub qps: Vec<QpCounters>,
    /// Per PFC class that saw anything (owned ports with PFC on).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pfc: Vec<PfcCounters>,
}

impl Link {
    /// The counters of `ep`, with the backend's received and sent packet counts.
    pub fn of(name: &str, ep: &Endpoint, rx_packets: u64, tx_packets: u64) -> Link {
        let qps: Vec<QpCounters> = ep
            .qp_numbers()
            .iter()
            .filter_map(|&q| ep.qp_stats(q).map(|s| QpCounters::of(q, &s)))
            .collect();
        let sum = |k: &str| -> u64 {
            qps.iter()
                .map(|q| q.counters.get(k).copied().unwrap_or(0))
                .sum()
        };
        let e = ep.stats();
        let pairs = [
            ("rx_packets", rx_packets),
            ("tx_packets", tx_packets),
            ("roce_rx", e.rx_datagrams),
            ("roce_tx", e.tx_datagrams),
            ("ibv_rx", sum("rx_packets")),
            ("ibv_tx", sum("tx_packets")),
            ("psn_drops", sum("psn_gaps") + sum("duplicates")),
            ("retransmissions", sum("retransmissions")),
            ("timeouts", sum("timeouts")),
            ("window_cuts", sum("window_cuts")),
            ("icrc_errors", e.icrc_errors),
            ("icrc_unverified", e.icrc_unverified),
            ("malformed", e.malformed),
            ("unknown_qp", e.unknown_qp),
            ("pkey_errors", e.pkey_errors),
            ("access_violations", sum("access_violations")),
            ("held_refusals", sum("held_refusals")),
            ("naks_sent", sum("naks_sent")),
            ("naks_received", sum("naks_received")),
            ("rnr_naks_received", sum("rnr_naks_received")),
            ("qp_drops", sum("drops")),
            ("damaged_messages", sum("damaged_messages")),
            ("foreign_port", sum("foreign_port")),
            ("psn_refused", sum("psn_refused")),
        ];
        Link {
            name: name.to_owned(),
            local: ep.config().local.to_string(),
            net: pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect(),
            qps,
            pfc: Vec::new(),
        }
    }

    /// Add an owned port's PFC counters (the classes that saw anything).
    pub fn set_pfc(&mut self, stats: &[crate::xdp::PfcClassStats]) {
        self.pfc = stats
            .iter()
            .zip(0u8..)
            .filter(|(s, _)| !s.is_idle())
            .map(|(s, c)| PfcCounters::of(c, s))
            .collect();
    }

    /// A link with no counters yet, for a loop that keeps its own (an emulated device).
    pub fn named(name: &str, local: &str) -> Link {
        Link {
            name: name.to_owned(),
            local: local.to_owned(),
            ..Link::default()
        }
    }

    /// Set (or add) one link counter, e.g. `tx_stalls` or a raw backend's `arp_rx`.
    pub fn set(&mut self, key: &str, value: u64) {
        self.net.insert(key.to_owned(), value);
    }

    /// A link counter (0 when absent).
    pub fn get(&self, key: &str) -> u64 {
        self.net.get(key).copied().unwrap_or(0)
    }
}

/// A process's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Snapshot {
    /// The command ("perf write_bw", "receive", …).
    pub command: String,
    /// Its process id.
    pub pid: u32,
    /// Per link.
    pub links: Vec<Link>,
}

impl Snapshot {
    /// An empty snapshot of this process.
    pub fn new(command: &str) -> Snapshot {
        Snapshot {
            command: command.to_owned(),
            pid: std::process::id(),
            links: Vec::new(),
        }
    }

    /// A counter summed over every link (the per-process figure).
    pub fn total(&self, key: &str) -> u64 {
        self.links.iter().map(|l| l.get(key)).sum()
    }

    /// Coyote's table: per link, then per QP. Counters a backend cannot see (ARP and ICMP
    /// over a UDP socket, answered by the kernel) read `-`.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for l in &self.links {
            let _ = writeln!(
                s,
                " -- NET STATS {} ({}, pid {}) {}",
                l.name, self.command, self.pid, l.local
            );
            for d in LINK {
                match l.net.get(d.key) {
                    Some(v) => {
                        let _ = writeln!(s, "{}: {v}", d.label);
                    }
                    None if SHOWN_ABSENT.contains(&d.key) => {
                        let _ = writeln!(s, "{}: -", d.label);
                    }
                    None => {}
                }
            }
            for q in &l.qps {
                let _ = writeln!(s, " -- QP {:#08x}", q.qpn);
                for d in QP {
                    let _ = writeln!(
                        s,
                        "{}: {}",
                        d.label,
                        q.counters.get(d.key).copied().unwrap_or(0)
                    );
                }
            }
            for p in &l.pfc {
                let _ = writeln!(s, " -- PFC class {}", p.class);
                for d in PFC {
                    let v = p.counters.get(d.key).copied().unwrap_or(0);
                    let _ = writeln!(s, "{}: {v}", d.label);
                }
            }
        }
        if self.links.is_empty() {
            let _ = writeln!(
                s,
                " -- NET STATS ({}, pid {}): no link yet",
                self.command, self.pid
            );
        }
        s
    }

    /// What moved since `before`, `elapsed` earlier (`stats --watch`): per link and per QP
    /// only the counters that changed, each with its total and its rate per second. A link
    /// where nothing moved is one line saying so.
    pub fn changes(&self, before: &Snapshot, elapsed: std::time::Duration) -> String {
        let secs = elapsed.as_secs_f64().max(1e-3);
        let mut s = String::new();
        let row = |s: &mut String, label: &str, now: u64, then: u64| {
            let rate = now.saturating_sub(then) as f64 / secs;
            let _ = writeln!(s, "{label}: {now} ({}/s)", per_sec(rate));
        };
        for l in &self.links {
            let was = before.links.iter().find(|b| b.name == l.name);
            let mut body = String::new();
            for d in LINK {
                let (Some(&now), then) = (l.net.get(d.key), was.map_or(0, |b| b.get(d.key))) else {
                    continue;
                };
                if now != then {
                    row(&mut body, d.label, now, then);
                }
            }
            for q in &l.qps {
                let old = was.and_then(|b| b.qps.iter().find(|o| o.qpn == q.qpn));
                let mut qbody = String::new();
                for d in QP {
                    let now = q.counters.get(d.key).copied().unwrap_or(0);
                    let then = old
                        .and_then(|o| o.counters.get(d.key).copied())
                        .unwrap_or(0);
                    if now != then {
                        row(&mut qbody, d.label, now, then);
                    }
                }
                if !qbody.is_empty() {
                    let _ = writeln!(body, " -- QP {:#08x}", q.qpn);
                    body.push_str(&qbody);
                }
            }
            let _ = write!(
                s,
                " -- NET STATS {} ({}, pid {}) {}",
                l.name, self.command, self.pid, l.local
            );
            if body.is_empty() {
                let _ = writeln!(s, ": nothing moved");
            } else {
                s.push('\n');
                s.push_str(&body);
            }
        }
        if self.links.is_empty() {
            let _ = writeln!(
                s,
                " -- NET STATS ({}, pid {}): no link yet",
                self.command, self.pid
            );
        }
        s
    }

    /// One line: the link counters that are not zero, summed over links.
    pub fn line(&self) -> String {
        let parts: Vec<String> = LINK
            .iter()
            .filter(|d| self.total(d.key) != 0)
            .map(|d| format!("{} {}", d.label, self.total(d.key)))
            .collect();
        if parts.is_empty() {
            "no packets".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// Prometheus' text exposition format (version 0.0.4): every counter as
    /// `rocelink_<key>_total{link,local}` and `rocelink_qp_<key>_total{link,local,qpn}`.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let pid = self.pid;
        let cmd = escape(&self.command);
        for d in LINK {
            let have: Vec<&Link> = self
                .links
                .iter()
                .filter(|l| l.net.contains_key(d.key))
                .collect();
            if have.is_empty() {
                continue;
            }
            let _ = writeln!(s, "# HELP rocelink_{}_total {}", d.key, d.help);
            let _ = writeln!(s, "# TYPE rocelink_{}_total counter", d.key);
            for l in have {
                let _ = writeln!(
                    s,
                    "rocelink_{}_total{{link=\"{}\",local=\"{}\",command=\"{cmd}\",pid=\"{pid}\"}} {}",
                    d.key,
                    escape(&l.name),
                    escape(&l.local),
                    l.get(d.key)
                );
            }
        }
        let qps: Vec<Item<'_>> = (self.links.iter())
            .flat_map(|l| {
                l.qps
                    .iter()
                    .map(move |q| (l, format!("qpn=\"{:#x}\"", q.qpn), &q.counters))
            })
            .collect();
        self.family(&mut s, "qp", QP, &qps);
        let pfc: Vec<Item<'_>> = (self.links.iter())
            .flat_map(|l| {
                l.pfc
                    .iter()
                    .map(move |p| (l, format!("class=\"{}\"", p.class), &p.counters))
            })
            .collect();
        self.family(&mut s, "pfc", PFC, &pfc);
        s
    }
}

/// One item a link holds counters for (a QP, a PFC class): its link, its own label, its
/// counters.
type Item<'a> = (&'a Link, String, &'a BTreeMap<String, u64>);

impl Snapshot {
    /// A family of per-item counters as `rocelink_<family>_<key>_total{link,local,<label>,…}`
    /// (nothing when no link has such items).
    fn family(&self, s: &mut String, family: &str, descs: &[Desc], items: &[Item<'_>]) {
        if items.is_empty() {
            return;
        }
        let (pid, cmd) = (self.pid, escape(&self.command));
        for d in descs {
            let _ = writeln!(s, "# HELP rocelink_{family}_{}_total {}", d.key, d.help);
            let _ = writeln!(s, "# TYPE rocelink_{family}_{}_total counter", d.key);
            for (l, label, counters) in items {
                let _ = writeln!(
                    s,
                    "rocelink_{family}_{}_total{{link=\"{}\",local=\"{}\",{label},command=\"{cmd}\",pid=\"{pid}\"}} {}",
                    d.key,
                    escape(&l.name),
                    escape(&l.local),
                    counters.get(d.key).copied().unwrap_or(0)
                );
            }
        }
    }
}

/// A rate with an SI prefix: `950`, `12.3k`, `1.25M`.
fn per_sec(r: f64) -> String {
    match r {
        r if r >= 1e9 => format!("{:.3}G", r / 1e9),
        r if r >= 1e6 => format!("{:.3}M", r / 1e6),
        r if r >= 1e3 => format!("{:.1}k", r / 1e3),
        r => format!("{r:.0}"),
    }
}

/// A Prometheus label value: backslash, quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The latest counters of a running process, shared between the loops that publish them
/// and the threads that serve them. Cloning shares the board.
#[derive(Debug, Clone)]
pub struct Board {
    inner: Arc<Mutex<Snapshot>>,
}

impl Board {
    /// An empty board for `command`.
    pub fn new(command: &str) -> Board {
        Board {
            inner: Arc::new(Mutex::new(Snapshot::new(command))),
        }
    }

    /// Publish a link's counters (replacing the link of the same name).
    pub fn set_link(&self, link: Link) {
        let mut s = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match s.links.iter_mut().find(|l| l.name == link.name) {
            Some(l) => *l = link,
            None => s.links.push(link),
        }
    }

    /// The latest counters.
    pub fn snapshot(&self) -> Snapshot {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocelink_transport::EndpointConfig;

    fn link(name: &str, rx: u64) -> Link {
        let ep = Endpoint::new(EndpointConfig::new("127.0.0.1:4791".parse().unwrap()));
        Link::of(name, &ep, rx, 0)
    }

    #[test]
    fn links_replace_by_name_and_sum() {
        let b = Board::new("t");
        b.set_link(link("a", 3));
        b.set_link(link("b", 4));
        b.set_link(link("a", 5));
        let s = b.snapshot();
        assert_eq!(s.links.len(), 2);
        assert_eq!(s.total("rx_packets"), 9);
        assert_eq!(s.line(), "RX pkgs 9");
    }

    #[test]
    fn pfc_classes_that_saw_anything_show_in_the_table_the_metrics_and_json() {
        use crate::xdp::PfcClassStats;
        let mut stats = [PfcClassStats::default(); 8];
        stats[3] = PfcClassStats {
            pauses_in: 7,
            paused: std::time::Duration::from_micros(2500),
            held: 40,
            ..PfcClassStats::default()
        };
        let mut l = link("data", 1);
        l.set_pfc(&stats);
        assert_eq!(l.pfc.len(), 1, "idle classes are left out");
        let mut s = Snapshot::new("t");
        s.links.push(l);
        let t = s.table();
        assert!(t.contains(" -- PFC class 3\nPauses received: 7\n"), "{t}");
        assert!(t.contains("\nPaused (us): 2500\nHeld pkgs: 40\n"), "{t}");
        let p = s.prometheus();
        assert!(
            p.contains(
                "rocelink_pfc_pauses_in_total{link=\"data\",local=\"127.0.0.1:4791\",class=\"3\""
            ),
            "{p}"
        );
        let back: Snapshot = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        // a link without PFC reads as before
        let plain = serde_json::to_value(link("x", 0)).unwrap();
        assert!(plain.get("pfc").is_none(), "{plain}");
    }

    #[test]
    fn table_marks_what_the_backend_cannot_see() {
        let mut l = link("a", 1);
        l.set("tx_stalls", 2);
        let mut s = Snapshot::new("t");
        s.links.push(l);
        let t = s.table();
        assert!(t.contains("\nARP RX pkgs: -\n"), "{t}");
        assert!(t.contains("\nTX stalls: 2\n"), "{t}");
        assert!(t.contains("\nRX pkgs: 1\n"), "{t}");
    }

    #[test]
    fn table_leaves_out_what_no_one_set() {
        let mut s = Snapshot::new("t");
        s.links.push(link("a", 1));
        let t = s.table();
        assert!(!t.contains("TX stalls"), "{t}");
        assert!(!t.contains("Sensor TX"), "{t}");
        let mut l = Link::named("device", "127.0.0.2:4791");
        l.set("stx_lost", 3);
        s.links.push(l);
        assert!(s.table().contains("\nSensor TX lost: 3\n"));
    }

    #[test]
    fn changes_show_only_what_moved_with_rates() {
        let mut before = Snapshot::new("t");
        before.links.push(link("a", 100));
        before.links.push(link("b", 5));
        let mut now = before.clone();
        now.links[0].set("rx_packets", 2_600);
        now.links[0].set("icrc_errors", 2);
        let c = now.changes(&before, std::time::Duration::from_millis(500));
        assert!(c.contains("\nRX pkgs: 2600 (5.0k/s)\n"), "{c}");
        assert!(c.contains("\nICRC errors: 2 (4/s)\n"), "{c}");
        assert!(!c.contains("TX pkgs"), "unchanged rows left out: {c}");
        assert!(c.contains(" -- NET STATS b (t, pid "), "{c}");
        assert!(c.contains(": nothing moved\n"), "{c}");
        // a link that was not there before counts from zero
        let mut l = Link::named("device", "x");
        l.set("stx_bytes", 3_000_000);
        now.links.push(l);
        let c = now.changes(&before, std::time::Duration::from_secs(1));
        assert!(c.contains("\nSensor TX bytes: 3000000 (3.000M/s)\n"), "{c}");
    }

    #[test]
    fn prometheus_lines_are_well_formed() {
        let mut s = Snapshot::new("perf \"x\"");
        s.links.push(link("a", 7));
        let p = s.prometheus();
        for line in p.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<u64>().is_ok(), "{line}");
            assert!(
                name.starts_with("rocelink_") && name.ends_with('}'),
                "{line}"
            );
        }
        assert!(p.contains("command=\"perf \\\"x\\\"\""), "{p}");
        assert!(p.contains("# TYPE rocelink_rx_packets_total counter"));
        assert!(!p.contains("arp_rx"), "no ARP counter over UDP: {p}");
    }

    #[test]
    fn json_round_trip() {
        let mut s = Snapshot::new("t");
        s.links.push(link("a", 7));
        let j = serde_json::to_string(&s).unwrap();
        let back: Snapshot = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
    }
}
