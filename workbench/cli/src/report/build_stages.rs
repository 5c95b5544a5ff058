//! build-stages: the server built as O3, ThinLTO, fat LTO, PGO, PGO + BOLT.
//! Table: per stage, the binary's size, QPS of each query at the spec's
//! concurrency, and the server's RSS through the mix (median and peak of
//! the 100 ms samples); a stage that could not be built shows the error.
//! Figure: RSS over the run, one line per stage.

use super::{median, values, Report};
use crate::data::dataset::Run;
use crate::fmt;
use crate::report::figures::{extent, write_both, Chart, Line};
use crate::report::tables::{dash, select, source_of, Cell, Table};
use anyhow::Result;
use probe::registry;
use server::workload::QUERIES;
use std::path::{Path, PathBuf};

pub const REPORT: Report = Report::of::<records::server::build_stages::Record>(registry::BUILD_STAGES, table, Some(figure));

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
    for v in run.manifest.spec.variants_at(run.manifest.scale) {
        let failed =
            select(&run.records, &[("kind", "build-failed"), ("variant", v)], &[]).ok().filter(|d| d.height() > 0);
        if let Some(df) = failed {
            let err =
                df.column("error").ok().and_then(|c| c.str().ok()?.get(0).map(str::to_string)).unwrap_or_default();
            failures.push(format!("{}: {}", stage_name(v), err.lines().next().unwrap_or("")));
            let mut row = vec![stage_name(v).to_string(), "not built".into()];
            row.extend(std::iter::repeat_n(dash(), QUERIES.len() + 3));
            rows.push(row.into_iter().map(Cell::from).collect());
            continue;
        }
        let size = median(&values(run, &[("kind", "binary"), ("variant", v)], &[], "binary_bytes")?);
        let stripped = median(&values(run, &[("kind", "binary"), ("variant", v)], &[], "stripped_bytes")?);
        let mut row =
            vec![stage_name(v).to_string(), size.map_or_else(dash, fmt::bytes), stripped.map_or_else(dash, fmt::bytes)];
        for (q, _) in QUERIES {
            let qps = median(&values(run, &[("kind", "query"), ("variant", v), ("query", q)], &[], "qps")?);
            row.push(qps.map_or_else(dash, fmt::sig3));
        }
        let rss = values(run, &[("kind", "rss"), ("variant", v)], &[], "rss_bytes")?;
        row.push(median(&rss).map_or_else(dash, fmt::bytes));
        row.push(rss.iter().copied().reduce(f64::max).map_or_else(dash, fmt::bytes));
        rows.push(row.into_iter().map(Cell::from).collect());
    }
    let s = run.manifest.spec.scale(run.manifest.scale);
    let param = |k: &str| s.params.get(k).map_or_else(|| "?".into(), |v| v.to_string());
    let mut caption = format!(
        "The server built five ways from one commit; query columns are QPS at {} clients (closed loop over ZAP, {} s \
         per query) on {} rows; RSS sampled every 100 ms through the whole mix. PGO and BOLT train on a short run \
         of the same three queries. Binary sizes are the files as built (the release profile keeps line tables; BOLT \
         drops debug info) and without debug info (strip --strip-debug). Medians of {} run(s).",
        param("concurrency").trim_matches(|c| c == '[' || c == ']'),
        param("seconds"),
        param("rows").parse::<u64>().map_or_else(|_| "?".into(), fmt::thousands),
        s.repetitions,
    );
    for f in failures {
        caption.push_str(&format!(" Not built: {f}."));
    }
    Ok(Table { name: REPORT.name, caption, header, rows, source: source_of(run) })
}

fn figure(dir: &Path, run: &Run) -> Result<Vec<PathBuf>> {
    let mut lines = Vec::new();
    for v in run.manifest.spec.variants_at(run.manifest.scale) {
        let df = select(&run.records, &[("kind", "rss"), ("variant", v)], &[("rep", 0)])?;
        if df.height() == 0 {
            continue;
        }
        let t = crate::report::tables::floats(&df, "t_s")?;
        let r = crate::report::tables::floats(&df, "rss_bytes")?;
        lines.push(Line { label: stage_name(v).to_string(), points: t.into_iter().zip(r).collect() });
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
    };
    write_both(dir, REPORT.name, &lines, &chart)
}
