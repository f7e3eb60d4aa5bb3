//! Webhook signatures, once for both sides: the relay signs each delivery with [`sign_webhook`], receivers
//! check it with [`verify_webhook`].
//!
//! The header is `pacerelle-signature: t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, "<t>." ‖ body)>`
//! (`docs/webhooks.md`). The secret is the webhook's, an HMAC key: it opens no envelope.

use std::time::Duration;

use data_encoding::HEXLOWER_PERMISSIVE;
use ring::hmac;

use crate::time::Timestamp;
use crate::wire::WebhookEvent;

/// Why a webhook request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The signature header is missing a part or is not `t=…,v1=…`.
    #[error("malformed signature header: {0}")]
    MalformedHeader(&'static str),
    /// The timestamp is further from now than the tolerance (a replay, or clocks far apart).
    #[error("the signature's timestamp is {age_seconds} s from now, beyond the tolerance")]
    OutsideTolerance {
        /// Now minus the signed timestamp, in seconds (negative: in the future).
        age_seconds: i64,
    },
    /// No `v1` signature matches: another secret, or the body or timestamp was altered.
    #[error("the signature does not match")]
    BadSignature,
    /// The signature is valid but the body is not a webhook event.
    #[error("the body is not a webhook event: {0}")]
    MalformedBody(String),
}

/// Verifies a webhook request and parses its event.
///
/// `signature` is the value of the [`SIGNATURE_HEADER`] header, `body` the raw request body (before any
/// JSON parsing), `now` the receiver's clock. Several `v1=` values are accepted (during a key rotation one
/// of them must match). The timestamp must be within `tolerance` of `now`, before or after.
pub fn verify_webhook(
    secret: impl AsRef<[u8]>,
    signature: &str,
    body: &[u8],
    now: Timestamp,
    tolerance: Duration,
) -> Result<WebhookEvent, WebhookError> {
    let mut timestamp: Option<&str> = None;
    let mut candidates: Vec<Vec<u8>> = Vec::new();
    for part in signature.split(',') {
        let Some((key, value)) = part.trim().split_once('=') else {
            return Err(WebhookError::MalformedHeader("expected key=value pairs"));
        };
        match key.trim() {
            "t" => {
                if timestamp.is_some() {
                    return Err(WebhookError::MalformedHeader("more than one timestamp"));
                }
                let value = value.trim();
                if value.is_empty() || value.len() > 12 || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(WebhookError::MalformedHeader("the timestamp is not unix seconds"));
                }
                timestamp = Some(value);
            }
            "v1" => {
                let bytes = HEXLOWER_PERMISSIVE
                    .decode(value.trim().as_bytes())
                    .map_err(|_| WebhookError::MalformedHeader("a v1 signature is not hex"))?;
                if bytes.len() != 32 {
                    return Err(WebhookError::MalformedHeader("a v1 signature is not 32 bytes"));
                }
                candidates.push(bytes);
            }
            // Other schemes (a future v2) are ignored.
            _ => {}
        }
    }
    let t = timestamp.ok_or(WebhookError::MalformedHeader("no timestamp"))?;
    if candidates.is_empty() {
        return Err(WebhookError::MalformedHeader("no v1 signature"));
    }
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_ref());
    let mut message = Vec::with_capacity(t.len() + 1 + body.len());
    message.extend_from_slice(t.as_bytes());
    message.push(b'.');
    message.extend_from_slice(body);
    // ring's verify compares in constant time.
    if !candidates
        .iter()
        .any(|tag| hmac::verify(&key, &message, tag).is_ok())
    {
        return Err(WebhookError::BadSignature);
    }
    let signed: i64 = t
        .parse()
        .map_err(|_| WebhookError::MalformedHeader("the timestamp is not unix seconds"))?;
    let age_seconds = now.millis().div_euclid(1000) - signed;
    if age_seconds.unsigned_abs() > tolerance.as_secs() {
        return Err(WebhookError::OutsideTolerance { age_seconds });
    }
    serde_json::from_slice(body).map_err(|e| WebhookError::MalformedBody(e.to_string()))
}

/// Signs a body as the relay does: the value of the [`SIGNATURE_HEADER`] header at `timestamp` (unix
/// seconds). For receivers' tests.
pub fn sign_webhook(secret: impl AsRef<[u8]>, timestamp: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_ref());
    let mut message = format!("{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    let tag = hmac::sign(&key, &message);
    format!(
        "t={timestamp},v1={}",
        data_encoding::HEXLOWER.encode(tag.as_ref())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cursor;
    use crate::question::{QuestionKind, QuestionState};
    use crate::wire::QuestionView;

    const SECRET: &str = "whsec_0123456789abcdef";
    const NOW: i64 = 1_800_000_000;

    fn event() -> WebhookEvent {
        WebhookEvent {
            id: "evt_1".into(),
            event_type: "question.answered".into(),
            created_at: Timestamp(NOW * 1000),
            agent_id: "ag_1".into(),
            user_id: None,
            question: QuestionView {
                question_id: "qst_1".into(),
                kind: QuestionKind::YesNo,
                state: QuestionState::Answered,
                created_at: Timestamp(0),
                expires_at: Timestamp(1),
                closed_at: None,
                self_envelope: "AQ".into(),
                recipients: vec!["dv_1".into()],
                answered_by: Some("dv_1".into()),
                answered_by_name: Some("phone".into()),
                answered_at: None,
                answer_envelope: Some("AQ".into()),
                cursor: Cursor(1),
                channel: None,
                user_id: None,
                approvals: 1,
                answers: Vec::new(),
            },
        }
    }

    fn body() -> Vec<u8> {
        serde_json::to_vec(&event()).expect("json")
    }

    fn now() -> Timestamp {
        Timestamp(NOW * 1000 + 500)
    }

    fn tol() -> Duration {
        Duration::from_secs(300)
    }

    #[test]
    fn a_good_signature_is_accepted() {
        let b = body();
        let header = sign_webhook(SECRET, NOW, &b);
        let event = verify_webhook(SECRET, &header, &b, now(), tol()).expect("valid");
        assert_eq!(event.id, "evt_1");
        assert_eq!(event.question.question_id, "qst_1");
        // At the edges of the window, either way.
        verify_webhook(SECRET, &sign_webhook(SECRET, NOW - 300, &b), &b, now(), tol()).expect("old edge");
        verify_webhook(SECRET, &sign_webhook(SECRET, NOW + 300, &b), &b, now(), tol()).expect("new edge");
    }

    #[test]
    fn rotated_keys_and_spacing_are_accepted() {
        let b = body();
        let good = sign_webhook(SECRET, NOW, &b);
        let good_sig = good.split("v1=").nth(1).expect("sig");
        let other = sign_webhook("another-secret-0000", NOW, &b);
        let other_sig = other.split("v1=").nth(1).expect("sig");
        let header = format!("t={NOW}, v1={other_sig}, v1={good_sig}, v0=zz");
        verify_webhook(SECRET, &header, &b, now(), tol()).expect("one of them matches");
    }

    #[test]
    fn forged_altered_stale_and_future_signatures_are_refused() {
        let b = body();
        let header = sign_webhook(SECRET, NOW, &b);
        assert_eq!(
            verify_webhook("wrong-secret-0000000", &header, &b, now(), tol()),
            Err(WebhookError::BadSignature)
        );
        let mut altered = b.clone();
        let i = altered.iter().position(|&c| c == b'1').expect("a digit");
        altered[i] = b'2';
        assert_eq!(
            verify_webhook(SECRET, &header, &altered, now(), tol()),
            Err(WebhookError::BadSignature)
        );
        // The timestamp is signed: moving it breaks the signature.
        let moved = header.replacen(&format!("t={NOW}"), &format!("t={}", NOW + 1), 1);
        assert_eq!(
            verify_webhook(SECRET, &moved, &b, now(), tol()),
            Err(WebhookError::BadSignature)
        );
        let stale = sign_webhook(SECRET, NOW - 301, &b);
        assert!(matches!(
            verify_webhook(SECRET, &stale, &b, now(), tol()),
            Err(WebhookError::OutsideTolerance { age_seconds: 301 })
        ));
        let future = sign_webhook(SECRET, NOW + 301, &b);
        assert!(matches!(
            verify_webhook(SECRET, &future, &b, now(), tol()),
            Err(WebhookError::OutsideTolerance { age_seconds: -301 })
        ));
    }

    #[test]
    fn malformed_headers_and_bodies_are_refused() {
        let b = body();
        let sig = sign_webhook(SECRET, NOW, &b);
        let v1 = sig.split("v1=").nth(1).expect("sig");
        for header in [
            "",
            "garbage",
            &format!("v1={v1}"),
            &format!("t={NOW}"),
            &format!("t=-5,v1={v1}"),
            &format!("t=12abc,v1={v1}"),
            &format!("t={NOW},t={NOW},v1={v1}"),
            &format!("t={NOW},v1=nothex"),
            &format!("t={NOW},v1=abcd"),
        ] {
            assert!(
                matches!(
                    verify_webhook(SECRET, header, &b, now(), tol()),
                    Err(WebhookError::MalformedHeader(_))
                ),
                "{header:?}"
            );
        }
        let not_event = br#"{"hello":"world"}"#;
        let header = sign_webhook(SECRET, NOW, not_event);
        assert!(matches!(
            verify_webhook(SECRET, &header, not_event, now(), tol()),
            Err(WebhookError::MalformedBody(_))
        ));
    }

    #[test]
    fn the_user_an_event_is_for_is_named_beside_the_agent_and_in_the_question() {
        // The owner's question: no userId anywhere, as before Partner mode.
        let owner = String::from_utf8(body()).expect("utf-8");
        assert!(!owner.contains("userId"), "{owner}");
        let mut event = event();
        event.user_id = Some("alice".into());
        event.question.user_id = Some("alice".into());
        let b = serde_json::to_vec(&event).expect("json");
        let json: serde_json::Value = serde_json::from_slice(&b).expect("json");
        assert_eq!(json["userId"], "alice");
        assert_eq!(json["question"]["userId"], "alice");
        let header = sign_webhook(SECRET, NOW, &b);
        let parsed = verify_webhook(SECRET, &header, &b, now(), tol()).expect("valid");
        assert_eq!(parsed, event);
        // A body from a relay that predates user ids parses with none.
        let header = sign_webhook(SECRET, NOW, &body());
        let parsed = verify_webhook(SECRET, &header, &body(), now(), tol()).expect("valid");
        assert_eq!((parsed.user_id, parsed.question.user_id), (None, None));
    }
}
