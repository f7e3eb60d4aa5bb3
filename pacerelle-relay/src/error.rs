//! Errors: [`Error`] for opening the relay, [`AppError`] for every HTTP answer that is not a success.
//!
//! An [`AppError`] renders [`pacerelle_core::wire::ErrorBody`] (`{"code", "error", "details"?}`) with a stable
//! code from [`pacerelle_core::wire::code`]. Internal and storage failures are logged here, where they are
//! turned into a response, and are never echoed to the caller.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pacerelle_core::question::Refusal;
use pacerelle_core::wire::{ErrorBody, LeaseHolder, code};

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database file could not be opened or created.
    #[error("cannot open the database {path}: {source}")]
    Open {
        /// The database file, or the PostgreSQL URL without its password.
        path: String,
        /// What the database said.
        #[source]
        source: sqlx::Error,
    },
    /// The schema migrations failed.
    #[error("cannot migrate the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A storage failure while starting.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The configuration is unusable.
    #[error("invalid relay configuration: {0}")]
    Config(String),
    /// The data folder or a file in it could not be created, read or restricted to its owner.
    #[error("cannot {action} {path}: {source}")]
    Files {
        /// What the relay was doing.
        action: &'static str,
        /// The folder or file.
        path: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The webhook key file exists but cannot be used (the relay never replaces it by itself).
    #[error("the webhook key {path} is unusable: {reason}")]
    WebhookKey {
        /// The file.
        path: String,
        /// Why, and what to do.
        reason: String,
    },
}

/// A failure of the storage layer (the conflicts a caller can cause are returned as values, not as errors).
///
/// It keeps the backend's error as its source without naming the backend's type, so that the routes, and any
/// other backend, do not depend on one database library.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database is busy, full, or its file cannot be written: retrying later may work.
    #[error("storage unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// Anything else: a bug or a corrupt database.
    #[error("storage failure: {0}")]
    Internal(#[source] BoxError),
}

/// A backend's error, kept as the source of a [`StoreError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl StoreError {
    /// An internal failure described by `what` (a bug, or a row the code cannot read).
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        StoreError::Internal(what.into().into())
    }

    /// An unavailable store described by `what` (closed, or too busy to take the write in time).
    pub(crate) fn unavailable(what: impl Into<String>) -> Self {
        StoreError::Unavailable(what.into().into())
    }
}

/// SQLite primary result codes that mean "not now" rather than "never": busy, locked, out of memory, read-only,
/// I/O error, disk full, cannot open.
fn sqlite_transient(primary: i64) -> bool {
    matches!(primary, 5 | 6 | 7 | 8 | 10 | 13 | 14)
}

/// PostgreSQL SQLSTATEs that mean "not now": a deadlock or serialization failure the client's retry resolves
/// (class 40), a lost connection (08), too many connections or no room (53), the server shutting down (57P), a
/// lock not available (55P03).
fn postgres_transient(state: &str) -> bool {
    ["40", "08", "53", "57P"]
        .iter()
        .any(|class| state.starts_with(class))
        || state == "55P03"
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        let transient = match &e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => true,
            sqlx::Error::Database(db) => db.code().is_some_and(|c| match c.parse::<i64>() {
                // SQLite: a numeric result code.
                Ok(code) => sqlite_transient(code & 0xff),
                // PostgreSQL: an SQLSTATE.
                Err(_) => postgres_transient(&c),
            }),
            _ => false,
        };
        if transient {
            StoreError::Unavailable(Box::new(e))
        } else {
            StoreError::Internal(Box::new(e))
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        let transient = match &e {
            rusqlite::Error::SqliteFailure(failure, _) => {
                sqlite_transient(i64::from(failure.extended_code & 0xff))
            }
            _ => false,
        };
        if transient {
            StoreError::Unavailable(Box::new(e))
        } else {
            StoreError::Internal(Box::new(e))
        }
    }
}

/// An error answer: HTTP status, stable code, message, optional details.
#[derive(Debug)]
pub(crate) struct AppError {
    status: StatusCode,
    code: &'static str,
    message: String,
    details: Option<serde_json::Value>,
}

impl AppError {
    /// An error with a status, a code from [`code`] and a message (never content or secrets).
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        AppError {
            status,
            code,
            message: message.into(),
            details: None,
        }
    }

    /// Its HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Adds the `details` field.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 `invalid_input`.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code::INVALID_INPUT, message)
    }

    /// 400 `invalid_json`.
    pub fn invalid_json(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code::INVALID_JSON, message)
    }

    /// 400 `bad_cursor`.
    pub fn bad_cursor() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            code::BAD_CURSOR,
            "this cursor was not issued by this relay; start again without a cursor",
        )
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED, message)
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code::FORBIDDEN, message)
    }

    /// 404 `not_found`, naming what was looked for (never another agent's data).
    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, code::NOT_FOUND, format!("no such {what}"))
    }

    /// 409 `id_conflict`.
    pub fn id_conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code::ID_CONFLICT, message)
    }

    /// 409 `agent_in_use`, with the holder in `details`.
    pub fn agent_in_use(holder: &LeaseHolder) -> Self {
        let details = serde_json::to_value(holder).unwrap_or(serde_json::Value::Null);
        Self::new(
            StatusCode::CONFLICT,
            code::AGENT_IN_USE,
            format!(
                "another session holds the lease of this agent's session {:?}: {} since {} (open a session with takeover to replace it, or give this one another name)",
                holder.name, holder.host, holder.since
            ),
        )
        .with_details(details)
    }

    /// 409 `lease_lost`.
    pub fn lease_lost() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            code::LEASE_LOST,
            "this session no longer holds the lease (it expired or was taken over); open a new session",
        )
    }

    /// 400 `no_device`: a question or notification without any device to go to.
    pub fn no_device() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            code::NO_DEVICE,
            "no device to send this to: pair a device first, then seal it for each active device",
        )
    }

    /// The answer to a transition the question's state machine refused: 410 `question_expired`, 409
    /// `question_cancelled` or 409 `question_answered`.
    pub fn refused(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Expired => Self::new(
                StatusCode::GONE,
                code::QUESTION_EXPIRED,
                "the question has expired: nobody answered in time, which counts as no",
            ),
            Refusal::Cancelled => Self::new(
                StatusCode::CONFLICT,
                code::QUESTION_CANCELLED,
                "the question was cancelled by the agent",
            ),
            Refusal::AlreadyAnswered => Self::new(
                StatusCode::CONFLICT,
                code::QUESTION_ANSWERED,
                "the question already has an answer (the first answer wins)",
            ),
        }
    }

    /// 429 `rate_limited`.
    pub fn rate_limited() -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            code::RATE_LIMITED,
            "too many requests of this kind from this address; retry in a minute",
        )
    }

    /// 429 `quota_exceeded`: the agent holds as much of something as the relay allows. The message names the
    /// limit and what frees room (`what_frees`), never anything from the request; `details` carries the
    /// quota's name (the serve flag that sets it, without its dashes) and the limit.
    pub fn quota_exceeded(quota: &'static str, limit: u32, held: &str, what_frees: &str) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            code::QUOTA_EXCEEDED,
            format!(
                "the agent already has as many {held} as this relay allows ({quota}: {limit}); nothing was \
                 stored: {what_frees}"
            ),
        )
        .with_details(serde_json::json!({ "quota": quota, "limit": limit }))
    }

    /// 500 `internal`; the cause is logged, not returned.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::INTERNAL,
            "internal error; see the relay's log",
        )
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "storage unavailable");
                AppError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    code::UNAVAILABLE,
                    "the relay's storage is unavailable; retry later",
                )
            }
            StoreError::Internal(cause) => AppError::internal(&cause),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.to_string(),
            error: self.message,
            details: self.details,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_is_unavailable_and_row_not_found_is_internal() {
        assert!(matches!(
            StoreError::from(sqlx::Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            StoreError::from(sqlx::Error::RowNotFound),
            StoreError::Internal(_)
        ));
    }

    #[test]
    fn postgres_deadlocks_and_lost_connections_are_transient_and_constraints_are_not() {
        for state in ["40P01", "40001", "08006", "53300", "57P01", "55P03"] {
            assert!(postgres_transient(state), "{state}");
        }
        for state in ["23505", "23503", "42P01", "22P02"] {
            assert!(!postgres_transient(state), "{state}");
        }
    }

    #[test]
    fn quota_exceeded_is_429_and_names_the_limit() {
        let e = AppError::quota_exceeded(
            "max_pending_tasks",
            5,
            "tasks not yet processed",
            "send again once the agent has processed some",
        );
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(e.code, code::QUOTA_EXCEEDED);
        assert_eq!(
            e.message,
            "the agent already has as many tasks not yet processed as this relay allows (max_pending_tasks: \
             5); nothing was stored: send again once the agent has processed some"
        );
        assert_eq!(
            e.details,
            Some(serde_json::json!({"quota": "max_pending_tasks", "limit": 5}))
        );
    }

    #[test]
    fn agent_in_use_names_the_holder() {
        let holder = LeaseHolder {
            host: "laptop / codex".into(),
            name: "default".into(),
            since: pacerelle_core::Timestamp(0),
            last_heartbeat_at: pacerelle_core::Timestamp(1),
        };
        let e = AppError::agent_in_use(&holder);
        assert_eq!(e.status, StatusCode::CONFLICT);
        assert_eq!(e.code, code::AGENT_IN_USE);
        assert!(e.message.contains("laptop / codex"));
        assert!(e.message.contains("1970-01-01T00:00:00.000Z"));
        assert_eq!(
            e.details.as_ref().and_then(|d| d.get("host")),
            Some(&"laptop / codex".into())
        );
    }
}
