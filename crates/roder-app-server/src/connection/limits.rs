//! Bounds of one connection.

/// What one client may cost the server. Every queue is bounded, so a slow or
/// hostile client costs at most these, and never slows the runtime down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Largest message read; a larger one is answered with -32007 and
    /// skipped. (WebSocket frames past four times this close the connection
    /// with 1009 instead, since they are never buffered whole.)
    pub max_message_bytes: usize,
    /// Messages queued for the client (notifications and responses). When a
    /// notification finds it full, the client's subscriptions are dropped
    /// and it is told (-32008) where to resume from.
    pub client_queue: usize,
    /// Requests of this connection running at once; further ones wait to be
    /// read, which pushes back on the client.
    pub max_in_flight: usize,
}

impl ConnectionLimits {
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;
    pub const DEFAULT_CLIENT_QUEUE: usize = 4096;
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
            client_queue: Self::DEFAULT_CLIENT_QUEUE,
            max_in_flight: Self::DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

impl ConnectionLimits {
    /// Rejects limits a connection cannot run under.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.max_message_bytes == 0 {
            anyhow::bail!("max_message_bytes must be at least 1");
        }
        if self.client_queue == 0 {
            anyhow::bail!("client_queue must be at least 1");
        }
        if self.max_in_flight == 0 || self.max_in_flight > u32::MAX as usize {
            anyhow::bail!("max_in_flight must be between 1 and {}", u32::MAX);
        }
        Ok(())
    }
}
