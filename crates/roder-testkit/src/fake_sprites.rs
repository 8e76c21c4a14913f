//! A fake Sprites API server (placeholder, being written).
