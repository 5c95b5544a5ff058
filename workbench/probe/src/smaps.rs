//! Where a process's resident memory comes from, from `/proc/<pid>/smaps`:
//! each mapping's resident bytes (`Rss`) put in one of seven parts, so a
//! change in RSS between two builds shows as the pages it moved.
//!
//! The parts ([`Anatomy`]): the binary's own text (its executable mapping)
//! and the rest of its file (read-only data, relocations, `.data`); other
//! file-backed mappings (shared libraries, the vdso); the `brk` heap;
//! thread stacks; and every other anonymous mapping (malloc's mmap'd arenas
//! and large blocks, jemalloc's extents, the runtime's buffers). They sum to
//! the process's RSS as smaps counts it.
//!
//! Thread stacks are not labelled in smaps (only the main thread's
//! `[stack]` is): a thread's stack is told by its guard, a `---p` mapping
//! of at most [`GUARD_MAX`] directly below it (glibc's `pthread_create`
//! maps the guard at the stack's low end). glibc's malloc arenas also leave
//! `---p` regions, but above their used part and tens of MiB large, so the
//! rule does not mistake them for stacks.

/// GUARD_MAX = 64 KiB: the largest guard below a thread stack (glibc's
/// default is one page; Rust's std asks for none beyond it).
pub const GUARD_MAX: u64 = 64 << 10;

/// A process's resident bytes by where they come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Anatomy {
    /// The binary's executable mapping, resident.
    pub text: u64,
    /// The binary's executable mapping, all of it (resident or not).
    pub text_size: u64,
    /// The binary's other mappings (read-only data, relocations, data).
    pub binary_other: u64,
    /// Other file-backed mappings: shared libraries, the vdso.
    pub files: u64,
    /// The `brk` heap (`[heap]`).
    pub heap: u64,
    /// Thread stacks, the main thread's `[stack]` among them.
    pub stacks: u64,
    /// Every other anonymous mapping: malloc's mmap'd arenas and large
    /// blocks, an allocator's extents.
    pub anon: u64,
}

impl Anatomy {
    /// The resident set: the parts' sum.
    pub fn rss(&self) -> u64 {
        self.text + self.binary_other + self.files + self.heap + self.stacks + self.anon
    }

    /// Reads `/proc/<pid>/smaps`; `None` when it cannot be read.
    pub fn read(pid: u32) -> Option<Anatomy> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
        Some(Anatomy::parse(&smaps, &exe.to_string_lossy()))
    }

    /// The anatomy of an smaps text for the binary at `exe`.
    pub fn parse(smaps: &str, exe: &str) -> Anatomy {
        let mut a = Anatomy::default();
        // The mapping before this one: its end address, whether it is an
        // anonymous `---p` guard, and its size.
        let mut prev_guard: Option<(u64, u64)> = None;
        let mut cur: Option<Mapping> = None;
        for line in smaps.lines() {
            if let Some(m) = Mapping::header(line) {
                if let Some(done) = cur.take() {
                    prev_guard = done.guard_end();
                    a.add(&done);
                }
                let below_guard = prev_guard.is_some_and(|(end, size)| end == m.start && size <= GUARD_MAX);
                let exe = m.path == exe;
                cur = Some(Mapping { below_guard, exe, ..m });
                continue;
            }
            let Some(m) = cur.as_mut() else { continue };
            if let Some(v) = line.strip_prefix("Rss:") {
                m.rss = kb(v);
            } else if let Some(v) = line.strip_prefix("Size:") {
                m.size = kb(v);
            }
        }
        if let Some(done) = cur {
            a.add(&done);
        }
        a
    }

    fn add(&mut self, m: &Mapping) {
        let part = match m.path.as_str() {
            "[heap]" => &mut self.heap,
            "[stack]" => &mut self.stacks,
            "" if m.below_guard && m.perms.starts_with("rw") => &mut self.stacks,
            "" => &mut self.anon,
            _ if m.exe => {
                if m.perms.contains('x') {
                    self.text_size += m.size;
                    &mut self.text
                } else {
                    &mut self.binary_other
                }
            }
            _ => &mut self.files,
        };
        *part += m.rss;
    }
}

/// One mapping of smaps: its header's fields and its sizes.
#[derive(Debug, Default)]
struct Mapping {
    start: u64,
    end: u64,
    perms: String,
    path: String,
    exe: bool,
    below_guard: bool,
    size: u64,
    rss: u64,
}

impl Mapping {
    /// `start-end perms offset dev inode [path]`, or `None` for a field line.
    fn header(line: &str) -> Option<Mapping> {
        let mut f = line.split_ascii_whitespace();
        let (start, end) = f.next()?.split_once('-')?;
        let (start, end) = (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?);
        let perms = f.next()?.to_string();
        let (_offset, _dev, _inode) = (f.next()?, f.next()?, f.next()?);
        let path = f.collect::<Vec<_>>().join(" ");
        Some(Mapping { start, end, perms, path, ..Mapping::default() })
    }

    /// `(end, size)` when this is an anonymous, inaccessible mapping (a guard).
    fn guard_end(&self) -> Option<(u64, u64)> {
        (self.path.is_empty() && self.perms.starts_with("---")).then_some((self.end, self.end - self.start))
    }
}

fn kb(field: &str) -> u64 {
    field.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0) * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55a000000000-55a000002000 r--p 00000000 fe:00 1 /opt/srv
Size:                  8 kB
Rss:                   8 kB
55a000002000-55a000102000 r-xp 00002000 fe:00 1 /opt/srv
Size:               1024 kB
Rss:                 256 kB
55a000102000-55a000110000 rw-p 00102000 fe:00 1 /opt/srv
Size:                 56 kB
Rss:                  40 kB
55a001000000-55a001100000 rw-p 00000000 00:00 0 [heap]
Size:               1024 kB
Rss:                 512 kB
7f0000000000-7f0000001000 ---p 00000000 00:00 0
Size:                  4 kB
Rss:                   0 kB
7f0000001000-7f0000201000 rw-p 00000000 00:00 0
Size:               2048 kB
Rss:                  16 kB
7f1000000000-7f1000021000 rw-p 00000000 00:00 0
Size:                132 kB
Rss:                 132 kB
7f1000021000-7f1004000000 ---p 00000000 00:00 0
Size:              65404 kB
Rss:                   0 kB
7f1004000000-7f1004100000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                 100 kB
7f2000000000-7f2000100000 r-xp 00000000 fe:00 2 /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               1024 kB
Rss:                 600 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Size:                132 kB
Rss:                  12 kB
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0 [vdso]
Size:                  8 kB
Rss:                   4 kB
";

    #[test]
    fn every_mapping_lands_in_one_part() {
        let a = Anatomy::parse(SMAPS, "/opt/srv");
        assert_eq!(a.text, 256 << 10);
        assert_eq!(a.text_size, 1024 << 10);
        assert_eq!(a.binary_other, 48 << 10);
        assert_eq!(a.heap, 512 << 10);
        // The 2 MiB mapping above a one-page guard, and [stack].
        assert_eq!(a.stacks, (16 + 12) << 10);
        // An arena's used part (its `---p` rest above it) and the mapping
        // above that rest (a 64 MiB guard is no stack's).
        assert_eq!(a.anon, (132 + 100) << 10);
        assert_eq!(a.files, (600 + 4) << 10);
        assert_eq!(a.rss(), (8 + 256 + 40 + 512 + 16 + 132 + 100 + 600 + 12 + 4) << 10);
    }

    #[test]
    fn this_process_adds_up_to_its_rss() {
        let a = Anatomy::read(std::process::id()).expect("/proc/self/smaps");
        assert!(a.text > 0 && a.text <= a.text_size, "{a:?}");
        let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap();
        let rss = rollup.lines().find_map(|l| l.strip_prefix("Rss:")).map(kb).unwrap();
        // Read a moment apart: within a few pages of each other.
        assert!(a.rss().abs_diff(rss) < 256 << 10, "{} against {rss}", a.rss());
    }
}
