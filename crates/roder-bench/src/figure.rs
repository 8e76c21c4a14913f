//! One benchmark figure as a JSON line.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value, json};

static SMOKE: AtomicBool = AtomicBool::new(false);

/// `--smoke`: every bench runs end to end at a size that only shows it
/// still runs (what CI does, so a bench that breaks fails CI); its figures
/// mean nothing and each line says `"smoke": true`.
pub fn set_smoke() {
    SMOKE.store(true, Ordering::Relaxed);
}

pub fn smoke() -> bool {
    SMOKE.load(Ordering::Relaxed)
}

/// A bench's amount of work: `full`, or `small` in smoke mode.
pub fn sized<T>(full: T, small: T) -> T {
    if smoke() { small } else { full }
}

pub fn print(bench: &str, figure: &str, value: f64, unit: &str, context: Value) {
    let mut line = Map::new();
    line.insert("bench".into(), json!(bench));
    line.insert("figure".into(), json!(figure));
    line.insert("value".into(), json!((value * 1000.0).round() / 1000.0));
    line.insert("unit".into(), json!(unit));
    if smoke() {
        line.insert("smoke".into(), json!(true));
    }
    if let Value::Object(extra) = context {
        line.extend(extra);
    }
    println!("{}", Value::Object(line));
}

/// The median of `samples` (which it sorts).
pub fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    match samples.len() {
        0 => 0.0,
        n if n % 2 == 1 => samples[n / 2],
        n => (samples[n / 2 - 1] + samples[n / 2]) / 2.0,
    }
}

/// The nearest-rank `fraction` percentile of `samples` (which it sorts).
pub fn percentile(samples: &mut [f64], fraction: f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    if samples.is_empty() {
        return 0.0;
    }
    let rank = (fraction * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut samples: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&mut samples, 0.95), 19.0);
        assert_eq!(percentile(&mut samples, 0.5), 10.0);
        assert_eq!(percentile(&mut [3.0], 0.95), 3.0);
        assert_eq!(percentile(&mut [], 0.95), 0.0);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
