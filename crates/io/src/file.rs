//! Files rocelink writes, and the rules it keeps for them (it often runs as root, in
//! directories other users can write):
//!
//! * it never writes through a symbolic link, never replaces anything that is not a
//!   regular file (a device node given as an output stays a device node), and never opens
//!   a file with more than one hard link;
//! * in a directory others may write (`/tmp`), it does not write into a file another user
//!   owns;
//! * a file replaced whole ([`write_atomic`]) is written to a fresh, unpredictably named
//!   temporary file opened with `O_CREAT|O_EXCL|O_NOFOLLOW` in the same directory, then
//!   renamed over the target;
//! * a directory it keeps to itself ([`private_dir`]) is made 0700, or, if it exists, is
//!   taken only when it is a real directory, ours, and no one else may enter it.
//!
//! Errors name the path and what is wrong with it. Also: disk-space reservation for the
//! recorder's index.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What a non-regular file is, for an error message.
fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_symlink() {
        "a symbolic link (rocelink does not write through links)"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

fn refused(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {why}", path.display()),
    )
}

fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// This process's effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether others may create files in `dir` (world- or group-writable: `/tmp` and the like).
fn shared_dir(dir: &Path) -> bool {
    std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o022 != 0)
}

/// The directory a path's file lives in ("." for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether rocelink may write over the existing file `m` at `path`.
fn check_existing(path: &Path, m: &std::fs::Metadata) -> io::Result<()> {
    if !m.file_type().is_file() {
        return Err(refused(path, format!("is {}", kind_of(m))));
    }
    if m.nlink() > 1 {
        return Err(refused(
            path,
            format!(
                "has {} hard links; rocelink writes only a file with one",
                m.nlink()
            ),
        ));
    }
    if m.uid() != euid() && shared_dir(&parent_of(path)) {
        return Err(refused(
            path,
            format!(
                "belongs to uid {} in a directory others can write; rocelink does not write into it",
                m.uid()
            ),
        ));
    }
    Ok(())
}

/// Read all of `path`, refusing one larger than `limit` bytes before reading it (a
/// regular file's size is known) or as soon as it passes the limit (a pipe may never
/// end), and a device (`/dev/zero`, a disk) without reading it.
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let too_big = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: larger than {limit} bytes, the most this reads",
                path.display()
            ),
        )
    };
    let f = File::open(path).map_err(|e| named(path, e))?;
    let m = f.metadata().map_err(|e| named(path, e))?;
    if m.file_type().is_file() && m.len() > limit {
        return Err(too_big());
    }
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_char_device() || t.is_block_device() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: a device, not a file", path.display()),
            ));
        }
    }
    let mut buf = Vec::new();
    f.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| named(path, e))?;
    if buf.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(buf)
}

/// Whether rocelink may write `path` (a file it will create or replace), checked before
/// anything else happens: its directory exists, and it is absent or a regular file
/// rocelink may write ([module rules](self)). Creates nothing.
pub fn check_output(path: &Path) -> io::Result<()> {
    let dir = parent_of(path);
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: no directory {}", path.display(), dir.display()),
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) => check_existing(path, &m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(named(path, e)),
    }
}

/// Open `path` to write from its start, as rocelink's outputs are (captures, exports,
/// plots): created (mode 0644 before the umask) if absent, else emptied — only after it
/// proved to be a regular file rocelink may write ([module rules](self)), opened without
/// following a link.
pub fn create_output(path: &Path) -> io::Result<File> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        check_existing(path, &m)?;
    }
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        // no link followed; a FIFO swapped in after the check does not block the open
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refused(
                    path,
                    "is a symbolic link (rocelink does not write through links)",
                )
            } else {
                named(path, e)
            }
        })?;
    // what was opened, not what was looked at
    let m = f.metadata().map_err(|e| named(path, e))?;
    check_existing(path, &m)?;
    f.set_len(0).map_err(|e| named(path, e))?;
    Ok(f)
}

/// An output file opened by [`Output::create`]: buffered, and every error it returns names
/// the file (a full disk says which file it could not write).
#[derive(Debug)]
pub struct Output {
    path: PathBuf,
    w: io::BufWriter<File>,
}

impl Output {
    /// [`create_output`] `path`, buffered.
    pub fn create(path: &Path) -> io::Result<Output> {
        Ok(Output {
            path: path.to_path_buf(),
            w: io::BufWriter::new(create_output(path)?),
        })
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w.write(buf).map_err(|e| named(&self.path, e))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.w.flush().map_err(|e| named(&self.path, e))
    }
}

/// A name no one can guess in advance, for a temporary file.
fn unpredictable() -> u64 {
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((std::process::id(), now))
}

/// Replace `path` with `bytes` so no reader sees half of it: written to a fresh temporary
/// file in the same directory (`O_CREAT|O_EXCL|O_NOFOLLOW`, an unpredictable name) and
/// renamed over `path` — which must be absent or a regular file rocelink may write.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        check_existing(path, &m)?;
    }
    let dir = parent_of(path);
    let name = path
        .file_name()
        .ok_or_else(|| refused(path, "names no file"))?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.{:016x}.tmp", unpredictable()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(|e| named(&tmp, e))?;
    let written = f.write_all(bytes).and_then(|()| f.sync_data());
    drop(f);
    let done = written.and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(named(path, e));
    }
    Ok(())
}

/// Make `dir` for rocelink's own files (a recording): created with `mode` if absent (its
/// parents as needed); an existing one is taken only if it is a real directory — not a
/// link to one — that this user owns.
pub fn own_dir(dir: &Path, mode: u32) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_dir() => {
            if m.uid() != euid() {
                return Err(refused(
                    dir,
                    format!("belongs to uid {}, not to this user", m.uid()),
                ));
            }
            Ok(())
        }
        Ok(m) => Err(refused(
            dir,
            format!("is not a directory but {}", kind_of(&m)),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(dir)
                .map_err(|e| named(dir, e))?;
            // made by us just now; a link planted in between is refused
            let m = std::fs::symlink_metadata(dir).map_err(|e| named(dir, e))?;
            if !m.file_type().is_dir() || m.uid() != euid() {
                return Err(refused(dir, "was replaced while it was being made"));
            }
            Ok(())
        }
        Err(e) => Err(named(dir, e)),
    }
}

/// A directory only this user may enter (control sockets): made 0700 if absent; an
/// existing one is taken only if it is a real directory, ours, with no access for group
/// or others — never chmod'ed into shape.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    own_dir(dir, 0o700)?;
    let m = std::fs::symlink_metadata(dir).map_err(|e| named(dir, e))?;
    if m.permissions().mode() & 0o077 != 0 {
        return Err(refused(
            dir,
            format!(
                "has mode {:o}; rocelink uses it only when no one else may enter it (0700)",
                m.permissions().mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

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

    /// A fresh directory under the system's temporary one, mode 1777 like /tmp.
    fn sticky(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rocelink-file-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
        d
    }

    fn chown(p: &Path, uid: u32) -> bool {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; lchown changes the link itself, not its target.
        unsafe { libc::lchown(c.as_ptr(), uid, uid) == 0 }
    }

    #[test]
    fn outputs_never_go_through_links_or_into_what_is_not_a_regular_file() {
        let d = sticky("out");
        let target = d.join("precious");
        std::fs::write(&target, b"keep").unwrap();
        // a planted symlink: refused, the target untouched
        let link = d.join("out.pcap");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = create_output(&link).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = write_atomic(&link, b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        // a device node stays one
        let e = create_output(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = write_atomic(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(e.to_string().contains("/dev/null"), "{e}");
        // a hard link to something else
        let hard = d.join("hard");
        std::fs::hard_link(&target, &hard).unwrap();
        let e = create_output(&hard).unwrap_err();
        assert!(e.to_string().contains("hard links"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        // a directory
        let e = create_output(&d).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        // a FIFO does not block the open, and is refused
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = create_output(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        // our own regular file is emptied and written; a new one is made
        let mine = d.join("mine");
        std::fs::write(&mine, b"old contents").unwrap();
        let mut f = create_output(&mine).unwrap();
        f.write_all(b"new").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&mine).unwrap(), b"new");
        write_atomic(&d.join("fresh.png"), b"png").unwrap();
        assert_eq!(std::fs::read(d.join("fresh.png")).unwrap(), b"png");
        // no temporary file is left behind
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_output_error_names_the_file() {
        let d = sticky("named");
        let p = d.join("x.pcap");
        let mut o = Output::create(&p).unwrap();
        o.write_all(b"ok").unwrap();
        o.flush().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"ok");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn reads_are_bounded() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a device, not a file"), "{e}");
        // a pipe that never ends stops at the limit
        let mut child = std::process::Command::new("yes")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let fd = child
            .stdout
            .as_ref()
            .map(std::os::fd::AsRawFd::as_raw_fd)
            .unwrap();
        let pipe = format!("/proc/self/fd/{fd}");
        let e = read_bounded(Path::new(&pipe), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("larger than 1048576"), "{e}");
        let _ = child.kill();
        let _ = child.wait();
        let d = sticky("bounded");
        let f = d.join("f");
        std::fs::write(&f, vec![1u8; 100]).unwrap();
        assert_eq!(read_bounded(&f, 100).unwrap().len(), 100);
        assert!(read_bounded(&f, 99).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn another_users_file_in_a_shared_directory_is_not_written() {
        if euid() != 0 {
            return; // needs a file of another user
        }
        let d = sticky("foreign");
        let planted = d.join("snap.png");
        std::fs::write(&planted, b"theirs").unwrap();
        assert!(chown(&planted, 65534));
        let e = create_output(&planted).unwrap_err();
        assert!(e.to_string().contains("uid 65534"), "{e}");
        let e = write_atomic(&planted, b"x").unwrap_err();
        assert!(e.to_string().contains("uid 65534"), "{e}");
        assert_eq!(std::fs::read(&planted).unwrap(), b"theirs");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_private_directory_is_ours_a_real_directory_and_closed() {
        let d = sticky("private");
        let p = d.join("rocelink-0");
        private_dir(&p).unwrap();
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        private_dir(&p).unwrap(); // again: taken as it is
        // open to others: refused, and not chmod'ed
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = private_dir(&p).unwrap_err();
        assert!(e.to_string().contains("mode 755"), "{e}");
        assert_eq!(
            std::fs::symlink_metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755
        );
        // a link to a directory: refused
        let link = d.join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = private_dir(&link).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        if euid() == 0 {
            let theirs = d.join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
            assert!(chown(&theirs, 65534));
            let e = private_dir(&theirs).unwrap_err();
            assert!(e.to_string().contains("uid 65534"), "{e}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

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
