//! The frame every page shares, escaping, and the two assets: a style sheet
//! and a small script. Pages are complete without the script (tables in
//! the order written, a point's value in its SVG `<title>`); the script
//! sorts tables by a header click and shows a hovered point's exact value
//! beside the pointer.

pub use analysis::report::figures::xml_escape as esc;

/// A whole page: `up` is the path from the page's directory to the site's
/// root (`""`, `"../"`, `"../../"`), `crumbs` the links above the title.
pub fn page(title: &str, up: &str, crumbs: &[(String, String)], body: &str) -> String {
    let mut nav = format!("<a href=\"{up}index.html\">report</a>");
    for (href, text) in crumbs {
        nav += &format!(" › <a href=\"{href}\">{}</a>", esc(text));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<link rel=\"icon\" href=\"data:,\">\n\
         <link rel=\"stylesheet\" href=\"{up}assets/site.css\">\n\
         <script defer src=\"{up}assets/site.js\"></script>\n</head>\n<body>\n\
         <nav>{nav}</nav>\n<h1>{t}</h1>\n{body}\n\
         <footer>Written by <code>workbench report</code> from <code>data/</code>; \
         regenerate it rather than editing it.</footer>\n</body>\n</html>\n",
        t = esc(title)
    )
}

/// A definition list of facts, each value already HTML.
pub fn facts(rows: &[(&str, String)]) -> String {
    let mut s = String::from("<dl class=\"facts\">\n");
    for (k, v) in rows {
        s += &format!("<dt>{}</dt><dd>{v}</dd>\n", esc(k));
    }
    s + "</dl>\n"
}

/// A sortable table of plain-text cells; `class` per row (empty for none).
/// Numeric cells sort as numbers ([`analysis::report::tables::leading_number`]).
pub fn table(id: &str, header: &[&str], rows: &[(String, Vec<String>)]) -> String {
    let mut s = format!("<table class=\"sortable\" id=\"{}\">\n<thead><tr>", esc(id));
    for h in header {
        s += &format!("<th scope=\"col\">{}</th>", esc(h));
    }
    s += "</tr></thead>\n<tbody>\n";
    for (class, cells) in rows {
        let class = if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") };
        s += &format!("<tr{class}>");
        for c in cells {
            s += &cell_html(c);
        }
        s += "</tr>\n";
    }
    s + "</tbody>\n</table>\n"
}

/// A cell holding HTML (a link, a `<code>`): its sort key is its text.
fn cell_html(html: &str) -> String {
    let text = strip_tags(html);
    match analysis::report::tables::leading_number(&text) {
        Some(v) => format!("<td data-sort=\"{v}\">{html}</td>"),
        None => format!("<td>{html}</td>"),
    }
}

/// Text with the tags removed (what a sort compares).
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut inside = false;
    for ch in html.chars() {
        match ch {
            '<' => inside = true,
            '>' => inside = false,
            _ if !inside => out.push(ch),
            _ => {}
        }
    }
    out
}

/// A link whose text is escaped.
pub fn link(href: &str, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", esc(href), esc(text))
}

pub const CSS: &str = r#"body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #222; }
nav { font-size: 13px; color: #555; }
h1 { font-size: 1.6em; margin: .4em 0; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 13px; }
caption { caption-side: top; text-align: left; padding: .3em 0; color: #444; max-width: 1100px; }
p.method { color: #444; font-size: .92em; max-width: 1100px; }
th, td { border: 1px solid #ddd; padding: .25em .55em; text-align: right; vertical-align: top; }
th[scope=row], td:first-child, td:not([data-sort]), thead th { text-align: left; }
thead th { background: #f3f3f3; cursor: pointer; user-select: none; }
thead th[aria-sort=ascending]::after { content: " ▲"; } thead th[aria-sort=descending]::after { content: " ▼"; }
tr.changed td, tr.changed th, td.changed { background: #fff1c2; }
tr.slower td { background: #fde0dc; } tr.faster td { background: #dcf3e0; }
tr.reproduced td:last-child { color: #17602a; } tr.not-reproduced td:last-child { color: #a01818; font-weight: bold; }
small { color: #666; } .source { font-size: 12px; color: #666; margin-top: -.8em; }
figure { margin: 1em 0; } figure svg { width: 100%; height: auto; border: 1px solid #eee; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
pre { background: #f7f7f7; padding: .6em; overflow: auto; font-size: 12px; max-height: 30em; }
iframe.flame { width: 100%; height: 640px; border: 1px solid #ddd; }
div.diff-flame { overflow-x: auto; border: 1px solid #ddd; }
p.stale { background: #fde0dc; padding: .4em .6em; border-left: 4px solid #a01818; }
rect.delta:hover { stroke: #000; stroke-width: 1; }
#tip { position: fixed; pointer-events: none; background: #222; color: #fff; padding: .25em .5em; border-radius: 3px; font-size: 12px; display: none; z-index: 10; }
footer { margin-top: 3em; font-size: 12px; color: #777; }
.frames { font-family: ui-monospace, monospace; font-size: 12px; text-align: left; }
"#;

pub const JS: &str = r#"// Sorting by a header click, and a hovered point's exact value. The
// pages are whole without this script.
"use strict";
function sortKey(cell) {
  const v = cell.getAttribute("data-sort");
  return v === null ? null : parseFloat(v);
}
function sortTable(table, col, th) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const asc = th.getAttribute("aria-sort") !== "ascending";
  rows.sort(function (a, b) {
    const ca = a.cells[col], cb = b.cells[col];
    if (!ca || !cb) return 0;
    const na = sortKey(ca), nb = sortKey(cb);
    let d;
    if (na !== null && nb !== null) d = na - nb;
    else if (na !== null) d = -1;
    else if (nb !== null) d = 1;
    else d = ca.textContent.localeCompare(cb.textContent);
    return asc ? d : -d;
  });
  for (const h of table.tHead.rows[0].cells) h.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  for (const r of rows) body.appendChild(r);
}
document.addEventListener("DOMContentLoaded", function () {
  for (const table of document.querySelectorAll("table.sortable")) {
    if (!table.tHead) continue;
    Array.from(table.tHead.rows[0].cells).forEach(function (th, i) {
      th.addEventListener("click", function () { sortTable(table, i, th); });
    });
  }
  const tip = document.createElement("div");
  tip.id = "tip";
  document.body.appendChild(tip);
  for (const p of document.querySelectorAll("circle.point, rect.delta")) {
    p.addEventListener("mouseover", function (e) {
      const t = p.querySelector("title");
      tip.textContent = t ? t.textContent : "";
      tip.style.left = (e.clientX + 12) + "px";
      tip.style.top = (e.clientY + 12) + "px";
      tip.style.display = "block";
    });
    p.addEventListener("mouseout", function () { tip.style.display = "none"; });
  }
});
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_sort_by_their_text_not_their_tags() {
        assert_eq!(cell_html("<a href=\"x\">1,024</a>"), "<td data-sort=\"1024\"><a href=\"x\">1,024</a></td>");
        assert_eq!(cell_html("<code>zap</code>"), "<td><code>zap</code></td>");
    }
}
