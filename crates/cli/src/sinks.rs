//! The output flags of `receive` and `demo`, checked before anything starts, and the sinks
//! they open (`rocelink_hsb_host`'s recorder and snapshot, and the terminal: per-frame lines
//! or JSON on stdout, the progress line on stderr).

use crate::args;
use anyhow::{Context, Result, bail};
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb_host::{
    Delivered, FrameSink, RecordSink, SessionError, SnapshotSink, ViewSink, frame_json, frame_line,
};
use std::path::PathBuf;

/// What the frame loop writes to the terminal and to disk.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Output {
    /// One JSON object per frame on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// No per-frame lines, progress or banner (errors and the recording summary still go
    /// to stderr).
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Record frames (with their verdicts) to this directory (new or empty).
    #[arg(long)]
    pub(crate) record: Option<PathBuf>,
    /// Replace the recording already in the --record directory.
    #[arg(long, requires = "record")]
    pub(crate) force: bool,
    /// Stop recording after this many bytes.
    #[arg(long, requires = "record", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_bytes: Option<u64>,
    /// Stop recording after this many frames.
    #[arg(long, requires = "record", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_frames: Option<u64>,
    /// Keep the latest good frame as a PNG here (needs an image sensor).
    #[arg(long, value_parser = args::out_file)]
    pub(crate) snapshot: Option<PathBuf>,
    /// The virtual port these frames are from, when there are several.
    #[arg(skip)]
    pub(crate) vp: Option<u32>,
}

pub(crate) use rocelink_hsb_host::session::suffixed;

/// The sinks, built after every input was checked.
pub(crate) struct Sinks {
    pub(crate) rec: Option<RecordSink>,
    pub(crate) snap: Option<SnapshotSink>,
    pub(crate) view: Option<ViewSink>,
    pub(crate) term: Terminal,
}

/// The sinks of one virtual port as one: each frame to every sink in order; at the end
/// every sink finished (the recording made durable) and the progress line cleared.
impl FrameSink for Sinks {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        for s in self.list() {
            s.frame(d)?;
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<(), SessionError> {
        self.term.done();
        rocelink_hsb_host::finish(&mut self.list())
    }
}

impl Sinks {
    /// Every sink, for the frame loop.
    pub(crate) fn list(&mut self) -> Vec<&mut dyn FrameSink> {
        let mut v: Vec<&mut dyn FrameSink> = Vec::new();
        if let Some(r) = self.rec.as_mut() {
            v.push(r);
        }
        if let Some(s) = self.snap.as_mut() {
            v.push(s);
        }
        if let Some(s) = self.view.as_mut() {
            v.push(s);
        }
        v.push(&mut self.term);
        v
    }
}

impl Output {
    /// Check the flags against the sensor and the disk, before anything starts.
    pub(crate) fn check(&self, sensor: Option<&SensorSpec>) -> Result<()> {
        if self.snapshot.is_some() && sensor.and_then(SensorSpec::image).is_none() {
            bail!(
                "--snapshot needs an image sensor (--sensor imx274-… or coe-raw10:WxH), not {}",
                sensor.map_or("none".to_string(), |s| s.to_string())
            );
        }
        if let Some(d) = &self.record {
            args::record_dir(d, self.force)?;
        }
        Ok(())
    }

    /// The flags for virtual port `vp` of several: its recording in `DIR/vpN`, its snapshot
    /// in `NAME-vpN.EXT`, its frames tagged with `"vp"`.
    pub(crate) fn for_vp(&self, vp: u32) -> Output {
        let mut o = self.clone();
        o.record = self.record.as_ref().map(|d| d.join(format!("vp{vp}")));
        o.snapshot = self.snapshot.as_ref().map(|p| suffixed(p, vp));
        o.vp = Some(vp);
        o
    }

    /// The sinks these flags ask for, publishing to `view` too if given.
    pub(crate) fn open(
        &self,
        sensor: Option<&SensorSpec>,
        frame_size: usize,
        view: Option<&rocelink_view::Live>,
    ) -> Result<Sinks> {
        let rec = match &self.record {
            Some(dir) => {
                let mut rc = RecordSink::config(dir.clone(), sensor, frame_size);
                rc.max_bytes = self.max_bytes;
                rc.max_frames = self.max_frames;
                Some(RecordSink::start(rc).with_context(|| format!("--record {}", dir.display()))?)
            }
            None => None,
        };
        let snap = match (&self.snapshot, sensor) {
            (Some(p), Some(s)) => Some(SnapshotSink::new(p.clone(), s, frame_size)),
            _ => None,
        };
        Ok(Sinks {
            rec,
            snap,
            view: view.map(|l| ViewSink::new(l.clone(), self.vp.unwrap_or(0))),
            term: Terminal::new(self.json, self.quiet, self.vp),
        })
    }
}

/// The terminal: one line or JSON object per frame on stdout, and a progress line (rate,
/// verdicts, losses) on stderr when it is a terminal.
pub(crate) struct Terminal {
    json: bool,
    quiet: bool,
    vp: Option<u32>,
    pb: indicatif::ProgressBar,
}

impl Terminal {
    fn new(json: bool, quiet: bool, vp: Option<u32>) -> Terminal {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        if json || quiet {
            pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        if vp.is_some() {
            // several ports print from several threads: lines only
            pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        Terminal {
            json,
            quiet,
            vp,
            pb,
        }
    }

    /// Take the progress line off the screen.
    pub(crate) fn done(&self) {
        self.pb.finish_and_clear();
    }
}

impl FrameSink for Terminal {
    fn frame(&mut self, d: &Delivered<'_>) -> Result<(), SessionError> {
        let f = d.report;
        if self.json {
            let mut j = frame_json(f);
            if let (Some(vp), Some(o)) = (self.vp, j.as_object_mut()) {
                o.insert("vp".into(), vp.into());
            }
            println!("{j}");
        } else if self.quiet {
        } else if let Some(vp) = self.vp {
            println!("vp {vp} {}", frame_line(f));
        } else if self.pb.is_hidden() {
            println!("{}", frame_line(f));
        } else {
            self.pb.println(frame_line(f));
        }
        let secs = d.elapsed.as_secs_f64().max(1e-9);
        let s = d.stats;
        self.pb.set_message(format!(
            "{:.1} fps {:.2} Gbit/s | {} good {} damaged | {} packets dropped | {} ICRC errors",
            s.frames as f64 / secs,
            s.bytes as f64 * 8.0 / secs / 1e9,
            s.good,
            s.damaged,
            s.dropped_packets,
            s.icrc_errors
        ));
        self.pb.tick();
        Ok(())
    }
}

/// One line on an AF_XDP port: where, which mode, what came through it, what the kernel
/// dropped.
pub(crate) fn xdp_summary(x: &rocelink_runtime::xdp::XdpPort) -> String {
    let (c, k) = x.xsk_stats();
    let s = x.stats();
    let i = x.iface_stats();
    let (ifname, queue) = x.bound();
    let dropped = k.map_or(0, |k| k.rx_dropped + k.rx_ring_full);
    format!(
        "AF_XDP on {ifname} queue {queue} ({}): {} frames, {} UDP datagrams with their IPv4 header \
         (each ICRC checked over the header as received), {} dropped by the kernel, {} to no port",
        if x.zero_copy() {
            "zero-copy"
        } else {
            "copy mode"
        },
        c.rx_frames,
        i.udp_rx,
        dropped,
        s.no_port
    )
}

/// One line per PFC class that saw anything on an AF_XDP port (none without PFC).
pub(crate) fn pfc_lines(role: &str, x: &rocelink_runtime::xdp::XdpPort) {
    let Some(stats) = x.pfc_stats() else { return };
    let (ifname, queue) = x.bound();
    let mut any = false;
    for (c, s) in stats.iter().enumerate() {
        if s.is_idle() {
            continue;
        }
        any = true;
        eprintln!(
            "rocelink {role}: PFC class {c} on {ifname} queue {queue}: {} pauses and {} resumes received, paused {:.1} ms, {} packets held, {} dropped; {} pauses and {} resumes sent, peer paused {:.1} ms",
            s.pauses_in,
            s.resumes_in,
            s.paused.as_secs_f64() * 1e3,
            s.held,
            s.dropped,
            s.pauses_out,
            s.resumes_out,
            s.asked.as_secs_f64() * 1e3
        );
    }
    if !any {
        eprintln!("rocelink {role}: PFC on {ifname} queue {queue}: no pause sent or received");
    }
}
