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

use std::ffi::CString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// The file a hard exit removes first (a control socket), as a C string leaked for the
/// handler; null for none.
static REMOVE_ON_EXIT: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Have a hard exit ([`stop_then_exit`]) remove `path` first: the file a clean stop would
/// remove (a control socket), so none is left behind. `None` forgets it.
pub fn remove_on_hard_exit(path: Option<&std::path::Path>) {
    use std::os::unix::ffi::OsStrExt;
    let new = path
        .and_then(|p| CString::new(p.as_os_str().as_bytes()).ok())
        .map_or(std::ptr::null_mut(), CString::into_raw);
    // the old string is left allocated: a handler may be reading it right now
    REMOVE_ON_EXIT.swap(new, Ordering::AcqRel);
}

/// On `sig`: the first stop signal sets `flag` (the running command stops cleanly); one
/// that finds it already set (a second Ctrl-C) removes the file of
/// [`remove_on_hard_exit`] and exits at once with 130. The test and the set are one
/// atomic swap: two signals can reach two threads at the same moment, and exactly one of
/// them then finds the flag clear.
pub fn stop_then_exit(sig: libc::c_int, flag: Arc<AtomicBool>) -> std::io::Result<()> {
    let action = move || {
        if flag.swap(true, Ordering::SeqCst) {
            let p = REMOVE_ON_EXIT.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: `p` is a NUL-terminated string leaked by `remove_on_hard_exit`
                // and never freed; unlink and _exit are async-signal-safe.
                unsafe { libc::unlink(p) };
            }
            // SAFETY: ends the process at once, as a second Ctrl-C asks; async-signal-safe.
            unsafe { libc::_exit(130) };
        }
    };
    // SAFETY: the action only touches atomics and calls unlink and _exit, all
    // async-signal-safe; it allocates nothing and takes no lock.
    unsafe { signal_hook::low_level::register(sig, action) }.map(|_| ())
}
