//! The live view's HTTP routes: the page, the picture, the numbers, and the events that
//! push them.

use crate::live::{Live, RETRY};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::Stream;
use std::convert::Infallible;
use std::time::{Duration, Instant};

/// The page (one file: its script and style inline, nothing fetched from elsewhere).
pub(crate) const PAGE: &str = include_str!("../assets/view.html");

/// How often the events say where the stream is.
const EVERY: Duration = Duration::from_millis(250);
/// An event stream ends after this and the browser reconnects: under the server's
/// per-exchange limit, so a page that stops reading holds a connection no longer.
const STREAM_FOR: Duration = Duration::from_secs(8);

/// `GET /`, `/frame.png`, `/status.json`, `/events` over `live`.
pub fn live(live: Live) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/frame.png", get(frame_png))
        .route("/status.json", get(status))
        .route("/events", get(events))
        .with_state(live)
}

pub(crate) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE,
    )
        .into_response()
}

/// A PNG answer, never cached.
pub(crate) fn png(bytes: impl Into<axum::body::Body>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/png"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        bytes.into(),
    )
        .into_response()
}

/// A JSON answer, never cached.
pub(crate) fn json(v: &serde_json::Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        v.to_string(),
    )
        .into_response()
}

async fn frame_png(State(live): State<Live>) -> Response {
    live.asked();
    match live.picture() {
        Some(p) => png(axum::body::Bytes::from_owner(p.bytes)),
        None => (
            StatusCode::NOT_FOUND,
            "no picture yet: pictures are made of good frames of an image stream while a page looks\n",
        )
            .into_response(),
    }
}

async fn status(State(live): State<Live>) -> Response {
    live.asked();
    json(&live.status())
}

/// `status` events every [`EVERY`], then `end` with the summary when the stream ends.
async fn events(State(live): State<Live>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let watching = live.watch();
    let started = Instant::now();
    let s = futures_util::stream::unfold(
        (watching, live, started, 0u64),
        |(w, live, started, n)| async move {
            if n == u64::MAX || started.elapsed() > STREAM_FOR {
                return None;
            }
            if n > 0 {
                tokio::time::sleep(EVERY).await;
            }
            let ended = live.ended();
            let ev = Event::default()
                .event(if ended { "end" } else { "status" })
                .retry(RETRY)
                .data(live.status().to_string());
            Some((
                Ok(ev),
                (w, live, started, if ended { u64::MAX } else { n + 1 }),
            ))
        },
    );
    Sse::new(s)
}
