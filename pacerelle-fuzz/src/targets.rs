//! The parser targets: everything the core, the client and the CLI parse from the network or a file.
//! Each checks, beyond "does not panic", the property its parser promises: a round trip where there is a
//! canonical form, and for sealed values that nothing opens to a plaintext that was not sealed.

use std::path::PathBuf;

use pacerelle_client::gate::Gate;
use pacerelle_core::envelope::{self, Aad, Direction, kind};
use pacerelle_core::pairing::{OfferPayload, PairingSecret, Role};
use pacerelle_core::policy::{self, Decision, Policy};
use pacerelle_core::{AgentToken, Bearer, ContentKey, Cursor, Timestamp, b64, wire};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::engine::{MARKER, Target};

/// The core's vector files: every string value in them is a seed of the text targets.
const VECTORS: &[&str] = &[
    include_str!("../../pacerelle-core/tests/vectors/cursor.json"),
    include_str!("../../pacerelle-core/tests/vectors/envelope.json"),
    include_str!("../../pacerelle-core/tests/vectors/pairing.json"),
    include_str!("../../pacerelle-core/tests/vectors/question.json"),
    include_str!("../../pacerelle-core/tests/vectors/roster.json"),
    include_str!("../../pacerelle-core/tests/vectors/token.json"),
];

/// The example execution policy shipped with the project.
pub const EXAMPLE_POLICY: &str = include_str!("../../examples/policy.toml");

/// Every string value of the vector files that starts with `prefix`.
fn vector_strings(prefix: &str) -> Vec<Vec<u8>> {
    fn walk(value: &serde_json::Value, prefix: &str, out: &mut Vec<Vec<u8>>) {
        match value {
            serde_json::Value::String(s) if s.starts_with(prefix) => out.push(s.as_bytes().to_vec()),
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, prefix, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, prefix, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for text in VECTORS {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
            walk(&value, prefix, &mut out);
        }
    }
    out
}

/// A small signal from an error's text (its variant), so that each kind of refusal counts as a path.
fn signal_of(text: &str) -> u64 {
    text.bytes().take(24).fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    })
}

/// All the parser targets, in a fixed order.
pub fn parser_targets() -> Vec<Box<dyn Target>> {
    vec![
        Box::new(EnvelopeTarget::new()),
        Box::new(CredentialTarget),
        Box::new(CursorTarget),
        Box::new(LinkTarget),
        Box::new(OfferTarget::new()),
        Box::new(WireTarget),
        Box::new(PolicyTarget),
        Box::new(HookTarget::new()),
        Box::new(WebhookTarget),
        Box::new(AnswerLogTarget::new()),
    ]
}

// ---- envelope --------------------------------------------------------------------------------------------

/// Envelope opening: any text is opened with a fixed key and context. It may only open to a plaintext that
/// was sealed with them (the seeds'), and one that opens must not open in another context.
#[derive(Debug)]
pub struct EnvelopeTarget {
    key: ContentKey,
    plaintexts: Vec<Vec<u8>>,
}

const ENVELOPE_AAD: Aad<'static> = Aad {
    agent_id: "ag_fuzz",
    device_id: "dv_fuzz",
    direction: Direction::DeviceToAgent,
    kind: kind::MESSAGE,
    object_id: "msg_fuzz",
};

impl EnvelopeTarget {
    fn new() -> Self {
        EnvelopeTarget {
            key: ContentKey::from_bytes([0x5a; 32]),
            plaintexts: vec![
                Vec::new(),
                b"hello".to_vec(),
                br#"{"text":"deploy the site"}"#.to_vec(),
                vec![0xff; 300],
            ],
        }
    }
}

impl Target for EnvelopeTarget {
    fn name(&self) -> &'static str {
        "envelope"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds: Vec<Vec<u8>> = self
            .plaintexts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let nonce = [i as u8; 12];
                envelope::seal_with_nonce(&self.key, &ENVELOPE_AAD, nonce, p).into_bytes()
            })
            .collect();
        seeds.extend(vector_strings("AQ"));
        seeds
    }

    fn run(&self, input: &[u8]) -> u64 {
        let text = String::from_utf8_lossy(input);
        match envelope::open(&self.key, &ENVELOPE_AAD, &text) {
            Ok(plain) => {
                assert!(
                    self.plaintexts.contains(&plain),
                    "an envelope opened to a plaintext nobody sealed"
                );
                let moved = Aad {
                    object_id: "msg_other",
                    ..ENVELOPE_AAD
                };
                assert!(
                    envelope::open(&self.key, &moved, &text).is_err(),
                    "an envelope opened in another context"
                );
                let parsed: Result<pacerelle_core::message::TaskPayload, _> =
                    envelope::open_json(&self.key, &ENVELOPE_AAD, &text);
                1 + u64::from(parsed.is_ok())
            }
            Err(e) => signal_of(&e.to_string()),
        }
    }
}

// ---- credentials -----------------------------------------------------------------------------------------

/// Agent tokens and bearer credentials: whatever parses has one canonical text, and parsing that text
/// gives the same value.
#[derive(Debug)]
pub struct CredentialTarget;

impl Target for CredentialTarget {
    fn name(&self) -> &'static str {
        "credential"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let token = AgentToken::from_secrets([1; 32], [2; 32]);
        let mut seeds = vec![
            token.expose().into_bytes(),
            token.bearer("ag_fuzz").0.into_bytes(),
            Bearer::issue("dv_fuzz").0.0.into_bytes(),
        ];
        seeds.extend(vector_strings("pcr1_"));
        seeds.extend(vector_strings("ag_"));
        seeds.extend(vector_strings("dv_"));
        seeds
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        vec![b"pcr1_".to_vec(), b".".to_vec(), b" ".to_vec()]
    }

    fn run(&self, input: &[u8]) -> u64 {
        let text = String::from_utf8_lossy(input);
        let mut signal = 0;
        match AgentToken::parse(&text) {
            Ok(token) => {
                let again = token.expose();
                assert_eq!(
                    again,
                    text.trim(),
                    "a token parsed from a text that is not its own"
                );
                assert_eq!(
                    AgentToken::parse(&again).ok(),
                    Some(token),
                    "a token's text does not parse back"
                );
                signal |= 1;
            }
            Err(e) => signal ^= signal_of(&e.to_string()),
        }
        let bearer = Bearer(text.to_string());
        if let Some((id, hash)) = bearer.split() {
            pacerelle_core::ids::validate("principal", id).expect("split returned an invalid id");
            let (_, secret) = text.rsplit_once('.').expect("a split bearer has a dot");
            let bytes = b64::decode(secret).expect("a split bearer's secret decodes");
            assert_eq!(
                pacerelle_core::keys::sha256(&bytes),
                hash,
                "the hash is not the secret's"
            );
            assert_eq!(
                b64::encode(&bytes),
                secret,
                "a bearer's secret is not in canonical form"
            );
            signal |= 2;
        }
        signal
    }
}

// ---- cursor ----------------------------------------------------------------------------------------------

/// Cursors: what parses prints back to the same text, and parses again to the same position.
#[derive(Debug)]
pub struct CursorTarget;

impl Target for CursorTarget {
    fn name(&self) -> &'static str {
        "cursor"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds: Vec<Vec<u8>> = [0, 1, 255, 1 << 40, i64::MAX as u64]
            .iter()
            .map(|n| Cursor(*n).to_string().into_bytes())
            .collect();
        seeds.extend(vector_strings("c1."));
        seeds
    }

    fn run(&self, input: &[u8]) -> u64 {
        let text = String::from_utf8_lossy(input);
        let from_json: Option<Cursor> = serde_json::from_slice(input).ok();
        match Cursor::parse(&text) {
            Ok(cursor) => {
                assert_eq!(
                    cursor.to_string(),
                    text,
                    "a cursor parsed from a text that is not its own"
                );
                assert_eq!(Cursor::parse(&cursor.to_string()).ok(), Some(cursor));
                let json = serde_json::to_string(&cursor).expect("a cursor serialises");
                assert_eq!(serde_json::from_str::<Cursor>(&json).ok(), Some(cursor));
                1
            }
            Err(_) => {
                if let Some(cursor) = from_json {
                    // A JSON string (with any whitespace around it) of a cursor's text: the text parses.
                    let json = serde_json::to_vec(&cursor).expect("a cursor serialises");
                    assert_eq!(serde_json::from_slice::<Cursor>(&json).ok(), Some(cursor));
                    return 3;
                }
                2
            }
        }
    }
}

// ---- pairing link ----------------------------------------------------------------------------------------

/// Pairing links: a parsed link's secret and relay make a link that parses to the same values.
#[derive(Debug)]
pub struct LinkTarget;

impl Target for LinkTarget {
    fn name(&self) -> &'static str {
        "link"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let s = PairingSecret([7; 32]);
        let mut seeds = vec![
            s.link("https://relay.example").into_bytes(),
            s.link("http://127.0.0.1:8080/").into_bytes(),
            s.link("https://relay.example/sub/path").into_bytes(),
        ];
        seeds.extend(vector_strings("https://"));
        seeds.extend(vector_strings("http://"));
        seeds
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        vec![b"/pair".to_vec(), b"#".to_vec(), b"v1.".to_vec(), b" ".to_vec()]
    }

    fn run(&self, input: &[u8]) -> u64 {
        let text = String::from_utf8_lossy(input);
        match PairingSecret::parse_link(&text) {
            Ok((relay, secret)) => {
                assert!(!relay.contains('#'), "a relay URL with a fragment");
                let link = secret.link(&relay);
                let trimmed = relay.trim_end_matches('/');
                // The relay part must still name a scheme once its trailing slashes are dropped (a link
                // to `https:///pair` has none left).
                if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
                    let (relay2, secret2) =
                        PairingSecret::parse_link(&link).expect("a link made from a parsed link parses");
                    assert_eq!(relay2, trimmed);
                    assert_eq!(secret2, secret);
                    1
                } else {
                    2
                }
            }
            Err(_) => 0,
        }
    }
}

// ---- pairing offer ---------------------------------------------------------------------------------------

/// Pairing offers: the sealed offer as the relay returns it (opens only to the offer sealed), and the offer
/// payload's JSON (round trip). Input starting with `{` is JSON, anything else a sealed offer.
#[derive(Debug)]
pub struct OfferTarget {
    secret: PairingSecret,
    offer: OfferPayload,
}

impl OfferTarget {
    fn new() -> Self {
        OfferTarget {
            secret: PairingSecret([9; 32]),
            offer: OfferPayload {
                v: 1,
                agent_id: "ag_fuzz".into(),
                agent_name: format!("laptop {MARKER}"),
                device_id: "dv_fuzz".into(),
                device_key: b64::encode(&[4; 32]),
                role: Role::Owner,
                expires_at: Timestamp(1_796_083_034_123),
                branding: None,
                user: None,
            },
        }
    }
}

impl Target for OfferTarget {
    fn name(&self) -> &'static str {
        "offer"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds = vec![
            pacerelle_core::pairing::seal_offer(&self.secret, &self.offer).into_bytes(),
            serde_json::to_vec(&self.offer).unwrap_or_default(),
        ];
        seeds.extend(vector_strings("{\"v\""));
        seeds
    }

    fn run(&self, input: &[u8]) -> u64 {
        if input.first() == Some(&b'{') {
            return round_trip::<OfferPayload>(input);
        }
        let text = String::from_utf8_lossy(input);
        match pacerelle_core::pairing::open_offer(&self.secret, "ag_fuzz", "dv_fuzz", &text) {
            Ok(offer) => {
                assert_eq!(offer, self.offer, "an offer opened to something not sealed");
                let _ = offer.key();
                1
            }
            Err(e) => signal_of(&e.to_string()),
        }
    }
}

/// Parses `input` as `T`; when it parses, its JSON parses back to the same value.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(input: &[u8]) -> u64 {
    match serde_json::from_slice::<T>(input) {
        Ok(value) => {
            let json = serde_json::to_vec(&value).expect("a parsed value serialises");
            let again: T = serde_json::from_slice(&json).expect("a serialised value parses back");
            // serde_json reads a number in free-form JSON (`ErrorBody::details`) without correct rounding
            // unless its `float_roundtrip` feature is on; Pacerelle writes no such number, so a difference
            // there is not a bug.
            if again != value && !has_float(&json) {
                assert_eq!(again, value, "a value changed on a JSON round trip");
            }
            1
        }
        Err(e) => 2 + e.classify() as u64,
    }
}

/// True when `json` holds a number that is not an integer.
fn has_float(json: &[u8]) -> bool {
    fn walk(value: &serde_json::Value) -> bool {
        match value {
            serde_json::Value::Number(n) => n.is_f64(),
            serde_json::Value::Array(items) => items.iter().any(walk),
            serde_json::Value::Object(map) => map.values().any(walk),
            _ => false,
        }
    }
    serde_json::from_slice::<serde_json::Value>(json).is_ok_and(|v| walk(&v))
}

// ---- wire JSON bodies ------------------------------------------------------------------------------------

/// The relay API's bodies and the sealed payloads' JSON: the first byte picks the type, the rest is the
/// JSON. What parses must survive a round trip.
#[derive(Debug)]
pub struct WireTarget;

type RoundTrip = fn(&[u8]) -> u64;

/// A valid sample of each type of [`WIRE_ROUND_TRIPS`], in the same order: the wire target's seeds.
fn wire_samples() -> Vec<serde_json::Value> {
    use serde_json::json;
    let t = Timestamp(1_796_083_034_123);
    let envelope = format!("AQ{MARKER}");
    let envelopes = json!([{"deviceId": "dv_1", "envelope": envelope}]);
    let view = json!({"questionId": "qst_1", "kind": "text", "state": "answered", "createdAt": t,
        "expiresAt": t, "closedAt": t, "selfEnvelope": envelope, "recipients": ["dv_1"],
        "answeredBy": "dv_1", "answeredByName": MARKER, "answeredAt": t, "answerEnvelope": envelope,
        "cursor": Cursor(9)});
    vec![
        json!({"agentId": "ag_1", "name": MARKER, "authHash": envelope}),
        json!({"pairingId": "p", "deviceId": "dv_1", "label": MARKER, "role": "owner", "claimHash": "x",
            "offer": envelope, "expiresAt": t}),
        json!({"claimSecret": MARKER, "name": "phone"}),
        json!({"messageId": "msg_1", "envelope": envelope}),
        json!({"replyId": "rep_1", "sourceMessageId": "msg_1", "envelopes": envelopes}),
        json!({"checkpointId": "ckp_1", "envelope": envelope}),
        json!({"host": MARKER, "takeover": true}),
        json!({"questionId": "qst_1", "kind": "yes_no", "expiresAt": t, "selfEnvelope": envelope,
            "envelopes": envelopes}),
        json!({"envelope": envelope, "copy": envelope}),
        json!({"previousVersion": 0, "version": 1, "envelope": envelope}),
        json!({"notificationId": "ntf_1", "envelopes": envelopes}),
        json!({"url": "https://example.invalid/hook", "secret": MARKER}),
        json!({"code": "invalid_json", "error": "x", "details": {"a": [1, MARKER]}}),
        json!({"id": "msg_1", "cursor": Cursor(5), "createdAt": t, "created": true}),
        json!({"messages": [{"messageId": "m", "from": "dv_1", "fromName": "p", "envelope": envelope,
            "sentAt": t, "redelivered": false, "cursor": Cursor(1)}], "cursor": Cursor(1)}),
        json!({"items": [], "cursor": Cursor(0)}),
        json!({"questions": [view.clone()], "next": Cursor(3)}),
        json!({"id": "evt_1", "type": "answered", "createdAt": t, "agentId": "ag_1", "question": view}),
        json!({"text": MARKER}),
        json!({"text": MARKER, "sourceMessageId": "msg_1"}),
        json!({"question": MARKER, "kind": "choice", "options": ["a", "b"], "multiple": true,
            "details": "d", "expiresAt": t, "recipients": ["dv_1"], "answerKey": envelope}),
        json!({"questionId": "qst_1", "answer": {"type": "options", "value": [MARKER]}, "answeredAt": t,
            "questionDigest": "d"}),
        json!({"text": MARKER, "title": "t", "level": "warning"}),
        json!({"v": 1, "agentId": "ag_1", "version": 2, "updatedAt": t,
            "devices": [{"deviceId": "dv_1", "role": "owner", "addedAt": t, "revokedAt": t}]}),
        json!({"summary": MARKER, "nextAction": "n", "messageIds": ["msg_1"]}),
    ]
}

impl Target for WireTarget {
    fn name(&self) -> &'static str {
        "wire"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        wire_samples()
            .into_iter()
            .enumerate()
            .map(|(i, sample)| {
                let mut seed = vec![i as u8];
                seed.extend(serde_json::to_vec(&sample).unwrap_or_default());
                seed
            })
            .collect()
    }

    fn run(&self, input: &[u8]) -> u64 {
        let Some((&which, json)) = input.split_first() else {
            return 0;
        };
        let index = usize::from(which) % WIRE_ROUND_TRIPS.len();
        (index as u64) << 8 | WIRE_ROUND_TRIPS[index](json)
    }
}

/// The types the wire target parses: the relay API's bodies, then the sealed payloads.
const WIRE_ROUND_TRIPS: &[RoundTrip] = &[
    round_trip::<wire::RegisterAgent>,
    round_trip::<wire::CreatePairing>,
    round_trip::<wire::ClaimPairing>,
    round_trip::<wire::SendMessage>,
    round_trip::<wire::SendReply>,
    round_trip::<wire::SaveCheckpoint>,
    round_trip::<wire::OpenSession>,
    round_trip::<wire::CreateQuestion>,
    round_trip::<wire::AnswerQuestion>,
    round_trip::<wire::PutRoster>,
    round_trip::<wire::SendNotification>,
    round_trip::<wire::SetWebhook>,
    round_trip::<wire::ErrorBody>,
    round_trip::<wire::Stored>,
    round_trip::<wire::MessageBatch>,
    round_trip::<wire::Conversation>,
    round_trip::<wire::AnswerLog>,
    round_trip::<wire::WebhookEvent>,
    round_trip::<pacerelle_core::message::TaskPayload>,
    round_trip::<pacerelle_core::message::ReplyPayload>,
    round_trip::<pacerelle_core::question::QuestionPayload>,
    round_trip::<pacerelle_core::question::AnswerPayload>,
    round_trip::<pacerelle_core::question::NotificationPayload>,
    round_trip::<pacerelle_core::roster::Roster>,
    round_trip::<pacerelle_core::checkpoint::CheckpointPayload>,
];

// ---- policy TOML -----------------------------------------------------------------------------------------

/// The approval policy file (`.pacerelle/policy.toml`): any text is parsed as the gate parses it, and a
/// policy that parses decides sample calls; an `allow` never covers a call touching the gate's own files.
#[derive(Debug)]
pub struct PolicyTarget;

fn sample_calls() -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::json;
    vec![
        ("Bash", json!({"command": "ls -la"})),
        ("Bash", json!({"command": "cat .pacerelle/policy.toml"})),
        ("shell", json!({"command": ["bash", "-lc", "rm -rf /tmp/x"]})),
        ("Edit", json!({"file_path": "/repo/src/main.rs"})),
        ("Write", json!({"file_path": "/repo/.claude/settings.json"})),
        (
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: .codex/config.toml\n"}),
        ),
        ("Read", json!({"file_path": "/etc/passwd"})),
        ("mcp__srv__tool", json!(null)),
    ]
}

/// Evaluates `call` with `gate`, checking that the gate's own files are never allowed.
fn check_gate(gate: &Gate, tool: &str, input: &serde_json::Value) -> u64 {
    let evaluation = gate.evaluate(tool, input);
    if gate.touches_the_gate(tool, input) {
        assert_ne!(
            evaluation.decision,
            Decision::Allow,
            "a call touching the gate's own files was allowed"
        );
    }
    let _ = policy::command_of(input);
    let _ = policy::paths_of(tool, input);
    evaluation.decision as u64
}

impl Target for PolicyTarget {
    fn name(&self) -> &'static str {
        "policy"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        vec![
            EXAMPLE_POLICY.as_bytes().to_vec(),
            b"default = \"allow\"\n".to_vec(),
            b"default = \"deny\"\n[[rule]]\ntool = \"Bash\"\ncommand = \"ls *\"\ndecision = \"allow\"\n".to_vec(),
            b"[[rule]]\ntool = [\"Edit\"]\npath = [\"**/*.rs\", \"{a,b}\"]\ndecision = \"ask\"\nreason = \"r\"\n"
                .to_vec(),
        ]
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        [
            "[[rule]]\n",
            "tool = ",
            "command = ",
            "path = ",
            "decision = ",
            "reason = ",
            "default = ",
            "\"allow\"",
            "\"ask\"",
            "\"deny\"",
            "**",
            "{",
            "}",
            "[!",
            "\\",
            "'''",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect()
    }

    fn run(&self, input: &[u8]) -> u64 {
        let Ok(text) = std::str::from_utf8(input) else {
            return 0;
        };
        match Policy::parse(text) {
            Ok(policy) => {
                let gate = Gate::new(policy, Some(PathBuf::from("/repo/policy.toml")));
                sample_calls()
                    .iter()
                    .fold(1, |s, (tool, input)| s * 3 + check_gate(&gate, tool, input))
            }
            Err(e) => 2 + (signal_of(&e.0) & 0xf),
        }
    }
}

// ---- PreToolUse JSON -------------------------------------------------------------------------------------

/// The hosts' PreToolUse JSON, as `pacerelle hook claude-code|codex` reads it. The CLI's reader
/// (`pacerelle-cli/src/hook/host.rs`, `parse_input`) lives in the binary crate, so this target reads the
/// same fields the same way and hands them to what it calls in the client and the core: the gate with the
/// example policy, and `command_of` / `paths_of`.
#[derive(Debug)]
pub struct HookTarget {
    gate: Gate,
}

impl HookTarget {
    fn new() -> Self {
        let policy = Policy::parse(EXAMPLE_POLICY).unwrap_or_else(|_| Policy::ask_everything());
        HookTarget {
            gate: Gate::new(policy, Some(PathBuf::from("/repo/.pacerelle/policy.toml"))),
        }
    }
}

impl Target for HookTarget {
    fn name(&self) -> &'static str {
        "hook"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        sample_calls()
            .into_iter()
            .map(|(tool, input)| {
                serde_json::to_vec(&serde_json::json!({
                    "session_id": "s", "hook_event_name": "PreToolUse", "cwd": "/repo",
                    "tool_name": tool, "tool_input": input, "transcript_path": MARKER,
                }))
                .unwrap_or_default()
            })
            .collect()
    }

    fn run(&self, input: &[u8]) -> u64 {
        use serde_json::Value;
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(input) else {
            return 0;
        };
        if let Some(event) = map.get("hook_event_name")
            && event.as_str() != Some("PreToolUse")
        {
            return 1;
        }
        let tool = match map.get("tool_name").and_then(Value::as_str) {
            Some(name) if !name.trim().is_empty() => name,
            _ => return 2,
        };
        let tool_input = map.get("tool_input").cloned().unwrap_or(Value::Null);
        // The CLI's `normalise`: Codex sends an apply_patch call's patch as `command`.
        let mut normalised = tool_input.clone();
        if tool == "apply_patch"
            && let Value::Object(m) = &mut normalised
            && !m.contains_key("input")
            && let Some(Value::String(patch)) = m.get("command")
            && patch.contains("*** Begin Patch")
        {
            let patch = patch.clone();
            m.remove("command");
            m.insert("input".into(), Value::String(patch));
        }
        16 + check_gate(&self.gate, tool, &normalised) * 2 + check_gate(&self.gate, tool, &tool_input)
    }
}

// ---- webhook signature -----------------------------------------------------------------------------------

/// A webhook receiver's check (`verify_webhook`): input is `header \n body`. Only a body that was signed
/// with the secret is accepted.
#[derive(Debug)]
pub struct WebhookTarget;

const WEBHOOK_SECRET: &[u8] = b"whsec_fuzz";
const WEBHOOK_TIME: i64 = 1_796_083_034;

fn webhook_bodies() -> Vec<Vec<u8>> {
    vec![
        br#"{"id":"evt_1","type":"reply","agentId":"ag_1","createdAt":"2026-11-30T23:57:14.123Z"}"#.to_vec(),
        b"{}".to_vec(),
    ]
}

impl Target for WebhookTarget {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        webhook_bodies()
            .into_iter()
            .map(|body| {
                let header = pacerelle_core::webhook::sign_webhook(WEBHOOK_SECRET, WEBHOOK_TIME, &body);
                let mut seed = header.into_bytes();
                seed.push(b'\n');
                seed.extend(body);
                seed
            })
            .collect()
    }

    fn run(&self, input: &[u8]) -> u64 {
        let (header, body) = match input.iter().position(|b| *b == b'\n') {
            Some(i) => (&input[..i], &input[i + 1..]),
            None => (input, &[][..]),
        };
        let header = String::from_utf8_lossy(header);
        match pacerelle_core::webhook::verify_webhook(
            WEBHOOK_SECRET,
            &header,
            body,
            Timestamp(WEBHOOK_TIME * 1000),
            std::time::Duration::from_secs(300),
        ) {
            Ok(_) => {
                assert!(
                    webhook_bodies().iter().any(|b| b == body),
                    "a webhook body nobody signed was accepted"
                );
                1
            }
            Err(e) => signal_of(&e.to_string()),
        }
    }
}

// ---- answer-log export -----------------------------------------------------------------------------------

/// Answer-log exports (`pacerelle audit verify`): a record is accepted only if it is one a device signed. The
/// seeds are the exports of the core's signature vectors and their tampered copies; whatever
/// `verify_export_json` (the reading and the checks `pacerelle audit verify` uses) accepts must carry, record by record, exactly what the untouched export's records carry (question bytes,
/// digest, device, answer, time, approval, signature) — a mutation may reorder keys or change what is not
/// signed (names, the export's time), never what an auditor relies on.
#[derive(Debug)]
pub struct AnswerLogTarget {
    /// The exports' texts: the untouched ones first.
    exports: Vec<Vec<u8>>,
    /// The signed content of the untouched exports' records.
    signed: Vec<String>,
}

/// What a record's signature vouches for, as one comparable string.
fn signed_content(record: &pacerelle_core::signing::ExportRecord) -> String {
    serde_json::json!([
        record.question_id,
        record.question,
        record.question_digest,
        record.device_id,
        record.answer,
        record.answered_at,
        record.approved,
        record.signature,
    ])
    .to_string()
}

impl AnswerLogTarget {
    fn new() -> Self {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../pacerelle-core/tests/vectors/signature.json"))
                .expect("the signature vectors parse");
        let cases = vectors["cases"].as_array().cloned().unwrap_or_default();
        let mut exports = Vec::new();
        let mut signed = Vec::new();
        for case in &cases {
            let Some(export) = case.get("export") else {
                continue;
            };
            let text = serde_json::to_vec(export).expect("an export serialises");
            if case["type"] == "export" {
                let parsed: pacerelle_core::signing::AnswerLogExport =
                    serde_json::from_value(export.clone()).expect("the vectors' export parses");
                signed.extend(parsed.records.iter().map(signed_content));
                exports.insert(0, text);
            } else {
                exports.push(text);
            }
        }
        assert!(!signed.is_empty(), "the signature vectors hold an export");
        AnswerLogTarget { exports, signed }
    }
}

impl Target for AnswerLogTarget {
    fn name(&self) -> &'static str {
        "answer-log"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        self.exports.clone()
    }

    fn run(&self, input: &[u8]) -> u64 {
        let verdict = pacerelle_core::signing::verify_export_json(input);
        let Some(export) = pacerelle_core::signing::read_export(input) else {
            assert!(verdict.is_err(), "a document not read as an export verified");
            return 1;
        };
        match verdict {
            Ok(count) => {
                assert_eq!(count, export.records.len());
                for record in &export.records {
                    assert!(
                        self.signed.contains(&signed_content(record)),
                        "a record no device signed verified: {}",
                        record.question_id
                    );
                }
                2 + count as u64
            }
            Err(failure) => signal_of(failure.reason),
        }
    }
}
