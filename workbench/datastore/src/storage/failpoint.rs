//! Named points in the storage's write paths where a test can stop the
//! process as a kill would, hold a thread, or fail a write as a full disk
//! does: how the crash tests reach every step of an insert, a merge and an
//! open deterministically (`datastore/tests/crash_points.rs`).
//!
//! A point is armed for one table directory, so tests running side by side
//! in one process never trip each other's. Unarmed, a point costs one
//! relaxed atomic load: the write paths it sits in fsync files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Every step a crash can fall between, in the order a write reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// An insert has taken its block number; nothing is on disk yet.
    InsertBlockTaken,
    /// An insert's part is written and fsynced in its `tmp_` directory.
    InsertPartWritten,
    /// An insert's part is renamed into place, not yet visible to queries.
    InsertRenamed,
    /// An insert's part is visible; the call has not returned (no acknowledgement).
    InsertVisible,
    /// A merge has chosen its inputs.
    MergeChosen,
    /// A merge has written some of its rows (after a granule's block).
    MergeMidway,
    /// A merge's result is written and fsynced in its `tmp_` directory.
    MergeWritten,
    /// A merge's result is renamed into place; its inputs are still on disk.
    MergeRenamed,
    /// A merge has deleted one of its inputs, not the others.
    MergeMidDelete,
    /// An open has removed one leftover (a covered part or a `tmp_` directory).
    OpenMidRemove,
    /// A column block is about to be written (where a full disk fails).
    WriteBlock,
}

impl Point {
    /// The points a kill can fall at, for tests that visit each.
    pub const ALL: [Point; 11] = [
        Point::InsertBlockTaken,
        Point::InsertPartWritten,
        Point::InsertRenamed,
        Point::InsertVisible,
        Point::MergeChosen,
        Point::MergeMidway,
        Point::MergeWritten,
        Point::MergeRenamed,
        Point::MergeMidDelete,
        Point::OpenMidRemove,
        Point::WriteBlock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Point::InsertBlockTaken => "insert-block-taken",
            Point::InsertPartWritten => "insert-part-written",
            Point::InsertRenamed => "insert-renamed",
            Point::InsertVisible => "insert-visible",
            Point::MergeChosen => "merge-chosen",
            Point::MergeMidway => "merge-midway",
            Point::MergeWritten => "merge-written",
            Point::MergeRenamed => "merge-renamed",
            Point::MergeMidDelete => "merge-mid-delete",
            Point::OpenMidRemove => "open-mid-remove",
            Point::WriteBlock => "write-block",
        }
    }

    pub fn from_name(name: &str) -> Option<Point> {
        Point::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// What an armed point does when it is reached.
#[derive(Clone)]
pub enum Action {
    /// Ends the process at once (`abort`: no destructor runs, nothing is
    /// flushed), as SIGKILL would.
    Abort,
    /// The write fails with this error, as a full disk's does.
    Fail(std::io::ErrorKind),
    /// The thread waits until the gate opens.
    Hold(Gate),
}

/// A thread held at a point, and the test that releases it.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<(bool, bool)>, Condvar)>);

impl Gate {
    /// Waits until a thread is held here.
    pub fn reached(&self) {
        let (lock, cv) = &*self.0;
        let mut g = lock.lock().expect("gate lock");
        while !g.0 {
            g = cv.wait(g).expect("gate lock");
        }
    }

    /// Lets the held thread (and any later one) go on.
    pub fn open(&self) {
        let (lock, cv) = &*self.0;
        lock.lock().expect("gate lock").1 = true;
        cv.notify_all();
    }

    fn hold(&self) {
        let (lock, cv) = &*self.0;
        let mut g = lock.lock().expect("gate lock");
        g.0 = true;
        cv.notify_all();
        while !g.1 {
            g = cv.wait(g).expect("gate lock");
        }
    }
}

struct Armed {
    point: Point,
    table_dir: PathBuf,
    /// Hits to let pass before acting.
    skip: u64,
    action: Action,
}

static ANY: AtomicBool = AtomicBool::new(false);
static ARMED: Mutex<Vec<Armed>> = Mutex::new(Vec::new());

/// Arms `point` for the table in `table_dir`: its first `skip` hits pass,
/// the next one acts (and every one after it, until [`disarm`]).
pub fn arm(point: Point, table_dir: &Path, skip: u64, action: Action) {
    let mut armed = ARMED.lock().expect("failpoint lock");
    armed.push(Armed { point, table_dir: table_dir.to_path_buf(), skip, action });
    ANY.store(true, Ordering::Release);
}

/// Disarms every point of the table in `table_dir`.
pub fn disarm(table_dir: &Path) {
    let mut armed = ARMED.lock().expect("failpoint lock");
    armed.retain(|a| a.table_dir != table_dir);
    ANY.store(!armed.is_empty(), Ordering::Release);
}

/// Reached `point` in the table at `table_dir`: `Err` when a failure is
/// armed there.
#[inline]
pub(crate) fn hit(point: Point, table_dir: &Path) -> std::io::Result<()> {
    if !ANY.load(Ordering::Relaxed) {
        return Ok(());
    }
    slow(point, table_dir)
}

#[cold]
fn slow(point: Point, table_dir: &Path) -> std::io::Result<()> {
    let action = {
        let mut armed = ARMED.lock().expect("failpoint lock");
        let Some(a) = armed.iter_mut().find(|a| a.point == point && a.table_dir == table_dir) else {
            return Ok(());
        };
        if a.skip > 0 {
            a.skip -= 1;
            return Ok(());
        }
        a.action.clone()
    };
    match action {
        Action::Abort => std::process::abort(),
        Action::Fail(kind) => Err(std::io::Error::new(kind, format!("injected at failpoint {}", point.name()))),
        Action::Hold(gate) => {
            gate.hold();
            Ok(())
        }
    }
}
