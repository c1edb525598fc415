//! `rocelink inspect` and `rocelink export`.

use anyhow::{Context, Result, anyhow, bail};
use rocelink_record::format::Header;
use rocelink_record::image;
use rocelink_record::read::Recording;
use std::path::PathBuf;
use std::process::ExitCode;

/// `export --format`: what a frame is written as.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExportFormat {
    /// The frame's bytes as received.
    Raw,
    /// A numpy array: a 16-bit image for CSI recordings, else the bytes.
    Npy,
    /// A 16-bit grey image.
    Pgm,
    /// A camera's frame demosaiced to RGB8 at half resolution; echoes as 16-bit grey.
    Png,
}

#[derive(clap::Args, Debug)]
pub(crate) struct InspectArgs {
    /// Recording directory.
    dir: PathBuf,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Read every good frame back and check it against its recorded CRC; list the frames
    /// whose stored bytes changed (exit 1 if any).
    #[arg(long)]
    verify: bool,
}

/// Frames (by position) whose stored bytes no longer match their CRC.
fn verify_all(r: &Recording) -> Result<(u64, Vec<u64>)> {
    let (mut checked, mut bad) = (0, Vec::new());
    for i in 0..r.len() {
        if let Some(ok) = r
            .verify(i)
            .with_context(|| format!("reading frame at index {i}"))?
        {
            checked += 1;
            if !ok {
                bad.push(r.entries[i].frame_number);
            }
        }
    }
    Ok((checked, bad))
}

pub(crate) fn inspect(a: &InspectArgs) -> Result<ExitCode> {
    let r = Recording::open(&a.dir).with_context(|| format!("cannot open {}", a.dir.display()))?;
    let verified = if a.verify {
        Some(verify_all(&r)?)
    } else {
        None
    };
    if a.json {
        println!("{}", inspect_json(&r, verified.as_ref())?);
    } else {
        inspect_text(a, &r, verified.as_ref());
    }
    let damaged = report_damage(a, &r);
    Ok(
        if damaged || verified.as_ref().is_some_and(|(_, bad)| !bad.is_empty()) {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}

fn inspect_json(r: &Recording, verified: Option<&(u64, Vec<u64>)>) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(r.inspect())?;
    v["sensor"] = r.header.sensor.clone().into();
    v["frame_size"] = r.header.frame_size.into();
    v["torn_index_bytes"] = r.torn_bytes.into();
    v["damaged_index_offsets"] = r.damaged_records.clone().into();
    v["frames_missing_data"] = r.missing_data.clone().into();
    if let Some((checked, bad)) = verified {
        v["verified_frames"] = (*checked).into();
        v["crc_mismatch_frames"] = bad.clone().into();
    }
    Ok(v)
}

fn inspect_text(a: &InspectArgs, r: &Recording, verified: Option<&(u64, Vec<u64>)>) {
    let s = r.inspect();
    println!(
        "{}: {} ({} bytes/frame, layout {})",
        a.dir.display(),
        r.header.sensor,
        r.header.frame_size,
        r.header.layout
    );
    println!(
        "{} frames ({} good, {} damaged, {} CRC failures), {} packets lost, {} frames dropped by the recorder, {} bytes",
        s.frames, s.good, s.damaged, s.crc_failures, s.dropped_packets, s.recorder_drops, s.bytes
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
    match verified {
        Some((checked, bad)) if bad.is_empty() => {
            println!("verified: the stored bytes of all {checked} good frames match their CRC");
        }
        Some((checked, bad)) => println!(
            "verify: {} of {checked} good frames no longer match their CRC: frames {bad:?}",
            bad.len()
        ),
        None => {}
    }
}

/// Damage to the recording's files, on stderr; whether there was any.
fn report_damage(a: &InspectArgs, r: &Recording) -> bool {
    let mut damaged = false;
    let d = a.dir.display();
    if !r.damaged_records.is_empty() {
        eprintln!(
            "rocelink inspect: {d}: DAMAGED: {} invalid index records at byte offsets {:?} of index.bin (skipped)",
            r.damaged_records.len(),
            r.damaged_records
        );
        damaged = true;
    }
    if !r.missing_data.is_empty() {
        eprintln!(
            "rocelink inspect: {d}: DAMAGED: data.bin is truncated; frames {:?} point past its end",
            r.missing_data
        );
        damaged = true;
    }
    if r.entries.is_empty() && r.torn_bytes >= rocelink_record::format::RECORD_LEN {
        eprintln!(
            "rocelink inspect: {d}: DAMAGED: index.bin holds {} bytes and not one valid record",
            r.torn_bytes
        );
        damaged = true;
    }
    damaged
}

#[derive(clap::Args, Debug)]
pub(crate) struct ExportArgs {
    /// Recording directory.
    dir: PathBuf,
    /// Frame number to export.
    #[arg(long)]
    frame: u64,
    /// What the frame is written as.
    #[arg(long, value_enum, default_value_t = ExportFormat::Png)]
    format: ExportFormat,
    /// Output file (default: frame-N.FORMAT in the current directory).
    #[arg(short, long, value_parser = crate::args::out_file)]
    out: Option<PathBuf>,
    /// Export even when the stored bytes no longer match the frame's recorded CRC.
    #[arg(long)]
    force: bool,
}

pub(crate) fn export(a: &ExportArgs) -> Result<ExitCode> {
    let r = Recording::open(&a.dir).with_context(|| format!("cannot open {}", a.dir.display()))?;
    let i = r
        .position(a.frame)
        .ok_or_else(|| match (r.entries.first(), r.entries.last()) {
            (Some(f), Some(l)) => anyhow!(
                "frame {} is not in the recording ({} frames, numbers {}..={})",
                a.frame,
                r.len(),
                f.frame_number,
                l.frame_number
            ),
            _ => anyhow!("frame {}: the recording holds no frame", a.frame),
        })?;
    match r.verify(i)? {
        Some(false) if !a.force => bail!(
            "frame {}: the bytes in data.bin no longer match the CRC recorded with the frame (the stored data is damaged); --force exports it anyway",
            a.frame
        ),
        Some(false) => eprintln!(
            "rocelink export: warning: frame {} does not match its recorded CRC",
            a.frame
        ),
        None => eprintln!(
            "rocelink export: warning: frame {} was recorded damaged",
            a.frame
        ),
        Some(true) => {}
    }
    let data = r.frame(i)?;
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "frame-{}.{}",
            a.frame,
            crate::args::value_name(&a.format)
        ))
    });
    rocelink_io::file::check_output(&out)?;
    let bytes = match a.format {
        ExportFormat::Raw => data,
        ExportFormat::Npy => match image::unpack(&r.header, &data) {
            Ok(img) => img.to_npy(),
            Err(_) => image::npy(&[data.len()], "|u1", &data),
        },
        ExportFormat::Pgm => image::unpack(&r.header, &data)?.to_pgm(),
        ExportFormat::Png => png_image(&r.header, &data)?,
    };
    rocelink_io::file::write_atomic(&out, &bytes).context("cannot write the export")?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// A frame as a PNG: a camera's RGGB demosaiced to RGB8 at half resolution; a grey
/// recording's (ultrasound echoes) 16-bit grey at full resolution.
pub(crate) fn png_image(header: &Header, data: &[u8]) -> Result<Vec<u8>> {
    let img = image::unpack(header, data)?;
    Ok(if header.grey {
        img.to_grey_png()?
    } else {
        img.to_png()?
    })
}
