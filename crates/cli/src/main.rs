//! `rocelink` — one binary, thin over the libraries.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod args;
mod audio;
mod bench;
mod bench_perf;
mod bench_scale;
mod bench_shots;
mod bench_verbs;
mod board;
mod decode;
mod examples;
mod hsb;
mod ims;
mod out;
mod perf;
mod perf_report;
mod pingpong;
mod plot;
mod receive;
mod record;
mod reference;
mod shots;
mod sinks;
mod stats;
mod stop;
mod trigger;
mod verbs;
mod view;

/// `rocelink --version`: the release, the commit, and the protocol versions it speaks.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("ROCELINK_COMMIT"),
    ")\nRoCE v2 (InfiniBand transport over UDP 4791); HSB IP 0x2606 (the immediate layout of 0x2510 selectable); IMS streaming protocol 1.1; perftest exchange 6.27"
);

#[derive(Parser, Debug)]
#[command(
    name = "rocelink",
    version = VERSION,
    about = "RoCE v2 in software: HSB/IMS device emulation, verified receive, decode"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Dissect a pcap/pcapng file, verifying every RoCE v2 ICRC.
    Decode(decode::Args),
    /// A counterpart of rdma-core's ibv_{rc,uc,ud}_pingpong over rocelink's user-space RoCE.
    Pingpong(pingpong::Args),
    /// perftest's ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat, ib_read_lat, ib_send_lat
    /// (server without SERVER, client with it); either side may be perftest itself.
    Perf(perf::Args),
    /// Unmodified RDMA programs (perftest, rdma-core's tools, …) over rocelink:
    /// librocelink_verbs.so preloaded, one device per address.
    Verbs(verbs::Args),
    /// Summarise a recording (frames, drops, CRC failures, rate over time).
    Inspect(record::InspectArgs),
    /// Export one recorded frame as raw, npy, pgm or png.
    Export(record::ExportArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Emulator and receiver in one process over loopback: an HSB camera stream received
    /// and verified frame by frame.
    Demo(receive::DemoArgs),
    /// Emulate a Holoscan Sensor Bridge device (ECB, BOOTP, sensor, RoCE packetizer).
    Emulate(hsb::EmulateArgs),
    /// List HSB devices that announce themselves (BOOTP on UDP 12267).
    Enumerate(hsb::EnumerateArgs),
    /// Assign an IP to the HSB device with MAC (BOOTP reply).
    SetIp(hsb::SetIpArgs),
    /// Read device registers over ECB.
    Read(hsb::ReadArgs),
    /// Write device registers over ECB.
    Write(hsb::WriteArgs),
    /// An I2C transaction on the device's bus, through its sequencer (as HSB's host drives
    /// cameras).
    I2c(board::I2cArgs),
    /// Reset the device and wait until it announces itself again.
    Reset(board::ResetArgs),
    /// Sensor TX: play a 24-bit WAV file (or send any file with --raw) to the device's
    /// I2S output, as HSB's audio players do (UC SEND to QP 2).
    SendAudio(audio::SendAudioArgs),
    /// Configure an HSB device and receive its frames, verified.
    Receive(Box<receive::ReceiveArgs>),
    /// The IMS streaming protocol: a buffer unit (serve) and a worker (send).
    #[command(subcommand)]
    Ims(ims::ImsCmd),
    /// Emulate an ultrasound probe: shots of 12-bit samples as UD SENDs, on trigger
    /// commands or its own periodic trigger.
    Probe(shots::ProbeArgs),
    /// Receive ultrasound shots (contiguous, verified, recorded or dropped whole), triggering
    /// the probe.
    Shots(shots::ShotsArgs),
    /// Trigger-to-shot round trip per shot size: min/median/p99/max and a histogram.
    Trigger(trigger::TriggerArgs),
    /// Network counters of a running rocelink process (its control socket), as the table
    /// printed at exit, JSON or Prometheus text.
    Stats(stats::StatsArgs),
    /// Browse a recording in the browser: every frame as a picture (or npy), damaged frames
    /// marked, the rate per second.
    View(view::ViewDirArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(reference::CompletionsArgs),
    /// Write a man page for every command into a directory.
    Man(reference::ManArgs),
    /// Print the command reference as Markdown (docs/commands.md).
    #[command(hide = true)]
    Reference,
}

fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    rocelink_io::signal::default_sigpipe();
    let matches = examples::with_examples(Cli::command()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let result = match cli.cmd {
        Cmd::Decode(args) => decode::run(&args),
        Cmd::Demo(a) => receive::demo(&a),
        Cmd::Bench(b) => bench::run(&b),
        Cmd::Inspect(a) => record::inspect(&a),
        Cmd::Export(a) => record::export(&a),
        Cmd::Emulate(a) => hsb::emulate(&a),
        Cmd::Enumerate(a) => hsb::enumerate(&a),
        Cmd::SetIp(a) => hsb::set_ip(&a),
        Cmd::Read(a) => hsb::read(&a),
        Cmd::Write(a) => hsb::write(&a),
        Cmd::Receive(a) => receive::receive(&a),
        Cmd::I2c(a) => board::i2c(&a),
        Cmd::Reset(a) => board::reset(&a),
        Cmd::SendAudio(a) => audio::send_audio(&a),
        Cmd::Pingpong(args) => pingpong::run(&args),
        Cmd::Verbs(a) => verbs::run(&a),
        Cmd::Perf(a) => stop::StopFlag::install().and_then(|s| perf::run(&a, &s)),
        Cmd::Ims(c) => ims::run(&c),
        Cmd::Probe(a) => shots::probe(&a),
        Cmd::Shots(a) => shots::shots(&a),
        Cmd::Trigger(a) => trigger::trigger(&a),
        Cmd::Stats(a) => stop::StopFlag::install().and_then(|s| stats::stats(&a, &s)),
        Cmd::View(a) => view::view_dir(&a),
        Cmd::Completions(a) => reference::completions(&a),
        Cmd::Man(a) => reference::man(&a),
        Cmd::Reference => reference::to_stdout(reference::markdown().as_bytes()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rocelink: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_names_what_it_speaks() {
        let dev = rocelink_hsb::device::DeviceConfig::new(std::net::Ipv4Addr::LOCALHOST);
        let hsb = format!("HSB IP {:#06x}", dev.hsb_ip_version);
        assert!(super::VERSION.contains(&hsb), "{}", super::VERSION);
        let ims = format!(
            "IMS streaming protocol {}.{}",
            rocelink_ims::VERSION.0,
            rocelink_ims::VERSION.1
        );
        assert!(super::VERSION.contains(&ims));
        assert!(super::VERSION.contains(rocelink_wire::perftest::VERSION));
    }
}
