//! Reading a running process's counters: a local control socket (`rocelink stats PID`),
//! served from a [`Board`] by a thread of its own, so the packet loops never wait for a
//! reader. (The Prometheus endpoint is `rocelink-web`'s.)
//!
//! The control socket is a Unix stream socket at [`socket_path`] (`$XDG_RUNTIME_DIR/rocelink/
//! PID.sock`, else `/tmp/rocelink-UID/PID.sock`): a client connects and reads one JSON
//! [`Snapshot`]; the server closes the connection after it. The file goes when the
//! [`ControlSocket`] is dropped.

use crate::counters::{Board, Snapshot};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The directory control sockets are made in: `$XDG_RUNTIME_DIR/rocelink` when that
/// directory is this user's, else `/run/rocelink` for root and `/tmp/rocelink-UID` for
/// others. It must be a real directory of this user's that no one else may enter
/// ([`rocelink_io::file::private_dir`]); rocelink refuses any other, never chmod'ing it.
pub fn socket_dir() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let me = rocelink_io::file::euid();
    let xdg = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir() && m.uid() == me));
    match xdg {
        Some(d) => d.join("rocelink"),
        None if me == 0 && Path::new("/run").is_dir() => PathBuf::from("/run/rocelink"),
        None => PathBuf::from(format!("/tmp/rocelink-{me}")),
    }
}

/// The control socket of process `pid`.
pub fn socket_path(pid: u32) -> PathBuf {
    socket_dir().join(format!("{pid}.sock"))
}

/// Remove the sockets in `dir` whose process is gone (left by a process killed before it
/// could remove its own, e.g. by a second Ctrl-C).
pub fn remove_stale(dir: &Path) {
    for (pid, p) in list_in(dir) {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(&p);
        }
    }
}

/// A control socket being served; removed on drop.
#[derive(Debug)]
pub struct ControlSocket {
    path: PathBuf,
}

impl ControlSocket {
    /// Serve `board` at `path` (see [`socket_path`]). A stale socket file of a process that
    /// is gone is replaced; a live one is an error.
    pub fn serve(board: Board, path: &Path) -> io::Result<ControlSocket> {
        if let Some(dir) = path.parent() {
            // ours alone, or not used at all (a planted directory is refused)
            rocelink_io::file::private_dir(dir)?;
            remove_stale(dir);
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{}: another process serves it", path.display()),
                ));
            }
            let _ = std::fs::remove_file(path);
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        // a second Ctrl-C, which exits at once, removes it too
        rocelink_io::signal::remove_on_hard_exit(Some(path));
        std::thread::Builder::new()
            .name("rocelink-control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    let Ok(mut conn) = conn else { continue };
                    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
                    let json = serde_json::to_string(&board.snapshot()).unwrap_or_default();
                    let _ = conn.write_all(json.as_bytes());
                }
            })?;
        Ok(ControlSocket {
            path: path.to_owned(),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        // the file first: a second Ctrl-C between the two still finds its path to unlink
        let _ = std::fs::remove_file(&self.path);
        rocelink_io::signal::remove_on_hard_exit(None);
    }
}

/// Most bytes [`query`] reads from a control socket.
pub const MAX_ANSWER: usize = 1 << 20;
/// Longest [`query`] waits for a whole answer.
pub const ANSWER_TIME: Duration = Duration::from_secs(2);

/// Read the counters from a control socket: one in a directory only this user may enter
/// (a socket elsewhere could be anyone's), at most [`MAX_ANSWER`] bytes within
/// [`ANSWER_TIME`].
pub fn query(path: &Path) -> io::Result<Snapshot> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        trusted_dir(dir)?;
    }
    let mut s = UnixStream::connect(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let end = std::time::Instant::now() + ANSWER_TIME;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{}: no whole answer within {} s",
                    path.display(),
                    ANSWER_TIME.as_secs()
                ),
            ));
        }
        s.set_read_timeout(Some(left))?;
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        };
        if n == 0 {
            break;
        }
        if buf.len() + n > MAX_ANSWER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: answers more than {MAX_ANSWER} bytes: not rocelink counters",
                    path.display()
                ),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    serde_json::from_slice(&buf).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not rocelink counters: {e}", path.display()),
        )
    })
}

/// Whether `dir` may hold control sockets this user trusts: a real directory of its own
/// that no one else may enter.
pub fn trusted_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let me = rocelink_io::file::euid();
    if !m.is_dir() || m.uid() != me || m.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{}: not a directory of this user's that only it may enter (uid {}, mode {:o}); its sockets are not trusted",
                dir.display(),
                m.uid(),
                m.permissions().mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// The control sockets in [`socket_dir`], with the process ids they belong to.
pub fn list() -> Vec<(u32, PathBuf)> {
    list_in(&socket_dir())
}

fn list_in(dir: &Path) -> Vec<(u32, PathBuf)> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let pid = p
                .file_name()?
                .to_str()?
                .strip_suffix(".sock")?
                .parse()
                .ok()?;
            Some((pid, p))
        })
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Link;
    use rocelink_transport::{Endpoint, EndpointConfig};

    fn board() -> Board {
        let b = Board::new("test");
        let ep = Endpoint::new(EndpointConfig::new("127.0.0.1:4791".parse().unwrap()));
        b.set_link(Link::of("data", &ep, 42, 7));
        b
    }

    #[test]
    fn control_socket_answers_and_goes() {
        let dir = std::env::temp_dir().join(format!("rocelink-ctl-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("x.sock");
        let c = ControlSocket::serve(board(), &path).unwrap();
        let s = query(c.path()).unwrap();
        assert_eq!(s.total("rx_packets"), 42);
        assert_eq!(s.pid, std::process::id());
        // a second server on a live socket is refused, naming it
        let e = ControlSocket::serve(board(), &path).unwrap_err();
        assert!(e.to_string().contains("x.sock"), "{e}");
        drop(c);
        assert!(!path.exists());
        let e = query(&path).unwrap_err();
        assert!(e.to_string().contains("x.sock"), "{e}");
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn a_directory_not_ours_alone_is_refused_and_never_chmoded() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rocelink-ctl-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = ControlSocket::serve(board(), &dir.join("1.sock")).unwrap_err();
        assert!(e.to_string().contains("mode 755"), "{e}");
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755, "left as it was");
        let e = query(&dir.join("1.sock")).unwrap_err();
        assert!(e.to_string().contains("not trusted"), "{e}");
        // a link to a good directory is refused too
        let good = dir.join("good");
        std::fs::create_dir(&good).unwrap();
        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = std::env::temp_dir().join(format!("rocelink-ctl-link-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let e = ControlSocket::serve(board(), &link.join("1.sock")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn stale_sockets_go_and_an_endless_answer_is_cut_short() {
        let dir = std::env::temp_dir().join(format!("rocelink-ctl-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        rocelink_io::file::private_dir(&dir).unwrap();
        // a socket left by a process that is gone (pid above the kernel's maximum)
        let stale = dir.join("4194305.sock");
        drop(UnixListener::bind(&stale).unwrap());
        assert!(stale.exists());
        let c = ControlSocket::serve(board(), &dir.join("x.sock")).unwrap();
        assert!(!stale.exists(), "removed");
        drop(c);
        // a server that never stops talking: the reader gives up, bounded in bytes and time
        let endless = dir.join("endless.sock");
        let l = UnixListener::bind(&endless).unwrap();
        std::thread::spawn(move || {
            if let Ok((mut c, _)) = l.accept() {
                let junk = vec![b' '; 64 * 1024];
                while c.write_all(&junk).is_ok() {}
            }
        });
        let t = std::time::Instant::now();
        let e = query(&endless).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
