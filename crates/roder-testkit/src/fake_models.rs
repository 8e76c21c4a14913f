//! Fake model API servers (placeholder, being written).
