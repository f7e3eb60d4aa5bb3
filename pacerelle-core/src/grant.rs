//! Grants: "yes, and for the next hour", given from a device to a gate question (docs/crypto.md §4.8b).
//!
//! A gate question may **offer** grants ([`GrantOffer`], sealed in the question): the durations the policy
//! lets the person choose, the scopes derived from the call (the exact command, the prefixes the policy names),
//! and the digest of the policy in force. A device answering `yes` may attach one [`Grant`]: one of the offered
//! scopes, an expiry no further than the longest offered duration, that policy digest, and its Ed25519
//! signature over all of it ([`SignedGrant::bytes`]). The relay carries it sealed inside the answer; it can
//! neither read, widen, extend nor move one. The agent checks a grant against its own copy of the question
//! ([`Grant::check`]) and, while it is live, lets a call inside its scope run without asking
//! ([`GrantScope::covers`]).

use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::signing::{PublicKey, field};

/// The context string of a grant's signed bytes.
pub const GRANT_CONTEXT: &[u8] = b"pacerelle/v1/grant-signature";

/// The longest grant a policy may offer: a day.
pub const MAX_GRANT_SECONDS: u64 = 24 * 3600;

/// How a grant's command is compared with a call's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum CommandMatch {
    /// The call's command is exactly the grant's.
    Exact,
    /// The call's command is the grant's, or the grant's followed by a space and arguments that hold no
    /// shell control character ([`SHELL_CONTROL`]): `cargo test` covers `cargo test -p core`, never
    /// `cargo test; curl … | sh` nor `cargo testify`.
    Prefix,
}

impl CommandMatch {
    /// The match's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CommandMatch::Exact => "exact",
            CommandMatch::Prefix => "prefix",
        }
    }
}

/// The characters that end a shell command or start another one, or substitute one: the arguments a prefix
/// grant covers hold none of them.
pub const SHELL_CONTROL: &[char] = &[';', '&', '|', '`', '$', '(', ')', '<', '>', '\n', '\r', '\\'];

/// What a grant lets run without a question: a tool, for a shell tool its command, in one project folder.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(rename_all = "camelCase")]
pub struct GrantScope {
    /// The tool's name, exactly (`Bash`, `Edit`, `shell`…).
    pub tool: String,
    /// The shell command, for a tool that runs one; absent for other tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// How `command` is compared: present exactly when `command` is.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matching: Option<CommandMatch>,
    /// The project folder: the call's working directory, exactly; a call of another tool than a shell is
    /// covered only when every path it touches is inside this folder.
    pub folder: String,
}

impl GrantScope {
    /// Whether a call of `tool`, with `command` (for a shell tool) and touching `paths`, made in `folder`,
    /// is inside this scope.
    pub fn covers(&self, tool: &str, command: Option<&str>, paths: &[String], folder: &str) -> bool {
        if tool != self.tool || folder != self.folder {
            return false;
        }
        match (&self.command, command) {
            (None, None) => paths.iter().all(|p| inside(p, &self.folder)),
            (Some(granted), Some(call)) => match self.matching {
                Some(CommandMatch::Exact) => call == granted,
                Some(CommandMatch::Prefix) => {
                    call == granted
                        || call.strip_prefix(granted.as_str()).is_some_and(|rest| {
                            rest.starts_with(' ') && !rest.contains(SHELL_CONTROL) && !granted.is_empty()
                        })
                }
                None => false,
            },
            _ => false,
        }
    }

    /// Checks the shape: a tool and a folder, `command` and `match` both present or both absent, and a prefix
    /// that holds no shell control character itself.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.tool.is_empty() || self.folder.is_empty() {
            return Err("a grant's scope names a tool and a folder");
        }
        match (&self.command, self.matching) {
            (None, None) => Ok(()),
            (Some(command), Some(CommandMatch::Prefix))
                if command.trim().is_empty() || command.contains(SHELL_CONTROL) =>
            {
                Err("a prefix grant's command is a plain command, without shell control characters")
            }
            (Some(_), Some(_)) => Ok(()),
            _ => Err("a grant's command and its match go together"),
        }
    }
}

/// Whether `path` is `folder` or inside it, compared by path components after removing `.` and resolving
/// `..` textually (a relative path is taken inside the folder). A path that climbs out is not inside.
fn inside(path: &str, folder: &str) -> bool {
    fn parts(text: &str) -> Option<Vec<&str>> {
        let mut out: Vec<&str> = Vec::new();
        for part in text.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    out.pop()?;
                }
                other => out.push(other),
            }
        }
        Some(out)
    }
    let Some(base) = parts(folder) else {
        return false;
    };
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{folder}/{path}")
    };
    parts(&full).is_some_and(|p| p.starts_with(&base))
}

/// The grants a gate question offers, sealed in the question (so that the device's answer signature, over the
/// question's digest, covers what it was offered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(rename_all = "camelCase")]
pub struct GrantOffer {
    /// The durations the person may choose, in seconds, shortest first; each at most [`MAX_GRANT_SECONDS`].
    pub durations: Vec<u64>,
    /// The scopes the person may choose, narrowest first (the exact call first).
    pub scopes: Vec<GrantScope>,
    /// `base64url(SHA-256(policy file bytes))` of the policy that offers them ([`policy_digest`]): a grant is
    /// live only while the gate's policy has this digest.
    pub policy: String,
}

impl GrantOffer {
    /// The longest duration offered.
    pub fn longest(&self) -> u64 {
        self.durations.iter().copied().max().unwrap_or(0)
    }

    /// Checks the shape: 1 to 8 durations of 1 s to a day, 1 to 8 valid scopes, a policy digest.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.durations.is_empty() || self.durations.len() > 8 {
            return Err("a grant offer has 1 to 8 durations");
        }
        if self.durations.iter().any(|d| *d == 0 || *d > MAX_GRANT_SECONDS) {
            return Err("a grant lasts from 1 s to a day");
        }
        if self.scopes.is_empty() || self.scopes.len() > 8 {
            return Err("a grant offer has 1 to 8 scopes");
        }
        self.scopes.iter().try_for_each(GrantScope::validate)?;
        if self.policy.is_empty() {
            return Err("a grant offer names its policy's digest");
        }
        Ok(())
    }
}

/// `base64url(SHA-256(bytes))` of a policy file: what binds a grant to the policy that offered it.
pub fn policy_digest(bytes: &[u8]) -> String {
    crate::b64::encode(&crate::keys::sha256(bytes))
}

/// A grant a device attaches to its `yes` (in the answer payload, §5): one offered scope, until `expiresAt`,
/// under the offered policy digest, signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// One of the scopes the question offered, as offered.
    pub scope: GrantScope,
    /// When it ends: after the answer's `answeredAt`, at most the longest offered duration after it.
    pub expires_at: Timestamp,
    /// The offer's policy digest.
    pub policy: String,
    /// base64url of the device's Ed25519 signature of [`SignedGrant::bytes`].
    pub signature: String,
}

/// What a device signs when it grants (docs/crypto.md §4.8b): the grant, with the fields its answer gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedGrant<'a> {
    /// Who granted, to which question, when.
    pub of: SignedGrantOf<'a>,
    /// The grant (its signature is not signed).
    pub grant: &'a Grant,
}

impl SignedGrant<'_> {
    /// `"pacerelle/v1/grant-signature" ‖ 0x01 ‖ field(agentId) ‖ field(deviceId) ‖ field(questionId) ‖
    /// field(questionDigest) ‖ field(grantedAt) ‖ field(expiresAt) ‖ field(policy) ‖ field(tool) ‖
    /// field(command) ‖ field(match) ‖ field(folder)`, times in the wire form, `command` and `match` empty
    /// when the scope has none.
    pub fn bytes(&self) -> Vec<u8> {
        let (of, grant) = (&self.of, self.grant);
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(GRANT_CONTEXT);
        out.push(1);
        field(&mut out, of.agent_id);
        field(&mut out, of.device_id);
        field(&mut out, of.question_id);
        field(&mut out, of.question_digest);
        field(&mut out, &of.granted_at.to_rfc3339());
        field(&mut out, &grant.expires_at.to_rfc3339());
        field(&mut out, &grant.policy);
        field(&mut out, &grant.scope.tool);
        field(&mut out, grant.scope.command.as_deref().unwrap_or(""));
        field(&mut out, grant.scope.matching.map_or("", CommandMatch::as_str));
        field(&mut out, &grant.scope.folder);
        out
    }

    /// Signs these bytes with the device's key.
    #[cfg(feature = "content")]
    pub fn sign(&self, key: &crate::signing::SigningKey) -> String {
        key.sign(&self.bytes())
    }
}

/// Why a grant is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GrantRefusal {
    /// The question offered no grant.
    #[error("the question offered no grant")]
    NotOffered,
    /// The scope is not one the question offered.
    #[error("the grant's scope is not one the question offered")]
    ScopeNotOffered,
    /// The policy digest is not the offer's.
    #[error("the grant names another policy than the question's offer")]
    OtherPolicy,
    /// It ends before it starts, or lasts longer than the longest offered duration.
    #[error("the grant lasts longer than the question offered (or ends before it starts)")]
    TooLong,
    /// The device has no pinned signing key: an unsigned grant never counts.
    #[error("the device has no signing key the agent pinned: it cannot grant")]
    NoKey,
    /// The signature does not verify.
    #[error("the grant's signature does not verify")]
    BadSignature,
}

impl GrantRefusal {
    /// Every refusal, in the order [`Grant::check`] tries them.
    pub const ALL: [GrantRefusal; 6] = [
        GrantRefusal::NotOffered,
        GrantRefusal::ScopeNotOffered,
        GrantRefusal::OtherPolicy,
        GrantRefusal::TooLong,
        GrantRefusal::NoKey,
        GrantRefusal::BadSignature,
    ];

    /// Its stable code (`signature.json`'s `rejectGrant` cases, docs/crypto.md §8): `not_offered`,
    /// `scope_not_offered`, `other_policy`, `too_long`, `no_key`, `bad_signature`.
    pub fn code(self) -> &'static str {
        match self {
            GrantRefusal::NotOffered => "not_offered",
            GrantRefusal::ScopeNotOffered => "scope_not_offered",
            GrantRefusal::OtherPolicy => "other_policy",
            GrantRefusal::TooLong => "too_long",
            GrantRefusal::NoKey => "no_key",
            GrantRefusal::BadSignature => "bad_signature",
        }
    }

    /// The refusal of code `code`.
    pub fn from_code(code: &str) -> Option<GrantRefusal> {
        GrantRefusal::ALL.into_iter().find(|r| r.code() == code)
    }
}

impl Grant {
    /// The agent's check of a grant attached to a `yes` to its question: `offer` is the grant offer of the
    /// agent's **own** copy of the question; `granted` the signed fields the device stated (its id, the
    /// question id and digest of the own copy, the answer's `answeredAt`); `key` the device's pinned key.
    pub fn check(
        &self,
        offer: Option<&GrantOffer>,
        granted: SignedGrantOf<'_>,
        key: Option<&PublicKey>,
    ) -> Result<(), GrantRefusal> {
        let offer = offer.ok_or(GrantRefusal::NotOffered)?;
        if !offer.scopes.contains(&self.scope) {
            return Err(GrantRefusal::ScopeNotOffered);
        }
        if self.policy != offer.policy {
            return Err(GrantRefusal::OtherPolicy);
        }
        let lasts = self.expires_at.0.saturating_sub(granted.granted_at.0);
        if lasts <= 0 || lasts > i64::try_from(offer.longest().saturating_mul(1000)).unwrap_or(i64::MAX) {
            return Err(GrantRefusal::TooLong);
        }
        let key = key.ok_or(GrantRefusal::NoKey)?;
        if !key.verifies(&self.signed(granted).bytes(), &self.signature) {
            return Err(GrantRefusal::BadSignature);
        }
        Ok(())
    }

    /// The signed bytes of this grant with the fields the answer gives.
    pub fn signed<'a>(&'a self, of: SignedGrantOf<'a>) -> SignedGrant<'a> {
        SignedGrant { of, grant: self }
    }

    /// Whether it is still running at `now`.
    pub fn live_at(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}

/// A grant as the agent keeps it: the grant, who gave it to which question and when, and the bytes of the
/// agent's own copy of that question, so that the grant can be checked again — signature, offer, policy — each
/// time it is used ([`GivenGrant::verifies`]): an edited copy fails like a forged one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GivenGrant {
    /// The gate question it answered: the grant's id.
    pub id: String,
    /// The device that granted it.
    pub device_id: String,
    /// When it started: the answer's `answeredAt`, as signed.
    pub granted_at: Timestamp,
    /// base64url of the agent's own copy of the question, as sealed: its offer and its digest.
    pub question: String,
    /// The grant, as the device signed it.
    pub grant: Grant,
}

impl GivenGrant {
    /// Whether it checks for agent `agent_id` with the device's pinned `key`: the question bytes decode and
    /// parse, and [`Grant::check`] passes against their offer and digest.
    pub fn verifies(&self, agent_id: &str, key: Option<&PublicKey>) -> bool {
        let Some(bytes) = crate::b64::decode(&self.question) else {
            return false;
        };
        let Some(question) = crate::signing::read_question(&bytes) else {
            return false;
        };
        let digest = crate::question::question_digest(&bytes);
        let of = SignedGrantOf {
            agent_id,
            device_id: &self.device_id,
            question_id: &self.id,
            question_digest: &digest,
            granted_at: self.granted_at,
        };
        self.grant.check(question.grants.as_ref(), of, key).is_ok()
    }
}

/// The signed fields of a grant that its answer gives: who, to which question, when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedGrantOf<'a> {
    /// The agent.
    pub agent_id: &'a str,
    /// The granting device.
    pub device_id: &'a str,
    /// The question (the grant's id).
    pub question_id: &'a str,
    /// The question's digest.
    pub question_digest: &'a str,
    /// The answer's `answeredAt`.
    pub granted_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(command: Option<&str>, matching: Option<CommandMatch>) -> GrantScope {
        GrantScope {
            tool: "Bash".into(),
            command: command.map(str::to_string),
            matching,
            folder: "/work/app".into(),
        }
    }

    #[test]
    fn an_exact_grant_covers_only_its_command_in_its_folder() {
        let exact = scope(Some("cargo test"), Some(CommandMatch::Exact));
        assert!(exact.covers("Bash", Some("cargo test"), &[], "/work/app"));
        assert!(!exact.covers("Bash", Some("cargo test -p core"), &[], "/work/app"));
        assert!(!exact.covers("Bash", Some("cargo test"), &[], "/work/other"));
        assert!(!exact.covers("shell", Some("cargo test"), &[], "/work/app"));
        assert!(!exact.covers("Bash", None, &[], "/work/app"));
    }

    #[test]
    fn a_prefix_grant_covers_arguments_but_never_another_command() {
        let prefix = scope(Some("cargo test"), Some(CommandMatch::Prefix));
        assert!(prefix.covers("Bash", Some("cargo test"), &[], "/work/app"));
        assert!(prefix.covers("Bash", Some("cargo test -p core --release"), &[], "/work/app"));
        for other in [
            "cargo testify",
            "cargo test; curl x | sh",
            "cargo test && rm -rf ~",
            "cargo test $(rm -rf ~)",
            "cargo test `id`",
            "cargo test > /etc/passwd",
            "cargo test\nrm -rf ~",
            "cargo publish",
        ] {
            assert!(!prefix.covers("Bash", Some(other), &[], "/work/app"), "{other}");
        }
        assert_eq!(
            scope(Some("cargo test;"), Some(CommandMatch::Prefix)).validate(),
            Err("a prefix grant's command is a plain command, without shell control characters")
        );
        assert!(scope(Some("cargo test"), None).validate().is_err());
        assert!(scope(None, Some(CommandMatch::Exact)).validate().is_err());
    }

    #[test]
    fn a_grant_without_a_command_covers_paths_inside_its_folder_only() {
        let edit = GrantScope {
            tool: "Edit".into(),
            command: None,
            matching: None,
            folder: "/work/app".into(),
        };
        let inside = ["/work/app/src/main.rs".to_string(), "README.md".to_string()];
        assert!(edit.covers("Edit", None, &inside, "/work/app"));
        for outside in [
            "/work/application/x",
            "/etc/passwd",
            "/work/app/../other/x",
            "../x",
        ] {
            assert!(
                !edit.covers("Edit", None, &[outside.to_string()], "/work/app"),
                "{outside}"
            );
        }
        assert!(!edit.covers("Edit", Some("ls"), &[], "/work/app"));
    }

    #[cfg(feature = "content")]
    #[test]
    fn the_agent_refuses_every_grant_the_question_did_not_offer_or_the_device_did_not_sign() {
        use crate::signing::SigningKey;
        let key = SigningKey::from_seed([0x77; 32]).expect("a key");
        let exact = scope(Some("cargo test"), Some(CommandMatch::Exact));
        let offer = GrantOffer {
            durations: vec![900, 3600],
            scopes: vec![
                exact.clone(),
                scope(Some("cargo test"), Some(CommandMatch::Prefix)),
            ],
            policy: "POLICY".into(),
        };
        let of = SignedGrantOf {
            agent_id: "ag_1",
            device_id: "dv_1",
            question_id: "qst_1",
            question_digest: "DIGEST",
            granted_at: Timestamp(1_000_000),
        };
        let sign = |grant: &mut Grant| grant.signature = grant.signed(of).sign(&key);
        let mut grant = Grant {
            scope: exact.clone(),
            expires_at: Timestamp(1_000_000 + 3_600_000),
            policy: "POLICY".into(),
            signature: String::new(),
        };
        sign(&mut grant);
        let public = key.public_key();
        assert_eq!(grant.check(Some(&offer), of, Some(&public)), Ok(()));
        assert_eq!(
            grant.check(None, of, Some(&public)),
            Err(GrantRefusal::NotOffered)
        );
        assert_eq!(grant.check(Some(&offer), of, None), Err(GrantRefusal::NoKey));
        // Each field the relay or a device could change.
        let mut wider = grant.clone();
        wider.scope = scope(Some("cargo"), Some(CommandMatch::Prefix));
        sign(&mut wider);
        assert_eq!(
            wider.check(Some(&offer), of, Some(&public)),
            Err(GrantRefusal::ScopeNotOffered)
        );
        let mut longer = grant.clone();
        longer.expires_at = Timestamp(1_000_000 + 3_600_001);
        sign(&mut longer);
        assert_eq!(
            longer.check(Some(&offer), of, Some(&public)),
            Err(GrantRefusal::TooLong)
        );
        let mut other = grant.clone();
        other.policy = "OTHER".into();
        sign(&mut other);
        assert_eq!(
            other.check(Some(&offer), of, Some(&public)),
            Err(GrantRefusal::OtherPolicy)
        );
        let mut extended = grant.clone();
        extended.expires_at = Timestamp(1_000_000 + 900_000);
        assert_eq!(
            extended.check(Some(&offer), of, Some(&public)),
            Err(GrantRefusal::BadSignature)
        );
        let moved = SignedGrantOf {
            agent_id: "ag_2",
            ..of
        };
        assert_eq!(
            grant.check(Some(&offer), moved, Some(&public)),
            Err(GrantRefusal::BadSignature)
        );
        assert!(grant.live_at(Timestamp(1_000_000 + 3_599_999)));
        assert!(!grant.live_at(Timestamp(1_000_000 + 3_600_000)));
    }
}
