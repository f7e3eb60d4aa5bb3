//! Agent sessions and the lease (DESIGN §7): an agent may have several named sessions; one session per name
//! consumes the inbox at a time, and only the tasks for its name or for any session.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use pacerelle_core::wire::{OpenSession, SESSION_HEADER, SessionInfo};
use pacerelle_core::{Timestamp, ids};

use super::{MAX_HOST_CHARS, check_text};
use crate::app::AppState;
use crate::auth::AgentAuth;
use crate::error::AppError;
use crate::extract::{Json, Path};
use crate::store::{Lease, Renewal, SessionOpened};
use crate::wake::Topic;

/// Refuses a request that consumes the inbox unless it may; else the session name it consumes as.
///
/// The request consumes as its session's name, or as the default session without a session (or with one the
/// relay does not know). Then:
/// - the session header names the live holder of that name's lease → allowed;
/// - it names another session of this agent (ended, lapsed or taken over) → `lease_lost`;
/// - otherwise: allowed when no session holds that name's lease, else `agent_in_use` naming the holder.
pub(crate) async fn require_lease(
    state: &AppState,
    agent_id: &str,
    headers: &HeaderMap,
) -> Result<String, AppError> {
    let session = session_of(headers);
    let caller = state.store.caller(agent_id, session, Timestamp::now()).await?;
    lease_verdict(caller.lease.as_ref(), session, caller.known)?;
    Ok(caller.name)
}

/// The session header of a request, if any.
pub(crate) fn session_of(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok())
}

/// The session header alone, for a handler that holds it across a long-poll: its text copied out, so that
/// nothing of the request (whose header values share hyper's read buffer) outlives the extractors — a header
/// value kept would keep that buffer, and the connection would take a second one to watch for the client's
/// close while the request is parked.
#[derive(Debug, Clone)]
pub(crate) struct SessionHeader(Option<String>);

impl SessionHeader {
    /// The header's text, as [`session_of`] reads it.
    pub(crate) fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SessionHeader {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(SessionHeader(session_of(&parts.headers).map(str::to_owned)))
    }
}

/// [`require_lease`]'s rule on facts already read: the lease now, the caller's session, and whether that
/// session is known to this agent.
pub(crate) fn lease_verdict(
    lease: Option<&Lease>,
    session: Option<&str>,
    known: bool,
) -> Result<(), AppError> {
    if let (Some(lease), Some(session)) = (lease, session)
        && lease.session_id == session
    {
        return Ok(());
    }
    if session.is_some() && known {
        return Err(AppError::lease_lost());
    }
    match lease {
        Some(lease) => Err(AppError::agent_in_use(&lease.holder)),
        None => Ok(()),
    }
}

/// `POST /v1/agent/sessions`: takes the lease of the session's name, or replaces its holder with `takeover`.
pub(crate) async fn open(
    State(state): State<AppState>,
    auth: AgentAuth,
    Json(body): Json<OpenSession>,
) -> Result<(StatusCode, Json<SessionInfo>), AppError> {
    let host = check_text("host", &body.host, MAX_HOST_CHARS)?;
    let name = body.name.as_deref().unwrap_or(ids::DEFAULT_SESSION);
    ids::validate_session_name(name).map_err(|e| AppError::invalid_input(e.to_string()))?;
    let folder = match &body.folder {
        Some(folder) => Some(check_text("folder", folder, MAX_FOLDER_CHARS)?),
        None => None,
    };
    let session_id = ids::generate(ids::SESSION);
    match state
        .store
        .open_session(
            &auth.agent_id,
            &session_id,
            &host,
            name,
            folder.as_deref(),
            body.takeover,
            Timestamp::now(),
        )
        .await?
    {
        SessionOpened::Opened(info) => {
            tracing::info!(agent = %auth.agent_id, session = %info.session_id, "session opened");
            // Waits parked by a previous holder wake up and find the lease gone.
            state.wakes.publish(&Topic::Inbox(auth.agent_id), 0);
            Ok((StatusCode::CREATED, Json(info)))
        }
        SessionOpened::InUse(holder) => Err(AppError::agent_in_use(&holder)),
    }
}

/// `POST /v1/agent/sessions/{sessionId}/heartbeat`: renews the lease while this session holds it.
pub(crate) async fn heartbeat(
    State(state): State<AppState>,
    auth: AgentAuth,
    Path(session_id): Path<String>,
) -> Result<Json<SessionInfo>, AppError> {
    match state
        .store
        .heartbeat(&auth.agent_id, &session_id, Timestamp::now())
        .await?
    {
        Renewal::Renewed(info) => Ok(Json(info)),
        Renewal::Lost => Err(AppError::lease_lost()),
        Renewal::NotFound => Err(AppError::not_found("session")),
    }
}

/// `DELETE /v1/agent/sessions/{sessionId}`: gives the lease up (idempotent).
pub(crate) async fn release(
    State(state): State<AppState>,
    auth: AgentAuth,
    Path(session_id): Path<String>,
) -> Result<Json<SessionInfo>, AppError> {
    let info = state
        .store
        .release(&auth.agent_id, &session_id, Timestamp::now())
        .await?
        .ok_or_else(|| AppError::not_found("session"))?;
    Ok(Json(info))
}

/// Longest folder a session may give, in characters: a folder's name, not a path.
pub(crate) const MAX_FOLDER_CHARS: usize = 200;
