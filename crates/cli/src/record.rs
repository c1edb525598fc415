//! `rocelink inspect` and `rocelink export`.

use anyhow::{Context, Result, anyhow, bail};
use rocelink_hsb::sensor::{unpack_raw10, unpack_raw12};
use rocelink_record::read::Recording;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub(crate) struct InspectArgs {
    /// Recording directory.
    dir: PathBuf,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

pub(crate) fn inspect(a: &InspectArgs) -> Result<ExitCode> {
    let r = Recording::open(&a.dir).with_context(|| format!("cannot open {}", a.dir.display()))?;
    let s = r.inspect();
    if a.json {
        let mut v = serde_json::to_value(&s)?;
        v["sensor"] = r.header.sensor.clone().into();
        v["frame_size"] = r.header.frame_size.into();
        v["torn_index_bytes"] = r.torn_bytes.into();
        println!("{v}");
    } else {
        println!(
            "{}: {} ({} bytes/frame, layout {})",
            a.dir.display(),
            r.header.sensor,
            r.header.frame_size,
            r.header.layout
        );
        println!(
            "{} frames ({} good, {} damaged, {} CRC failures), {} packets lost, {} frames dropped by the recorder, {} bytes",
            s.frames,
            s.good,
            s.damaged,
            s.crc_failures,
            s.dropped_packets,
            s.recorder_drops,
            s.bytes
        );
        if let (Some(a0), Some(b)) = (s.first_frame, s.last_frame) {
            println!(
                "frames {a0}..={b} over {:.2} s = {:.1} fps; per second: {:?}",
                s.seconds, s.fps, s.fps_by_second
            );
        }
        if r.torn_bytes > 0 {
            println!(
                "index ends with {} bytes of a torn record (ignored)",
                r.torn_bytes
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub(crate) struct ExportArgs {
    /// Recording directory.
    dir: PathBuf,
    /// Frame number to export.
    #[arg(long)]
    frame: u64,
    /// raw (bytes as received), npy (numpy: 16-bit image for CSI recordings, else bytes),
    /// pgm (16-bit grey Bayer image), png (demosaiced RGB8, half resolution).
    #[arg(long, default_value = "png", value_parser = ["raw", "npy", "pgm", "png"])]
    format: String,
    /// Output file (default: DIR/frame-N.FORMAT).
    #[arg(short, long)]
    out: Option<PathBuf>,
}

/// The active image of a CSI frame as 16-bit values (10 or 12 significant bits).
pub(crate) fn unpack_image(r: &Recording, data: &[u8]) -> Result<(usize, usize, Vec<u16>)> {
    let h = &r.header;
    if !h.layout.starts_with("csi-raw") {
        bail!(
            "recording layout is {:?}, not a CSI image (record with --sensor imx274-…)",
            h.layout
        );
    }
    let (w, hgt, bpl, start) = (
        h.width as usize,
        h.height as usize,
        h.bytes_per_line as usize,
        h.start_byte as usize,
    );
    let line_bytes = w * h.bits as usize / 8;
    let mut px = Vec::with_capacity(w * hgt);
    for y in 0..hgt {
        let at = start + y * bpl;
        let line = data
            .get(at..at + line_bytes)
            .ok_or_else(|| anyhow!("frame shorter than its geometry"))?;
        if h.bits == 10 {
            unpack_raw10(line, &mut px)
        } else {
            unpack_raw12(line, &mut px)
        }
    }
    Ok((w, hgt, px))
}

fn npy(shape: &[usize], descr: &str, body: &[u8]) -> Vec<u8> {
    let dims = shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let dims = if shape.len() == 1 {
        format!("{dims},")
    } else {
        dims
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    out
}

pub(crate) fn export(a: &ExportArgs) -> Result<ExitCode> {
    let r = Recording::open(&a.dir).with_context(|| format!("cannot open {}", a.dir.display()))?;
    let i = r
        .position(a.frame)
        .ok_or_else(|| anyhow!("frame {} is not in the recording", a.frame))?;
    let data = r.frame(i)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| a.dir.join(format!("frame-{}.{}", a.frame, a.format)));
    let bytes = match a.format.as_str() {
        "raw" => data,
        "npy" => match unpack_image(&r, &data) {
            Ok((w, h, px)) => npy(
                &[h, w],
                "<u2",
                &px.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
            ),
            Err(_) => npy(&[data.len()], "|u1", &data),
        },
        "pgm" => {
            let (w, h, px) = unpack_image(&r, &data)?;
            let max = (1u32 << r.header.bits) - 1;
            let mut b = format!("P5\n{w} {h}\n{max}\n").into_bytes();
            b.extend(px.iter().flat_map(|v| v.to_be_bytes()));
            b
        }
        _ => {
            let (w, h, px) = unpack_image(&r, &data)?;
            let shift = r.header.bits - 8;
            // RGGB 2×2 cells → one RGB pixel
            let (ow, oh) = (w / 2, h / 2);
            let mut rgb = Vec::with_capacity(ow * oh * 3);
            for y in 0..oh {
                for x in 0..ow {
                    let p = |dy: usize, dx: usize| px[(2 * y + dy) * w + 2 * x + dx];
                    let g = (u32::from(p(0, 1)) + u32::from(p(1, 0))) / 2;
                    rgb.extend_from_slice(&[
                        (p(0, 0) >> shift) as u8,
                        (g >> shift) as u8,
                        (p(1, 1) >> shift) as u8,
                    ]);
                }
            }
            let mut b = Vec::new();
            {
                let mut enc = png::Encoder::new(&mut b, ow as u32, oh as u32);
                enc.set_color(png::ColorType::Rgb);
                enc.set_depth(png::BitDepth::Eight);
                let mut w = enc.write_header()?;
                w.write_image_data(&rgb)?;
            }
            b
        }
    };
    std::fs::write(&out, bytes).with_context(|| format!("cannot write {}", out.display()))?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}
