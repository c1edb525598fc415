//! Instruction counts with callgrind (valgrind): a test runs one of its own tests (the
//! child) under `valgrind --tool=callgrind` and reads the run's total. Counting
//! instructions, not time, keeps a per-packet budget free of timing noise.
//!
//! This file uses nothing but `std`, so a crate that `rocelink-testkit` itself depends on
//! (the transport) includes it by path instead of depending on the kit.

use std::process::Command;

/// Whether valgrind is here. Without it a test skips (saying why), except in CI, where it
/// fails: `.ci/run` installs valgrind.
pub fn available() -> bool {
    let here = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !here {
        let msg = "this test needs `valgrind` (apt-get install valgrind, or scripts/install-test-deps for every test prerequisite)";
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        eprintln!("skipping: {msg}");
    }
    here
}

/// Instructions of this test binary's test `child` run alone under callgrind with
/// environment `env`; with `toggle`, only those inside functions matching it (callgrind's
/// `--toggle-collect`) are counted.
pub fn instructions(child: &str, env: &[(&str, String)], toggle: Option<&str>) -> u64 {
    let exe = std::env::current_exe().unwrap();
    let dir = std::env::temp_dir().join(format!("rocelink-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tag: Vec<&str> = env.iter().map(|(_, v)| v.as_str()).collect();
    let out = dir.join(format!("cg.{}", tag.join(".")));
    let mut c = Command::new("valgrind");
    c.arg("--tool=callgrind");
    if let Some(t) = toggle {
        c.arg(format!("--toggle-collect={t}"));
    }
    let st = c
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .args(["--exact", child, "--test-threads=1", "--quiet"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("valgrind must be installed (apt-get install valgrind; .ci/run does)");
    assert!(
        st.status.success(),
        "callgrind run failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_dir(&dir);
    // "totals: <Ir>" (or "summary: <Ir>") sums the instructions of the whole run
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("callgrind output has a totals line")
}
