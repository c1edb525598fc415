//! Argument value parsers: every numeric input is range-checked here, before anything
//! starts, with an error that names the value and the range.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest duration any flag takes (about 11.5 days): finite, and far from the
/// overflow of `Duration` arithmetic on a deadline.
pub(crate) const MAX_SECS: f64 = 1e6;

/// Seconds: a finite number in (0, 1e6].
pub(crate) fn secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > MAX_SECS {
        return Err(format!(
            "{s}: seconds must be more than 0 and at most {MAX_SECS}"
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Seconds as `f64`, checked as [`secs`].
pub(crate) fn secs_f64(s: &str) -> Result<f64, String> {
    secs(s).map(|d| d.as_secs_f64())
}

/// A count in `lo..=hi`.
pub(crate) fn usize_in(lo: usize, hi: usize) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |s: &str| match s.parse::<usize>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("{s}: must be a whole number from {lo} to {hi}")),
    }
}

/// A rate (frames per second, Gbit/s): a finite number in (0, 1e5].
pub(crate) fn rate(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() || v <= 0.0 || v > 1e5 {
        return Err(format!("{s}: must be more than 0 and at most 100000"));
    }
    Ok(v)
}

/// A 32-bit number, hex with `0x` or decimal.
pub(crate) fn u32_num(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a 32-bit number (decimal, or hex with 0x)"))
}

/// A 24-bit number (QPN), hex with `0x` or decimal.
pub(crate) fn u24_num(s: &str) -> Result<u32, String> {
    let v = u32_num(s)?;
    if v > 0xFF_FFFF {
        return Err(format!("{s}: a QP number has 24 bits (at most 0xffffff)"));
    }
    Ok(v)
}

/// A frame size in bytes: 1 to 1 GiB.
pub(crate) fn frame_size(s: &str) -> Result<usize, String> {
    let v: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of bytes"))?;
    let max = rocelink_hsb::catalogue::MAX_FRAME;
    if v == 0 || v > max {
        return Err(format!("{s}: a frame is 1 to {max} bytes"));
    }
    Ok(v)
}

/// A link MTU for HSB data: 256 to 9000 bytes (the packet is the MTU less 74 bytes of
/// headers, in 128-byte steps, so anything smaller carries no page).
pub(crate) fn mtu(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|_| format!("{s:?} is not an MTU"))?;
    if !(256..=9000).contains(&v) {
        return Err(format!("{s}: the MTU must be from 256 to 9000 bytes"));
    }
    Ok(v)
}

/// A sensor name of the catalogue.
pub(crate) fn sensor(s: &str) -> Result<rocelink_hsb::catalogue::SensorSpec, String> {
    s.parse()
        .map_err(|e: rocelink_hsb::catalogue::SensorError| e.to_string())
}

/// A file to create or replace: its directory must exist, and it must be absent or a
/// regular file rocelink may write (not a link, a device, a FIFO, a file with other hard
/// links, another user's file in a shared directory). Opens (creates) nothing.
pub(crate) fn out_file(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if p.as_os_str().is_empty() {
        return Err("empty file name".into());
    }
    if p.is_dir() {
        return Err(format!("{s} is a directory"));
    }
    rocelink_io::file::check_output(&p).map_err(|e| e.to_string())?;
    Ok(p)
}

/// Check that a recording may be written to `dir`: a path that does not exist yet or an
/// empty directory, or, with `force`, a directory holding an earlier recording (which is
/// replaced). Creates the directory and proves it writable; writes nothing else.
pub(crate) fn record_dir(dir: &Path, force: bool) -> anyhow::Result<()> {
    rocelink_record::prepare_dir(dir, force).map_err(|e| {
        // the file rules' errors name the directory themselves
        let what = match e {
            rocelink_record::DirError::Own(_) => "--record".to_string(),
            rocelink_record::DirError::NotEmpty(_) => {
                format!("--record {} (--force replaces a recording)", dir.display())
            }
            rocelink_record::DirError::NotARecording => {
                format!("--record {} --force", dir.display())
            }
            _ => format!("--record {}", dir.display()),
        };
        anyhow::Error::new(e).context(what)
    })
}

/// A size in bytes: a number with an optional binary suffix (K, M, G, T; `KiB`… and `KB`…
/// mean the same), at least 1.
pub(crate) fn bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 4096, 64K, 1M, 10G)"))?;
    let shift = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("{s:?}: unknown unit (K, M, G or T)")),
    };
    n.checked_mul(1 << shift)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("{s}: a size from 1 byte to 16 EiB"))
}

/// A 64-bit number, hex with `0x` or decimal.
pub(crate) fn u64_num(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a 64-bit number (decimal, or hex with 0x)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_out_of_range_are_refused_not_panicked() {
        for s in ["-1", "NaN", "inf", "1e300", "0", "x", ""] {
            assert!(secs(s).is_err(), "secs {s}");
        }
        assert_eq!(secs("0.5"), Ok(Duration::from_millis(500)));
        for s in ["0", "-3", "NaN", "1e9"] {
            assert!(rate(s).is_err(), "rate {s}");
        }
        for s in ["0", "10", "100", "70000"] {
            assert!(mtu(s).is_err(), "mtu {s}");
        }
        assert_eq!(mtu("1500"), Ok(1500));
        for s in ["0", "1000000000000", "4294967296"] {
            assert!(frame_size(s).is_err(), "frame size {s}");
        }
        assert!(u24_num("0x1000000").is_err());
        assert_eq!(u24_num("0x11"), Ok(0x11));
        assert!(u32_num("0x100000000").is_err());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}") {
            let _ = secs(&s);
            let _ = rate(&s);
            let _ = u32_num(&s);
            let _ = u24_num(&s);
            let _ = frame_size(&s);
            let _ = mtu(&s);
            let _ = sensor(&s);
        }
    }

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_the_rest() {
        assert_eq!(bytes("4096"), Ok(4096));
        assert_eq!(bytes("64K"), Ok(64 << 10));
        assert_eq!(bytes("1M"), Ok(1 << 20));
        assert_eq!(bytes("10GiB"), Ok(10 << 30));
        assert_eq!(bytes("2gb"), Ok(2 << 30));
        assert_eq!(bytes(" 3T "), Ok(3 << 40));
        for bad in ["", "0", "12X", "-1", "1.5G", "99999999999T", "G"] {
            assert!(bytes(bad).is_err(), "{bad}");
        }
        assert_eq!(u64_num("0xffffffffffffffc0"), Ok(0xffff_ffff_ffff_ffc0));
        assert!(u64_num("0x1_0000_0000_0000_0000").is_err());
    }
}

/// `--pfc` and the link rate its quanta are counted at, for a role with `--xdp`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PfcArgs {
    /// Priority flow control (802.1Qbb) on the --xdp port: honour the peer's pauses when
    /// sending (a paused class's packets wait, bounded, until it may go) and pause the
    /// peer's arriving classes when a receive ring is half full, resuming at a quarter.
    #[arg(long, requires = "xdp")]
    pub(crate) pfc: bool,
    /// The link's rate in Gbit/s, for --pfc: one pause quantum is 512 bit times at it.
    #[arg(long, default_value = "10", requires = "pfc", value_parser = rate)]
    pub(crate) link_gbps: f64,
}

impl PfcArgs {
    /// The port's PFC setting (`None` without --pfc).
    pub(crate) fn config(&self) -> Option<rocelink_runtime::xdp::PfcConfig> {
        self.pfc
            .then(|| rocelink_runtime::xdp::PfcConfig::new(self.link_gbps))
    }
}

/// The name a closed set's value has on the command line (and in `--json`).
pub(crate) fn value_name<T: clap::ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}
