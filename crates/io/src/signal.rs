//! Process-wide signal dispositions a command-line tool wants.

/// Let SIGPIPE end the process quietly, as it ends `cat` or `grep`: Rust starts programs
/// with it ignored, so `rocelink decode big.pcap | head` would panic on the closed pipe.
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to its default has no memory effects; no
    // handler of ours is replaced (SIGPIPE has none).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
