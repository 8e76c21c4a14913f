//! The sandbox policy (`roder_api::sandbox_policy`) on a sprite: what the
//! Sprites API can enforce, what this client enforces, and what nobody does.
//!
//! A sprite is a microVM of its own, so a command never touches the machine
//! Roder runs on; inside the VM it may write wherever its user may. The one
//! confinement the API offers is the **network policy**
//! (`POST /v1/sprites/{name}/policy/network`, a DNS-based egress allow-list
//! that also blocks raw-IP and private-range connections), and it is set from
//! `policy.network`. The environment is enforced here, on the client: the
//! live server runs a command with exactly the `env` it is sent. Process,
//! memory, CPU and disk limits have no documented API and are reported as
//! not enforced rather than pretended.

use std::collections::BTreeMap;

use roder_api::sandbox_policy::{
    KNOWN_CREDENTIAL_VARS, NetworkAccess, Protection, SANDBOX_CONFIG_KEY, SandboxMode,
    SandboxPolicy,
};
use serde_json::{Value, json};

use crate::error::SpritesError;
use crate::exec::{DEFAULT_HOME, DEFAULT_PATH};

/// The `sandbox` value of a destination config or session state, or the
/// default policy (enforce, network off) when there is none.
pub(crate) fn parse_policy(value: Option<&Value>) -> Result<SandboxPolicy, SpritesError> {
    match value {
        None | Some(Value::Null) => Ok(SandboxPolicy::default()),
        Some(value) => serde_json::from_value(value.clone()).map_err(|err| {
            SpritesError::Config(format!(
                "{SANDBOX_CONFIG_KEY} is not a sandbox policy ({err}); see roder_api::sandbox_policy::SandboxPolicy for its keys"
            ))
        }),
    }
}

/// The network policy body to set on the sprite, or `None` when the policy
/// is not enforced (`mode = "none"`: the sprite's own policy is left as it
/// is). Off denies every domain (`*`), which per the docs also blocks raw-IP
/// connections; on sends `{"rules": []}`, the documented "no restriction".
pub(crate) fn network_rules(policy: &SandboxPolicy) -> Option<Value> {
    if policy.mode == SandboxMode::None {
        return None;
    }
    Some(match policy.network {
        NetworkAccess::Off => json!({ "rules": [{ "domain": "*", "action": "deny" }] }),
        NetworkAccess::On => json!({ "rules": [] }),
    })
}

/// Names never sent to a sprite: [`KNOWN_CREDENTIAL_VARS`] and `extra` (the
/// configured providers' key variables, when the embedder passes them).
pub(crate) fn credential_names(extra: &[String]) -> Vec<String> {
    let mut names: Vec<String> = KNOWN_CREDENTIAL_VARS
        .iter()
        .map(|name| (*name).to_string())
        .collect();
    for name in extra {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// The environment every command of a session starts from, by
/// [`SandboxPolicy::command_env`]: `LANG` and `TERM` and the `env.pass`
/// variables from `host` (Roder's environment), then `env.set`. `PATH` and
/// `HOME` are the sprite's own ([`DEFAULT_PATH`], [`DEFAULT_HOME`]), not the
/// host's, which mean nothing inside the VM; `env.set` may override them. No
/// variable named in `credentials` is ever in it.
pub(crate) fn base_env(
    policy: &SandboxPolicy,
    host: impl IntoIterator<Item = (String, String)>,
    credentials: &[String],
) -> BTreeMap<String, String> {
    let host = host
        .into_iter()
        .filter(|(name, _)| name != "PATH" && name != "HOME")
        .chain([
            ("PATH".to_string(), DEFAULT_PATH.to_string()),
            ("HOME".to_string(), DEFAULT_HOME.to_string()),
        ]);
    policy.command_env(host, credentials)
}

/// What a sprite session enforces of `policy`, one [`Protection`] each.
pub(crate) fn protections(policy: &SandboxPolicy) -> Vec<Protection> {
    let enforced = policy.mode == SandboxMode::Enforce;
    let protection = |name: &str, active: bool, detail: String| Protection {
        name: name.to_string(),
        active,
        detail,
    };
    let mut list = vec![protection(
        "host isolation",
        true,
        "commands run in a Fly.io Sprites microVM, never on this machine; the sprite is the sandbox"
            .to_string(),
    )];
    list.push(match (enforced, policy.network) {
        (false, _) => protection(
            "network",
            false,
            "sandbox mode is \"none\": the sprite's network policy is left as it is".to_string(),
        ),
        (true, NetworkAccess::Off) => protection(
            "network",
            true,
            "Sprites network policy set to deny every domain (\"*\") at session start and resume: DNS lookups are refused, raw-IP and private-range connections blocked, by the Sprites platform".to_string(),
        ),
        (true, NetworkAccess::On) => protection(
            "network",
            false,
            "network = \"on\": the Sprites network policy is set to no restriction ({\"rules\": []})".to_string(),
        ),
    });
    list.push(protection(
        "environment",
        true,
        "enforced by this client (the server runs exactly the env it is sent): PATH and HOME of the sprite, LANG, TERM, env.pass and env.set; credential variables (SPRITES_TOKEN, provider keys) are never sent".to_string(),
    ));
    list.push(protection(
        "filesystem writes",
        false,
        if policy.writable_roots.is_empty() {
            "not confined inside the sprite: a command may write anywhere its user may in the VM (it cannot reach this machine's files)".to_string()
        } else {
            "writable_roots are not enforced inside the sprite: a command may write anywhere its user may in the VM (it cannot reach this machine's files)".to_string()
        },
    ));
    list.push(protection(
        ".git/hooks",
        false,
        "a command can write .git/hooks in the sprite's workspace; hooks run only inside the sprite".to_string(),
    ));
    let unbounded = |name: &str, set: bool, what: &str| {
        protection(
            name,
            false,
            format!(
                "{}the Sprites API has no documented {what} limit (sprites have fixed resources: 8 vCPU, 100 GB disk, managed memory)",
                if set {
                    "limits set in the policy are not applied: "
                } else {
                    ""
                }
            ),
        )
    };
    list.push(unbounded(
        "processes",
        policy.limits.max_processes.is_some(),
        "process",
    ));
    list.push(unbounded(
        "memory",
        policy.limits.memory_mib.is_some(),
        "memory",
    ));
    list.push(unbounded("cpu", policy.limits.cpus.is_some(), "CPU"));
    list.push(unbounded("disk", policy.limits.disk_mib.is_some(), "disk"));
    list.push(protection(
        "output size",
        true,
        match policy.limits.output_bytes {
            Some(bytes) => format!(
                "enforced by this client: at most {bytes} bytes of each of stdout and stderr are kept, the rest dropped with a note"
            ),
            None => format!(
                "enforced by this client: at most {} bytes of each of stdout and stderr are kept, the rest dropped with a note",
                crate::exec_frames::DEFAULT_STREAM_LIMIT
            ),
        },
    ));
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_missing_policy_is_the_default_and_a_bad_one_is_named() {
        assert_eq!(parse_policy(None).unwrap(), SandboxPolicy::default());
        assert_eq!(
            parse_policy(Some(&Value::Null)).unwrap(),
            SandboxPolicy::default()
        );
        let on = parse_policy(Some(&json!({"network": "on"}))).unwrap();
        assert_eq!(on.network, NetworkAccess::On);
        let err = parse_policy(Some(&json!({"netwrok": "on"})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("sandbox is not a sandbox policy"), "{err}");
        assert!(err.contains("netwrok"), "{err}");
    }

    #[test]
    fn network_off_denies_every_domain_and_on_lifts_the_restriction() {
        let mut policy = SandboxPolicy::default();
        assert_eq!(
            network_rules(&policy),
            Some(json!({"rules": [{"domain": "*", "action": "deny"}]}))
        );
        policy.network = NetworkAccess::On;
        assert_eq!(network_rules(&policy), Some(json!({"rules": []})));
        policy.mode = SandboxMode::None;
        assert_eq!(network_rules(&policy), None);
    }

    #[test]
    fn the_base_env_is_minimal_and_never_holds_a_credential() {
        let mut policy = SandboxPolicy::default();
        policy.env.pass = vec!["CARGO_HOME".into(), "SPRITES_TOKEN".into(), "MY_KEY".into()];
        policy.env.set.insert("GITHUB_TOKEN".into(), "x".into());
        policy.env.set.insert("RUST_LOG".into(), "debug".into());
        let host = pairs(&[
            ("PATH", "/host/bin"),
            ("HOME", "/home/me"),
            ("LANG", "C.UTF-8"),
            ("TERM", "xterm"),
            ("CARGO_HOME", "/c"),
            ("SPRITES_TOKEN", "tok"),
            ("OPENAI_API_KEY", "sk"),
            ("MY_KEY", "secret"),
            ("UNRELATED", "1"),
        ]);
        let credentials = credential_names(&["MY_KEY".to_string()]);
        let env = base_env(&policy, host, &credentials);
        let expected: BTreeMap<String, String> = pairs(&[
            ("PATH", DEFAULT_PATH),
            ("HOME", DEFAULT_HOME),
            ("LANG", "C.UTF-8"),
            ("TERM", "xterm"),
            ("CARGO_HOME", "/c"),
            ("RUST_LOG", "debug"),
        ])
        .into_iter()
        .collect();
        assert_eq!(env, expected);
        // Without any host variable, PATH and HOME are still there.
        let bare = base_env(&SandboxPolicy::default(), Vec::new(), &credentials);
        assert_eq!(bare.len(), 2);
        // env.set may point PATH elsewhere.
        let mut custom = SandboxPolicy::default();
        custom.env.set.insert("PATH".into(), "/opt/bin".into());
        let env = base_env(&custom, Vec::new(), &credentials);
        assert_eq!(env.get("PATH").map(String::as_str), Some("/opt/bin"));
    }

    #[test]
    fn credential_names_cover_the_known_ones_and_the_extra_once() {
        let names = credential_names(&["SPRITES_TOKEN".into(), "MY_KEY".into()]);
        for known in KNOWN_CREDENTIAL_VARS {
            assert!(names.iter().any(|n| n == known), "{known}");
        }
        assert_eq!(names.iter().filter(|n| *n == "SPRITES_TOKEN").count(), 1);
        assert!(names.contains(&"MY_KEY".to_string()));
    }

    fn find<'a>(list: &'a [Protection], name: &str) -> &'a Protection {
        list.iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no protection {name:?} in {list:?}"))
    }

    #[test]
    fn protections_say_what_holds_and_what_does_not() {
        let list = protections(&SandboxPolicy::default());
        let names: Vec<&str> = list.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "host isolation",
                "network",
                "environment",
                "filesystem writes",
                ".git/hooks",
                "processes",
                "memory",
                "cpu",
                "disk",
                "output size",
            ]
        );
        for name in ["host isolation", "network", "environment", "output size"] {
            assert!(find(&list, name).active, "{name}");
        }
        for name in [
            "filesystem writes",
            ".git/hooks",
            "processes",
            "memory",
            "cpu",
            "disk",
        ] {
            let protection = find(&list, name);
            assert!(!protection.active, "{name}");
            assert!(!protection.detail.is_empty(), "{name}");
        }
        assert!(find(&list, "network").detail.contains("deny every domain"));
        assert!(
            find(&list, "processes")
                .detail
                .contains("no documented process limit")
        );

        let mut policy = SandboxPolicy {
            network: NetworkAccess::On,
            writable_roots: vec!["/opt/cache".into()],
            ..SandboxPolicy::default()
        };
        policy.limits.memory_mib = Some(512);
        policy.limits.output_bytes = Some(1000);
        let list = protections(&policy);
        assert!(!find(&list, "network").active);
        assert!(find(&list, "network").detail.contains("network = \"on\""));
        assert!(find(&list, "memory").detail.contains("not applied"));
        assert!(!find(&list, "cpu").detail.contains("not applied"));
        assert!(find(&list, "output size").detail.contains("1000 bytes"));
        assert!(
            find(&list, "filesystem writes")
                .detail
                .contains("writable_roots are not enforced")
        );

        policy.mode = SandboxMode::None;
        let network = find(&protections(&policy), "network").clone();
        assert!(!network.active);
        assert!(network.detail.contains("\"none\""));
    }
}
