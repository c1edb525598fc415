//! `send-audio`: sensor TX, as HSB's audio players do it — a 24-bit WAV file (or any
//! file's bytes with `--raw`) sent to the device's I2S output in UC SENDs to QP 2.

use crate::args;
use crate::hsb::{DeviceArgs, control};
use crate::stop::StopFlag;
use anyhow::{Context, Result, bail};
use rocelink_hsb::audio::{DEFAULT_CHUNK, Wav};
use rocelink_hsb::host::sensor_tx::{self, SensorTx, SensorTxConfig, TxFormat};
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub(crate) struct SendAudioArgs {
    #[command(flatten)]
    dev: DeviceArgs,
    /// A 24-bit PCM WAV file (or, with --raw, any file).
    file: PathBuf,
    /// Send the file's bytes as they are: no WAV parsing, no 4-byte sample slots, no
    /// pacing, and a short last packet instead of a zero-padded one.
    #[arg(long)]
    raw: bool,
    /// Bytes per packet (HSB's --chunk-size).
    #[arg(long, default_value_t = DEFAULT_CHUNK, value_parser = args::usize_in(1, 4096))]
    chunk: usize,
    /// Destination QP: the device sends QP q to sensor TX port q/2 - 1 (2: the I2S output).
    #[arg(long, default_value_t = rocelink_wire::hsb::stx::AUDIO_QP, value_parser = args::u24_num)]
    qp: u32,
    /// How the samples are packed.
    #[arg(long, value_enum, default_value_t = AudioFormat::Roce)]
    format: AudioFormat,
    /// Send the file this many times; 0: until Ctrl-C (HSB's players loop forever).
    #[arg(long, default_value_t = 1)]
    repeat: u64,
    /// Do not pace at the WAV's sample rate: as fast as the socket takes them.
    #[arg(long)]
    fast: bool,
    /// Skip the I2S set-up writes (clock gate, APB control, TX FIFO start).
    #[arg(long)]
    no_setup: bool,
    /// Buffers in flight (HSB's --queue-size).
    #[arg(long, default_value_t = 3, value_parser = args::usize_in(1, 1024))]
    queue: usize,
    /// Local address to send from (default: the one routing to the device).
    #[arg(long)]
    local: Option<IpAddr>,
    /// One JSON object at the end.
    #[arg(long)]
    json: bool,
    /// Print nothing but errors.
    #[arg(long)]
    quiet: bool,
}

/// How the samples are packed (`--format`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AudioFormat {
    /// UC SEND with an exact ICRC (HSB's audio_player.py).
    Roce,
    /// The hand-built packet of HSB's linux_audio_player.py (CRC-32 trailer, no ICRC).
    Linux,
}

/// The largest file send-audio takes (over 1.5 hours of 8-channel 48 kHz 24-bit audio).
const MAX_FILE: u64 = 1 << 30;

/// What to send: the file as it is (`--raw`), or a WAV file's samples as I2S wants them,
/// with their byte rate (unless `--fast`) and a description.
fn samples(a: &SendAudioArgs, bytes: Vec<u8>) -> Result<(Vec<u8>, Option<u64>, String)> {
    if a.raw {
        return Ok((bytes, None, "raw".to_owned()));
    }
    let (s, w) = Wav::parse(&bytes)
        .and_then(|w| w.i2s().map(|s| (s, w)))
        .with_context(|| format!("{} (use --raw to send any file as it is)", a.file.display()))?;
    let what = format!(
        "{} Hz x {} ch 24-bit, {:.2} s",
        w.sample_rate,
        w.channels,
        s.len() as f64 / w.i2s_bytes_per_second() as f64
    );
    Ok((s, (!a.fast).then(|| w.i2s_bytes_per_second()), what))
}

pub(crate) fn send_audio(a: &SendAudioArgs) -> Result<ExitCode> {
    let IpAddr::V4(device) = a.dev.device else {
        bail!("--device {}: HSB devices are IPv4", a.dev.device);
    };
    // the whole file is held in memory (and sent over and over): bounded, so a device
    // or a pipe given by mistake is refused rather than read without end
    let bytes = rocelink_io::file::read_bounded(&a.file, MAX_FILE)
        .with_context(|| format!("cannot read {}", a.file.display()))?;
    // everything is checked before the first write to the device
    let (stream, rate, what) = samples(a, bytes)?;
    if stream.is_empty() {
        bail!("{}: no samples to send", a.file.display());
    }
    let cfg = tx_config(a, device);
    let mut tx = SensorTx::connect(&cfg)?;
    if !a.no_setup {
        let mut ctl = control(&a.dev)?;
        sensor_tx::configure_i2s(&mut ctl)
            .with_context(|| format!("I2S set-up of {device} (skip it with --no-setup)"))?;
    }
    let stop = StopFlag::install()?;
    let t0 = Instant::now();
    let st = sensor_tx::play(
        &mut tx,
        &stream,
        a.chunk,
        !a.raw,
        a.repeat,
        rate,
        &stop.stopper(),
    )
    .with_context(|| format!("sending to {device}:{}", cfg.port))?;
    report(a, device, &what, &st, t0.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// Where and how the samples go.
fn tx_config(a: &SendAudioArgs, device: Ipv4Addr) -> SensorTxConfig {
    SensorTxConfig {
        format: match a.format {
            AudioFormat::Linux => TxFormat::Linux,
            AudioFormat::Roce => TxFormat::Roce,
        },
        qp: a.qp,
        max_chunk: a.chunk,
        queue: a.queue,
        local: a.local,
        ..SensorTxConfig::new(device)
    }
}

/// What was sent: JSON, or a line unless `--quiet`.
fn report(a: &SendAudioArgs, device: Ipv4Addr, what: &str, st: &sensor_tx::PlayStats, secs: f64) {
    if a.json {
        println!(
            "{}",
            json!({"device": device.to_string(), "qp": a.qp, "format": crate::args::value_name(&a.format),
                   "file": a.file.display().to_string(), "packets": st.packets,
                   "bytes": st.bytes, "passes": st.passes, "seconds": secs,
                   "stopped": st.stopped})
        );
    } else if !a.quiet {
        println!(
            "sent {} ({what}) to {device} QP {}: {} packets, {} bytes, {} pass(es) in {secs:.2} s{}",
            a.file.display(),
            a.qp,
            st.packets,
            st.bytes,
            st.passes,
            if st.stopped { " (stopped)" } else { "" }
        );
    }
}
