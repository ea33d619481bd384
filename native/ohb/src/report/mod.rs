//! `ohb report [--input DIR] [--out DIR]`: every JSON file the suites wrote, as charts (SVG and
//! PNG, drawn with plotters), one self-contained HTML page and a Markdown summary.
//!
//! [`extract`] turns each file into a [`model::Run`] (its charts, tables and targets), [`chart`]
//! draws a chart, [`page`] writes the documents. One chart never mixes files, and every chart names
//! the run (machine and commit) it comes from. Nothing in the output depends on when or where the
//! report is made, so the same inputs give the same files.

pub mod chart;
pub mod extract;
pub mod model;
pub mod page;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::args::Args;
use crate::child::find_repo_root;
use crate::report::model::Run;

/// Result files read at most, and the largest file read: the inputs are ohb's own small files.
pub const INPUT_FILES_MAX: usize = 500;
pub const INPUT_FILE_BYTES_MAX: u64 = 16 << 20;

/// What a report run wrote.
#[derive(Debug)]
pub struct Written {
    pub page: PathBuf,
    pub summary: PathBuf,
    pub charts: usize,
    pub runs: usize,
}

/// Reads the JSON files of `input` (sorted by name), in order.
pub fn read_runs(input: &Path) -> Result<Vec<Run>, String> {
    let entries = std::fs::read_dir(input).map_err(|e| format!("{}: {e} (run an ohb suite first, or pass --input)", input.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("{}: no .json results (run an ohb suite first)", input.display()));
    }
    if files.len() > INPUT_FILES_MAX {
        return Err(format!("{}: {} result files, more than {INPUT_FILES_MAX}", input.display(), files.len()));
    }
    let mut runs = Vec::new();
    for path in files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let size = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?.len();
        if size > INPUT_FILE_BYTES_MAX {
            return Err(format!("{}: {size} bytes, more than {INPUT_FILE_BYTES_MAX}", path.display()));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        runs.push(extract::run_of(&name, &value)?);
    }
    Ok(runs)
}

/// Writes `out/index.html`, `out/summary.md` and `out/charts/*.{svg,png}` (charts of earlier
/// reports in `out/charts` are removed first).
pub fn write_report(runs: &[Run], input_label: &str, out: &Path) -> Result<Written, String> {
    let charts_dir = out.join("charts");
    std::fs::create_dir_all(&charts_dir).map_err(|e| format!("{}: {e}", charts_dir.display()))?;
    for entry in std::fs::read_dir(&charts_dir).map_err(|e| format!("{}: {e}", charts_dir.display()))?.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "svg" || x == "png") {
            std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    let mut ids = std::collections::HashSet::new();
    let mut svgs = Vec::new();
    for run in runs {
        let mut run_svgs = Vec::new();
        for chart in &run.charts {
            if !ids.insert(chart.id.clone()) {
                return Err(format!("two charts named {} (from {})", chart.id, run.file));
            }
            run_svgs.push(chart::render_files(chart, &charts_dir)?);
        }
        svgs.push(run_svgs);
    }
    let page = out.join("index.html");
    std::fs::write(&page, page::html(runs, &svgs, input_label)).map_err(|e| format!("{}: {e}", page.display()))?;
    let summary = out.join("summary.md");
    std::fs::write(&summary, page::markdown(runs, input_label)).map_err(|e| format!("{}: {e}", summary.display()))?;
    Ok(Written { page, summary, charts: ids.len(), runs: runs.len() })
}

pub fn report_main(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(argv, &["input", "out"], &["help"])?;
    if args.switch("help") {
        print!("{}", crate::usage());
        return Ok(());
    }
    if let Some(word) = args.positional.first() {
        return Err(format!("unexpected argument '{word}'"));
    }
    let root = find_repo_root().unwrap_or_else(|| PathBuf::from("."));
    let input = args.value("input").map(PathBuf::from).unwrap_or_else(|| root.join("results"));
    let out = args.value("out").map(PathBuf::from).unwrap_or_else(|| root.join("report"));
    let runs = read_runs(&input)?;
    let label = args.value("input").unwrap_or("results/");
    let written = write_report(&runs, label, &out)?;
    println!(
        "report: {} ({} charts from {} result files; summary {}, charts in {})",
        written.page.display(),
        written.charts,
        written.runs,
        written.summary.display(),
        out.join("charts").display()
    );
    Ok(())
}
