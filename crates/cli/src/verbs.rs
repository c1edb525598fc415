//! `rocelink verbs`: the devices `librocelink_verbs.so` offers, and unmodified RDMA
//! programs run over it (the library preloaded, the devices set).

use anyhow::{Context, Result, bail};
use rocelink_verbs::devices::{self, DeviceInfo};
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Option<VerbsCmd>,
    /// The devices' addresses, one device each (rocelink0, rocelink1, …), as
    /// ROCELINK_VERBS takes them; default: ROCELINK_VERBS if set, else every IPv4 address
    /// of an interface that is up and not loopback.
    #[arg(long, value_delimiter = ',', value_name = "IP,…")]
    ip: Vec<IpAddr>,
    /// The program to run, and its arguments (after `--`).
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    program: Vec<OsString>,
}

#[derive(clap::Subcommand, Debug)]
enum VerbsCmd {
    /// List the devices, as ibv_devices and ibv_devinfo would show them.
    Devices(DevicesArgs),
}

#[derive(clap::Args, Debug)]
struct DevicesArgs {
    /// The devices' addresses (as `rocelink verbs --ip`).
    #[arg(long, value_delimiter = ',', value_name = "IP,…")]
    ip: Vec<IpAddr>,
    /// One JSON object per device.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &Args) -> Result<ExitCode> {
    match &a.cmd {
        Some(VerbsCmd::Devices(d)) => list(d),
        None if a.program.is_empty() => bail!(
            "name a program to run after `--` (rocelink verbs -- ib_write_bw), or `rocelink verbs devices`"
        ),
        None => exec(a),
    }
}

/// The devices for `--ip` (or the environment / the interfaces), checked.
fn resolve(ip: &[IpAddr]) -> Result<(Vec<DeviceInfo>, Option<String>)> {
    let spec = if ip.is_empty() {
        std::env::var(devices::ENV).ok()
    } else {
        Some(
            ip.iter()
                .map(IpAddr::to_string)
                .collect::<Vec<_>>()
                .join(","),
        )
    };
    let list = devices::discover(spec.as_deref()).map_err(|e| {
        let mut e = e.to_string();
        if !ip.is_empty() {
            e = e.replace(devices::ENV, "--ip");
        }
        anyhow::anyhow!(e)
    })?;
    Ok((list, spec))
}

fn list(d: &DevicesArgs) -> Result<ExitCode> {
    let (list, _) = resolve(&d.ip)?;
    if list.is_empty() {
        bail!(
            "no devices: no interface has an IPv4 address and is up (give one with --ip 127.0.0.2)"
        );
    }
    for dev in &list {
        if d.json {
            println!("{}", serde_json::to_string(dev)?);
        } else {
            let g = dev.guid;
            println!(
                "{}  GID {}  RoCE v2  port ACTIVE, Ethernet, MTU {}  node GUID {:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}  ({})",
                dev.name,
                std::net::Ipv6Addr::from(devices::gid_of(dev.ip)),
                128 << devices::ib_mtu_for(dev.if_mtu),
                g[0],
                g[1],
                g[2],
                g[3],
                g[4],
                g[5],
                g[6],
                g[7],
                dev.ifname.as_deref().unwrap_or("no interface"),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where `librocelink_verbs.so` is: `ROCELINK_VERBS_LIB`, or the newest of the copies
/// beside this executable (as cargo builds it) and in `../lib/rocelink` (as installed).
pub(crate) fn library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("ROCELINK_VERBS_LIB") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("ROCELINK_VERBS_LIB={}: no such file", p.display());
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("where this program is")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        dir.join("librocelink_verbs.so"),
        dir.join("deps/librocelink_verbs.so"),
        dir.join("../lib/rocelink/librocelink_verbs.so"),
    ];
    // cargo leaves a copy beside the executable and one in deps/, and updates them with
    // different commands (`cargo build` the first, `cargo test` the second): the newer
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let found = candidates.into_iter().filter(|p| p.is_file());
    found.max_by_key(modified).with_context(|| {
        format!(
            "librocelink_verbs.so is not beside {} (build it with `cargo build --release -p rocelink-verbs`, or point ROCELINK_VERBS_LIB at it)",
            exe.display()
        )
    })
}

fn exec(a: &Args) -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let lib = library()?;
    let (list, spec) = resolve(&a.ip)?;
    if list.is_empty() {
        bail!(
            "no devices: no interface has an IPv4 address and is up (give one with --ip 127.0.0.2)"
        );
    }
    let mut preload = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let mut cmd = std::process::Command::new(&a.program[0]);
    cmd.args(&a.program[1..]).env("LD_PRELOAD", preload);
    if let Some(s) = spec {
        cmd.env(devices::ENV, s);
    }
    // the program takes this process's place: its exit status and its signals are its own
    let e = cmd.exec();
    bail!("cannot run {}: {e}", a.program[0].to_string_lossy())
}
