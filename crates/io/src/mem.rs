//! What the machine has: memory, for checking sizes a user asks for before allocating.

/// Bytes of memory the kernel manages (`MemTotal` of `/proc/meminfo`), if it can be read.
pub fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_is_read() {
        let m = super::total_memory().unwrap();
        assert!(m > 64 << 20, "{m}");
    }
}
