//! How a number reads, shared by the tables, figures, trace reviews and
//! pages: bytes with a binary unit, counts with thousands separators, three
//! significant digits. Defined once so that a figure reads the same
//! wherever it is shown.
//!
//! # Layout
//! One file: [`bytes`], [`si_bytes`], [`sig3`], [`thousands`], [`count`],
//! [`xml_escape`], [`csv_row`].

/// Bytes with a binary unit: `0 B`, `512 B`, `1.5 KiB`, `2.93 GiB`.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if b.abs() < 1024.0 {
        return format!("{} B", b.round() as i64);
    }
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{} {}", sig3(v), UNITS[u])
}

/// Bytes with a decimal unit for log axes, whose ticks fall on powers of ten: `10 kB`.
pub fn si_bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    let n = sig3(v);
    let n = if n.contains('.') { n.trim_end_matches('0').trim_end_matches('.') } else { &n };
    format!("{n} {}", UNITS[u])
}

/// Three significant digits, no exponent.
pub fn sig3(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = v.abs().log10().floor() as i32;
    let decimals = (2 - digits).clamp(0, 6) as usize;
    format!("{v:.decimals$}")
}

/// An integer with thousands separators: `2,929,000`.
pub fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count that may be fractional (a median of an even count, a rate).
pub fn count(v: f64) -> String {
    if (v.fract() == 0.0 || v.abs() >= 1000.0) && (0.0..1e15).contains(&v) {
        thousands(v.round() as u64)
    } else {
        sig3(v)
    }
}

/// Text escaped for XML content and attributes.
pub fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(ch),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.00 GiB");
        assert_eq!(thousands(2_929_000), "2,929,000");
        assert_eq!(si_bytes(100_000.0), "100 kB");
        assert_eq!(si_bytes(1.0), "1 B");
        assert_eq!(count(2.5), "2.50");
        assert_eq!(count(12.0), "12");
        assert_eq!(count(77_003_469.4), "77,003,469");
    }
}

/// One CSV row (RFC 4180): fields joined by commas, a field quoted when it
/// holds a comma, a quote or a line break (its quotes doubled), and the
/// line ended.
pub fn csv_row<S: AsRef<str>>(fields: impl IntoIterator<Item = S>) -> String {
    let mut o = String::new();
    for (i, f) in fields.into_iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let f = f.as_ref();
        if f.contains([',', '"', '\n', '\r']) {
            o.push('"');
            o.push_str(&f.replace('"', "\"\""));
            o.push('"');
        } else {
            o.push_str(f);
        }
    }
    o.push('\n');
    o
}

#[cfg(test)]
mod csv_tests {
    #[test]
    fn csv_rows_quote_what_needs_it() {
        assert_eq!(super::csv_row(["a", "b,c", "say \"hi\"", ""]), "a,\"b,c\",\"say \"\"hi\"\"\",\n");
    }
}
