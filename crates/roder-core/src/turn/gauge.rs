//! How big the next request is, in the model's own tokens as far as known.
//!
//! Bytes / 4 is only an estimate, and it drifts from a model's tokenizer
//! with the content (code, JSON, other scripts), so a threshold checked
//! against it alone fires early or late (Codex #24779). The provider counts
//! every request it answers. So the gauge keeps the last answered request's
//! estimate and count: the next request of the turn is that count plus what
//! was appended since, scaled by the same tokens-per-estimate ratio; after a
//! compaction (the prompt changed wholesale) it is the new estimate scaled
//! by that ratio; before any answer, or from a provider that counts nothing,
//! it is the estimate. Compaction aims at the threshold in estimate units
//! ([`Gauge::in_estimate`]), so it cuts enough when the tokenizer counts
//! more than bytes / 4 (a compaction that leaves the request over the
//! threshold would compact again every round).

use roder_api::inference::{AgentInferenceRequest, TokenUsage};

use crate::turn::compaction::{estimate_tokens, estimate_with_tool_bytes, tool_bytes};

/// Ratios outside this (tokens per estimated token, in percent) are taken
/// as a provider's counting glitch and clamped.
const RATIO_PERCENT: std::ops::RangeInclusive<u64> = 25..=400;

#[derive(Debug, Default)]
pub(crate) struct Gauge {
    last: Option<Measured>,
    /// Whether the last answered request is a prefix of the next one.
    continues: bool,
    /// The bytes of the turn's tools, when known (every request of a turn
    /// carries the same): serialising their schemas each round is most of
    /// what an estimate costs.
    tool_bytes: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
struct Measured {
    /// Bytes / 4 of the request the provider answered (at least 1).
    estimate: u64,
    /// Its input tokens as the provider counted them.
    reported: u64,
}

impl Measured {
    fn ratio_percent(self) -> u64 {
        let percent = u128::from(self.reported) * 100 / u128::from(self.estimate);
        u64::try_from(percent)
            .unwrap_or(u64::MAX)
            .clamp(*RATIO_PERCENT.start(), *RATIO_PERCENT.end())
    }

    fn scale(self, estimate: u64) -> u64 {
        let scaled = u128::from(estimate) * u128::from(self.ratio_percent()) / 100;
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }
}

impl Gauge {
    /// A gauge for the requests of a turn offered `tools`.
    pub fn for_tools(tools: &[roder_api::tools::ToolSpec]) -> Self {
        Self {
            tool_bytes: Some(tool_bytes(tools)),
            ..Self::default()
        }
    }

    /// Bytes / 4 of `request`.
    pub fn estimate(&self, request: &AgentInferenceRequest) -> u64 {
        match self.tool_bytes {
            Some(tools) => estimate_with_tool_bytes(request, tools),
            None => estimate_tokens(request),
        }
    }

    /// Tokens of `request`, calibrated by the last answered request.
    pub fn size(&self, request: &AgentInferenceRequest) -> u64 {
        let estimate = self.estimate(request);
        match self.last {
            Some(last) if self.continues && estimate >= last.estimate => last
                .reported
                .saturating_add(last.scale(estimate - last.estimate)),
            Some(last) => last.scale(estimate),
            None => estimate,
        }
    }

    /// `tokens` in the estimate's units, for a compaction's target.
    pub fn in_estimate(&self, tokens: u64) -> u64 {
        match self.last {
            Some(last) => {
                let units = u128::from(tokens) * 100 / u128::from(last.ratio_percent());
                u64::try_from(units).unwrap_or(u64::MAX)
            }
            None => tokens,
        }
    }

    /// The provider answered `request` and counted `usage`.
    #[cfg(test)]
    pub fn answered(&mut self, request: &AgentInferenceRequest, usage: &TokenUsage) {
        self.answered_estimate(self.estimate(request), usage);
    }

    /// The provider answered a request of `estimate` ([`Gauge::estimate`])
    /// and counted `usage`.
    pub fn answered_estimate(&mut self, estimate: u64, usage: &TokenUsage) {
        if usage.input_tokens > 0 {
            self.last = Some(Measured {
                estimate: estimate.max(1),
                reported: usage.input_tokens,
            });
            self.continues = true;
        } else {
            self.continues = false;
        }
    }

    /// The prompt changed wholesale (a compaction): the last count no
    /// longer describes a prefix of the next request, but its ratio holds.
    pub fn compacted(&mut self) {
        self.continues = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::transcript::TranscriptItem;

    fn request(text_bytes: usize) -> AgentInferenceRequest {
        AgentInferenceRequest {
            model: "m".into(),
            instructions: String::new(),
            developer_context: None,
            transcript: vec![TranscriptItem::UserMessage {
                text: "x".repeat(text_bytes),
                images: Vec::new(),
            }],
            tools: Vec::new(),
            parallel_tool_calls: false,
            reasoning: None,
            hosted_web_search: Default::default(),
        }
    }

    fn usage(input_tokens: u64) -> TokenUsage {
        TokenUsage {
            input_tokens,
            ..TokenUsage::default()
        }
    }

    #[test]
    fn the_providers_count_calibrates_what_follows() {
        let mut gauge = Gauge::default();
        let first = request(4_000);
        let estimate = estimate_tokens(&first);
        assert_eq!(gauge.size(&first), estimate, "nothing measured yet");
        assert_eq!(gauge.in_estimate(900), 900);
        // The tokenizer counted twice the estimate: what follows builds on
        // that count, and what is added counts twice too.
        gauge.answered(&first, &usage(estimate * 2));
        let grown = request(8_000);
        let added = estimate_tokens(&grown) - estimate;
        assert_eq!(gauge.size(&grown), estimate * 2 + added * 2);
        assert_eq!(gauge.in_estimate(900), 450);
        // After a compaction, or for a shorter request: the estimate, scaled.
        let shorter = request(400);
        assert_eq!(gauge.size(&shorter), estimate_tokens(&shorter) * 2);
        gauge.compacted();
        assert_eq!(gauge.size(&grown), estimate_tokens(&grown) * 2);
        // A provider that reports nothing: no continuation, the old ratio.
        gauge.answered(&first, &usage(estimate * 2));
        gauge.answered(&grown, &usage(0));
        assert_eq!(gauge.size(&grown), estimate_tokens(&grown) * 2);
    }

    #[test]
    fn an_absurd_count_is_clamped() {
        let mut gauge = Gauge::default();
        let first = request(4_000);
        let estimate = estimate_tokens(&first);
        gauge.answered(&first, &usage(estimate * 1_000));
        gauge.compacted();
        assert_eq!(gauge.size(&first), estimate * 4);
        gauge.answered(&first, &usage(1));
        gauge.compacted();
        assert_eq!(gauge.size(&first), estimate / 4);
    }
}
