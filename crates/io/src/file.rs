//! File helpers the recorder needs beyond `std`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Reserve disk blocks for `[offset, offset + len)` of `file` without changing its size
/// (`fallocate(FALLOC_FL_KEEP_SIZE)`), so later writes into that range cannot fail with
/// `ENOSPC`. Filesystems without `fallocate` return `EOPNOTSUPP`.
pub fn reserve(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: fallocate only reads its integer arguments; the descriptor is owned by `file`
    // and stays open for the call.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off, n) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_keeps_the_size_and_allocates() {
        let p = std::env::temp_dir().join(format!("rocelink-reserve-{}", std::process::id()));
        let f = File::create(&p).unwrap();
        match reserve(&f, 0, 1 << 20) {
            Ok(()) => {
                let m = f.metadata().unwrap();
                assert_eq!(m.len(), 0, "size unchanged");
                use std::os::unix::fs::MetadataExt;
                assert!(
                    m.blocks() * 512 >= 1 << 20,
                    "blocks allocated: {}",
                    m.blocks()
                );
            }
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}"),
        }
        let _ = std::fs::remove_file(&p);
    }
}
