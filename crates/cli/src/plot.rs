//! `--plot FILE.svg` of the bench commands: small self-contained SVG charts (line charts
//! over a log₂ x axis, and overlaid latency histograms), no fonts or libraries needed to view.

use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;

const W: f64 = 760.0;
const H: f64 = 440.0;
const L: f64 = 70.0; // left margin
const R: f64 = 20.0;
const T: f64 = 40.0;
const B: f64 = 60.0;
const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// One named series of points.
pub(crate) type Series = (String, Vec<(f64, f64)>);

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn header(title: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>
"#,
        W / 2.0,
        esc(title)
    );
    s
}

/// "Nice" upper bound for an axis.
fn nice(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let e = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * e >= max {
            return m * e;
        }
    }
    10.0 * e
}

fn axes(s: &mut String, xlabel: &str, ylabel: &str, ymax: f64) {
    let (x0, y0, x1, y1) = (L, H - B, W - R, T);
    let _ = writeln!(
        s,
        r#"<path d="M{x0},{y1} L{x0},{y0} L{x1},{y0}" stroke="black" fill="none"/>"#
    );
    for i in 0..=5 {
        let v = ymax * f64::from(i) / 5.0;
        let y = y0 - (y0 - y1) * f64::from(i) / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            fmt_num(v)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        H - 15.0,
        esc(xlabel)
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">{}</text>"#,
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        esc(ylabel)
    );
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn legend(s: &mut String, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let y = T + 14.0 + 18.0 * i as f64;
        let x = W - R - 190.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="14" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            y - 9.0,
            COLORS[i % COLORS.len()],
            x + 20.0,
            y,
            esc(n)
        );
    }
}

/// A line chart with a log₂ x axis (sizes).
pub(crate) fn lines(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
) -> Result<()> {
    let s = lines_svg(title, xlabel, ylabel, series);
    rocelink_io::file::write_atomic(path, s.as_bytes()).context("cannot write the plot")
}

/// Line charts stacked in one SVG, each (title, x label, y label, series).
pub(crate) fn panels(path: &Path, charts: &[(&str, &str, &str, Vec<Series>)]) -> Result<()> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{}" viewBox="0 0 {W} {}">"#,
        H * charts.len() as f64,
        H * charts.len() as f64
    );
    for (i, (title, x, y, series)) in charts.iter().enumerate() {
        let inner = lines_svg(title, x, y, series);
        s.push_str(&inner.replacen("<svg ", &format!(r#"<svg y="{}" "#, H * i as f64), 1));
    }
    s.push_str("</svg>\n");
    rocelink_io::file::write_atomic(path, s.as_bytes()).context("cannot write the plot")
}

/// [`lines`] as SVG text. Series named "UDP…" are drawn dashed.
fn lines_svg(title: &str, xlabel: &str, ylabel: &str, series: &[Series]) -> String {
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (mut xmin, mut xmax, mut ymax) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        xmin = xmin.min(x.max(1.0).log2());
        xmax = xmax.max(x.max(1.0).log2());
        ymax = ymax.max(y);
    }
    if xmax <= xmin {
        xmax = xmin + 1.0;
    }
    let ymax = nice(ymax * 1.05);
    let mut s = header(title);
    axes(&mut s, xlabel, ylabel, ymax);
    let px = |x: f64| L + (x.max(1.0).log2() - xmin) / (xmax - xmin) * (W - L - R);
    let py = |y: f64| H - B - y / ymax * (H - B - T);
    let mut e = xmin.ceil();
    while e <= xmax {
        let x = px(e.exp2());
        let _ = writeln!(
            s,
            r#"<text x="{x}" y="{}" text-anchor="middle">{}</text>"#,
            H - B + 18.0,
            fmt_size(e.exp2())
        );
        e += 1.0;
    }
    for (i, (_, p)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let d: Vec<String> = p
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let dash = if series[i].0.starts_with("UDP") {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"{dash}/>"#,
            d.join(" ")
        );
        for &(x, y) in p {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                px(x),
                py(y)
            );
        }
    }
    let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
    legend(&mut s, &names);
    s.push_str("</svg>\n");
    s
}

fn fmt_size(b: f64) -> String {
    let b = b as u64;
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}M", b >> 20)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{}K", b >> 10)
    } else {
        b.to_string()
    }
}

/// Overlaid histograms of samples (µs), 60 bins up to the 99.9th percentile of all.
pub(crate) fn histogram(
    path: &Path,
    title: &str,
    xlabel: &str,
    series: &[(String, &[f64])],
) -> Result<()> {
    let mut all: Vec<f64> = series.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    all.sort_by(f64::total_cmp);
    let lo = all.first().copied().unwrap_or(0.0);
    let hi = all
        .get((all.len() as f64 * 0.999) as usize)
        .or(all.last())
        .copied()
        .unwrap_or(1.0)
        .max(lo + 1e-3);
    let bins = 60usize;
    let width = (hi - lo) / bins as f64;
    let counts: Vec<Vec<f64>> = series
        .iter()
        .map(|(_, v)| {
            let mut c = vec![0.0; bins];
            for &x in v.iter() {
                let i = (((x - lo) / width) as usize).min(bins - 1);
                c[i] += 1.0;
            }
            let n = v.len().max(1) as f64;
            c.iter().map(|k| k / n * 100.0).collect()
        })
        .collect();
    let ymax = nice(counts.iter().flatten().fold(0.0f64, |a, &b| a.max(b)) * 1.05);
    let mut s = header(title);
    axes(&mut s, xlabel, "samples [%]", ymax);
    let px = |x: f64| L + (x - lo) / (hi - lo) * (W - L - R);
    let py = |y: f64| H - B - y / ymax * (H - B - T);
    for i in 0..=5 {
        let v = lo + (hi - lo) * f64::from(i) / 5.0;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            px(v),
            H - B + 18.0,
            fmt_num(v)
        );
    }
    for (k, c) in counts.iter().enumerate() {
        let col = COLORS[k % COLORS.len()];
        for (i, &y) in c.iter().enumerate() {
            if y <= 0.0 {
                continue;
            }
            let x = px(lo + width * i as f64);
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{col}" fill-opacity="0.55"/>"#,
                py(y),
                (px(lo + width) - px(lo)).max(1.0),
                H - B - py(y)
            );
        }
    }
    let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
    legend(&mut s, &names);
    s.push_str("</svg>\n");
    rocelink_io::file::write_atomic(path, s.as_bytes()).context("cannot write the plot")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_every_series() {
        let dir = std::env::temp_dir().join(format!("rocelink-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("l.svg");
        let pts = |k: f64| vec![(4096.0, 10.0 * k), (65536.0, 20.0 * k)];
        let series = [("RC WRITE".into(), pts(1.0)), ("UDP".into(), pts(1.1))];
        lines(&p, "t", "size", "Gbit/s", &series).unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains(">4K<") && s.contains(">64K<"));
        let h = dir.join("h.svg");
        let a: Vec<f64> = (0..100).map(|i| 10.0 + f64::from(i % 7)).collect();
        histogram(
            &h,
            "t",
            "µs",
            &[("RC WRITE".into(), &a[..]), ("bare UDP".into(), &a[..50])],
        )
        .unwrap();
        let s = std::fs::read_to_string(&h).unwrap();
        assert!(s.contains("RC WRITE") && s.contains("bare UDP"));
        assert!(s.matches("<rect").count() > 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nice_bounds() {
        assert_eq!(nice(7.3), 10.0);
        assert_eq!(nice(23.0), 25.0);
        assert_eq!(nice(0.0), 1.0);
    }
}
