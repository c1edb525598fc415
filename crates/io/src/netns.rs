//! Network namespaces.

/// Move the calling thread into network namespace `name` (as `ip netns exec` would, for
/// one thread: `/var/run/netns/NAME`). Needs CAP_SYS_ADMIN.
pub fn enter(name: &str) -> std::io::Result<()> {
    let path = format!("/var/run/netns/{name}");
    let f = std::fs::File::open(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?;
    crate::sys::setns_net(std::os::fd::AsRawFd::as_raw_fd(&f))
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot enter namespace {name}: {e}")))
}
