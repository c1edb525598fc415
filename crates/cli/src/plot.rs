//! `--plot FILE.svg` of the bench commands, drawn with plotters' SVG backend: line charts
//! over a log₂ size axis, stacked panels of them, and overlaid latency histograms on a
//! logarithmic time axis. The SVG is built in memory and written as any other output
//! (`io::file::write_atomic`: no link followed, nothing half-written).

use anyhow::{Context, Result, anyhow};
use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;

/// One chart's size in pixels.
const SIZE: (u32, u32) = (760, 440);

/// One named series of points.
pub(crate) type Series = (String, Vec<(f64, f64)>);

/// Colours that stay apart from each other (a series per colour, up to eight; more cycle).
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// A plotters error as ours (they borrow the backend, which does not outlive the chart).
fn drawing<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the plot: {e}")
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

/// Tick labels of an axis from 0 to `max` in about `n` steps, all with the decimals the step
/// needs (a step of 1, 2 or 5 times a power of ten, as the ticks are placed).
fn tick_format(max: f64, n: usize) -> impl Fn(&f64) -> String {
    let rough = max / n.max(1) as f64;
    let e = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * e)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * e);
    let decimals = if step >= 1.0 || !step.is_finite() {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    move |v: &f64| format!("{v:.decimals$}")
}

/// plotters' SVG puts a label's text on a line of its own; put it back inside its element
/// (`<text …>4K</text>`), so the file reads and searches as the labels read.
fn tidy(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut lines = svg.lines().peekable();
    while let Some(l) = lines.next() {
        out.push_str(l);
        if l.starts_with("<text")
            && l.ends_with('>')
            && let Some(t) = lines.next_if(|t| !t.starts_with('<'))
        {
            out.push_str(t);
            if let Some(close) = lines.next_if(|c| *c == "</text>") {
                out.push_str(close);
            }
        }
        out.push('\n');
    }
    out
}

/// A size in bytes as `512`, `4K`, `1M`.
fn fmt_size(b: f64) -> String {
    let b = b.round() as u64;
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}M", b >> 20)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{}K", b >> 10)
    } else {
        b.to_string()
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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw_lines(&root, title, xlabel, ylabel, series)?;
        root.present().map_err(drawing)?;
    }
    write(path, &svg)
}

/// Line charts stacked in one SVG, each (title, x label, y label, series).
pub(crate) fn panels(path: &Path, charts: &[(&str, &str, &str, Vec<Series>)]) -> Result<()> {
    let mut svg = String::new();
    {
        let size = (SIZE.0, SIZE.1 * charts.len().max(1) as u32);
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let areas = root.split_evenly((charts.len().max(1), 1));
        for ((title, x, y, series), area) in charts.iter().zip(&areas) {
            draw_lines(area, title, x, y, series)?;
        }
        root.present().map_err(drawing)?;
    }
    write(path, &svg)
}

fn write(path: &Path, svg: &str) -> Result<()> {
    rocelink_io::file::write_atomic(path, tidy(svg).as_bytes()).context("cannot write the plot")
}

/// The x range of `series` in log₂ units, widened to at least one octave.
fn log2_range(series: &[Series]) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for &(x, _) in series.iter().flat_map(|(_, p)| p.iter()) {
        lo = lo.min(x.max(1.0).log2());
        hi = hi.max(x.max(1.0).log2());
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    if hi - lo < 1.0 {
        hi = lo + 1.0;
    }
    (lo, hi)
}

/// One line chart into `area`. Series named "UDP…" (the baselines) are drawn dashed, with a
/// dashed swatch in the legend; every point is marked.
fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
) -> Result<()> {
    area.fill(&WHITE).map_err(drawing)?;
    let (lo, hi) = log2_range(series);
    let ymax = nice(
        series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
            .fold(0.0, f64::max)
            * 1.05,
    );
    let octaves = (hi.floor() - lo.ceil()) as usize + 1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(lo..hi, 0f64..ymax)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc(xlabel)
        .y_desc(ylabel)
        // ticks at powers of two, labelled as sizes (a tick between them has no label)
        .x_labels(octaves)
        .x_label_formatter(&|v| {
            if v.fract() == 0.0 {
                fmt_size(v.exp2())
            } else {
                String::new()
            }
        })
        .y_labels(6)
        .y_label_formatter(&tick_format(ymax, 5))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(drawing)?;
    let colours = pair_colours(series);
    for ((name, pts), &c) in series.iter().zip(&colours) {
        line_of(&mut chart, name, pts, c)?;
    }
    legend(&mut chart)
}

/// One series on a log2-x chart: a line (dashed for a "UDP…" baseline) with its legend
/// swatch, and a dot at every point.
fn line_of<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    name: &str,
    pts: &[(f64, f64)],
    c: RGBColor,
) -> Result<()> {
    let at = |&(x, y): &(f64, f64)| (x.max(1.0).log2(), y);
    let style = c.stroke_width(2);
    let line: Vec<(f64, f64)> = pts.iter().map(at).collect();
    if name.starts_with("UDP") {
        chart
            .draw_series(DashedLineSeries::new(line, 6, 4, style))
            .map_err(drawing)?
            .label(name)
            .legend(move |(x, y)| {
                plotters::element::DashedPathElement::new(vec![(x, y), (x + 20, y)], 6, 4, style)
            });
    } else {
        chart
            .draw_series(LineSeries::new(line, style))
            .map_err(drawing)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .draw_series(pts.iter().map(|p| Circle::new(at(p), 3, c.filled())))
        .map_err(drawing)?;
    Ok(())
}

/// A colour per series: a baseline ("UDP…", dashed) shares the colour of the series it is
/// the baseline of (same last word, e.g. "RoCE UD N_s=500" and "UDP N_s=500"), so each pair
/// reads as one colour, solid and dashed; every other series gets a colour of its own.
fn pair_colours(series: &[Series]) -> Vec<RGBColor> {
    let last = |n: &str| n.rsplit(' ').next().unwrap_or("").to_owned();
    let solid: Vec<&Series> = series
        .iter()
        .filter(|(n, _)| !n.starts_with("UDP"))
        .collect();
    let mut next = solid.len();
    series
        .iter()
        .map(|(n, _)| {
            let same = |(m, _): &&Series| n.contains(' ') && last(m) == last(n);
            match solid
                .iter()
                .position(|s| s.0 == *n)
                .or_else(|| solid.iter().position(same))
            {
                Some(i) => colour(i),
                None => {
                    next += 1;
                    colour(next - 1)
                }
            }
        })
        .collect()
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(drawing)
}

/// The bins of [`histogram`]: logarithmic from the smallest sample to the 99.9th percentile
/// of all, so a few slow outliers do not squash the rest into one bin. Returns the bin
/// edges and, per series, the percentage of its samples in each bin and how many lay above
/// the last edge (left out, and said so in the legend).
fn log_bins(series: &[(String, &[f64])], bins: usize) -> (Vec<f64>, Vec<(Vec<f64>, usize)>) {
    let mut all: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    all.sort_by(f64::total_cmp);
    let lo = all.first().copied().unwrap_or(1.0);
    let p999 = all
        .get((all.len().saturating_sub(1) as f64 * 0.999) as usize)
        .copied()
        .unwrap_or(lo);
    let hi = p999.max(lo * 1.01);
    let (llo, lhi) = (lo.ln(), hi.ln());
    let edges: Vec<f64> = (0..=bins)
        .map(|i| (llo + (lhi - llo) * i as f64 / bins as f64).exp())
        .collect();
    let counts = series
        .iter()
        .map(|(_, v)| {
            let mut c = vec![0.0; bins];
            let mut above = 0;
            for &x in v.iter() {
                if x > hi {
                    above += 1;
                    continue;
                }
                let f = ((x.max(lo).ln() - llo) / (lhi - llo) * bins as f64) as usize;
                c[f.min(bins - 1)] += 1.0;
            }
            let n = v.len().max(1) as f64;
            (c.iter().map(|k| k / n * 100.0).collect(), above)
        })
        .collect();
    (edges, counts)
}

/// Overlaid histograms of samples (µs): 60 logarithmic bins up to the 99.9th percentile of
/// all samples, each series in its own colour, the samples above it counted in the legend.
pub(crate) fn histogram(
    path: &Path,
    title: &str,
    xlabel: &str,
    series: &[(String, &[f64])],
) -> Result<()> {
    let (edges, counts) = log_bins(series, 60);
    let (lo, hi) = (edges[0], edges[edges.len() - 1]);
    let ymax = nice(
        counts
            .iter()
            .flat_map(|(c, _)| c)
            .fold(0.0f64, |a, &b| a.max(b))
            * 1.05,
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
                0f64..ymax,
            )
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc(format!("{xlabel}, log scale"))
            .y_desc("samples [%]")
            .x_label_formatter(&|v| format!("{}", round_sig(*v)))
            .y_labels(6)
            .y_label_formatter(&tick_format(ymax, 5))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(drawing)?;
        for (k, ((name, _), (c, above))) in series.iter().zip(&counts).enumerate() {
            let label = if *above > 0 {
                format!("{name} ({above} above {} not shown)", round_sig(hi))
            } else {
                name.clone()
            };
            bars_of(&mut chart, label, c, &edges, colour(k))?;
        }
        legend_right(&mut chart)?;
        root.present().map_err(drawing)?;
    }
    write(path, &svg)
}

/// One histogram series: a translucent bar per non-empty bin between `edges`, and its swatch.
fn bars_of<DB: DrawingBackend, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, RangedCoordf64>>,
    label: String,
    counts: &[f64],
    edges: &[f64],
    col: RGBColor,
) -> Result<()> {
    let bars = counts
        .iter()
        .enumerate()
        .filter(|(_, y)| **y > 0.0)
        .map(|(i, &y)| Rectangle::new([(edges[i], 0.0), (edges[i + 1], y)], col.mix(0.5).filled()));
    chart
        .draw_series(bars)
        .map_err(drawing)?
        .label(label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], col.filled()));
    Ok(())
}

fn legend_right<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(drawing)
}

/// 1-2-5 ticks from `lo` to `hi`.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut t = Vec::new();
    let mut e = 10f64.powf(lo.log10().floor());
    while e <= hi {
        for m in [1.0, 2.0, 5.0] {
            if (lo..=hi).contains(&(m * e)) {
                t.push(m * e);
            }
        }
        e *= 10.0;
    }
    t
}

/// `v` to three significant digits, for log-axis labels (18.3, 120, 2510).
fn round_sig(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return v;
    }
    let p = 10f64.powi(2 - v.log10().floor() as i32);
    (v * p).round() / p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rocelink-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn line_charts_mark_every_point_and_label_sizes() {
        let p = tmp("l.svg");
        let pts = |k: f64| vec![(4096.0, 10.0 * k), (65536.0, 20.0 * k)];
        let series = [("RC WRITE".into(), pts(1.0)), ("UDP".into(), pts(1.1))];
        lines(&p, "t", "size", "Gbit/s", &series).unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<circle").count(), 4, "two points per series");
        assert!(s.contains(">4K<") && s.contains(">64K<"), "{s}");
        assert!(s.contains(">RC WRITE<") && s.contains(">UDP<"));
        // the dashed baseline is drawn in pieces, in the chart and in its legend swatch
        assert!(s.matches("<polyline").count() > 4, "{s}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_baseline_shares_its_series_colour() {
        let s = |n: &str| (n.to_owned(), vec![(1.0, 1.0)]);
        let c = pair_colours(&[
            s("RoCE UD N_s=500"),
            s("RoCE UD N_s=1000"),
            s("UDP N_s=500"),
            s("UDP N_s=1000"),
        ]);
        assert_eq!((c[0], c[1]), (c[2], c[3]));
        assert_ne!(c[0], c[1]);
        let c = pair_colours(&[s("RC WRITE"), s("UDP")]);
        assert_ne!(c[0], c[1], "no pair: a colour of its own");
    }

    #[test]
    fn histograms_have_their_own_colours_and_count_what_they_leave_out() {
        let h = tmp("h.svg");
        let a: Vec<f64> = (0..1000).map(|i| 10.0 + f64::from(i % 7)).collect();
        let mut b: Vec<f64> = (0..1000).map(|i| 100.0 + f64::from(i % 13)).collect();
        b.extend([6000.0, 7000.0]); // outliers beyond the 99.9th percentile of all
        let series: Vec<(String, &[f64])> = (0..5)
            .map(|i| (format!("N_s = {i}"), if i == 4 { &b[..] } else { &a[..] }))
            .collect();
        histogram(&h, "t", "round trip [µs]", &series).unwrap();
        let s = std::fs::read_to_string(&h).unwrap();
        for i in 0..5 {
            assert!(s.contains(&format!("N_s = {i}")), "{s}");
        }
        assert!(s.contains("N_s = 4 (2 above"), "outliers counted: {s}");
        // five series, five distinct fill colours
        let fills: std::collections::BTreeSet<&str> = s
            .match_indices("fill=\"#")
            .map(|(i, _)| &s[i + 6..i + 13])
            .filter(|c| *c != "#FFFFFF" && *c != "#000000")
            .collect();
        assert!(fills.len() >= 5, "{fills:?}");
        std::fs::remove_file(&h).unwrap();
    }

    #[test]
    fn bins_are_logarithmic_and_percentages_add_up() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let (edges, counts) = log_bins(&[("a".into(), &v[..])], 10);
        assert_eq!(edges.len(), 11);
        let ratio = edges[1] / edges[0];
        for w in edges.windows(2) {
            assert!((w[1] / w[0] - ratio).abs() < 1e-9);
        }
        let (c, above) = &counts[0];
        assert_eq!(*above, 1, "the sample above the 99.9th percentile");
        let total: f64 = c.iter().sum();
        assert!((total - 99.9).abs() < 1e-9, "{total}");
    }

    #[test]
    fn ticks_share_their_decimals() {
        let f = tick_format(8.0, 5);
        assert_eq!([f(&0.0), f(&2.0), f(&8.0)], ["0", "2", "8"]);
        let f = tick_format(1.0, 5);
        assert_eq!([f(&0.0), f(&0.4), f(&1.0)], ["0.0", "0.4", "1.0"]);
        let f = tick_format(0.25, 5);
        assert_eq!([f(&0.0), f(&0.05)], ["0.00", "0.05"]);
        let f = tick_format(200.0, 5);
        assert_eq!([f(&0.0), f(&50.0)], ["0", "50"]);
        assert_eq!(
            tidy("<svg>\n<text x=\"1\">\n4K\n</text>\n</svg>\n"),
            "<svg>\n<text x=\"1\">4K</text>\n</svg>\n"
        );
        assert_eq!(nice(7.3), 10.0);
        assert_eq!(nice(23.0), 25.0);
        assert_eq!(nice(0.0), 1.0);
        assert_eq!(round_sig(18.347), 18.3);
        assert_eq!(round_sig(2513.0), 2510.0);
    }
}
