//! `ohb report` end to end on small committed results (`tests/report-golden/*.json`, real output of
//! quick runs): the same inputs give the same files, the Markdown summary is the committed one, the
//! PNGs are images of the chart size, and Debian's chromium loads the page with every chart and
//! table in it (its screenshot is kept in `build/report-test/`).
//!
//! To accept a deliberate change of the summary: `OHB_BLESS=1 cargo test -p ohb --test report`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ohb::report::chart::{HEIGHT_PX, WIDTH_PX};

const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(120);

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report-golden")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn render(out: &Path) {
    let _ = std::fs::remove_dir_all(out);
    let result = Command::new(env!("CARGO_BIN_EXE_ohb"))
        .args(["report", "--input", "tests/report-golden", "--out"])
        .arg(out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(stdout.starts_with("report: ") && stdout.contains("index.html"), "{stdout}");
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Width and height from a PNG's IHDR chunk, after checking the signature and the final IEND.
fn png_size(bytes: &[u8]) -> Result<(u32, u32), String> {
    if bytes.len() < 33 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return Err("not a PNG (signature or IHDR)".into());
    }
    if &bytes[bytes.len() - 8..bytes.len() - 4] != b"IEND" {
        return Err("no IEND chunk at the end".into());
    }
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    Ok((be(16), be(20)))
}

#[test]
fn same_inputs_same_report_and_the_committed_summary() {
    let base = std::env::temp_dir().join(format!("ohb-report-test-{}", std::process::id()));
    let (a, b) = (base.join("a"), base.join("b"));
    render(&a);
    render(&b);
    let (files_a, files_b) = (files_under(&a), files_under(&b));
    assert_eq!(files_a.len(), files_b.len());
    for (fa, fb) in files_a.iter().zip(&files_b) {
        assert_eq!(fa.strip_prefix(&a).unwrap(), fb.strip_prefix(&b).unwrap());
        assert!(std::fs::read(fa).unwrap() == std::fs::read(fb).unwrap(), "{} differs between two renders", fa.display());
    }
    let summary = std::fs::read_to_string(a.join("summary.md")).unwrap();
    let expected_path = golden_dir().join("expected-summary.md");
    if std::env::var_os("OHB_BLESS").is_some() {
        std::fs::write(&expected_path, &summary).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    assert!(summary == expected, "summary.md differs from {} (OHB_BLESS=1 to accept):\n{summary}", expected_path.display());
    let pngs: Vec<&PathBuf> = files_a.iter().filter(|p| p.extension().is_some_and(|x| x == "png")).collect();
    let svgs = files_a.iter().filter(|p| p.extension().is_some_and(|x| x == "svg")).count();
    assert!(!pngs.is_empty() && pngs.len() == svgs, "{} PNGs, {svgs} SVGs", pngs.len());
    for png in pngs {
        assert_eq!(png_size(&std::fs::read(png).unwrap()), Ok((WIDTH_PX, HEIGHT_PX)), "{}", png.display());
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn png_check_rejects_what_is_not_a_png() {
    assert!(png_size(b"<svg></svg>").is_err());
    let mut truncated = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    truncated.extend([0u8; 20]);
    assert_eq!(png_size(&truncated), Err("no IEND chunk at the end".into()));
}

#[test]
fn chromium_shows_every_chart_and_table() {
    let out = repo_root().join("build/report-test");
    render(&out);
    let runs = ohb::report::read_runs(&golden_dir()).unwrap();
    let page = out.join("index.html");
    let profile = out.join("chromium-profile");
    let chromium = |extra: &[String]| {
        let mut cmd = Command::new("chromium");
        cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(format!("file://{}", page.display()));
        ohb::child::run_captured("chromium (Debian's chromium package; make deps installs it)", cmd, CHROMIUM_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let dom = chromium(&["--dump-dom".to_string()]);
    assert!(dom.status.success(), "{}", dom.stderr);
    let text = dom.stdout;
    assert!(text.contains("<table id=\"runs\">"), "no table of runs");
    let mut charts = 0;
    for run in &runs {
        for chart in &run.charts {
            let start = text.find(&format!("<figure id=\"chart-{}\"", chart.id)).unwrap_or_else(|| panic!("chart {} missing", chart.id));
            let figure = &text[start..start + text[start..].find("</figure>").unwrap()];
            assert!(figure.contains("<svg"), "chart {} has no drawing", chart.id);
            assert!(text.contains(&format!("<table id=\"table-{}\"", chart.data_table().id)), "table of {}", chart.id);
            charts += 1;
        }
        for table in &run.tables {
            assert!(text.contains(&format!("<table id=\"table-{}\"", table.id)), "table {}", table.id);
        }
        if !run.targets.is_empty() {
            assert!(text.contains(&format!("<table id=\"targets-{}\"", ohb::report::model::slug(&run.file))), "targets of {}", run.file);
        }
    }
    assert!(charts >= 5, "{charts} charts");
    let screenshot = out.join("screenshot.png");
    let _ = std::fs::remove_file(&screenshot);
    let shot = chromium(&[format!("--screenshot={}", screenshot.display()), "--window-size=1280,2400".to_string()]);
    assert!(shot.status.success(), "{}", shot.stderr);
    assert_eq!(png_size(&std::fs::read(&screenshot).unwrap()), Ok((1280, 2400)));
    let _ = std::fs::remove_dir_all(&profile);
}
