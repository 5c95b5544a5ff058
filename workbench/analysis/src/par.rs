//! Work spread over the machine's cores: `workbench report` and `render`
//! load, analyse and write every dataset independently.

/// `f(0) … f(n - 1)`, their results in that order, computed by as many
/// threads as the machine has cores, each taking the next index when free.
///
/// PERF: datasets are independent of each other: loading each newest run
/// and making its table, and writing its page (tables, figures, trace and
/// compare pages). Over this repository's committed data (2 cores,
/// 2026-12-05) `workbench report` took 112 s on one thread, and the test
/// command's site check waited on it; with pages on two threads, 83–87 s;
/// with the loading too (and the comparisons' cells found without a
/// string a row, [`crate::inspect::compare`]), 26 s. The callers start
/// the biggest job first, so that no thread starts one as the others end.
pub fn on_every_core<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |c| c.get()).min(n.max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<T>>> = std::sync::Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let out = f(i);
                done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(out);
            });
        }
    });
    done.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().map(|o| o.expect("every index ran")).collect()
}
