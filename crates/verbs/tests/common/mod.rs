//! Running unmodified RDMA programs under the library: the library this test was built
//! with, a server and a client on two free loopback addresses (or in two namespaces), and
//! what they printed.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `librocelink_verbs.so` as built for this test.
pub(crate) fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        let p = dir.join("librocelink_verbs.so");
        if p.exists() {
            return p;
        }
    }
    panic!(
        "librocelink_verbs.so is not built next to {}",
        exe.display()
    );
}

/// Whether `program` (from Debian's `package`) is installed; a skip (or, in CI, a failure)
/// naming it otherwise.
pub(crate) fn have(program: &str, package: &str) -> bool {
    rocelink_testkit::netns::need(program, package)
}

/// `program args` under the library with `ROCELINK_VERBS=ip` (inside namespace `ns`, if
/// given), output captured.
pub(crate) fn command(ns: Option<&str>, ip: IpAddr, program: &str, args: &[&str]) -> Command {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, program]);
            c
        }
        None => Command::new(program),
    };
    c.args(args)
        .env("ROCELINK_VERBS", ip.to_string())
        .env("LD_PRELOAD", library())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Wait for `child` at most `limit`, killing it after; its output.
pub(crate) fn wait_output(mut child: Child, limit: Duration) -> Output {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// What a run printed, both streams.
pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Where the two ends of a run are.
pub(crate) struct Ends {
    pub(crate) server_ns: Option<String>,
    pub(crate) client_ns: Option<String>,
    pub(crate) server_ip: IpAddr,
    pub(crate) client_ip: IpAddr,
    /// The address the client reaches the server's TCP exchange on.
    pub(crate) connect: String,
    /// Interfaces the server and the client run their devices on through AF_XDP
    /// (`ROCELINK_VERBS_XDP`), if any.
    pub(crate) xdp: (Option<String>, Option<String>),
    /// Variables both ends run with besides the library's (e.g. UCX's `UCX_TLS`).
    pub(crate) env: Vec<(String, String)>,
}

impl Ends {
    /// Two free loopback addresses.
    pub(crate) fn loopback() -> Ends {
        let ips = rocelink_testkit::ports::free_roce_ips(2);
        Ends {
            server_ns: None,
            client_ns: None,
            server_ip: ips[0],
            client_ip: ips[1],
            connect: ips[0].to_string(),
            xdp: (None, None),
            env: Vec::new(),
        }
    }

    /// A server and a client: `program args -p PORT` on both, the client with the server's
    /// address last; waits for the server's TCP exchange before the client starts.
    /// Returns (server, client) output; both are killed after `limit`.
    pub(crate) fn run(&self, program: &str, args: &[&str], limit: Duration) -> (Output, Output) {
        // a port another test took between the look and the bind ends the server at once:
        // then once more on another
        let (server, port) = self.listening_server(program, args);
        let (server, port) = match server {
            Ok(s) => (s, port),
            Err(_) => {
                let (s, p) = self.listening_server(program, args);
                (s.unwrap_or_else(|m| panic!("{m}")), p)
            }
        };
        let mut sargs: Vec<&str> = args.to_vec();
        sargs.extend(["-p", &port]);
        let mut cargs = sargs.clone();
        cargs.push(&self.connect);
        let mut cc = command(self.client_ns.as_deref(), self.client_ip, program, &cargs);
        cc.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(i) = &self.xdp.1 {
            cc.env("ROCELINK_VERBS_XDP", i);
        }
        let client = cc.spawn().unwrap();
        let c = wait_output(client, limit);
        let s = wait_output(server, Duration::from_secs(10));
        (s, c)
    }
}

impl Ends {
    /// `program args -p PORT` as the server, on a free port, once it listens (or why not).
    fn listening_server(&self, program: &str, args: &[&str]) -> (Result<Child, String>, String) {
        let port = rocelink_testkit::ports::free_tcp_port().to_string();
        let mut sargs: Vec<&str> = args.to_vec();
        sargs.extend(["-p", &port]);
        let mut sc = command(self.server_ns.as_deref(), self.server_ip, program, &sargs);
        sc.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(i) = &self.xdp.0 {
            sc.env("ROCELINK_VERBS_XDP", i);
        }
        let mut server = sc.spawn().unwrap();
        // (the server listens in its namespace: look from there)
        let listening = match &self.server_ns {
            None => rocelink_testkit::ports::wait_tcp_listening(
                port.parse().unwrap(),
                Duration::from_secs(30),
            ),
            Some(ns) => wait_listening_in(ns, &port),
        };
        if listening && server.try_wait().unwrap().is_none() {
            return (Ok(server), port);
        }
        let out = wait_output(server, Duration::from_millis(100));
        let why = format!(
            "{program} never listened on {port}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (Err(why), port)
    }

    /// The server alone (nothing connects): its output once it ends or after 10 s.
    pub(crate) fn run_server_alone(&self, program: &str, args: &[&str]) -> (Output, ()) {
        let mut sc = command(self.server_ns.as_deref(), self.server_ip, program, args);
        if let Some(i) = &self.xdp.0 {
            sc.env("ROCELINK_VERBS_XDP", i);
        }
        (
            wait_output(sc.spawn().unwrap(), Duration::from_secs(10)),
            (),
        )
    }
}

fn wait_listening_in(ns: &str, port: &str) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "ss",
                "-Hltn",
                &format!("sport = :{port}"),
            ])
            .output()
            .unwrap();
        if !o.stdout.is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The result rows a perftest run printed: lines whose first field is the message size.
pub(crate) fn perftest_rows(out: &str) -> Vec<Vec<f64>> {
    let mut seen_header = false;
    let mut rows = Vec::new();
    for l in out.lines() {
        if l.trim_start().starts_with("#bytes") {
            seen_header = true;
            continue;
        }
        let f: Vec<f64> = l
            .split_whitespace()
            .map_while(|w| w.parse::<f64>().ok())
            .collect();
        if seen_header && f.len() >= 3 {
            rows.push(f);
        }
    }
    rows
}

/// Assert that a run ended well on both sides and printed at least `rows` result rows on
/// the client and `server_rows` on the server (perftest's passive servers print fewer: one
/// row for `-a`, none for a READ latency test); the client's rows.
pub(crate) fn assert_rows(
    what: &str,
    s: &Output,
    c: &Output,
    rows: usize,
    server_rows: usize,
) -> Vec<Vec<f64>> {
    let (st, ct) = (text(s), text(c));
    assert!(
        s.status.success() && c.status.success(),
        "{what}: server {:?}, client {:?}\n--- server\n{st}\n--- client\n{ct}",
        s.status,
        c.status
    );
    let (sr, cr) = (perftest_rows(&st), perftest_rows(&ct));
    assert!(
        sr.len() >= server_rows && cr.len() >= rows,
        "{what}: {} server rows ({server_rows} wanted), {} client rows ({rows} wanted)\n--- server\n{st}\n--- client\n{ct}",
        sr.len(),
        cr.len()
    );
    cr
}

/// `ucx_perftest ARGS` between two processes over UCX's verbs transports `tls` on the
/// library's device: both end well, the client prints its result row, and its device
/// carried the traffic (the library's counters, printed at close).
pub(crate) fn ucx_perftest(e: &mut Ends, tls: &str, args: &[&str]) {
    e.env = vec![
        ("UCX_TLS".into(), tls.into()),
        ("UCX_NET_DEVICES".into(), "rocelink0:1".into()),
        ("ROCELINK_VERBS_STATS".into(), "1".into()),
    ];
    let (s, c) = e.run("ucx_perftest", args, Duration::from_secs(120));
    let (st, ct) = (text(&s), text(&c));
    let what = format!("UCX_TLS={tls} ucx_perftest {args:?}");
    assert!(
        s.status.success() && c.status.success(),
        "{what}: server {:?}, client {:?}\n--- server\n{st}\n--- client\n{ct}",
        s.status,
        c.status
    );
    let row = ct
        .lines()
        .find(|l| l.starts_with("Final:"))
        .unwrap_or_default();
    let iters: Vec<f64> = row
        .split_whitespace()
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(
        iters.len() >= 7 && iters[0] >= 200.0,
        "{what}: no result row\n{ct}"
    );
    let received = ct
        .lines()
        .find_map(|l| {
            let at = l.find("rx_datagrams: ")? + "rx_datagrams: ".len();
            l[at..].split(',').next()?.trim().parse::<u64>().ok()
        })
        .unwrap_or(0);
    assert!(
        received >= 200,
        "{what}: the device received {received} datagrams\n{ct}"
    );
}

/// Debian's own Python, which its `pyverbs` and `mpi4py` modules are built for.
pub(crate) const DEBIAN_PYTHON: &str = "/usr/bin/python3";

/// The MPI test program (`tests/data/mpi_pingpong.py`).
pub(crate) const MPI_PINGPONG: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mpi_pingpong.py");

/// Whether Open MPI and mpi4py (for Debian's python3) are installed; a skip (or, in CI, a
/// failure) otherwise.
pub(crate) fn have_mpi() -> bool {
    if !have("mpirun", "openmpi-bin") {
        return false;
    }
    let mpi4py = Command::new(DEBIAN_PYTHON)
        .args(["-c", "import mpi4py.MPI"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !mpi4py {
        let msg = "this test needs mpi4py for Debian's python3 (apt-get install python3-mpi4py)";
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        eprintln!("skipping: {msg}");
    }
    mpi4py
}

/// Assert that an MPI run of `MPI_PINGPONG` ended well: both ranks' bytes intact and sums
/// right, and UCX's log naming `rc_verbs` on the library's device for both.
pub(crate) fn assert_mpi_run(o: &Output) {
    let t = text(o);
    assert!(o.status.success(), "{t}");
    for rank in 0..2 {
        let line = t
            .split("rank ")
            .find(|l| l.starts_with(&format!("{rank}:")))
            .unwrap_or_default();
        assert!(
            line.contains("intact=True") && line.contains("sums right=True"),
            "rank {rank}: `{line}`\n{t}"
        );
    }
    let over_verbs = t
        .lines()
        .filter(|l| l.contains("ep_cfg") && l.contains("rc_verbs/rocelink0:1"))
        .count();
    assert!(over_verbs >= 2, "UCX did not name the device:\n{t}");
}
