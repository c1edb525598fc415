//! The sensor catalogue: every name `--sensor` takes, parsed once and shared by the
//! emulator, the receiver, the recorder and export.
//!
//! ```
//! use rocelink_hsb::catalogue::SensorSpec;
//! let s: SensorSpec = "imx274-1080p-raw10".parse().unwrap();
//! assert_eq!(s.frame_len(), Some(2_611_376));
//! assert_eq!(s.image().unwrap().width, 1920);
//! assert!("coe-raw10:4294967295x4294967295".parse::<SensorSpec>().is_err());
//! ```

use crate::sensor::{Imx274Mode, Sensor, coe_bytes_per_line};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The largest frame any sensor of the catalogue, `--frame-size` or a recording may have
/// (1 GiB): far above any real sensor, and small enough to allocate.
pub const MAX_FRAME: usize = 1 << 30;
/// The largest CoE image side in pixels.
pub const MAX_SIDE: u32 = 16_384;

/// A sensor by name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SensorSpec {
    /// `pattern`: deterministic bytes, as many as the host's window holds.
    Pattern,
    /// `imx274-1080p-raw10`, `imx274-4k-raw10`, `imx274-4k-raw12`.
    Imx274(Imx274Mode),
    /// `ultrasound`: 128 channels × 4096 12-bit samples.
    Ultrasound,
    /// `coe-raw10:WxH` / `coe-raw12:WxH`: a Camera-over-Ethernet packed image.
    Coe {
        /// 10 or 12.
        bits: u8,
        /// Pixels per line.
        width: u32,
        /// Lines.
        height: u32,
    },
    /// `file:PATH`: a file's bytes replayed, `--frame-size` at a time.
    File(PathBuf),
}

/// Where the active pixels of an image sensor's frame are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGeometry {
    /// `csi-raw10`, `csi-raw12`, `coe-raw10` or `coe-raw12` (the recording layout).
    pub layout: &'static str,
    /// Pixels per line.
    pub width: u32,
    /// Lines.
    pub height: u32,
    /// Bits per pixel.
    pub bits: u32,
    /// Offset of the first active line.
    pub start_byte: u64,
    /// Bytes from one line to the next.
    pub bytes_per_line: u64,
}

/// Why a sensor name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SensorError(String);

const NAMES: &str = "pattern, imx274-1080p-raw10, imx274-4k-raw10, imx274-4k-raw12, ultrasound, \
                     coe-raw10:WxH, coe-raw12:WxH, file:PATH";

impl FromStr for SensorSpec {
    type Err = SensorError;
    fn from_str(s: &str) -> Result<SensorSpec, SensorError> {
        Ok(match s {
            "pattern" => SensorSpec::Pattern,
            "imx274-1080p-raw10" => SensorSpec::Imx274(Imx274Mode::P1080Raw10),
            "imx274-4k-raw10" => SensorSpec::Imx274(Imx274Mode::P2160Raw10),
            "imx274-4k-raw12" => SensorSpec::Imx274(Imx274Mode::P2160Raw12),
            "ultrasound" => SensorSpec::Ultrasound,
            _ => {
                if let Some(p) = s.strip_prefix("file:") {
                    if p.is_empty() {
                        return Err(SensorError("file: needs a path (file:PATH)".into()));
                    }
                    return Ok(SensorSpec::File(PathBuf::from(p)));
                }
                let Some((packing, dims)) = s.split_once(':') else {
                    return Err(SensorError(format!("unknown sensor {s:?} ({NAMES})")));
                };
                let bits = match packing {
                    "coe-raw10" => 10,
                    "coe-raw12" => 12,
                    _ => return Err(SensorError(format!("unknown sensor {s:?} ({NAMES})"))),
                };
                let side = |v: &str| -> Result<u32, SensorError> {
                    match v.parse::<u32>() {
                        Ok(n) if (2..=MAX_SIDE).contains(&n) && n % 2 == 0 => Ok(n),
                        _ => Err(SensorError(format!(
                            "{s:?}: width and height must be even numbers from 2 to {MAX_SIDE}"
                        ))),
                    }
                };
                let (w, h) = dims.split_once('x').ok_or_else(|| {
                    SensorError(format!("{s:?}: expected {packing}:WIDTHxHEIGHT"))
                })?;
                SensorSpec::Coe {
                    bits,
                    width: side(w)?,
                    height: side(h)?,
                }
            }
        })
    }
}

impl fmt::Display for SensorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SensorSpec::Pattern => f.write_str("pattern"),
            SensorSpec::Imx274(Imx274Mode::P1080Raw10) => f.write_str("imx274-1080p-raw10"),
            SensorSpec::Imx274(Imx274Mode::P2160Raw10) => f.write_str("imx274-4k-raw10"),
            SensorSpec::Imx274(Imx274Mode::P2160Raw12) => f.write_str("imx274-4k-raw12"),
            SensorSpec::Ultrasound => f.write_str("ultrasound"),
            SensorSpec::Coe {
                bits,
                width,
                height,
            } => write!(f, "coe-raw{bits}:{width}x{height}"),
            SensorSpec::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

impl SensorSpec {
    /// The frame size this sensor implies (`None`: pattern and file replay, sized by the
    /// host's window or `--frame-size`).
    pub fn frame_len(&self) -> Option<usize> {
        match self {
            SensorSpec::Imx274(m) => Some(m.frame_len()),
            SensorSpec::Ultrasound => Some(128 * 4096 * 2),
            SensorSpec::Coe { height, .. } => self
                .image()
                .map(|g| g.bytes_per_line as usize * *height as usize),
            SensorSpec::Pattern | SensorSpec::File(_) => None,
        }
    }

    /// The image layout, for image sensors.
    pub fn image(&self) -> Option<ImageGeometry> {
        match *self {
            SensorSpec::Imx274(m) => {
                let (w, h, bits) = m.geometry();
                Some(ImageGeometry {
                    layout: if bits == 10 { "csi-raw10" } else { "csi-raw12" },
                    width: w as u32,
                    height: h as u32,
                    bits: bits as u32,
                    start_byte: m.start_byte() as u64,
                    bytes_per_line: m.bytes_per_line() as u64,
                })
            }
            SensorSpec::Coe {
                bits,
                width,
                height,
            } => Some(ImageGeometry {
                layout: if bits == 10 { "coe-raw10" } else { "coe-raw12" },
                width,
                height,
                bits: u32::from(bits),
                start_byte: 0,
                bytes_per_line: coe_bytes_per_line(width as usize, usize::from(bits)) as u64,
            }),
            _ => None,
        }
    }

    /// The emulator's frame source. `frame_size` is needed by file replay (and bounded by
    /// [`MAX_FRAME`]); CoE images are received and recorded, and emulated by replaying a
    /// file of packed frames.
    pub fn source(&self, frame_size: Option<usize>) -> Result<Sensor, SensorError> {
        Ok(match self {
            SensorSpec::Pattern => Sensor::Pattern,
            SensorSpec::Imx274(m) => Sensor::Imx274(*m),
            SensorSpec::Ultrasound => Sensor::Ultrasound {
                channels: 128,
                samples: 4096,
            },
            SensorSpec::Coe { .. } => {
                return Err(SensorError(format!(
                    "{self} is a receive/record geometry; emulate it as a file replay of its frame size"
                )));
            }
            SensorSpec::File(path) => {
                let size = frame_size
                    .ok_or_else(|| SensorError("file replay needs a frame size".into()))?;
                if size == 0 || size > MAX_FRAME {
                    return Err(SensorError(format!(
                        "frame size {size}: must be from 1 to {MAX_FRAME} bytes"
                    )));
                }
                Sensor::replay(path, size)
                    .map_err(|e| SensorError(format!("cannot replay {}: {e}", path.display())))?
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for n in [
            "pattern",
            "imx274-1080p-raw10",
            "imx274-4k-raw10",
            "imx274-4k-raw12",
            "ultrasound",
            "coe-raw10:1920x1080",
            "coe-raw12:64x2",
            "file:/tmp/x.bin",
        ] {
            let s: SensorSpec = n.parse().unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(s.to_string(), n);
        }
    }

    #[test]
    fn refuses_what_has_no_meaning() {
        for n in [
            "foo",
            "",
            "file:",
            "coe-raw10:0x0",
            "coe-raw10:3x2",
            "coe-raw10:4294967295x4294967295",
            "coe-raw14:64x64",
            "coe-raw10:64",
            "imx274",
        ] {
            assert!(n.parse::<SensorSpec>().is_err(), "{n} accepted");
        }
    }

    #[test]
    fn geometry_matches_the_sensor() {
        let s: SensorSpec = "imx274-4k-raw12".parse().unwrap();
        let src = s.source(None).unwrap();
        assert_eq!(s.frame_len(), src.frame_len());
        let c: SensorSpec = "coe-raw10:6x2".parse().unwrap();
        // 6 RAW10 pixels: two 32-bit words of three pixels, lines padded to 8 bytes
        let g = c.image().unwrap();
        assert_eq!(g.bytes_per_line, coe_bytes_per_line(6, 10) as u64);
        assert_eq!(c.frame_len(), Some(g.bytes_per_line as usize * 2));
        assert!(c.source(None).is_err());
        assert!(
            "file:/x"
                .parse::<SensorSpec>()
                .unwrap()
                .source(Some(0))
                .is_err()
        );
    }
}
