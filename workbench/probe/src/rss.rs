//! Resident set size from `/proc/<pid>/status`, read without allocating
//! (for this process).

use std::io::Read;

/// Current and peak resident set size, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rss {
    /// `VmRSS`.
    pub rss: u64,
    /// `VmHWM`: the high-water mark since the process started.
    pub peak: u64,
}

/// Reads VmRSS and VmHWM; `None` off Linux or when the file is unreadable.
/// PERF: a stack buffer, so sampling RSS does not disturb the heap it samples.
pub fn read() -> Option<Rss> {
    read_from("/proc/self/status")
}

/// This process's resident anonymous memory (`RssAnon`: its heap, thread
/// stacks and other private mappings, not the file-backed pages of its code
/// and libraries), bytes, read as [`read`] reads: without allocating.
pub fn read_anon() -> Option<u64> {
    let mut buf = [0u8; 4096];
    let n = fill("/proc/self/status", &mut buf)?;
    buf[..n].split(|b| *b == b'\n').find_map(|line| line.strip_prefix(b"RssAnon:").and_then(kb))
}

/// The same for another process (a server a load driver spawned).
pub fn read_pid(pid: u32) -> Option<Rss> {
    read_from(&format!("/proc/{pid}/status"))
}

/// The proportional set size of another process (`Pss` in
/// `/proc/<pid>/smaps_rollup`), bytes: its private pages plus its share of
/// pages other processes map too. Summed over processes it counts a shared
/// library's pages once, where summed RSS counts them once per process.
pub fn read_pss(pid: u32) -> Option<u64> {
    let text = std::fs::read(format!("/proc/{pid}/smaps_rollup")).ok()?;
    text.split(|b| *b == b'\n').find_map(|line| line.strip_prefix(b"Pss:").and_then(kb))
}

/// A `/proc/<pid>/stat` line's command name and CPU ticks (user + system,
/// fields 14 and 15); the name is in parentheses and may hold spaces, so
/// the fields are counted after the last ')'.
pub fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the state.
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some((stat.get(open + 1..close)?.to_string(), ticks(11)? + ticks(12)?))
}

/// A process's CPU time so far (user + system, all its threads), in clock
/// ticks (`sysconf(_SC_CLK_TCK)` a second).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?).map(|(_, t)| t)
}

fn read_from(path: &str) -> Option<Rss> {
    let mut buf = [0u8; 4096];
    let n = fill(path, &mut buf)?;
    parse(&buf[..n])
}

/// Reads the file at `path` into `buf` (as much as fits); the bytes read.
fn fill(path: &str, buf: &mut [u8]) -> Option<usize> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    Some(n)
}

/// Parses the `VmRSS:` and `VmHWM:` lines (values in kB).
pub fn parse(status: &[u8]) -> Option<Rss> {
    let mut rss = None;
    let mut peak = None;
    for line in status.split(|b| *b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"VmRSS:") {
            rss = kb(rest);
        } else if let Some(rest) = line.strip_prefix(b"VmHWM:") {
            peak = kb(rest);
        }
    }
    Some(Rss { rss: rss?, peak: peak? })
}

fn kb(field: &[u8]) -> Option<u64> {
    let digits = field.iter().skip_while(|b| !b.is_ascii_digit()).take_while(|b| b.is_ascii_digit());
    let mut v: u64 = 0;
    let mut any = false;
    for d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        any = true;
    }
    any.then_some(v * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_status_lines() {
        let s = b"Name:\tx\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(super::parse(s), Some(super::Rss { rss: 1024 * 1024, peak: 2048 * 1024 }));
        assert_eq!(super::parse(b"VmRSS: 5 kB\n"), None);
    }

    #[test]
    fn reads_this_process() {
        let r = super::read().expect("/proc/self/status");
        assert!(r.rss > 0 && r.peak >= r.rss);
        let anon = super::read_anon().expect("RssAnon in /proc/self/status");
        assert!(anon > 0 && anon <= super::read().unwrap().rss + (64 << 10), "{anon}");
        let pss = super::read_pss(std::process::id()).expect("/proc/<pid>/smaps_rollup");
        // PSS shares out what other processes also map, so it never exceeds RSS
        // (read a moment later, so allow the heap to have grown by a page or two).
        assert!(pss > 0 && pss <= super::read().unwrap().rss + (64 << 10), "{pss}");
    }
}
