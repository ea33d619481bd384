//! The report's two documents: one self-contained HTML page (charts inlined as SVG, no external
//! file or script) and a Markdown summary that links the chart files. Both name, for every chart,
//! the run it comes from; when the inputs come from more than one machine or commit the page says
//! so at the top.

use crate::report::model::{Run, Table};

/// Escapes text for HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The distinct origins (machine @ commit) of the runs, in first-seen order.
pub fn origins(runs: &[Run]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in runs {
        if !out.contains(&r.origin()) {
            out.push(r.origin());
        }
    }
    out
}

fn html_table(table: &Table) -> String {
    let mut out = format!("<table id=\"table-{}\" class=\"data\">\n<caption>{}</caption>\n<tr>", table.id, escape(&table.title));
    for h in &table.header {
        out += &format!("<th>{}</th>", escape(h));
    }
    out += "</tr>\n";
    for row in &table.rows {
        out += "<tr>";
        for cell in row {
            out += &format!("<td>{}</td>", escape(cell));
        }
        out += "</tr>\n";
    }
    out + "</table>\n"
}

/// `svgs[i][j]` is the SVG text of `runs[i].charts[j]`.
pub fn html(runs: &[Run], svgs: &[Vec<String>], input: &str) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Slipstream ohb report</title>\n<style>\n\
         body { font-family: sans-serif; margin: 2em; max-width: 1100px; }\n\
         table { border-collapse: collapse; margin: 0.5em 0 1.5em 0; font-size: 0.9em; }\n\
         td, th { border: 1px solid #bbb; padding: 2px 8px; text-align: right; }\n\
         th:first-child, td:first-child { text-align: left; }\n\
         caption { text-align: left; font-weight: bold; padding: 4px 0; }\n\
         .PASS { color: #1a7f1a; font-weight: bold; } .FAIL { color: #c0392b; font-weight: bold; }\n\
         figure { margin: 1em 0; } figcaption { font-size: 0.85em; color: #555; }\n\
         .warning { background: #fff3cd; padding: 0.5em; border: 1px solid #e0c060; }\n\
         </style>\n</head>\n<body>\n<h1>Slipstream ohb report</h1>\n",
    );
    out += &format!("<p>{} result file(s) from <code>{}</code>.</p>\n", runs.len(), escape(input));
    let origins = origins(runs);
    if origins.len() > 1 {
        out += &format!(
            "<p class=\"warning\" id=\"mixed-origins\">These results come from {} different machines or commits; \
             every chart is one run and names it. Compare across runs with care.</p>\n",
            origins.len()
        );
    }
    out += "<table id=\"runs\">\n<caption>Runs</caption>\n<tr><th>file</th><th>test</th><th>machine</th><th>commit</th><th>written (UTC)</th><th>command</th></tr>\n";
    for r in runs {
        out += &format!(
            "<tr><td><a href=\"#run-{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            crate::report::model::slug(&r.file),
            escape(&r.file),
            escape(&r.bench),
            escape(&r.machine),
            escape(&r.commit),
            escape(&r.written_utc),
            escape(&r.command)
        );
    }
    out += "</table>\n";
    for (r, run_svgs) in runs.iter().zip(svgs) {
        out += &format!("<section id=\"run-{}\">\n<h2>{} <small>({})</small></h2>\n", crate::report::model::slug(&r.file), escape(&r.bench), escape(&r.file));
        out += &format!("<p>machine: {}; commit: {}{}</p>\n", escape(&r.machine), escape(&r.commit), escape(&load_text(r)));
        if !r.targets.is_empty() {
            out += &format!("<table id=\"targets-{}\">\n<caption>Targets</caption>\n<tr><th>target</th><th>verdict</th><th>detail</th></tr>\n", crate::report::model::slug(&r.file));
            for t in &r.targets {
                out += &format!(
                    "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>\n",
                    escape(&t.name),
                    escape(&t.verdict),
                    escape(&t.verdict),
                    escape(&t.detail)
                );
            }
            out += "</table>\n";
        }
        for (chart, svg) in r.charts.iter().zip(run_svgs) {
            out += &format!("<figure id=\"chart-{}\" class=\"chart\">\n", chart.id);
            // The SVG file's own XML declaration is dropped: the page inlines the <svg> element.
            out += svg.trim_start_matches(|c| c != '<').split_once("?>").map(|(_, rest)| rest).unwrap_or(svg).trim();
            out += &format!("\n<figcaption>{} - run: {} ({})</figcaption>\n</figure>\n", escape(&chart.title), escape(&r.file), escape(&r.origin()));
            out += &html_table(&chart.data_table());
        }
        for table in &r.tables {
            out += &html_table(table);
        }
        out += "</section>\n";
    }
    out + "</body>\n</html>\n"
}

fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn md_table(table: &Table) -> String {
    let mut out = format!("**{}**\n\n| {} |\n|{}\n", md_cell(&table.title), table.header.iter().map(|h| md_cell(h)).collect::<Vec<_>>().join(" | "), "---|".repeat(table.header.len()));
    for row in &table.rows {
        out += &format!("| {} |\n", row.iter().map(|c| md_cell(c)).collect::<Vec<_>>().join(" | "));
    }
    out + "\n"
}

/// `; load average 1.50 2.00 2.50 (1, 5, 15 min) when written`, or nothing for files without it.
fn load_text(run: &Run) -> String {
    if run.load_average.is_empty() {
        String::new()
    } else {
        format!("; load average {} (1, 5, 15 min) when written", run.load_average)
    }
}

/// The Markdown summary; charts are linked as `charts/ID.svg`.
pub fn markdown(runs: &[Run], input: &str) -> String {
    let mut out = format!("# Slipstream ohb report\n\n{} result file(s) from `{input}`.\n\n", runs.len());
    let origins = origins(runs);
    if origins.len() > 1 {
        out += &format!("**These results come from {} different machines or commits; every chart is one run and names it.**\n\n", origins.len());
    }
    out += "| file | test | machine | commit | written (UTC) |\n|---|---|---|---|---|\n";
    for r in runs {
        out += &format!("| {} | {} | {} | {} | {} |\n", md_cell(&r.file), md_cell(&r.bench), md_cell(&r.machine), md_cell(&r.commit), md_cell(&r.written_utc));
    }
    for r in runs {
        out += &format!("\n## {} ({})\n\nmachine: {}; commit: {}{}\n\n", r.bench, r.file, r.machine, r.commit, load_text(r));
        if !r.targets.is_empty() {
            out += "| target | verdict | detail |\n|---|---|---|\n";
            for t in &r.targets {
                out += &format!("| {} | {} | {} |\n", md_cell(&t.name), t.verdict, md_cell(&t.detail));
            }
            out += "\n";
        }
        for chart in &r.charts {
            out += &format!("![{}](charts/{}.svg)\n\n", md_cell(&chart.title), chart.id);
            out += &md_table(&chart.data_table());
        }
        for table in &r.tables {
            out += &md_table(table);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(file: &str, commit: &str) -> Run {
        Run {
            file: file.into(),
            bench: "fabric lat".into(),
            machine: "2 x cpu".into(),
            commit: commit.into(),
            written_utc: String::new(),
            command: String::new(),
            load_average: "1.50 2.00 2.50".into(),
            charts: vec![],
            tables: vec![],
            targets: vec![],
        }
    }

    #[test]
    fn runs_of_different_commits_are_flagged_not_merged() {
        let same = [run("a.json", "c1"), run("b.json", "c1")];
        assert!(!html(&same, &[vec![], vec![]], "results/").contains("mixed-origins"));
        let mixed = [run("a.json", "c1"), run("b.json", "c2")];
        let page = html(&mixed, &[vec![], vec![]], "results/");
        assert!(page.contains("id=\"mixed-origins\"") && page.contains("2 different machines or commits"), "{page}");
        assert!(markdown(&mixed, "results/").contains("2 different machines or commits"));
    }

    #[test]
    fn each_run_says_its_load_when_stamped() {
        let stamped = [run("a.json", "c1")];
        assert!(html(&stamped, &[vec![]], "results/").contains("load average 1.50 2.00 2.50 (1, 5, 15 min) when written"));
        assert!(markdown(&stamped, "results/").contains("load average 1.50 2.00 2.50"));
        let mut old = run("b.json", "c1");
        old.load_average.clear();
        assert!(!markdown(&[old], "results/").contains("load average"), "files written before the stamp say nothing");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
    }
}
