//! The view of a finished recording (`rocelink view DIR`): the same page with a frame
//! slider, the per-second rate from the index with damaged frames marked, and each frame as
//! a picture, a numpy `.npy` or a PNG to download.

use crate::picture::{Render, for_header};
use crate::routes::{json, page, png};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rocelink_record::image::{npy, unpack};
use rocelink_record::read::Recording;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Clone)]
struct Shown {
    rec: Arc<Recording>,
    render: Option<Render>,
}

/// `GET /`, `/status.json`, `/index.json`, `/frame/{i}.png`, `/frame/{i}.npy` over `rec`.
pub fn recording(rec: Recording) -> Router {
    let render = for_header(&rec.header);
    Router::new()
        .route("/", get(page))
        .route("/status.json", get(status))
        .route("/index.json", get(index))
        .route("/frame/{file}", get(frame))
        .with_state(Shown {
            rec: Arc::new(rec),
            render,
        })
}

async fn status(State(s): State<Shown>) -> Response {
    let i = s.rec.inspect();
    let h = &s.rec.header;
    json(&json!({
        "mode": "recording",
        "dir": s.rec.dir.display().to_string(),
        "sensor": h.sensor,
        "layout": h.layout,
        "width": h.width,
        "height": h.height,
        "frames": s.rec.len(),
        "frames_good": i.good,
        "frames_damaged": i.damaged,
        "packets_lost": i.dropped_packets,
        "recorder_drops": i.recorder_drops,
        "first_frame_number": i.first_frame,
        "last_frame_number": i.last_frame,
        "seconds": i.seconds,
        "fps": i.fps,
        "pictures": s.render.is_some(),
    }))
}

/// Every frame (`[number, good, bytes, ms since the first, packets lost]`) and the rate of
/// each second (`[second, frames, Gbit/s, packets lost, damaged]`).
fn index_of(rec: &Recording) -> Value {
    let t0 = rec.entries.first().map_or(0, |e| e.recorded_ns);
    let frames: Vec<Value> = rec
        .entries
        .iter()
        .map(|e| {
            json!([
                e.frame_number,
                u8::from(e.good),
                e.length,
                e.recorded_ns.saturating_sub(t0) / 1_000_000,
                e.dropped_packets
            ])
        })
        .collect();
    let mut seconds: Vec<[f64; 5]> = Vec::new();
    for e in &rec.entries {
        let s = (e.recorded_ns.saturating_sub(t0) / 1_000_000_000) as usize;
        while seconds.len() <= s {
            seconds.push([seconds.len() as f64, 0.0, 0.0, 0.0, 0.0]);
        }
        let r = &mut seconds[s];
        r[1] += 1.0;
        r[2] += e.length as f64 * 8.0 / 1e9;
        r[3] += e.dropped_packets as f64;
        r[4] += f64::from(u8::from(!e.good));
    }
    json!({"frames": frames, "rate": seconds})
}

async fn index(State(s): State<Shown>) -> Response {
    json(&index_of(&s.rec))
}

fn not_found(what: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("{what}\n")).into_response()
}

/// `/frame/{i}.png` or `/frame/{i}.npy`: frame `i` (0-based, in recording order).
async fn frame(State(s): State<Shown>, Path(file): Path<String>) -> Response {
    let Some((i, ext)) = file.split_once('.') else {
        return not_found("frames are /frame/N.png or /frame/N.npy");
    };
    let (Ok(i), true) = (i.parse::<usize>(), matches!(ext, "png" | "npy")) else {
        return not_found("frames are /frame/N.png or /frame/N.npy");
    };
    if i >= s.rec.len() {
        return not_found(&format!("the recording has {} frames", s.rec.len()));
    }
    let ext = ext.to_string();
    let made = tokio::task::spawn_blocking(move || file_of(&s, i, &ext)).await;
    match made {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("frame {i}: {e}\n"),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("frame {i}: {e}\n"),
        )
            .into_response(),
    }
}

/// Frame `i` as the file `ext` names.
fn file_of(s: &Shown, i: usize, ext: &str) -> Result<Response, String> {
    let data = s.rec.frame(i).map_err(|e| e.to_string())?;
    if ext == "png" {
        let render = s
            .render
            .as_ref()
            .ok_or("this recording's frames are not pictures")?;
        let p = render(&data).map_err(|e| e.to_string())?;
        return Ok(png(p.to_png().map_err(|e| e.to_string())?));
    }
    let body = match unpack(&s.rec.header, &data) {
        Ok(img) => img.to_npy(),
        Err(_) => npy(&[data.len()], "|u1", &data),
    };
    let name = format!("attachment; filename=\"frame-{i}.npy\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_DISPOSITION, name),
        ],
        body,
    )
        .into_response())
}
