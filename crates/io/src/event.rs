//! Event counters (`eventfd`): a file descriptor another thread or program waits on with
//! `poll`/`epoll`/`read`, signalled by a `write`. The verbs library hands one out as a
//! completion channel's `fd`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An eventfd.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A new counter at zero: with `semaphore`, each read takes one (`EFD_SEMAPHORE`), else
    /// all; reads block unless `nonblocking`.
    pub fn new(semaphore: bool, nonblocking: bool) -> io::Result<EventFd> {
        let mut flags = libc::EFD_CLOEXEC;
        if semaphore {
            flags |= libc::EFD_SEMAPHORE;
        }
        if nonblocking {
            flags |= libc::EFD_NONBLOCK;
        }
        // SAFETY: eventfd takes plain flags and returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Add one to the counter (wakes a waiter).
    pub fn signal(&self) -> io::Result<()> {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local buffer to our descriptor.
        let n = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        if n == 8 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Take from the counter (one, or all without `EFD_SEMAPHORE`): blocks while it is zero
    /// unless the descriptor is non-blocking — which its holder may have made it with
    /// `fcntl` — then fails with `WouldBlock`.
    pub fn take(&self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        loop {
            // SAFETY: reads at most 8 bytes into a live local buffer from our descriptor.
            let n = unsafe { libc::read(self.0.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
            if n == 8 {
                return Ok(u64::from_ne_bytes(b));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semaphore_gives_one_per_read_and_a_drained_one_would_block() {
        let e = EventFd::new(true, true).unwrap();
        e.signal().unwrap();
        e.signal().unwrap();
        assert!(
            crate::udp::wait_readable_any(&[e.as_raw_fd()], Some(std::time::Duration::ZERO))
                .unwrap()
        );
        assert_eq!(e.take().unwrap(), 1);
        assert_eq!(e.take().unwrap(), 1);
        assert_eq!(e.take().unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let all = EventFd::new(false, true).unwrap();
        for _ in 0..3 {
            all.signal().unwrap();
        }
        assert_eq!(all.take().unwrap(), 3);
    }
}
