//! build-stages: the server built as O3, ThinLTO, fat LTO, PGO, PGO + BOLT.
//! Table: per stage, the binary's size, QPS of each query at the spec's
//! concurrency, and the server's RSS through the mix (median and peak of
//! the 100 ms samples); a stage that could not be built shows the error.
//! Figure: RSS over the run, one line per stage.
//!
//! [`ANATOMY`]: where each stage's resident set came from after the mix
//! (`probe::smaps`: the binary's text as pages resident of its whole, the
//! rest of the binary, libraries, the brk heap, thread stacks, other
//! anonymous memory), medians over the runs with their ranges; the figure
//! stacks the parts per stage.

use super::{median, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, write_stacked, Chart, Line, Stack};
use crate::report::tables::{col, dash, source_of, stats_of, Table, TableCell};
use anyhow::Result;
use records::server::build_stages::Record;
use records::server::throughput::{Anatomy, Query, Rss};
use records::server::QUERIES;
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<Record>(registry::Experiment::BuildStages, table, Some(figure));

/// The resident set's anatomy per stage: a table and a stacked figure of
/// its own, from the same dataset.
pub const ANATOMY: Report =
    Report { name: "build-stages-anatomy", table: anatomy_table, figure: Some(anatomy_figure), ..REPORT };

/// A run's records, each with its build stage, in the order written.
#[derive(Default)]
struct Data {
    binaries: Vec<(String, records::server::build_stages::Binary)>,
    failed: Vec<(String, String)>,
    queries: Vec<(String, Query)>,
    rss: Vec<(String, u64, Rss)>,
    anatomy: Vec<(String, u64, Anatomy)>,
}

impl Data {
    fn of(run: &Run) -> Result<Data> {
        let mut d = Data::default();
        for r in run.each::<Record>() {
            let r = r?;
            let v = r.cell.variant.to_string();
            match r.record {
                // The load driver's floors and (absent) peer: not this table's.
                Record::Floor(_) | Record::Peer(_) | Record::HeapProfile(_) => {}
                Record::Binary(b) => d.binaries.push((v, b)),
                Record::BuildFailed(f) => d.failed.push((v, f.error)),
                Record::Query(q) => d.queries.push((v, q)),
                Record::Rss(x) => d.rss.push((v, r.cell.rep, x)),
                Record::Anatomy(a) => d.anatomy.push((v, r.cell.rep, a)),
            }
        }
        Ok(d)
    }

    /// Per run of `variant`: the anatomy after the mix (its last sample).
    fn after_mix(&self, variant: &str) -> Vec<&Anatomy> {
        let mut last: std::collections::BTreeMap<u64, &Anatomy> = std::collections::BTreeMap::new();
        for (v, rep, a) in &self.anatomy {
            if v == variant {
                last.insert(*rep, a);
            }
        }
        last.into_values().collect()
    }

    fn rss<'a>(&'a self, variant: &'a str) -> impl Iterator<Item = (u64, &'a Rss)> + 'a {
        self.rss.iter().filter(move |r| r.0 == variant).map(|r| (r.1, &r.2))
    }
}

fn stage_name(variant: &str) -> &str {
    match variant {
        "o3" => "O3 (release)",
        "thinlto" => "+ ThinLTO",
        "fatlto" => "fat LTO, 1 CGU",
        "pgo" => "+ PGO",
        "pgo-bolt" => "+ PGO + BOLT",
        other => other,
    }
}

fn table(run: &Run) -> Result<Table> {
    let mut header = vec!["Build", "Binary", "Without debug info"];
    header.extend(QUERIES.iter().map(|(name, _)| *name));
    header.extend(["RSS (median)", "RSS (peak)"]);
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let d = Data::of(run)?;
    let stages = run.manifest.spec.variants_at(run.manifest.scale);
    for v in stages {
        if let Some((_, err)) = d.failed.iter().find(|f| f.0 == *v) {
            failures.push(format!("{}: {}", stage_name(v), err.lines().next().unwrap_or("")));
            let mut row = vec![stage_name(v).to_string(), "not built".into()];
            row.extend(std::iter::repeat_n(dash(), QUERIES.len() + 3));
            rows.push(row.into_iter().map(TableCell::from).collect());
            continue;
        }
        let binaries = || d.binaries.iter().filter(|b| b.0 == *v).map(|b| &b.1);
        let size = median(&binaries().map(|b| b.binary_bytes as f64).collect::<Vec<_>>());
        let stripped = median(&binaries().filter_map(|b| b.stripped_bytes).map(|b| b as f64).collect::<Vec<_>>());
        let mut row =
            vec![stage_name(v).to_string(), size.map_or_else(dash, fmt::bytes), stripped.map_or_else(dash, fmt::bytes)];
        for (q, _) in QUERIES {
            let qps: Vec<f64> = d.queries.iter().filter(|x| x.0 == *v && x.1.query == *q).map(|x| x.1.qps).collect();
            let qps = median(&qps);
            row.push(qps.map_or_else(dash, fmt::sig3));
        }
        let rss: Vec<f64> = d.rss(v).map(|(_, r)| r.rss_bytes as f64).collect();
        row.push(median(&rss).map_or_else(dash, fmt::bytes));
        row.push(rss.iter().copied().reduce(f64::max).map_or_else(dash, fmt::bytes));
        rows.push(row.into_iter().map(TableCell::from).collect());
    }
    let s = run.manifest.spec.scale(run.manifest.scale);
    let param = |k: &str| s.params.get(k).map_or_else(|| "?".into(), |v| v.to_string());
    let mut caption = format!(
        "The server built {} from one commit; query columns are QPS at {} clients (closed loop over ZAP, {} s \
         per query) on {} rows, binary sizes and RSS; medians of {} run(s).",
        if stages.len() == 1 { "one way".to_string() } else { format!("{} ways", stages.len()) },
        param("concurrency").trim_matches(|c| c == '[' || c == ']'),
        param("seconds"),
        param("rows").parse::<u64>().map_or_else(|_| "?".into(), fmt::thousands),
        s.repetitions,
    );
    for f in failures {
        caption.push_str(&format!(" Not built: {f}."));
    }
    let method = "RSS is sampled every 100 ms through the whole mix. PGO and BOLT train on a short run of the same \
                  three queries. Binary sizes are the files as built (the release profile keeps line tables; BOLT \
                  drops debug info) and without debug info (strip --strip-debug)."
        .to_string();
    Ok(Table { name: REPORT.name, caption, method, header, rows, source: source_of(run) })
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let mut lines = Vec::new();
    let d = Data::of(run)?;
    for v in run.manifest.spec.variants_at(run.manifest.scale) {
        let points: Vec<(f64, f64)> =
            d.rss(v).filter(|(rep, _)| *rep == 0).map(|(_, r)| (r.t_s, r.rss_bytes as f64)).collect();
        if points.is_empty() {
            continue;
        }
        lines.push(Line { label: stage_name(v).to_string(), points });
    }
    let (_, xmax, _, ymax) = extent(&lines);
    let chart = Chart {
        title: format!("Server RSS through the query mix, per build ({})", run.manifest.run_id),
        x_desc: "seconds since the server started",
        y_desc: "server RSS",
        x_log: false,
        x_range: (0.0, xmax * 1.02),
        y_log_floor: false,
        y_range: (0.0, ymax * 1.15),
        x_fmt: &|v| fmt::sig3(*v),
        y_fmt: &|v| fmt::si_bytes(*v),
        x_marks: &[],
    };
    write_both(dir, REPORT.name, &lines, &chart)
}

/// The parts of the resident set, in the order stacked: what each is
/// called and reads from a sample.
type Part = (&'static str, fn(&Anatomy) -> u64);

const PARTS: [Part; 6] = [
    ("Text (resident)", |a| a.text_bytes),
    ("Rest of the binary", |a| a.binary_other_bytes),
    ("Libraries", |a| a.files_bytes),
    ("Heap (brk)", |a| a.heap_bytes),
    ("Thread stacks", |a| a.stack_bytes),
    ("Other anonymous", |a| a.anon_bytes),
];

const PAGE: f64 = 4096.0;

/// `median [min, max]` of `f` over `samples`, formatted by `show`.
fn ranged(samples: &[&Anatomy], f: impl Fn(&Anatomy) -> f64, show: impl Fn(f64) -> String) -> TableCell {
    TableCell::spread(&samples.iter().map(|a| f(a)).collect::<Vec<_>>(), show)
}

fn anatomy_table(run: &Run) -> Result<Table> {
    let mut header = vec!["Build", col::TEXT_PAGES, col::TEXT_SHARE];
    header.extend(PARTS.iter().skip(1).map(|p| p.0));
    header.push(col::RSS);
    let d = Data::of(run)?;
    let mut rows = Vec::new();
    let mut runs = 0;
    for v in run.manifest.spec.variants_at(run.manifest.scale) {
        let after = d.after_mix(v);
        if after.is_empty() {
            continue;
        }
        runs = runs.max(after.len());
        let mut row = vec![TableCell::keyed(stage_name(v), v)];
        row.push(ranged(&after, |a| (a.text_bytes as f64 / PAGE).round(), |x| fmt::thousands(x as u64)));
        row.push(ranged(
            &after,
            |a| 100.0 * a.text_bytes as f64 / (a.text_size_bytes as f64).max(1.0),
            |x| format!("{x:.1} %"),
        ));
        for (_, f) in PARTS.iter().skip(1) {
            row.push(ranged(&after, |a| f(a) as f64, fmt::bytes));
        }
        row.push(ranged(&after, |a| a.rss_bytes as f64, fmt::bytes));
        rows.push(row);
    }
    let caption = format!(
        "Where each build's resident set comes from after the query mix (the server's /proc/<pid>/smaps): the \
         binary's text resident and as a share of the whole text, then the other parts; medians [min, max] over \
         {runs} run(s)."
    );
    let method = "The binary's text is counted as 4 KiB pages resident: the kernel maps up to 64 KiB around each \
                  fault, so not only pages executed."
        .to_string();
    Ok(Table { name: ANATOMY.name, caption, method, header, rows, source: source_of(run) })
}

fn anatomy_figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let d = Data::of(run)?;
    let mut bars = Vec::new();
    for v in run.manifest.spec.variants_at(run.manifest.scale) {
        let after = d.after_mix(v);
        if after.is_empty() {
            continue;
        }
        let parts = PARTS
            .iter()
            .map(|(name, f)| {
                let v: Vec<f64> = after.iter().map(|a| f(a) as f64).collect();
                (name.to_string(), stats_of(&v).map_or(0.0, |s| s.0))
            })
            .collect();
        bars.push(Stack { label: stage_name(v).to_string(), parts });
    }
    if bars.is_empty() {
        return Ok(Vec::new());
    }
    let title = format!("Resident set after the mix by part, per build (medians; {})", run.manifest.run_id);
    write_stacked(dir, ANATOMY.name, &title, "resident bytes", &bars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{run, server};
    use records::runner::BuildFailed;
    use records::server::build_stages::Binary;

    #[test]
    fn a_stage_that_failed_to_build_says_why() {
        let query = |qps| Query {
            engine: "ours".into(),
            query: QUERIES[0].0.into(),
            concurrency: 4,
            round: None,
            rows: 10,
            queries: 10,
            seconds: 1.0,
            qps,
            p50_ms: 1.0,
            p99_ms: 1.0,
            mean_ms: 1.0,
            answers_checked: None,
            engine_p50_ms: None,
        };
        let rows = vec![
            (server("o3", 0), Record::Binary(Binary { binary_bytes: 4 << 20, stripped_bytes: Some(3 << 20) })),
            (server("o3", 0), Record::Query(query(100.0))),
            (server("o3", 1), Record::Query(query(300.0))),
            (server("thinlto", 0), Record::BuildFailed(BuildFailed { error: "lld: not found\nmore".into() })),
        ];
        // Both stages planned, whatever the committed spec's quick scale builds.
        let mut r = run("build-stages", None, &rows);
        r.manifest.spec.quick.variants = Some(vec!["o3".into(), "thinlto".into()]);
        let t = table(&r).unwrap();
        assert!(t.caption.starts_with("The server built 2 ways"), "{}", t.caption);
        let o3 = t.rows.iter().find(|r| r[0].text == "O3 (release)").unwrap();
        assert_eq!(o3[1].text, fmt::bytes((4 << 20) as f64));
        assert_eq!(o3[3].text, fmt::sig3(200.0));
        let thin = t.rows.iter().find(|r| r[0].text == "+ ThinLTO").unwrap();
        assert_eq!(thin[1].text, "not built");
        assert!(t.caption.contains("Not built: + ThinLTO: lld: not found."), "{}", t.caption);
    }

    #[test]
    fn the_anatomy_reads_each_runs_last_sample() {
        let sample = |round: u64, text: u64| {
            Record::Anatomy(Anatomy {
                engine: "ours".into(),
                query: QUERIES[2].0.into(),
                concurrency: 4,
                round,
                rows: 10,
                text_bytes: text * 4096,
                text_size_bytes: 1000 * 4096,
                binary_other_bytes: 1 << 20,
                files_bytes: 2 << 20,
                heap_bytes: 0,
                stack_bytes: 64 << 10,
                anon_bytes: 5 << 20,
                rss_bytes: text * 4096 + (8 << 20) + (64 << 10),
            })
        };
        let rows = vec![
            // The earlier round is not the one after the mix.
            (server("o3", 0), sample(0, 900)),
            (server("o3", 0), sample(1, 100)),
            (server("o3", 1), sample(1, 300)),
            (server("o3", 2), sample(1, 200)),
        ];
        let r = run("build-stages", None, &rows);
        let t = anatomy_table(&r).unwrap();
        let o3 = &t.rows[0];
        assert_eq!(o3[0].key.as_deref(), Some("o3"));
        assert_eq!(o3[1].text, "200");
        assert_eq!(o3[1].range, Some(("100".into(), "300".into())));
        assert_eq!(o3[2].text, "20.0 %");
        assert!(t.caption.contains("over 3 run(s)"), "{}", t.caption);
        let dir = std::env::temp_dir().join(format!("wb-anatomy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = anatomy_figure(&dir, &r).unwrap();
        let csv = std::fs::read_to_string(&files[2]).unwrap();
        assert!(csv.contains("O3 (release),Text (resident),819200\n"), "{csv}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
