//! The role libraries reach the live view only through their `view` feature (which the CLI
//! and Python turn on): a user of the sans-IO IMS, ultrasound or HSB host library alone
//! compiles no HTTP server and no async runtime.
#![allow(clippy::unwrap_used)]

use std::process::Command;

/// `cargo tree` of `krate`'s normal dependencies, with `features`.
fn tree(krate: &str, features: &[&str]) -> String {
    let mut c = Command::new(env!("CARGO"));
    c.args([
        "tree",
        "--offline",
        "-e",
        "normal",
        "--prefix",
        "none",
        "-p",
        krate,
    ]);
    if !features.is_empty() {
        c.args(["--features", &features.join(",")]);
    }
    let o = c.current_dir(env!("CARGO_MANIFEST_DIR")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn role_libraries_alone_pull_in_no_http_stack() {
    for krate in ["rocelink-ims", "rocelink-ultrasound", "rocelink-hsb-host"] {
        let alone = tree(krate, &[]);
        assert!(alone.contains(krate), "{alone}");
        for heavy in ["axum ", "hyper ", "tokio ", "rocelink-view "] {
            assert!(!alone.contains(heavy), "{krate} pulls in {heavy}:\n{alone}");
        }
        // with the feature the view comes in (so the look above can fail)
        assert!(
            tree(krate, &["view"]).contains("axum "),
            "{krate} with view"
        );
    }
}
