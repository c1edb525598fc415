//! Suites and middleware written by others, run against the library: rdma-core's own
//! pyverbs tests (Debian's `python3-pyverbs` ships them), UCX's `ucx_perftest` over its
//! verbs transports (`rc_verbs`, `ud_verbs`) and Open MPI on UCX (two ranks), two processes
//! on two loopback addresses.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// Where Debian's `python3-pyverbs` puts rdma-core's tests (some files gzipped).
const PYVERBS_TESTS: &str = "/usr/share/doc/rdma-core/tests";

/// Whether the pyverbs suite is installed; a skip (or, in CI, a failure) otherwise.
fn have_pyverbs() -> bool {
    let found = Path::new(PYVERBS_TESTS).join("run_tests.py").exists()
        && Command::new(DEBIAN_PYTHON)
            .args(["-c", "import pyverbs.device"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !found {
        let msg = "this test needs rdma-core's pyverbs tests (apt-get install python3-pyverbs, \
                   or scripts/install-test-deps)";
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        eprintln!("skipping: {msg}");
    }
    found
}

/// The counts unittest printed: (ran, skipped, failures, errors).
fn unittest_counts(out: &str) -> (usize, usize, usize, usize) {
    let ran = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let count = |key: &str| {
        out.lines()
            .rev()
            .find(|l| l.starts_with("OK") || l.starts_with("FAILED"))
            .and_then(|l| {
                let at = l.find(&format!("{key}="))? + key.len() + 1;
                let n: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
                n.parse().ok()
            })
            .unwrap_or(0)
    };
    (ran, count("skipped"), count("failures"), count("errors"))
}

#[test]
fn rdma_cores_pyverbs_suite_passes_with_no_failure_and_no_error() {
    if !have_pyverbs() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("rocelink-pyverbs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let suite = dir.join("tests");
    let copied = Command::new("cp")
        .args(["-r", PYVERBS_TESTS])
        .arg(&suite)
        .status()
        .unwrap();
    assert!(copied.success());
    let gz: Vec<_> = std::fs::read_dir(&suite)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gz"))
        .collect();
    if !gz.is_empty() {
        assert!(
            Command::new("gzip")
                .arg("-d")
                .args(&gz)
                .status()
                .unwrap()
                .success()
        );
    }
    let ip = rocelink_testkit::ports::free_roce_ips(1)[0];
    let mut c = command(
        None,
        ip,
        DEBIAN_PYTHON,
        &["run_tests.py", "--dev", "rocelink0", "-v"],
    );
    c.current_dir(&suite);
    let o = wait_output(c.spawn().unwrap(), LIMIT);
    let _ = std::fs::remove_dir_all(&dir);
    let t = text(&o);
    let (ran, skipped, failures, errors) = unittest_counts(&t);
    let passed = ran - skipped;
    eprintln!("pyverbs: {ran} ran, {passed} passed, {skipped} skipped");
    assert!(o.status.success() && failures == 0 && errors == 0, "{t}");
    // every test that applies to a RoCE v2 device without memory windows, XRC, on-demand
    // paging or device memory (docs/verbs.md lists the skips; a host's huge pages or GPU
    // may move a few)
    assert!(ran > 200 && passed >= 70, "{passed} of {ran} passed:\n{t}");
    for test in [
        "test_atomic_invalid_qp_access",
        "test_cq_events_rc",
        "test_query_device_ex",
        "test_ro_rc_traffic",
        "test_qp_ex_rc_rdma_write",
        "test_qp_ex_rc_atomic_cmp_swp",
        "test_qp_ex_ud_send_imm",
        "test_rc_traffic_cq_ex",
        "test_ud_traffic_cq_ex",
    ] {
        // `name (module)`, then its docstring's line if it has one, ending in the verdict
        let lines: Vec<&str> = t.lines().collect();
        let at = lines.iter().position(|l| l.starts_with(test));
        let verdict = at.map(|i| lines[i..lines.len().min(i + 2)].join(" "));
        let verdict = verdict.unwrap_or_default();
        assert!(verdict.contains("... ok"), "{test}: `{verdict}`");
    }
}

#[test]
fn ucx_runs_tag_put_and_get_over_rc_verbs_and_ud_verbs() {
    if !have("ucx_perftest", "ucx-utils") {
        return;
    }
    let mut e = Ends::loopback();
    let n = ["-n", "300", "-w", "20"];
    // `rc_verbs` needs `ud_verbs` beside it for UCX's wire-up (`UCX_TLS=rc` names both)
    for tls in ["rc_verbs,ud_verbs,self", "ud_verbs,self"] {
        for test in [
            &["-t", "tag_lat"][..],
            &["-t", "tag_bw", "-s", "1048576"],
            &["-t", "ucp_put_bw", "-s", "65536"],
            &["-t", "ucp_get", "-s", "65536"],
        ] {
            ucx_perftest(&mut e, tls, &[test, &n[..]].concat());
        }
    }
    // UCX's transport layer itself: RDMA WRITE and READ straight from registered memory
    for test in [["-t", "put_bw"], ["-t", "get"]] {
        let args = [
            &test[..],
            &["-D", "zcopy", "-s", "65536", "-x", "rc_verbs"],
            &n[..],
        ];
        ucx_perftest(
            &mut e,
            "rc_verbs",
            &[&args.concat()[..], &["-d", "rocelink0:1"]].concat(),
        );
    }
}

#[test]
fn open_mpi_runs_a_ping_pong_and_an_allreduce_over_ucx_on_the_library() {
    if !have_mpi() {
        return;
    }
    let ips = rocelink_testkit::ports::free_roce_ips(2);
    let lib = library();
    let mut c = Command::new("mpirun");
    // pml ucx over UCX's verbs transports on each rank's own device; the launcher's own
    // channel on loopback only (a test sends nothing beyond 127/8)
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--mca",
        "pml",
        "ucx",
        "--mca",
        "pml_ucx_devices",
        "rocelink*",
        "--mca",
        "pml_ucx_tls",
        "any",
        "--mca",
        "btl",
        "self",
        "--mca",
        "oob_tcp_if_include",
        "lo",
    ]);
    for (i, ip) in ips.iter().enumerate() {
        if i > 0 {
            c.arg(":");
        }
        c.args(["-np", "1"]);
        for (k, v) in [
            ("LD_PRELOAD", lib.display().to_string()),
            ("ROCELINK_VERBS", ip.to_string()),
            ("UCX_TLS", "rc_verbs,ud_verbs,self".into()),
            ("UCX_NET_DEVICES", "rocelink0:1".into()),
            ("UCX_LOG_LEVEL", "info".into()),
        ] {
            c.args(["-x", &format!("{k}={v}")]);
        }
        c.args([DEBIAN_PYTHON, MPI_PINGPONG]);
    }
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let o = wait_output(c.spawn().unwrap(), LIMIT);
    assert_mpi_run(&o);
}

#[test]
fn a_device_has_the_node_and_sysfs_files_programs_look_for() {
    // what UCX checks before it lists a device, read here by Python's os module (its
    // `stat`, `access` and `open` are the C library's)
    if !have("python3", "python3") {
        return;
    }
    let ip = rocelink_testkit::ports::free_roce_ips(1)[0];
    let script = r#"
import os, stat, sys
node = "/dev/infiniband/uverbs-rocelink0"
st = os.stat(node)
print("chr", stat.S_ISCHR(st.st_mode), os.access(node, os.R_OK | os.W_OK), os.access(node, os.X_OK))
print("absent", os.path.exists("/dev/infiniband/uverbs-rocelink9"))
base = "/sys/class/infiniband/rocelink0/ports/1/"
for f in ["gid_attrs/types/0", "gids/0", "state", "link_layer"]:
    print(f, repr(open(base + f).read()))
try:
    open(base + "gid_attrs/types/0", "w")
except OSError as e:
    print("write", e.errno)
try:
    open(base + "gid_attrs/types/1")
except OSError as e:
    print("other", e.errno)
"#;
    let o = wait_output(
        command(None, ip, "python3", &["-c", script])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let [a, b, c, d] = ip_octets(ip);
    for want in [
        "chr True True False".to_owned(),
        "absent False".to_owned(),
        "gid_attrs/types/0 'RoCE v2\\n'".to_owned(),
        format!("gids/0 '0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}\\n'"),
        "state '4: ACTIVE\\n'".to_owned(),
        "link_layer 'Ethernet\\n'".to_owned(),
        format!("write {}", libc::EACCES),
        format!("other {}", libc::ENOENT),
    ] {
        assert!(t.lines().any(|l| l == want), "no `{want}` in:\n{t}");
    }
}

fn ip_octets(ip: std::net::IpAddr) -> [u8; 4] {
    match ip {
        std::net::IpAddr::V4(v) => v.octets(),
        std::net::IpAddr::V6(_) => panic!("loopback test addresses are IPv4"),
    }
}

#[test]
fn a_fortified_c_program_reads_the_devices_sysfs_files_too() {
    // `_FORTIFY_SOURCE` turns `open(path, flags)` with flags not known at compile time into
    // `__open_2`: the library answers that as `open`
    if !have("gcc", "gcc") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("rocelink-fortify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let src = dir.join("read.c");
    std::fs::write(
        &src,
        r#"#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int flags = atoi(argv[2]); /* not a constant: __open_2 under _FORTIFY_SOURCE */
    int fd = open(argv[1], flags);
    if (fd < 0) { perror("open"); return 1; }
    char buf[64] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    printf("%zd [%s]\n", n, buf);
    return close(fd);
}
"#,
    )
    .unwrap();
    let exe = dir.join("read");
    let built = Command::new("gcc")
        .args(["-O2", "-D_FORTIFY_SOURCE=2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success());
    let nm = Command::new("nm").arg("-D").arg(&exe).output().unwrap();
    assert!(
        String::from_utf8_lossy(&nm.stdout).contains("__open_2"),
        "the compiler did not fortify the call"
    );
    let ip = rocelink_testkit::ports::free_roce_ips(1)[0];
    let path = "/sys/class/infiniband/rocelink0/ports/1/gid_attrs/types/0";
    let exe_s = exe.display().to_string();
    let o = wait_output(
        command(None, ip, &exe_s, &[path, "0"]).spawn().unwrap(),
        LIMIT,
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(text(&o).trim(), "8 [RoCE v2\n]", "{}", text(&o));
}
