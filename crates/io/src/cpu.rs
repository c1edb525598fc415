//! CPUs: pinning threads and processes, and the CPU time a thread used.

/// Pin the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it; the call
    // passes its exact size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Pin every thread of process `pid` that exists now (and those it starts later) to `cpu`.
pub fn pin_process(pid: u32, cpu: usize) -> std::io::Result<()> {
    // the main thread first: a thread it makes from now on inherits the pin; then every
    // thread it already made
    pin_task(pid, cpu)?;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                // a thread that ended meanwhile is not an error
                let _ = pin_task(tid, cpu);
            }
        }
    }
    Ok(())
}

/// Pin one thread (a task id) to `cpu`.
fn pin_task(tid: u32, cpu: usize) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(tid)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: as in pin_current_thread; sched_setaffinity only reads the set, and an
    // unknown pid is an error (ESRCH), not undefined behaviour.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// CPU time the calling thread has used, split as the kernel accounts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// In user space.
    pub user: std::time::Duration,
    /// In the kernel on the thread's behalf (system calls, the copies they make).
    pub system: std::time::Duration,
}

impl CpuTime {
    /// User plus system.
    pub fn total(self) -> std::time::Duration {
        self.user + self.system
    }
}

impl std::ops::Sub for CpuTime {
    type Output = CpuTime;
    fn sub(self, o: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(o.user),
            system: self.system.saturating_sub(o.system),
        }
    }
}

/// CPU time (user and system) the calling thread has used.
pub fn thread_cpu() -> CpuTime {
    // SAFETY: getrusage writes one rusage struct, which `ru` is.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    CpuTime {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
    }
}

/// CPU time (user + system) the calling thread has used.
pub fn thread_cpu_time() -> std::time::Duration {
    thread_cpu().total()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_a_process_pins_the_threads_it_already_has() {
        // a process whose second thread exists before the pin
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import threading,time; threading.Thread(target=time.sleep,args=(5,)).start(); time.sleep(5)",
            ])
            .spawn()
            .unwrap();
        let pid = child.id();
        let tasks = || std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
        let t0 = std::time::Instant::now();
        while tasks() < 2 && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(tasks() >= 2, "the child has two threads");
        pin_process(pid, 0).unwrap();
        let allowed: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .map(|t| {
                let s = std::fs::read_to_string(t.path().join("status")).unwrap();
                let l = s
                    .lines()
                    .find(|l| l.starts_with("Cpus_allowed_list:"))
                    .unwrap();
                l.split_whitespace().nth(1).unwrap().to_string()
            })
            .collect();
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            allowed.len() >= 2 && allowed.iter().all(|a| a == "0"),
            "{allowed:?}"
        );
    }

    #[test]
    fn a_busy_thread_accounts_user_time() {
        let t0 = thread_cpu();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        // bounded: at most 2 s of spinning, stopped as soon as the kernel has accounted a tick
        while start.elapsed() < std::time::Duration::from_secs(2) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            if (thread_cpu() - t0).user > std::time::Duration::ZERO {
                break;
            }
        }
        std::hint::black_box(x);
        let d = thread_cpu() - t0;
        assert!(d.user > std::time::Duration::ZERO, "{d:?}");
        assert_eq!(d.total(), d.user + d.system);
    }
}
