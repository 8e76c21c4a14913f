//! A session's choices as ACP shows them: `configOptions` for the approval
//! mode, the model, the reasoning effort and the agent profile, and the
//! legacy `modes` object kept in step with the mode option (clients read one
//! or the other).

use agent_client_protocol_schema::v1 as acp;
use roder_api::inference::ReasoningEffort;
use roder_api::policy_mode::PolicyMode;

pub(crate) const MODE: &str = "mode";
pub(crate) const MODEL: &str = "model";
pub(crate) const EFFORT: &str = "reasoning_effort";
pub(crate) const PROFILE: &str = "profile";

/// The value of the profile option of a session without one.
pub(crate) const PROFILE_NONE: &str = "none";

/// The value of the effort option that leaves the choice to the config.
const EFFORT_DEFAULT: &str = "default";

const EFFORTS: [ReasoningEffort; 4] = [
    ReasoningEffort::Minimal,
    ReasoningEffort::Low,
    ReasoningEffort::Medium,
    ReasoningEffort::High,
];

/// What one session runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Choices {
    pub mode: PolicyMode,
    /// `provider/model`.
    pub model: String,
    /// `None`: the configuration's effort.
    pub effort: Option<ReasoningEffort>,
    /// The models offered (the current one among them).
    pub models: Vec<String>,
    /// The profile the session's thread runs as (its selector), if any.
    pub profile: Option<String>,
    /// The profiles offered; none: no profile option.
    pub profiles: Vec<String>,
}

/// A change a client asked for that cannot be made.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refused(pub String);

impl Choices {
    pub fn config_options(&self) -> Vec<acp::SessionConfigOption> {
        let modes: Vec<acp::SessionConfigSelectOption> = PolicyMode::ALL
            .iter()
            .map(|mode| {
                acp::SessionConfigSelectOption::new(mode.as_str(), mode_name(*mode))
                    .description(mode.description().to_string())
            })
            .collect();
        let models: Vec<acp::SessionConfigSelectOption> = self
            .models
            .iter()
            .map(|model| acp::SessionConfigSelectOption::new(model.clone(), model.clone()))
            .collect();
        let mut efforts = vec![
            acp::SessionConfigSelectOption::new(EFFORT_DEFAULT, "Configured")
                .description("The effort config.toml sets (reasoning_effort).".to_string()),
        ];
        efforts.extend(
            EFFORTS.iter().map(|effort| {
                acp::SessionConfigSelectOption::new(effort.as_str(), effort.as_str())
            }),
        );
        let mut options = vec![
            acp::SessionConfigOption::select(MODE, "Approval mode", self.mode.as_str(), modes)
                .description("Which tool calls run without asking.".to_string())
                .category(acp::SessionConfigOptionCategory::Mode),
            acp::SessionConfigOption::select(MODEL, "Model", self.model.clone(), models)
                .category(acp::SessionConfigOptionCategory::Model),
            acp::SessionConfigOption::select(
                EFFORT,
                "Reasoning effort",
                self.effort.map_or(EFFORT_DEFAULT, ReasoningEffort::as_str),
                efforts,
            )
            .category(acp::SessionConfigOptionCategory::ThoughtLevel),
        ];
        if !self.profiles.is_empty() || self.profile.is_some() {
            let mut profiles: Vec<acp::SessionConfigSelectOption> = Vec::new();
            match &self.profile {
                None => profiles.push(
                    acp::SessionConfigSelectOption::new(PROFILE_NONE, "None")
                        .description("Roder as configured.".to_string()),
                ),
                Some(current) if !self.profiles.contains(current) => profiles.push(
                    acp::SessionConfigSelectOption::new(current.clone(), current.clone()),
                ),
                Some(_) => {}
            }
            profiles.extend(self.profiles.iter().map(|selector| {
                acp::SessionConfigSelectOption::new(selector.clone(), selector.clone())
            }));
            options.push(
                acp::SessionConfigOption::select(
                    PROFILE,
                    "Agent profile",
                    self.profile
                        .clone()
                        .unwrap_or_else(|| PROFILE_NONE.to_string()),
                    profiles,
                )
                .description(
                    "Who the agent is; chosen once, before the session's first prompt.".to_string(),
                ),
            );
        }
        options
    }

    /// Whether the profile option may become `value` (the runtime then
    /// applies it to the thread).
    pub fn check_profile(&self, value: &str) -> Result<(), Refused> {
        if let Some(current) = &self.profile {
            if current == value {
                return Ok(());
            }
            return Err(Refused(format!(
                "the session runs as profile \"{current}\": a session's profile is chosen once, before its first prompt"
            )));
        }
        if value != PROFILE_NONE && !self.profiles.iter().any(|offered| offered == value) {
            return Err(Refused(format!(
                "profile \"{value}\" is not offered (offered: {})",
                self.profiles.join(", ")
            )));
        }
        Ok(())
    }

    pub fn modes(&self) -> acp::SessionModeState {
        acp::SessionModeState::new(
            self.mode.as_str(),
            PolicyMode::ALL
                .iter()
                .map(|mode| {
                    acp::SessionMode::new(mode.as_str(), mode_name(*mode))
                        .description(mode.description().to_string())
                })
                .collect(),
        )
    }

    /// Applies `config_id = value`.
    pub fn set(&mut self, config_id: &str, value: &str) -> Result<(), Refused> {
        match config_id {
            MODE => self.mode = parse_mode(value)?,
            MODEL => {
                if !self.models.iter().any(|model| model == value) {
                    return Err(Refused(format!(
                        "model \"{value}\" is not offered (offered: {})",
                        self.models.join(", ")
                    )));
                }
                self.model = value.to_string();
            }
            EFFORT => {
                self.effort = if value == EFFORT_DEFAULT {
                    None
                } else {
                    Some(
                        EFFORTS
                            .into_iter()
                            .find(|effort| effort.as_str() == value)
                            .ok_or_else(|| {
                                Refused(format!(
                                    "reasoning effort \"{value}\" is not one of default, minimal, low, medium, high"
                                ))
                            })?,
                    )
                };
            }
            PROFILE => {
                self.check_profile(value)?;
                if value != PROFILE_NONE {
                    self.profile = Some(value.to_string());
                }
            }
            other => {
                return Err(Refused(format!(
                    "no config option \"{other}\" (options: {MODE}, {MODEL}, {EFFORT}, {PROFILE})"
                )));
            }
        }
        Ok(())
    }
}

pub(crate) fn parse_mode(value: &str) -> Result<PolicyMode, Refused> {
    value.parse().map_err(|_| {
        Refused(format!(
            "mode \"{value}\" is not one of plan, default, accept_edits, bypass"
        ))
    })
}

fn mode_name(mode: PolicyMode) -> &'static str {
    match mode {
        PolicyMode::Plan => "Plan",
        PolicyMode::Default => "Ask",
        PolicyMode::AcceptEdits => "Accept edits",
        PolicyMode::Bypass => "Bypass",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choices() -> Choices {
        Choices {
            mode: PolicyMode::Default,
            model: "fake/m".into(),
            effort: None,
            models: vec!["fake/m".into(), "fake/n".into()],
            profile: None,
            profiles: vec!["builtin:plan".into(), "reviewer".into()],
        }
    }

    #[test]
    fn a_profile_is_chosen_once_among_those_offered() {
        let mut choices = choices();
        let options = serde_json::to_value(choices.config_options()).unwrap();
        assert_eq!(options[3]["id"], "profile");
        assert_eq!(options[3]["currentValue"], "none");
        assert!(choices.set(PROFILE, "builtin:nope").is_err());
        choices.set(PROFILE, PROFILE_NONE).unwrap();
        assert_eq!(choices.profile, None);
        choices.set(PROFILE, "reviewer").unwrap();
        assert_eq!(choices.profile.as_deref(), Some("reviewer"));
        choices.set(PROFILE, "reviewer").unwrap();
        let again = choices.set(PROFILE, "builtin:plan").unwrap_err();
        assert!(again.0.contains("chosen once"), "{}", again.0);
        let options = serde_json::to_value(choices.config_options()).unwrap();
        assert_eq!(options[3]["currentValue"], "reviewer");
        assert!(
            !options[3].to_string().contains("\"none\""),
            "{}",
            options[3]
        );
    }

    #[test]
    fn options_and_modes_agree_and_changes_are_checked() {
        let mut choices = choices();
        let options = serde_json::to_value(choices.config_options()).unwrap();
        assert_eq!(options[0]["id"], "mode");
        assert_eq!(options[0]["type"], "select");
        assert_eq!(options[0]["currentValue"], "default");
        assert_eq!(options[1]["category"], "model");
        assert_eq!(options[2]["currentValue"], "default");
        choices.set(MODE, "plan").unwrap();
        choices.set(MODEL, "fake/n").unwrap();
        choices.set(EFFORT, "high").unwrap();
        assert_eq!(choices.modes().current_mode_id.to_string(), "plan");
        assert_eq!(choices.effort, Some(ReasoningEffort::High));
        assert!(choices.set(MODEL, "other/x").is_err());
        assert!(choices.set(MODE, "yolo").is_err());
        assert!(choices.set("speed", "x").is_err());
        choices.set(EFFORT, "default").unwrap();
        assert_eq!(choices.effort, None);
    }
}
