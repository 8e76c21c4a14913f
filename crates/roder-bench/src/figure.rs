//! One benchmark figure as a JSON line.

use serde_json::{Map, Value, json};

pub fn print(bench: &str, figure: &str, value: f64, unit: &str, context: Value) {
    let mut line = Map::new();
    line.insert("bench".into(), json!(bench));
    line.insert("figure".into(), json!(figure));
    line.insert("value".into(), json!((value * 1000.0).round() / 1000.0));
    line.insert("unit".into(), json!(unit));
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
