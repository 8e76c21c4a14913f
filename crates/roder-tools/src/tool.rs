//! The shape every builtin tool shares: typed arguments, one `run` over a
//! [`Workspace`], and one adapter that turns it into a [`ToolExecutor`].
//!
//! The adapter owns the checks that must be identical for every tool (argument
//! parsing, "no workspace", read-only policy), so a tool file only holds what
//! that tool does.

use std::future::Future;
use std::marker::PhantomData;

use roder_api::approval::{CallPreview, CallScope, ToolEffects};
use roder_api::tools::{ToolCall, ToolExecutionContext, ToolExecutor, ToolResult, ToolSpec};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::workspace::Workspace;

/// What a tool produced: its text for the model, structured data for clients,
/// and whether the model should read it as a failure.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolOutput {
    pub text: String,
    pub data: Value,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>, data: Value) -> Self {
        Self {
            text: text.into(),
            data,
            is_error: false,
        }
    }

    /// A result that is an error for the model but still carries data (a
    /// failed command's exit code and output).
    pub fn failed(text: impl Into<String>, data: Value) -> Self {
        Self {
            text: text.into(),
            data,
            is_error: true,
        }
    }
}

/// A failure the model can read and act on. Never a panic, never a failed turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Shorthand: `Err(ToolError)` from a formatted message.
macro_rules! tool_bail {
    ($($arg:tt)*) => {
        return Err($crate::tool::ToolError::new(format!($($arg)*)))
    };
}
pub(crate) use tool_bail;

pub(crate) const NO_WORKSPACE: &str =
    "this thread has no workspace: file and shell tools are unavailable";

/// One builtin tool, written once against [`Workspace`].
pub(crate) trait CodingTool: Send + Sync + 'static {
    /// Arguments, deserialized with `deny_unknown_fields` to match the
    /// schema's `additionalProperties: false`.
    type Args: DeserializeOwned + Send;

    const NAME: &'static str;

    /// What the tool does, declared exactly: approvals are decided from it.
    const EFFECTS: ToolEffects;

    fn description() -> &'static str;

    /// JSON Schema of the arguments.
    fn parameters() -> Value;

    fn run(
        workspace: Workspace,
        ctx: &ToolExecutionContext,
        args: Self::Args,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;

    /// The command it runs and the paths it changes, from the arguments.
    fn scope(args: &Self::Args) -> CallScope {
        let _ = args;
        CallScope::default()
    }

    /// What a person deciding the call sees, computed without changing
    /// anything; `None` shows the arguments.
    fn preview(
        workspace: Workspace,
        ctx: &ToolExecutionContext,
        args: Self::Args,
    ) -> impl Future<Output = Result<Option<CallPreview>, ToolError>> + Send {
        let _ = (workspace, ctx, args);
        async { Ok(None) }
    }
}

/// The [`ToolExecutor`] for a [`CodingTool`].
pub(crate) struct Registered<T>(PhantomData<fn() -> T>);

impl<T> Registered<T> {
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

#[async_trait::async_trait]
impl<T: CodingTool> ToolExecutor for Registered<T> {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.to_string(),
            description: T::description().to_string(),
            parameters: T::parameters(),
        }
    }

    fn effects(&self) -> ToolEffects {
        T::EFFECTS
    }

    /// Arguments that do not parse make the call fail before it does
    /// anything: nobody needs to approve it.
    fn call_scope(&self, arguments: &Value) -> Result<CallScope, String> {
        parse_arguments::<T::Args>(T::NAME, arguments)
            .map(|args| T::scope(&args))
            .map_err(|error| error.0)
    }

    async fn preview(
        &self,
        ctx: ToolExecutionContext,
        call: &ToolCall,
    ) -> anyhow::Result<CallPreview> {
        let args: T::Args =
            parse_arguments(T::NAME, &call.arguments).map_err(anyhow::Error::msg)?;
        let workspace =
            Workspace::from_context(&ctx).ok_or_else(|| anyhow::anyhow!(NO_WORKSPACE))?;
        let preview = T::preview(workspace, &ctx, args)
            .await
            .map_err(anyhow::Error::msg)?;
        let mut preview =
            preview.unwrap_or_else(|| CallPreview::for_arguments(T::NAME, call.arguments.clone()));
        preview.arguments = call.arguments.clone();
        Ok(preview)
    }

    async fn execute(
        &self,
        ctx: ToolExecutionContext,
        call: ToolCall,
    ) -> anyhow::Result<ToolResult> {
        Ok(match execute::<T>(&ctx, &call).await {
            Ok(output) => ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                text: output.text,
                data: output.data,
                is_error: output.is_error,
            },
            Err(error) => ToolResult::error(&call, error.0),
        })
    }
}

async fn execute<T: CodingTool>(
    ctx: &ToolExecutionContext,
    call: &ToolCall,
) -> Result<ToolOutput, ToolError> {
    let args: T::Args = parse_arguments(T::NAME, &call.arguments)?;
    if !T::EFFECTS.only_reads() && !ctx.policy_mode.allows_mutation() {
        tool_bail!(
            "{} is not available in the plan mode: only tools that read may run",
            T::NAME
        );
    }
    let workspace = Workspace::from_context(ctx).ok_or_else(|| ToolError::new(NO_WORKSPACE))?;
    T::run(workspace, ctx, args).await
}

/// Parses a call's arguments. A JSON string holding an object is accepted too:
/// some engines pass the raw argument text through.
pub(crate) fn parse_arguments<A: DeserializeOwned>(
    tool: &str,
    arguments: &Value,
) -> Result<A, ToolError> {
    let parsed = match arguments {
        Value::String(raw) => serde_json::from_str::<Value>(raw).map_err(|error| {
            ToolError::new(format!(
                "invalid arguments for {tool}: not a JSON object ({error})"
            ))
        })?,
        Value::Null => Value::Object(Default::default()),
        other => other.clone(),
    };
    if !parsed.is_object() {
        tool_bail!("invalid arguments for {tool}: expected a JSON object, got {parsed}");
    }
    serde_json::from_value(parsed)
        .map_err(|error| ToolError::new(format!("invalid arguments for {tool}: {error}")))
}

/// Builds an object schema with `additionalProperties: false`.
pub(crate) fn object_schema(properties: Value, required: &[&str]) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Args {
        path: String,
        limit: Option<u64>,
    }

    #[test]
    fn parses_objects_and_json_strings() {
        let from_object: Args =
            parse_arguments("t", &serde_json::json!({"path": "a", "limit": 3})).unwrap();
        let from_string: Args =
            parse_arguments("t", &Value::String(r#"{"path":"a","limit":3}"#.into())).unwrap();
        assert_eq!(from_object, from_string);
    }

    #[test]
    fn names_the_tool_and_the_problem() {
        let missing = parse_arguments::<Args>("read_file", &serde_json::json!({})).unwrap_err();
        assert!(
            missing.0.contains("invalid arguments for read_file"),
            "{missing}"
        );
        assert!(missing.0.contains("missing field `path`"), "{missing}");

        let unknown = parse_arguments::<Args>("t", &serde_json::json!({"path": "a", "bogus": 1}))
            .unwrap_err();
        assert!(unknown.0.contains("unknown field `bogus`"), "{unknown}");

        let wrong_type = parse_arguments::<Args>("t", &serde_json::json!({"path": 7})).unwrap_err();
        assert!(wrong_type.0.contains("invalid type"), "{wrong_type}");

        let not_object = parse_arguments::<Args>("t", &serde_json::json!([1])).unwrap_err();
        assert!(
            not_object.0.contains("expected a JSON object"),
            "{not_object}"
        );

        let bad_json = parse_arguments::<Args>("t", &Value::String("{".into())).unwrap_err();
        assert!(bad_json.0.contains("not a JSON object"), "{bad_json}");
    }
}
