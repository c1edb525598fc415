//! Board commands and bring-up: `i2c` (raw transactions through the sequencer), `reset`,
//! and the camera/PTP bring-up `receive` runs before its frames.

use crate::args;
use crate::hsb::{DeviceArgs, control};
use anyhow::{Context, Result, bail};
use rocelink_hsb::catalogue::SensorSpec;
use rocelink_hsb::host::board;
use rocelink_hsb::host::i2c::I2c;
use rocelink_hsb::regs::i2c::CAM_BUS;
use rocelink_hsb::sensor::Imx274Mode;
use serde_json::json;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// Bytes given as hex on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HexBytes(Vec<u8>);

/// Bytes as `30,04,02`, `3004 02` or `0x30 0x04`: hex, two digits a byte.
fn hex_bytes(s: &str) -> Result<HexBytes, String> {
    let digits: String = s
        .split([',', ' ', ':'])
        .map(|t| t.trim_start_matches("0x").trim_start_matches("0X"))
        .collect();
    if !digits.len().is_multiple_of(2)
        || digits.is_empty()
        || !digits.chars().all(|c| c.is_ascii_hexdigit())
    {
        return Err(format!(
            "{s:?}: expected hex bytes, two digits each (30,04,02 or 300402)"
        ));
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&digits[i..i + 2], 16)
                .map_err(|_| format!("{s:?}: {:?} is not a hex byte", &digits[i..i + 2]))
        })
        .collect::<Result<Vec<u8>, String>>()
        .map(HexBytes)
}

fn i2c_address(s: &str) -> Result<u8, String> {
    let v = args::u32_num(s)?;
    u8::try_from(v)
        .ok()
        .filter(|a| *a <= 0x7F)
        .ok_or_else(|| format!("{s}: I2C addresses are 7-bit (0..=0x7f)"))
}

/// `--camera`: the camera brought up over I2C.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CameraChoice {
    /// Sony IMX274, as on HSB's boards.
    Imx274,
}

#[derive(clap::Args, Debug)]
pub(crate) struct I2cArgs {
    #[command(flatten)]
    dev: DeviceArgs,
    /// I2C bus (0: board, 1: cameras).
    #[arg(long, default_value_t = CAM_BUS, value_parser = clap::value_parser!(u32).range(0..8))]
    bus: u32,
    /// 7-bit peripheral address (0x1a: IMX274, 0x70: the camera expander).
    #[arg(value_parser = i2c_address)]
    address: u8,
    /// Bytes to write first, hex (an IMX274 register write: 3004,02).
    #[arg(long, value_parser = hex_bytes)]
    write: Option<HexBytes>,
    /// Bytes to read after the write.
    #[arg(long, default_value_t = 0, value_parser = args::usize_in(0, 256))]
    read: usize,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

pub(crate) fn i2c(a: &I2cArgs) -> Result<ExitCode> {
    let write = a.write.clone().map(|h| h.0).unwrap_or_default();
    if write.len() > 256 {
        bail!(
            "--write of {} bytes: one transaction writes at most 256",
            write.len()
        );
    }
    if write.is_empty() && a.read == 0 {
        bail!("nothing to do: give --write BYTES and/or --read N");
    }
    let mut ctl = control(&a.dev)?;
    let mut bus = I2c::new(&mut ctl, a.bus)
        .with_context(|| format!("device {} did not answer ECB", a.dev.device))?;
    let got = bus.transaction(a.address, &write, a.read)?;
    let hex: Vec<String> = got.iter().map(|b| format!("{b:02x}")).collect();
    if a.json {
        println!(
            "{}",
            json!({"bus": a.bus, "address": format!("{:#04x}", a.address),
                   "wrote": write.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>(),
                   "read": hex})
        );
    } else if !got.is_empty() {
        println!("{}", hex.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub(crate) struct ResetArgs {
    #[command(flatten)]
    dev: DeviceArgs,
    /// How long to wait for the device to announce itself again.
    #[arg(long, default_value = "30", value_parser = args::secs)]
    timeout: Duration,
    /// Where to listen for its enumeration (BOOTP).
    #[arg(long, default_value = "0.0.0.0:12267")]
    bind: SocketAddr,
}

pub(crate) fn reset(a: &ResetArgs) -> Result<ExitCode> {
    let listener = rocelink_hsb::host::enumerate::listener(a.bind)
        .with_context(|| format!("cannot listen for enumeration on {}", a.bind))?;
    let mut ctl = control(&a.dev)?;
    ctl.read(rocelink_hsb::regs::HSB_IP_VERSION)
        .with_context(|| format!("device {} did not answer ECB", a.dev.device))?;
    let took = board::reset(&mut ctl, &listener, a.timeout)?;
    let version = ctl.read(rocelink_hsb::regs::HSB_IP_VERSION)?;
    println!(
        "{} reset; back after {} ms (HSB IP {:#06x})",
        a.dev.device,
        took.as_millis(),
        version & 0xFFFF
    );
    Ok(ExitCode::SUCCESS)
}

/// A camera mode by HSB's number or name.
fn mode(s: &str) -> Result<Imx274Mode, String> {
    rocelink_hsb::imx274::parse_mode(s)
        .ok_or_else(|| format!("{s:?}: IMX274 modes are 0/4k-raw10, 1/1080p-raw10, 2/4k-raw12"))
}

/// What `receive` brings up before its frames.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct BringUp {
    /// Configure and start this camera over I2C first, as HSB's player does (camera N of
    /// the board feeds virtual port N): imx274.
    #[arg(long, value_enum)]
    pub(crate) camera: Option<CameraChoice>,
    /// IMX274 mode: 0/4k-raw10 (HSB's default), 1/1080p-raw10, 2/4k-raw12.
    #[arg(long, requires = "camera", value_parser = mode)]
    mode: Option<Imx274Mode>,
    /// Set up PTP and wait until the board reports synchronised before receiving.
    #[arg(long)]
    pub(crate) ptp: bool,
    /// How long to wait for PTP.
    #[arg(long, default_value = "10", value_parser = args::secs)]
    ptp_timeout: Duration,
}

impl BringUp {
    /// The sensor the camera streams, when one is brought up.
    pub(crate) fn sensor(&self) -> Option<SensorSpec> {
        self.camera
            .as_ref()
            .map(|_| SensorSpec::Imx274(self.mode.unwrap_or(Imx274Mode::P2160Raw10)))
    }

    /// What the session brings up.
    pub(crate) fn session(&self) -> rocelink_hsb::host::bring_up::BringUp {
        rocelink_hsb::host::bring_up::BringUp {
            ptp: self.ptp.then_some(self.ptp_timeout),
            camera: self
                .camera
                .as_ref()
                .map(|_| self.mode.unwrap_or(Imx274Mode::P2160Raw10)),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_bytes_forms() {
        use super::HexBytes;
        assert_eq!(
            super::hex_bytes("30,04,02"),
            Ok(HexBytes(vec![0x30, 0x04, 0x02]))
        );
        assert_eq!(
            super::hex_bytes("300402"),
            Ok(HexBytes(vec![0x30, 0x04, 0x02]))
        );
        assert_eq!(
            super::hex_bytes("0x30 0x04"),
            Ok(HexBytes(vec![0x30, 0x04]))
        );
        assert!(super::hex_bytes("304").is_err());
        assert!(super::hex_bytes("zz").is_err());
        assert!(super::hex_bytes("é1").is_err());
        assert!(super::i2c_address("0x80").is_err());
        assert_eq!(super::i2c_address("0x1a"), Ok(0x1A));
    }
}
