//! The ultrasound roles as sessions a program starts, watches and stops — the shape every
//! rocelink role has (config → [`start`](probe::ProbeSession::start) → events and live
//! counters → [`Stopper::stop`] from any thread → a summary), driven alike by the CLI,
//! Python and the web view:
//!
//! * [`probe::ProbeSession`] — the emulated probe, one thread per link.
//! * [`shots::ShotsSession`] — the host receiving shots, one thread per link, each shot an
//!   event.
//! * [`round_trip::RoundTrip`] — the trigger-to-shot round trip, one shot at a time, per
//!   shot size, each size a row.
//!
//! [`view`] (feature `view`) serves a shots session's live view in the browser.

pub mod probe;
pub mod round_trip;
pub mod shots;
#[cfg(feature = "view")]
pub mod view;

use crate::Error;
use rocelink_runtime::{Driver, bind_roce};
pub use rocelink_runtime::{Session, Stopper};
use rocelink_transport::{Endpoint, EndpointConfig};
use std::net::{IpAddr, SocketAddr};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the link threads publish their counters.
pub(crate) const EVERY: Duration = Duration::from_millis(100);

/// Where a session's links are: one address per link, and whether the caller chose them
/// (a loopback address that was not chosen moves to a free 127/8 address when its port is
/// taken, as the rdma-core idiom of two ends on one host needs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LinkAddrs {
    /// One address per link.
    pub addrs: Vec<IpAddr>,
    /// The RoCE UDP port of every link.
    pub port: u16,
    /// The addresses were chosen (never moved).
    pub chosen: bool,
}

impl LinkAddrs {
    /// `n` links from `first` on consecutive IPv4 addresses (one IPv6 link).
    pub fn consecutive(first: IpAddr, n: usize, port: u16, chosen: bool) -> Option<LinkAddrs> {
        let addrs = match first {
            IpAddr::V4(v4) => (0..n)
                .map(|i| IpAddr::V4((u32::from(v4).wrapping_add(i as u32)).into()))
                .collect(),
            IpAddr::V6(_) if n == 1 => vec![first],
            IpAddr::V6(_) => return None,
        };
        Some(LinkAddrs {
            addrs,
            port,
            chosen,
        })
    }
}

/// Link `i`'s RoCE socket, its driver and an endpoint with random keys on it.
pub(crate) fn bind_link(
    link: usize,
    ip: IpAddr,
    port: u16,
    chosen: bool,
) -> Result<(Driver, Endpoint, SocketAddr), Error> {
    let (sock, ip) = bind_roce(ip, port, chosen).map_err(|source| Error::Bind { link, source })?;
    let local = SocketAddr::new(ip, port);
    let ep = Endpoint::new(EndpointConfig::new(local).random_keys());
    Ok((Driver::new(sock), ep, local))
}

/// Join every link thread, in link order; the first error wins.
pub(crate) fn join_all<T>(threads: Vec<JoinHandle<Result<T, Error>>>) -> Result<Vec<T>, Error> {
    let mut out = Vec::with_capacity(threads.len());
    let mut first_err = None;
    for (i, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(Ok(v)) => out.push(v),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(Error::Panicked(i));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// A send error as the session reports it: a UD message over the path MTU says so.
pub(crate) fn link_error(link: usize, bytes: u32, source: std::io::Error) -> Error {
    if source.raw_os_error() == Some(libc::EMSGSIZE) {
        Error::MessageTooBig {
            link,
            bytes,
            source,
        }
    } else {
        Error::Io { link, source }
    }
}
