//! Pairing: the agent uploads a sealed offer; a phone fetches it and claims it once (DESIGN §4).

use axum::extract::State;
use axum::http::StatusCode;
use pacerelle_core::wire::{ClaimPairing, CreatePairing, PairingClaimed, PairingCreated, PairingOffer, code};
use pacerelle_core::{Timestamp, b64, keys};

use super::device::check_signing_key;
use super::{MAX_NAME_CHARS, check_envelope, check_id, check_text, decode_fixed};
use crate::app::AppState;
use crate::auth::{AgentAuth, ClaimGate};
use crate::error::AppError;
use crate::extract::{Json, Path};
use crate::store::{Claim, NewPairing, PairingStored};

/// Longest lifetime of an offer: the relay caps `expiresAt` at one hour from now.
pub(crate) const MAX_OFFER_TTL_MS: i64 = pacerelle_core::pairing::MAX_TTL_SECONDS as i64 * 1000;

fn expired() -> AppError {
    AppError::new(
        StatusCode::GONE,
        code::PAIRING_EXPIRED,
        "this pairing offer has expired; create a new pairing link",
    )
}

fn claimed() -> AppError {
    AppError::new(
        StatusCode::CONFLICT,
        code::PAIRING_CLAIMED,
        "this pairing offer was already claimed; create a new pairing link",
    )
}

/// A pairing id is base64url of 16 bytes.
fn is_pairing_id(text: &str) -> bool {
    b64::decode_array::<16>(text).is_some()
}

/// `POST /v1/agent/pairings`.
pub(crate) async fn create(
    State(state): State<AppState>,
    auth: AgentAuth,
    Json(body): Json<CreatePairing>,
) -> Result<(StatusCode, Json<PairingCreated>), AppError> {
    let now = Timestamp::now();
    if !is_pairing_id(&body.pairing_id) {
        return Err(AppError::invalid_input("pairingId must be base64url of 16 bytes"));
    }
    check_id("device id", &body.device_id)?;
    let label = match body.label.as_deref() {
        Some(label) if !label.trim().is_empty() => Some(check_text("label", label, MAX_NAME_CHARS)?),
        _ => None,
    };
    let claim_hash = decode_fixed::<32>("claimHash", &body.claim_hash)?;
    check_envelope("offer", &body.offer)?;
    if body.expires_at <= now {
        return Err(AppError::invalid_input("expiresAt is in the past"));
    }
    let expires_at = body.expires_at.min(now.plus_millis(MAX_OFFER_TTL_MS));
    let outcome = state
        .store
        .create_pairing(&NewPairing {
            agent_id: &auth.agent_id,
            pairing_id: &body.pairing_id,
            device_id: &body.device_id,
            label: label.as_deref(),
            role: body.role,
            claim_hash,
            offer: &body.offer,
            expires_at,
            now,
        })
        .await?;
    match outcome {
        PairingStored::Created(created) => Ok((StatusCode::CREATED, Json(created))),
        PairingStored::Conflict(why) => Err(AppError::id_conflict(why)),
    }
}

/// `GET /v1/pairings/{pairingId}` (no credential: the id is derived from the link's secret).
pub(crate) async fn offer(
    State(state): State<AppState>,
    Path(pairing_id): Path<String>,
) -> Result<Json<PairingOffer>, AppError> {
    if !is_pairing_id(&pairing_id) {
        return Err(AppError::not_found("pairing offer"));
    }
    let row = state
        .store
        .pairing(&pairing_id)
        .await?
        .ok_or_else(|| AppError::not_found("pairing offer"))?;
    if row.claimed_at.is_some() {
        return Err(claimed());
    }
    match row.offer {
        Some(offer) if row.expires_at > Timestamp::now() => Ok(Json(PairingOffer {
            pairing_id: row.pairing_id,
            agent_id: row.agent_id,
            device_id: row.device_id,
            offer,
            expires_at: row.expires_at,
            label: row.label,
        })),
        _ => Err(expired()),
    }
}

/// `POST /v1/pairings/{pairingId}/claim`: once, with the claim secret; creates the device, with its signing
/// key and the key's seal if it gives them (both or neither, checked before the offer is touched).
pub(crate) async fn claim(
    State(state): State<AppState>,
    _gate: ClaimGate,
    Path(pairing_id): Path<String>,
    Json(body): Json<ClaimPairing>,
) -> Result<(StatusCode, Json<PairingClaimed>), AppError> {
    if !is_pairing_id(&pairing_id) {
        return Err(AppError::not_found("pairing offer"));
    }
    let name = check_text("name", &body.name, MAX_NAME_CHARS)?;
    let secret = b64::decode(&body.claim_secret)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| AppError::invalid_input("claimSecret must be non-empty base64url"))?;
    let proof = keys::sha256(&secret);
    let signing = match (body.signing_key.as_deref(), body.signing_key_seal.as_deref()) {
        (Some(key), Some(seal)) => Some(check_signing_key(key, seal)?),
        (None, None) => None,
        (Some(_), None) => {
            return Err(AppError::invalid_input(
                "signingKeySeal is missing: a claim gives signingKey and signingKeySeal together, or neither",
            ));
        }
        (None, Some(_)) => {
            return Err(AppError::invalid_input(
                "signingKey is missing: a claim gives signingKey and signingKeySeal together, or neither",
            ));
        }
    };
    match state
        .store
        .claim_pairing(&pairing_id, &proof, &name, signing, Timestamp::now())
        .await?
    {
        Claim::Claimed(done) => {
            tracing::info!(agent = %done.agent_id, device = %done.device_id, "device paired");
            Ok((StatusCode::CREATED, Json(done)))
        }
        Claim::NotFound => Err(AppError::not_found("pairing offer")),
        Claim::WrongProof => Err(AppError::new(
            StatusCode::FORBIDDEN,
            code::PAIRING_PROOF,
            "the claim secret does not match this pairing offer",
        )),
        Claim::AlreadyClaimed => Err(claimed()),
        Claim::Expired => Err(expired()),
    }
}
