//! Pictures made off the stream's thread: the stream offers a frame at most every
//! [`Pictures::interval`], and only while someone looks; the frame is copied into a spare
//! buffer and handed to a thread of its own that renders and encodes it. With no spare
//! buffer (the encoder is behind) the offer is declined at once: the stream never waits.

use crate::picture::{PictureError, Render};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The latest picture, encoded.
#[derive(Debug, Clone)]
pub struct Png {
    /// Counts pictures made, from 1.
    pub version: u64,
    /// The PNG file.
    pub bytes: Arc<[u8]>,
    /// Its size.
    pub width: usize,
    /// Its size.
    pub height: usize,
    /// The frame it shows.
    pub frame: u64,
    /// Time to render and encode it.
    pub took: Duration,
}

/// What the encoder thread shares.
#[derive(Debug, Default)]
struct Store {
    latest: Mutex<Option<Png>>,
    spare: Mutex<Option<Vec<u8>>>,
    failure: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The picture side of a live view.
pub(crate) struct Pictures {
    store: Arc<Store>,
    tx: SyncSender<(Vec<u8>, u64)>,
    offered: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Pictures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pictures").finish_non_exhaustive()
    }
}

impl Pictures {
    /// Shortest time between two pictures.
    pub(crate) const INTERVAL: Duration = Duration::from_millis(250);

    /// Start the encoder thread for pictures made by `render`.
    pub(crate) fn start(render: Render) -> std::io::Result<Pictures> {
        let store = Arc::new(Store {
            spare: Mutex::new(Some(Vec::new())),
            ..Store::default()
        });
        let (tx, rx) = sync_channel(1);
        let s = store.clone();
        std::thread::Builder::new()
            .name("rocelink-picture".into())
            .spawn(move || encode_loop(&render, &rx, &s))?;
        Ok(Pictures {
            store,
            tx,
            offered: Mutex::new(None),
        })
    }

    /// The gap to keep after a picture that took `took`: at least [`Self::INTERVAL`], and
    /// long enough that making pictures costs at most 2% of a core.
    fn interval(took: Duration) -> Duration {
        Self::INTERVAL.max(took * 50)
    }

    /// Offer frame `frame`: copied and sent to the encoder if a picture is due and the
    /// encoder is free. Returns whether it was taken.
    pub(crate) fn offer(&self, frame: u64, data: &[u8]) -> bool {
        let took = lock(&self.store.latest).as_ref().map(|p| p.took);
        {
            let mut at = lock(&self.offered);
            if at.is_some_and(|t| t.elapsed() < Self::interval(took.unwrap_or_default())) {
                return false;
            }
            let Some(mut buf) = lock(&self.store.spare).take() else {
                return false;
            };
            buf.clear();
            buf.extend_from_slice(data);
            match self.tx.try_send((buf, frame)) {
                Ok(()) => {}
                Err(TrySendError::Full((b, _)) | TrySendError::Disconnected((b, _))) => {
                    *lock(&self.store.spare) = Some(b);
                    return false;
                }
            }
            *at = Some(Instant::now());
        }
        true
    }

    /// The latest picture.
    pub(crate) fn latest(&self) -> Option<Png> {
        lock(&self.store.latest).clone()
    }

    /// Why the last picture failed, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        lock(&self.store.failure).clone()
    }
}

/// Render, encode and keep each frame sent, then give its buffer back; ends when the view
/// is dropped.
fn encode_loop(render: &Render, rx: &Receiver<(Vec<u8>, u64)>, store: &Store) {
    let mut version = 0;
    while let Ok((buf, frame)) = rx.recv() {
        let t = Instant::now();
        let made = render(&buf).and_then(|p| Ok((p.to_png()?, p.width, p.height)));
        *lock(&store.spare) = Some(buf);
        match made {
            Ok((png, width, height)) => {
                version += 1;
                *lock(&store.latest) = Some(Png {
                    version,
                    bytes: png.into(),
                    width,
                    height,
                    frame,
                    took: t.elapsed(),
                });
                *lock(&store.failure) = None;
            }
            Err(e @ (PictureError::Short { .. } | PictureError::Png(_))) => {
                *lock(&store.failure) = Some(format!("frame {frame}: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::Picture;

    #[test]
    fn offers_are_declined_while_busy_or_early_and_a_picture_follows() {
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let go_rx = Mutex::new(go_rx);
        let render: Render = Arc::new(move |d: &[u8]| {
            let _ = lock(&go_rx).recv();
            Ok(Picture {
                width: d.len(),
                height: 1,
                channels: 1,
                data: d.to_vec(),
            })
        });
        let p = Pictures::start(render).unwrap();
        assert!(p.offer(7, &[1, 2, 3]));
        assert!(!p.offer(8, &[1, 2]), "too soon, and the encoder is busy");
        go_tx.send(()).unwrap();
        let t = Instant::now();
        while p.latest().is_none() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let png = p.latest().unwrap();
        assert_eq!((png.version, png.frame, png.width), (1, 7, 3));
        std::thread::sleep(Pictures::INTERVAL);
        assert!(p.offer(9, &[4; 10]));
        go_tx.send(()).unwrap();
        let t = Instant::now();
        while p.latest().is_some_and(|l| l.version < 2) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(p.latest().map(|l| (l.frame, l.width)), Some((9, 10)));
    }

    #[test]
    fn a_failed_picture_is_said_and_the_last_good_one_kept() {
        let render: Render = Arc::new(|d: &[u8]| {
            Err(PictureError::Short {
                len: d.len(),
                need: 9,
            })
        });
        let p = Pictures::start(render).unwrap();
        assert!(p.offer(3, &[0; 4]));
        let t = Instant::now();
        while p.failure().is_none() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(p.failure().unwrap().contains("frame 3"));
        assert!(p.latest().is_none());
    }
}
