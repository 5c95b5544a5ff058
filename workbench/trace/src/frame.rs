//! One frame of a dhat frame table: its function, location and crate, and
//! which side of a transport ([`Side`]) a stack that reaches it ran on.

/// One frame of the frame table, parsed from dhat's
/// `0xADDR: function (file:line:col)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub function: String,
    /// `file:line` as dhat wrote it (the last components of the path only).
    pub location: String,
    /// The crate, from the function's path (or the file's registry directory).
    pub krate: Option<String>,
}

/// `location` split into its file and line (`None`: no line recorded).
pub fn file_line(location: &str) -> (&str, Option<u64>) {
    match location.rsplit_once(':') {
        Some((f, l)) => (f, l.parse().ok()),
        None => (location, None),
    }
}

/// Crates whose frames sit between an allocation request and the allocator:
/// folded away at the top of a stack.
const PLUMBING: &[&str] = &["alloc", "core", "std", "dhat", "probe", "backtrace", "hashbrown"];
/// Crates of this workspace: where a stack enters the subject's own code.
pub const OWN: &[&str] =
    &["subjects", "subject", "stacks", "zap", "datastore", "server", "datastore_server", "workbench"];
/// Functions of the thread start-up code, folded away at the bottom.
const STARTUP: &[&str] =
    &["start_thread", "clone3", "clone", "_start", "main", "__libc_start_main", "__libc_start_call_main"];

impl Frame {
    pub(super) fn parse(s: &str) -> Frame {
        let rest = match s.find(": ") {
            Some(i) if s.starts_with("0x") => &s[i + 2..],
            _ => s,
        };
        let (function, location) = match (rest.rfind(" ("), rest.ends_with(')')) {
            (Some(i), true) => (&rest[..i], &rest[i + 2..rest.len() - 1]),
            _ => (rest, ""),
        };
        // dhat appends the column; a line is precise enough to find the call.
        let location = match location.rsplit_once(':') {
            Some((l, col)) if col.chars().all(|c| c.is_ascii_digit()) => l,
            _ => location,
        };
        Frame { function: function.to_string(), location: location.to_string(), krate: krate_of(function, location) }
    }

    pub(super) fn is_plumbing(&self) -> bool {
        self.function.starts_with("__rust")
            || self.function.starts_with("__rg_")
            || self.function.starts_with("__rdl_")
            || self.in_crates(PLUMBING)
    }

    pub(super) fn is_startup(&self) -> bool {
        STARTUP.contains(&self.function.as_str())
            || self.function.starts_with("__libc")
            || self.function.contains("__rust_begin_short_backtrace")
            || (self.in_crates(&["std", "core", "alloc"])
                && [
                    "std::rt::",
                    "std::sys::",
                    "std::thread::",
                    "std::panic",
                    "core::ops::function::",
                    "<std::sys::",
                    "<std::thread::",
                    "<alloc::boxed::Box<",
                    "<core::panic::",
                    "<dyn core::ops::function::",
                    "<&dyn core::ops::function::",
                ]
                .iter()
                .any(|p| self.function.starts_with(p)))
    }

    pub fn is_own(&self) -> bool {
        self.in_crates(OWN)
    }

    fn in_crates(&self, crates: &[&str]) -> bool {
        self.krate.as_deref().is_some_and(|k| crates.contains(&k))
    }

    /// `function (crate/file:line)`: dhat keeps only the path's tail, which
    /// for a dependency often drops the crate (`src/codec/decode.rs`).
    pub fn display(&self) -> String {
        let loc = match &self.krate {
            Some(k)
                if !self.location.is_empty()
                    && !self.location.starts_with(k.as_str())
                    && !self.location.contains(&format!("{k}-")) =>
            {
                format!("{k}: {}", self.location)
            }
            _ => self.location.clone(),
        };
        if loc.is_empty() {
            self.function.clone()
        } else {
            format!("{} ({loc})", self.function)
        }
    }
}

/// The crate a frame belongs to: the first path segment of its function, or
/// a registry directory (`bytes-1.12.2/src/…`) in its location.
fn krate_of(function: &str, location: &str) -> Option<String> {
    let f = function.trim_start_matches(['<', '&', '*', '(']).trim_start_matches("mut ").trim_start_matches("dyn ");
    // `<u8 as alloc::vec::SpecFromElem>::from_elem`: a primitive's impl lives
    // in the trait's crate.
    let f = match f.split_once(" as ") {
        Some((self_ty, tr)) if !self_ty.contains("::") => tr,
        _ => f,
    };
    if let Some((first, _)) = f.split_once("::") {
        if !first.is_empty() && first.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Some(first.to_string());
        }
    }
    let dir = location.split('/').next()?;
    if let Some((name, version)) = dir.rsplit_once('-') {
        if version.starts_with(|c: char| c.is_ascii_digit()) {
            return Some(name.replace('-', "_"));
        }
    }
    // `probe/src/sides.rs`: a workspace or standard-library crate's own
    // directory. Traces written before the frames carried crate paths
    // (closures, bare `alloc`) are recognised by it, so their allocator
    // frames fold as today's do.
    let rest = location.strip_prefix(dir)?.strip_prefix('/')?;
    (rest.starts_with("src/") && dir.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .then(|| dir.replace('-', "_"))
}

/// Which thread a site ran on, from the entry frames its stack reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// The harness: the main thread's experiment loop (the client of a transport).
    Client,
    /// A transport's server thread (`subjects::transports::spawn_server`).
    Server,
    /// Neither entry frame in reach: a library's own thread, or a stack
    /// deeper than the trace kept.
    Other,
}

impl Side {
    pub fn parse(s: &str) -> Option<Side> {
        match s {
            "client" => Some(Side::Client),
            "server" => Some(Side::Server),
            "other" => Some(Side::Other),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
            Side::Other => "other",
        }
    }

    pub(super) fn of(frames: &[&Frame]) -> Side {
        if frames.iter().any(|f| f.function.contains("spawn_server")) {
            Side::Server
        } else if frames
            .iter()
            .any(|f| f.function.starts_with("subject::main") || f.function.contains("subjects::experiments::"))
        {
            Side::Client
        } else {
            Side::Other
        }
    }
}

#[cfg(test)]
mod tests;
