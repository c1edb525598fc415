//! What `rocelink perf` prints and writes: perftest's header, address lines and rows (or
//! one JSON line per row), perftest's `--out_json` file, and the sweep's plot.

use anyhow::{Context, Result};
use rocelink_perftest::perf::lines::{BwLine, BwUnit, LatLine};
use rocelink_perftest::perf::{Addresses, BwRow, Kind, LatRow, Outcome, PerfConfig, Verb};
use rocelink_transport::QpType;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const LINE: &str =
    "---------------------------------------------------------------------------------------";

/// How the rows of one run are shown.
pub(crate) struct Report {
    pub(crate) cfg: PerfConfig,
    /// Gb/sec instead of MiB/sec.
    pub(crate) gbits: bool,
    /// JSON lines instead of perftest's text.
    pub(crate) json: bool,
    /// `-x`, shown in the header.
    pub(crate) gid_index: Option<i32>,
    /// `-d`, shown in the JSON file.
    pub(crate) device: Option<String>,
    /// Where `--out_json` writes.
    pub(crate) out_json: Option<PathBuf>,
    /// This side connected to the server.
    pub(crate) client: bool,
}

/// C's `%#0Nx`: zero-padded to `width` with `0x` counted in it, no prefix for zero.
fn alt_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$}", 0)
    } else {
        format!("0x{v:0w$x}", w = width.saturating_sub(2))
    }
}

fn conn_name(c: QpType) -> &'static str {
    match c {
        QpType::Rc => "RC",
        QpType::Uc => "UC",
        _ => "UD",
    }
}

impl Report {
    fn bw_unit(&self) -> BwUnit {
        if self.gbits {
            BwUnit::GbitPerSec
        } else {
            BwUnit::MibPerSec
        }
    }

    fn unit(&self, bps: f64) -> f64 {
        self.bw_unit().of(bps)
    }

    fn unit_name(&self) -> &'static str {
        self.bw_unit().name()
    }

    /// perftest's test information, address lines and column titles.
    pub(crate) fn header(&self, x: &Addresses) {
        self.test_info(x);
        self.address_lines(x);
        let t = self.cfg.test;
        if t.kind == Kind::Lat && t.verb == rocelink_perftest::perf::Verb::Read && !self.client {
            // a READ latency server is passive: no row follows, and perftest prints no columns
            return;
        }
        if t.kind == Kind::Bw {
            println!(
                " #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]",
                u = self.unit_name()
            );
        } else {
            println!(
                " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
            );
        }
    }

    /// The block that names the test and its settings.
    fn test_info(&self, x: &Addresses) {
        let t = self.cfg.test;
        let receiver = t.verb == Verb::Send && t.kind == Kind::Bw && !self.client;
        let timed = self.cfg.duration.is_some() && t.kind == Kind::Bw;
        if self.cfg.infinite || receiver || timed {
            println!(" WARNING: BW peak won't be measured in this run.");
        }
        println!("{LINE}");
        println!("                    {}", t.title());
        println!(
            " Number of qps   : {}\t\tTransport type : IB",
            x.local.len()
        );
        println!(
            " Connection type : {}\t\tUsing SRQ      : OFF",
            conn_name(self.cfg.conn)
        );
        println!(" TX depth        : {}", self.cfg.tx_depth);
        if t.verb == Verb::Send {
            println!(" RX depth        : {}", self.cfg.rx_depth);
        }
        println!(" Mtu             : {}[B]", x.mtu.bytes());
        println!(" Link type       : Ethernet");
        println!(" GID index       : {}", self.gid_index.unwrap_or(0));
        println!(" Max inline data : 0[B]");
        println!(" rdma_cm QPs\t : OFF");
        let peer = if x.peer_rocelink {
            "rocelink, perftest"
        } else {
            "perftest"
        };
        println!(
            " Data ex. method : Ethernet (peer {peer} {})",
            x.peer_version
        );
        println!("{LINE}");
    }

    /// perftest's local and remote address lines, one per QP.
    fn address_lines(&self, x: &Addresses) {
        let verb = self.cfg.test.verb;
        for (side, keys) in [("local", &x.local), ("remote", &x.remote)] {
            for k in keys {
                let mut l = format!(
                    " {side} address: LID {} QPN {} PSN {}",
                    alt_hex(u64::from(k.lid), 4),
                    alt_hex(u64::from(k.qpn), 6),
                    alt_hex(u64::from(k.psn), 6)
                );
                if verb == Verb::Read {
                    l += &format!(" OUT {}", alt_hex(u64::from(k.out_reads), 4));
                }
                if verb != Verb::Send {
                    l += &format!(
                        " RKey {} VAddr {}",
                        alt_hex(u64::from(k.rkey), 8),
                        alt_hex(k.vaddr, 16)
                    );
                }
                println!("{l}");
                if let Some(g) = k.gid {
                    let g: Vec<String> = g.iter().map(|b| format!("{b:02}")).collect();
                    println!(" GID: {}", g.join(":"));
                }
            }
        }
        println!("{LINE}");
    }

    /// One bandwidth row.
    pub(crate) fn bw_row(&self, r: &BwRow) {
        if self.json {
            // numbers and a unit name: serialising cannot fail
            let line = serde_json::to_string(&BwLine::new(r, self.bw_unit())).unwrap_or_default();
            println!("{line}");
        } else {
            println!(
                " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t     {:<7.6}",
                r.bytes,
                r.iters,
                self.unit(r.peak_bps),
                self.unit(r.avg_bps),
                r.msg_rate_mpps
            );
        }
    }

    fn lat_row(&self, r: &LatRow) {
        let s = &r.stats;
        if self.json {
            let line = serde_json::to_string(&LatLine::new(r)).unwrap_or_default();
            println!("{line}");
        } else {
            println!(
                " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
                r.bytes, r.iters, s.t_min, s.t_max, s.t_typical, s.t_avg, s.t_stdev, s.p99, s.p999
            );
        }
    }

    /// The rows of a finished run (running infinitely, they were printed as they came).
    pub(crate) fn rows(&self, out: &Outcome, peer_closed: bool) {
        match out {
            Outcome::Bw(rows) => rows.iter().for_each(|r| self.bw_row(r)),
            Outcome::Lat(rows) => rows.iter().for_each(|r| self.lat_row(r)),
            _ => {}
        }
        if peer_closed && !self.json {
            println!(" Client closed connection");
        }
        let passive = self.cfg.test.kind == Kind::Lat
            && self.cfg.test.verb == rocelink_perftest::perf::Verb::Read
            && !self.client;
        if !self.json && !passive {
            println!("{LINE}");
        }
    }

    /// perftest's `--out_json` file for the last row (perftest rewrites it after each);
    /// `None` when there is no row (a passive server running infinitely, or a READ
    /// latency server).
    pub(crate) fn perftest_json(&self, x: &Addresses, out: &Outcome) -> Option<String> {
        let t = self.cfg.test;
        let mut s = String::from("{\n\"test_info\": {\n");
        let verb = match t.verb {
            Verb::Send => "Send",
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
        };
        let kind = if t.kind == Kind::Bw { "BW" } else { "Latency" };
        let _ = writeln!(s, "\"test\": \"{verb}_{kind}_Test\",");
        let _ = writeln!(s, "\"Dual_port\": \"OFF\",");
        let device = self.device.as_deref().unwrap_or("rocelink");
        let _ = writeln!(s, "\"Device\": {},", serde_json::Value::from(device));
        let _ = writeln!(s, "\"Number_of_qps\": {},", x.local.len());
        let _ = writeln!(s, "\"Transport_type\": \"IB\",");
        let _ = writeln!(s, "\"Connection_type\": \"{}\",", conn_name(self.cfg.conn));
        let _ = writeln!(s, "\"Using_SRQ\": \"OFF\",");
        let _ = writeln!(s, " \"PCIe_relax_order\": \"Unsupported\",");
        let _ = writeln!(s, "\"ibv_wr_API\": \"ON\",");
        if self.client {
            let _ = writeln!(s, "\"TX_depth\": {},", self.cfg.tx_depth);
        }
        if t.verb == Verb::Send && !self.client {
            let _ = writeln!(s, "\"RX_depth\": {},", self.cfg.rx_depth);
        }
        if t.kind == Kind::Bw {
            // every work request is signalled: one completion per message
            let _ = writeln!(s, "\"CQ_Moderation\": 1,");
        }
        let _ = writeln!(s, "\"Mtu\": {},", x.mtu.bytes());
        let _ = writeln!(s, "\"Link_type\": \"Ethernet\",");
        if let Some(g) = self.gid_index {
            let _ = writeln!(s, "\"GID_index\": {g},");
        }
        if t.verb == Verb::Read {
            let _ = writeln!(s, "\"Outstand_reads\": {},", self.cfg.out_reads);
        } else {
            let _ = writeln!(s, "\"Max_inline_data\": 0,");
        }
        let _ = writeln!(s, "\"rdma_cm_QPs\": \"OFF\",");
        let _ = writeln!(s, "\"Use_ROCm_memory\": \"OFF\",");
        let _ = writeln!(s, "\"Use_MUSA_memory\": \"OFF\",");
        let _ = write!(
            s,
            "\"Data_ex_method\": \"Ethernet\"\n}},\n\"results\": {{\n"
        );
        s.push_str(&self.results(out)?);
        s.push_str("}\n}\n");
        Some(s)
    }

    /// The `results` object of perftest's JSON file: the last row.
    fn results(&self, out: &Outcome) -> Option<String> {
        let mut s = String::new();
        match out {
            Outcome::Bw(rows) => {
                let r = rows.last()?;
                let _ = write!(
                    s,
                    "\"MsgSize\": {},\n\"n_iterations\": {},\n\"BW_peak\": {:.2},\n\"BW_average\": {:.2},\n\"MsgRate\": {:.6}\n",
                    r.bytes,
                    r.iters,
                    self.unit(r.peak_bps),
                    self.unit(r.avg_bps),
                    r.msg_rate_mpps
                );
            }
            Outcome::Lat(rows) => {
                let r = rows.last()?;
                let l = &r.stats;
                let _ = write!(
                    s,
                    "\"MsgSize\": {},\n\"n_iterations\": {},\n\"t_min\": {:.2},\n\"t_max\": {:.2},\n\"t_typical\": {:.2},\n\"t_avg\": {:.2},\n\"t_stdev\": {:.2},\n\"percentile_99\": {:.2},\n\"percentile_99.9\": {:.2}\n",
                    r.bytes,
                    r.iters,
                    l.t_min,
                    l.t_max,
                    l.t_typical,
                    l.t_avg,
                    l.t_stdev,
                    l.p99,
                    l.p999
                );
            }
            _ => return None,
        }
        Some(s)
    }

    /// The sweep's chart: bandwidth (average and peak) or latency (typical, average, 99%)
    /// against the message size.
    pub(crate) fn plot(&self, path: &Path, out: &Outcome) -> Result<()> {
        let t = self.cfg.test;
        let title = format!(
            "rocelink perf {} ({}, {} QP{})",
            t.name(),
            conn_name(self.cfg.conn),
            self.cfg.qps,
            if self.cfg.qps > 1 { "s" } else { "" }
        );
        let (ylabel, series): (String, Vec<crate::plot::Series>) = match out {
            Outcome::Bw(rows) => {
                let pts = |f: &dyn Fn(&BwRow) -> f64| -> Vec<(f64, f64)> {
                    rows.iter().map(|r| (r.bytes as f64, f(r))).collect()
                };
                // the table's unit: MiB/sec, or Gb/sec with --report_gbits
                (
                    format!("bandwidth [{}]", self.unit_name()),
                    vec![
                        ("BW average".into(), pts(&|r| self.unit(r.avg_bps))),
                        ("BW peak".into(), pts(&|r| self.unit(r.peak_bps))),
                    ],
                )
            }
            Outcome::Lat(rows) => {
                let pts = |f: &dyn Fn(&LatRow) -> f64| -> Vec<(f64, f64)> {
                    rows.iter().map(|r| (r.bytes as f64, f(r))).collect()
                };
                (
                    "latency [µs]".to_owned(),
                    vec![
                        ("t_typical".into(), pts(&|r| r.stats.t_typical)),
                        ("t_avg".into(), pts(&|r| r.stats.t_avg)),
                        ("99%".into(), pts(&|r| r.stats.p99)),
                    ],
                )
            }
            _ => return Ok(()),
        };
        if series.iter().all(|s| s.1.is_empty()) {
            eprintln!("rocelink perf: no rows on this side, no plot written");
            return Ok(());
        }
        crate::plot::lines(path, &title, "message size [bytes]", &ylabel, &series)
            .with_context(|| format!("--plot {}", path.display()))?;
        if !self.json {
            eprintln!("rocelink perf: wrote {}", path.display());
        }
        Ok(())
    }
}
