//! Webhooks (client `webhook`): the agent's webhook, deliveries, verified events.

use pacerelle_client as client;
use pyo3::prelude::*;

use super::Time;

wrapper! {
    /// The agent's webhook (`url` is None when none is set).
    PyWebhookInfo("WebhookInfo", client::core::wire::WebhookInfo) {
        /// The URL the relay POSTs question events to.
        url: |v| v.url.as_deref(),
        /// When it was set.
        updated_at: |v| v.updated_at.map(Time),
    }
}

wrapper! {
    /// One webhook event's delivery state.
    PyDelivery("Delivery", client::agent::Delivery) {
        /// The event id, also in the `Pacerelle-Event-Id` header.
        event_id: |v| &v.event_id,
        /// 'question.answered', 'question.expired' or 'question.cancelled'.
        event_type: |v| &v.event_type,
        /// The question concerned.
        question_id: |v| &v.question_id,
        /// 'pending' (will be tried again), 'delivered' or 'failed'.
        state: |v| &v.state,
        /// Attempts made.
        attempts: |v| v.attempts,
        /// The last HTTP status received.
        last_status: |v| v.last_status,
        /// The last error.
        last_error: |v| v.last_error.as_deref(),
        /// When the event was created.
        created_at: |v| Time(v.created_at),
        /// When it was delivered.
        delivered_at: |v| v.delivered_at.map(Time),
    }
}

wrapper! {
    /// A verified webhook event: metadata in clear. The content stays sealed: to learn whether the owner
    /// approved, ask the agent (`agent.wait_for_answer(event.question_id, timeout=0)`).
    PyWebhookEvent("WebhookEvent", client::core::wire::WebhookEvent) {
        /// Unique per event; deduplicate by it.
        id: |v| &v.id,
        /// 'question.answered', 'question.expired' or 'question.cancelled'.
        r#type: |v| &v.event_type,
        /// When the event happened.
        created_at: |v| Time(v.created_at),
        /// The agent.
        agent_id: |v| &v.agent_id,
        /// Partner mode: the `externalId` of the user the question was for, as the agent gave it; None for a
        /// question asked of the owner. Informational: approval is decided on the agent side.
        user_id: |v| v.user_id.as_deref(),
        /// The question.
        question_id: |v| &v.question.question_id,
        /// The question's kind.
        kind: |v| v.question.kind.as_str(),
        /// The question's state by the relay's record.
        state: |v| v.question.state.as_str(),
        /// The device that answered, by the relay's record.
        answered_by: |v| v.question.answered_by.as_deref(),
        /// That device's name.
        answered_by_name: |v| v.question.answered_by_name.as_deref(),
        /// How it was answered, by the relay's record: 'phone' (a device) or 'host' (at the computer, through
        /// the agent; no `answered_by`). None while unanswered.
        channel: |v| v.question.channel.map(client::Channel::as_str),
        /// When the question expires.
        expires_at: |v| Time(v.question.expires_at),
        /// When it was answered, expired or cancelled.
        closed_at: |v| v.question.closed_at.map(Time),
    }
}
