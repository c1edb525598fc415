//! `rocelink bench scale`: N streams at once, each a sender and a receiver on a pair of
//! CPUs of their own (stream *i* on CPUs 2*i* and 2*i*+1, wrapping where the machine has
//! fewer), each over loopback addresses of its own — the bare UDP sink first, then
//! rocelink's verified receiver, on the same N streams. Reports the aggregate goodput and
//! the goodput per receiver CPU, so one session per core can be compared with N.

use crate::{StreamConfig, StreamResult, stream};
use std::net::Ipv4Addr;

/// One N's figures for one receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleResult {
    /// `sink` or `rocelink`.
    pub name: &'static str,
    /// Streams at once.
    pub streams: usize,
    /// Their goodput together, Gbit/s.
    pub gbps: f64,
    /// Goodput per receiver CPU: the sum of goodputs over the sum of the receivers' CPU
    /// (in cores), Gbit/s.
    pub gbps_per_cpu: f64,
    /// Datagrams lost, all streams together, as a fraction of those sent.
    pub loss: f64,
    /// Frames damaged (rocelink), all streams.
    pub damaged: u64,
    /// Each stream's result.
    pub each: Vec<StreamResult>,
}

/// CPUs this process may run on.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Stream `i`'s settings: its addresses (127.0.(100+i).2 → .1) and its CPUs.
fn nth(base: &StreamConfig, i: usize, name: &'static str) -> StreamConfig {
    let n = cpus();
    let third = 100 + (i % 100) as u8;
    StreamConfig {
        device: Ipv4Addr::new(127, 0, third, 2),
        host: Ipv4Addr::new(127, 0, third, 1),
        cpus: ((2 * i) % n, (2 * i + 1) % n),
        receivers: vec![name],
        veth: None,
        ..base.clone()
    }
}

/// `streams` streams of receiver `name` at once.
pub fn scale_one(
    base: &StreamConfig,
    streams: usize,
    name: &'static str,
) -> crate::Result<ScaleResult> {
    let each = std::thread::scope(|s| {
        let runs: Vec<_> = (0..streams)
            .map(|i| {
                let cfg = nth(base, i, name);
                s.spawn(move || stream(&cfg))
            })
            .collect();
        runs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or(Err(crate::BenchError::Panicked("stream")))
            })
            .collect::<crate::Result<Vec<Vec<StreamResult>>>>()
    })?;
    let each: Vec<StreamResult> = each.into_iter().flatten().collect();
    let gbps: f64 = each.iter().map(|r| r.gbps).sum();
    let cores: f64 = each.iter().map(|r| r.cpu_percent / 100.0).sum();
    let (sent, received) = each
        .iter()
        .fold((0, 0), |(s, r), e| (s + e.sent, r + e.received));
    Ok(ScaleResult {
        name,
        streams,
        gbps,
        gbps_per_cpu: if cores > 0.0 { gbps / cores } else { 0.0 },
        loss: if sent > 0 {
            1.0 - received as f64 / sent as f64
        } else {
            0.0
        },
        damaged: each.iter().map(|r| r.frames.1).sum(),
        each,
    })
}

/// For each N in `streams`: the sink's and rocelink's figures on N streams at once.
pub fn scale(
    base: &StreamConfig,
    streams: &[usize],
) -> crate::Result<Vec<(ScaleResult, ScaleResult)>> {
    streams
        .iter()
        .map(|&n| Ok((scale_one(base, n, "sink")?, scale_one(base, n, "rocelink")?)))
        .collect()
}
