//! `rocelink` — one binary, thin over the libraries.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod decode;
mod demo;
mod pingpong;

#[derive(Parser, Debug)]
#[command(
    name = "rocelink",
    version,
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
    /// Build a synthetic HSB camera stream with the wire crate, capture it to a pcap and
    /// decode it back with every check (ICRC, PSN continuity, frame CRC).
    Demo {
        /// Where to write the capture.
        #[arg(long, default_value = "rocelink-demo.pcap")]
        pcap: PathBuf,
        /// Frames to generate.
        #[arg(long, default_value_t = 4)]
        frames: u32,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Decode(args) => decode::run(&args),
        Cmd::Demo { pcap, frames } => demo::run(&pcap, frames),
        Cmd::Pingpong(args) => pingpong::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rocelink: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
