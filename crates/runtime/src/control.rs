//! Reading a running process's counters: a local control socket (`rocelink stats PID`) and
//! a Prometheus endpoint (`--metrics 127.0.0.1:PORT`), both served from a [`Board`] by a
//! thread of their own, so the packet loops never wait for a reader.
//!
//! The control socket is a Unix stream socket at [`socket_path`] (`$XDG_RUNTIME_DIR/rocelink/
//! PID.sock`, else `/tmp/rocelink-UID/PID.sock`): a client connects and reads one JSON
//! [`Snapshot`]; the server closes the connection after it. The file goes when the
//! [`Control`] is dropped.

use crate::counters::{Board, Snapshot};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The directory control sockets are made in.
pub fn socket_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("rocelink"),
        None => PathBuf::from(format!("/tmp/rocelink-{}", uid())),
    }
}

fn uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    // the owner of our own /proc entry is our real uid
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

/// The control socket of process `pid`.
pub fn socket_path(pid: u32) -> PathBuf {
    socket_dir().join(format!("{pid}.sock"))
}

/// A control socket being served; removed on drop.
#[derive(Debug)]
pub struct Control {
    path: PathBuf,
}

impl Control {
    /// Serve `board` at `path` (see [`socket_path`]). A stale socket file of a process that
    /// is gone is replaced; a live one is an error.
    pub fn serve(board: Board, path: &Path) -> io::Result<Control> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
            // the directory holds only our sockets; others need not list it
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
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
        Ok(Control {
            path: path.to_owned(),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Read the counters from a control socket.
pub fn query(path: &Path) -> io::Result<Snapshot> {
    let mut s = UnixStream::connect(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    serde_json::from_slice(&buf).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not rocelink counters: {e}", path.display()),
        )
    })
}

/// The control sockets in [`socket_dir`], with the process ids they belong to.
pub fn list() -> Vec<(u32, PathBuf)> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(socket_dir())
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

/// A Prometheus endpoint being served (the thread ends with the process).
#[derive(Debug)]
pub struct Metrics {
    addr: SocketAddr,
}

impl Metrics {
    /// Serve `board` over HTTP at `addr`: `GET /metrics` answers the text format, anything
    /// else 404.
    pub fn serve(board: Board, addr: SocketAddr) -> io::Result<Metrics> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| io::Error::new(e.kind(), format!("metrics at {addr}: {e}")))?;
        let addr = listener.local_addr()?;
        std::thread::Builder::new()
            .name("rocelink-metrics".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let _ = answer(conn, &board);
                }
            })?;
        Ok(Metrics { addr })
    }

    /// The address it listens at (the port chosen when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// One HTTP/1.0-style exchange: read the request head (at most 8 KiB, 2 s), answer, close.
fn answer(mut conn: TcpStream, board: &Board) -> io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 || head.len() > 8192 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = if method == "GET" && (path == "/metrics" || path == "/") {
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            board.snapshot().prometheus(),
        )
    } else {
        (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "rocelink serves GET /metrics\n".to_owned(),
        )
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
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
        let path = dir.join("x.sock");
        let c = Control::serve(board(), &path).unwrap();
        let s = query(c.path()).unwrap();
        assert_eq!(s.total("rx_packets"), 42);
        assert_eq!(s.pid, std::process::id());
        // a second server on a live socket is refused, naming it
        let e = Control::serve(board(), &path).unwrap_err();
        assert!(e.to_string().contains("x.sock"), "{e}");
        drop(c);
        assert!(!path.exists());
        let e = query(&path).unwrap_err();
        assert!(e.to_string().contains("x.sock"), "{e}");
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn metrics_over_http() {
        let m = Metrics::serve(board(), "127.0.0.1:0".parse().unwrap()).unwrap();
        let get = |req: &str| {
            let mut c = TcpStream::connect(m.addr()).unwrap();
            c.write_all(req.as_bytes()).unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        };
        let ok = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("\nrocelink_rx_packets_total{link=\"data\""),
            "{ok}"
        );
        let body = ok.split("\r\n\r\n").nth(1).unwrap();
        let len: usize = ok
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), len);
        let nf = get("GET /other HTTP/1.1\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
    }
}
