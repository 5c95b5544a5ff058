//! `datastore`: load the paper's workload, run SQL, list parts. (The
//! engine's timings are the workbench's `datastore-queries` experiment.)

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use datastore::{Db, Output, QueryResult, Value};
use server::workload;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "datastore", about = "A MergeTree-style columnar store: load, query, parts")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the workload's queries, one `name<TAB>sql` per line (for scripts).
    Queries,
    /// Create table `t` and fill it with the paper's workload.
    Load {
        #[arg(long)]
        data: PathBuf,
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Rows per insert (one part each).
        #[arg(long, default_value_t = 1_000_000)]
        batch: u64,
        /// Also write the same rows as Parquet here.
        #[arg(long)]
        parquet: Option<PathBuf>,
        /// Leave the parts unmerged at the end (background merges still run).
        #[arg(long)]
        no_optimize: bool,
    },
    /// Run one SQL statement.
    Query {
        #[arg(long)]
        data: PathBuf,
        sql: String,
        #[arg(long, default_value = "table", value_parser = ["table", "csv", "json"])]
        format: String,
    },
    /// List the parts of each table.
    Parts {
        #[arg(long)]
        data: PathBuf,
    },
    /// Crash-test helper: inserts numbered batches forever, printing each
    /// batch number once its insert has returned.
    #[command(hide = true)]
    InsertLoop {
        #[arg(long)]
        data: PathBuf,
        #[arg(long, default_value_t = 2000)]
        batch: u64,
    },
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Load { data, rows, seed, batch, parquet, no_optimize } => {
            load(&data, rows, seed, batch, !no_optimize)?;
            if let Some(p) = parquet {
                let t0 = Instant::now();
                workload::write_parquet(&p, seed, rows, batch)?;
                eprintln!("wrote {} in {:.1} s", p.display(), t0.elapsed().as_secs_f64());
            }
        }
        Cmd::Query { data, sql, format } => {
            let db = Db::open(&data)?;
            match db.execute(&sql)? {
                Output::Created(name) => println!("created table {name}"),
                Output::Rows(r, s) => {
                    print_result(&r, &format)?;
                    eprintln!(
                        "{} row(s); read {} of {} granules, {} rows scanned",
                        r.rows.len(),
                        s.granules_read,
                        s.granules_total,
                        s.rows_scanned
                    );
                }
            }
        }
        Cmd::Queries => {
            for (name, sql) in workload::QUERIES {
                println!("{name}\t{sql}");
            }
        }
        Cmd::Parts { data } => parts(&data)?,
        Cmd::InsertLoop { data, batch } => insert_loop(&data, batch)?,
    }
    Ok(())
}

fn load(data: &Path, rows: u64, seed: u64, batch: u64, optimize: bool) -> Result<f64> {
    let db = Db::open(data)?;
    let t0 = Instant::now();
    let t = workload::load(&db, rows, seed, batch, optimize, |from, parts| {
        eprintln!("progress {from} {rows} ({parts} parts)")
    })
    .with_context(|| format!("loading {rows} rows into {}", data.display()))?;
    let secs = t0.elapsed().as_secs_f64();
    let parts = t.snapshot();
    eprintln!(
        "loaded {rows} rows into {} part(s) in {secs:.1} s ({:.0} rows/s); {} on disk",
        parts.len(),
        rows as f64 / secs,
        human(disk_bytes(&t.dir)?)
    );
    Ok(secs)
}

fn insert_loop(data: &Path, batch: u64) -> Result<()> {
    let db = Db::open(data)?;
    if !db.table_names()?.contains(&"t".to_string()) {
        db.execute(workload::CREATE)?;
    }
    let t = db.table("t")?;
    let merger = datastore::storage::table::Merger::start(t.clone(), 2);
    let start = match db.query("SELECT max(id) FROM t")?.rows[0][0] {
        Value::U(m) => m / batch + 1,
        _ => 0,
    };
    let mut out = std::io::stdout().lock();
    for b in start.. {
        t.insert(&workload::batch(b, b * batch, (b + 1) * batch))?;
        merger.poke();
        writeln!(out, "inserted {b}")?;
        out.flush()?;
    }
    Ok(())
}

fn disk_bytes(dir: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let e = e?;
        let m = e.metadata()?;
        n += if m.is_dir() { disk_bytes(&e.path())? } else { m.len() };
    }
    Ok(n)
}

fn human(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

fn parts(data: &Path) -> Result<()> {
    let db = Db::open(data)?;
    println!("table\tpart\trows\tmarks\tcompressed\tuncompressed\tindex_in_memory");
    for name in db.table_names()? {
        let t = db.table(&name)?;
        for p in t.snapshot().iter() {
            let comp: u64 = p.meta.columns.iter().map(|c| c.compressed).sum();
            let raw: u64 = p.meta.columns.iter().map(|c| c.uncompressed).sum();
            println!(
                "{name}\t{}\t{}\t{}\t{}\t{}\t{}",
                p.meta.name,
                p.meta.rows,
                p.granules(),
                human(comp),
                human(raw),
                human(p.index_bytes() as u64)
            );
        }
        for (c, col) in t.schema.columns.iter().enumerate() {
            let comp: u64 = t.snapshot().iter().map(|p| p.meta.columns[c].compressed).sum();
            let raw: u64 = t.snapshot().iter().map(|p| p.meta.columns[c].uncompressed).sum();
            println!(
                "  column {} {} ({:?}): {} compressed, {} raw, ratio {:.2}",
                col.name,
                col.ty.name(),
                col.codec,
                human(comp),
                human(raw),
                raw as f64 / comp.max(1) as f64
            );
        }
    }
    Ok(())
}

/// A cell in table or CSV output: DateTimes as ClickHouse prints them
/// (`2025-12-11 09:32:03`, UTC); JSON keeps epoch seconds.
fn cell(v: &Value, ty: Option<&datastore::ColumnType>) -> String {
    match (v, ty) {
        (Value::F(f), _) => format!("{f}"),
        (other, Some(t)) => other.display_as(*t),
        (other, None) => other.to_string(),
    }
}

fn print_result(r: &QueryResult, format: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        "csv" => {
            writeln!(out, "{}", r.columns.join(","))?;
            for row in &r.rows {
                let cells: Vec<String> = row
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let s = cell(v, r.types.get(i));
                        if s.contains([',', '"', '\n']) {
                            format!("\"{}\"", s.replace('"', "\"\""))
                        } else {
                            s
                        }
                    })
                    .collect();
                writeln!(out, "{}", cells.join(","))?;
            }
        }
        "json" => {
            let rows: Vec<serde_json::Map<String, serde_json::Value>> = r
                .rows
                .iter()
                .map(|row| {
                    r.columns
                        .iter()
                        .zip(row)
                        .map(|(c, v)| {
                            let j = match v {
                                Value::Null => serde_json::Value::Null,
                                Value::U(x) => (*x).into(),
                                Value::I(x) => (*x).into(),
                                Value::F(x) => {
                                    serde_json::Number::from_f64(*x).map_or(serde_json::Value::Null, Into::into)
                                }
                                Value::S(s) => s.clone().into(),
                            };
                            (c.clone(), j)
                        })
                        .collect()
                })
                .collect();
            serde_json::to_writer_pretty(&mut out, &rows)?;
            writeln!(out)?;
        }
        _ => {
            let cells: Vec<Vec<String>> = r
                .rows
                .iter()
                .map(|row| row.iter().enumerate().map(|(i, v)| cell(v, r.types.get(i))).collect())
                .collect();
            let widths: Vec<usize> = (0..r.columns.len())
                .map(|i| cells.iter().map(|c| c[i].len()).chain([r.columns[i].len()]).max().unwrap_or(0))
                .collect();
            let line = |vals: &[String]| -> String {
                vals.iter().zip(&widths).map(|(v, w)| format!("{v:>w$}")).collect::<Vec<_>>().join("  ")
            };
            writeln!(out, "{}", line(&r.columns))?;
            for c in &cells {
                writeln!(out, "{}", line(c))?;
            }
        }
    }
    Ok(())
}
