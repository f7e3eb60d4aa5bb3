//! Credentials: `Authorization: Bearer <principalId>.<base64url(secret)>`.
//!
//! The relay looks the principal up (agents, then devices), hashes the secret with SHA-256 and compares it
//! with the stored hash in constant time. A wrong or unknown credential is `unauthorized` (the same answer
//! for both); a valid credential of the wrong kind is `forbidden`; a revoked device is `device_revoked`.
//! The extractors hand the handler the agent id every query is then scoped by.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use pacerelle_core::wire::{REGISTRATION_HEADER, code};
use pacerelle_core::{Bearer, keys};

use crate::app::AppState;
use crate::error::AppError;
use crate::ratelimit::Limit;
use crate::store::Principal;

/// An authenticated agent.
#[derive(Debug, Clone)]
pub(crate) struct AgentAuth {
    pub agent_id: String,
}

/// An authenticated, not revoked device, and its agent.
#[derive(Debug, Clone)]
pub(crate) struct DeviceAuth {
    pub agent_id: String,
    pub device_id: String,
    /// `owner` or `user` (Partner mode), from the credential's record.
    pub role: pacerelle_core::pairing::Role,
}

fn revoked() -> AppError {
    AppError::new(
        StatusCode::FORBIDDEN,
        code::DEVICE_REVOKED,
        "this device was revoked; pair it again to use it",
    )
}

/// Authenticates the request's bearer. An address that sent too many credentials that are missing, malformed
/// or not recognised is refused (`rate_limited`) before its credential is looked at, until its bucket refills.
async fn authenticate(parts: &Parts, state: &AppState) -> Result<Principal, AppError> {
    let ip = client_ip(parts, state);
    if ip.is_some_and(|ip| state.limiter.exhausted(Limit::FailedAuth, ip)) {
        return Err(AppError::rate_limited());
    }
    let result = check_bearer(&parts.headers, state).await;
    if let (Err(e), Some(ip)) = (&result, ip)
        && e.status() == StatusCode::UNAUTHORIZED
    {
        state.limiter.allow(Limit::FailedAuth, ip);
    }
    result
}

async fn check_bearer(headers: &HeaderMap, state: &AppState) -> Result<Principal, AppError> {
    let value = headers.get(AUTHORIZATION).ok_or_else(|| {
        AppError::unauthorized("missing credential: send Authorization: Bearer <id>.<secret>")
    })?;
    let malformed =
        || AppError::unauthorized("malformed credential: expected Authorization: Bearer <id>.<secret>");
    let text = value.to_str().map_err(|_| malformed())?;
    let (scheme, credential) = text.trim().split_once(' ').ok_or_else(malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed());
    }
    let bearer = Bearer(credential.trim().to_string());
    let (id, presented) = bearer.split().ok_or_else(malformed)?;
    let not_recognised = || AppError::unauthorized("credential not recognised");
    let principal = state.store.principal(id).await?.ok_or_else(not_recognised)?;
    let stored = match &principal {
        Principal::Agent { hash, .. } | Principal::Device { hash, .. } => hash,
    };
    if !keys::constant_time_eq(stored, &presented) {
        return Err(not_recognised());
    }
    if let Principal::Device { revoked: true, .. } = principal {
        return Err(revoked());
    }
    Ok(principal)
}

impl FromRequestParts<AppState> for AgentAuth {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        // Boxed: the lookup's room is not part of the handler's future, which a parked wait keeps.
        match Box::pin(authenticate(parts, state)).await? {
            Principal::Agent { agent_id, .. } => Ok(AgentAuth { agent_id }),
            Principal::Device { .. } => Err(AppError::forbidden(
                "a device credential cannot use /v1/agent routes; use the agent's credential",
            )),
        }
    }
}

impl FromRequestParts<AppState> for DeviceAuth {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        // Boxed: the lookup's room is not part of the handler's future, which a parked wait keeps.
        match Box::pin(authenticate(parts, state)).await? {
            Principal::Device {
                agent_id,
                device_id,
                role,
                ..
            } => Ok(DeviceAuth {
                agent_id,
                device_id,
                role,
            }),
            Principal::Agent { .. } => Err(AppError::forbidden(
                "an agent credential cannot use /v1/device routes; use a device's credential",
            )),
        }
    }
}

impl DeviceAuth {
    /// Checks again that the device is not revoked (after a long wait).
    pub(crate) async fn still_valid(&self, state: &AppState) -> Result<(), AppError> {
        match state.store.device(&self.agent_id, &self.device_id).await? {
            Some(d) if d.revoked_at.is_none() => Ok(()),
            _ => Err(revoked()),
        }
    }
}

/// The address the rate limits count a request for: its peer, or the client a trusted proxy names. None
/// without a socket address (the router driven in-process): there is nobody to limit.
fn client_ip(parts: &Parts, state: &AppState) -> Option<std::net::IpAddr> {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())?;
    Some(crate::ratelimit::client_ip(
        &state.config.trusted_proxies,
        peer,
        &parts.headers,
    ))
}

fn rate_limit(parts: &Parts, state: &AppState, limit: Limit) -> Result<(), AppError> {
    match client_ip(parts, state) {
        Some(ip) if !state.limiter.allow(limit, ip) => Err(AppError::rate_limited()),
        _ => Ok(()),
    }
}

/// Admits a registration: rate limit per address, then the registration secret unless registration is open.
#[derive(Debug)]
pub(crate) struct RegistrationGate;

impl FromRequestParts<AppState> for RegistrationGate {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        rate_limit(parts, state, Limit::Registration)?;
        if state.config.open_registration {
            return Ok(RegistrationGate);
        }
        let presented = parts.headers.get(REGISTRATION_HEADER).map(|v| v.as_bytes());
        let admitted = match (presented, state.config.registration_secret.as_deref()) {
            // Hashing first makes the comparison independent of the secret's length too.
            (Some(presented), Some(secret)) if !secret.is_empty() => {
                keys::constant_time_eq(&keys::sha256(presented), &keys::sha256(secret.as_bytes()))
            }
            _ => false,
        };
        if admitted {
            Ok(RegistrationGate)
        } else {
            Err(AppError::new(
                StatusCode::FORBIDDEN,
                code::REGISTRATION_CLOSED,
                format!(
                    "registration on this relay needs its registration secret in the {REGISTRATION_HEADER} header"
                ),
            ))
        }
    }
}

/// Admits a pairing claim: rate limit per address.
#[derive(Debug)]
pub(crate) struct ClaimGate;

impl FromRequestParts<AppState> for ClaimGate {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        rate_limit(parts, state, Limit::Claim)?;
        Ok(ClaimGate)
    }
}
