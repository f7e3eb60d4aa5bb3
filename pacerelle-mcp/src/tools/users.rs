//! Partner mode: `connect_user`, `list_users`, `get_user` and `disconnect_user`, the agent's own users.
//!
//! A user is a named group of devices with the integrator's `externalId`, connected once by a pairing link
//! they open on their own phone; `ask_user` and `send_notification` reach them with `userId`. These tools
//! only call the client ([`pacerelle_client::AgentClient::connect_user`] and its siblings): the roster that
//! says which devices answer for whom stays sealed with the agent's keys. None of them needs the lease.

use crate::tools::output_schema;
use pacerelle_client::core::pairing;
use pacerelle_client::{
    Error, ErrorKind, agent::AuditEntry, agent::ConnectOptions, agent::PairingLink, agent::UserDevice,
    agent::UserInfo, core::pairing::Branding,
};
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ResultText;
use crate::server::PacerelleServer;
use crate::tools::{Args, failure, input_schema, output, relay_failure, render, result_text, to_json};

/// Arguments of `connect_user`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectArgs {
    /// Your own id for the user (1 to 128 characters, no control characters): pass it as userId to
    /// ask_user and send_notification. Connecting a known user again gives another link (a second phone)
    /// and reconnects a disconnected user.
    pub external_id: String,
    /// The user's name, as the app shows it (1 to 200 characters).
    pub name: String,
    /// The app's accent colour for this agent, `#rrggbb`.
    pub accent_color: Option<String>,
    /// The agent's icon in the app: a `data:image/png;base64,…` (or image/svg+xml, image/jpeg) URL of at
    /// most 16 KiB.
    pub icon: Option<String>,
    /// How long the link can be opened, in seconds (1 to 3600; default 600).
    pub link_ttl_seconds: Option<u64>,
}

/// Arguments of `get_user` and `disconnect_user`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserArgs {
    /// The user's externalId, as given to connect_user.
    pub external_id: String,
}

/// The result of `connect_user`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectResult {
    /// The user's externalId.
    pub external_id: String,
    /// The user's name.
    pub name: String,
    /// The pairing link: give it to this user only (whoever opens it first answers for them).
    pub link: String,
    /// When the link stops working (RFC 3339).
    pub expires_at: String,
    /// The device the link creates once opened.
    pub device_id: String,
    /// The link as a QR code to show the user: an SVG `data:image/svg+xml;base64,…` URL.
    pub qr_code: String,
}

/// A user's device.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserDeviceView {
    /// Its id (`answeredBy` of its answers, `from` of its tasks).
    pub device_id: String,
    /// Its name; null while the link is unused.
    pub name: Option<String>,
    /// True once the user opened the link (the device is paired).
    pub paired: bool,
    /// True once revoked (it answers nothing any more).
    pub revoked: bool,
}

/// The last answered question addressed to a user.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastAnswerView {
    /// The question's id.
    pub question_id: String,
    /// The question.
    pub question: String,
    /// The answer: `yes`, `no`, the chosen options, or the text.
    pub answer: Option<String>,
    /// Whether it approved.
    pub approved: bool,
    /// The device that answered.
    pub answered_by: Option<String>,
    /// When (RFC 3339, the relay's clock).
    pub answered_at: Option<String>,
}

/// A user of the agent.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserView {
    /// The user's externalId (`userId` of ask_user, send_notification and their tasks).
    pub external_id: String,
    /// The user's name.
    pub name: String,
    /// `connected` or `disconnected`.
    pub status: UserStatus,
    /// Their devices, the links not yet used included, oldest first.
    pub devices: Vec<UserDeviceView>,
    /// The last answered question addressed to them, when the recent log holds one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_answer: Option<LastAnswerView>,
}

/// Whether a user can be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "snake_case")]
pub enum UserStatus {
    /// Can be asked and notified (once one of their devices is paired).
    Connected,
    /// Disconnected: their devices are revoked; connect_user connects them again.
    Disconnected,
}

/// The result of `list_users`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsersResult {
    /// Every user ever connected, in the order they were connected.
    pub users: Vec<UserView>,
}

fn device_view(d: &UserDevice) -> UserDeviceView {
    UserDeviceView {
        device_id: d.device_id.clone(),
        name: d.name.clone(),
        paired: d.paired,
        revoked: d.revoked_at.is_some(),
    }
}

fn last_answer_view(e: &AuditEntry) -> LastAnswerView {
    LastAnswerView {
        question_id: e.question_id.clone(),
        question: e.question.clone(),
        answer: e.answer.clone(),
        approved: e.approved,
        answered_by: e.answered_by.clone(),
        answered_at: e.answered_at.map(|t| t.to_string()),
    }
}

/// What the tools show of a user.
pub fn user_view(u: &UserInfo) -> UserView {
    UserView {
        external_id: u.external_id.clone(),
        name: u.name.clone(),
        status: if u.disconnected_at.is_some() {
            UserStatus::Disconnected
        } else {
            UserStatus::Connected
        },
        devices: u.devices.iter().map(device_view).collect(),
        last_answer: u.last_answer.as_ref().map(last_answer_view),
    }
}

/// `text` as a QR code: a compact SVG (one path, a run of dark modules per segment, a 4-module quiet zone)
/// as a base64 data URL.
pub fn qr_data_url(text: &str) -> Option<String> {
    let code = qrcode::QrCode::new(text.as_bytes()).ok()?;
    let width = code.width();
    let colors = code.to_colors();
    let quiet = 4;
    let size = width + 2 * quiet;
    let mut path = String::new();
    for y in 0..width {
        let mut x = 0;
        while x < width {
            if colors[y * width + x] == qrcode::Color::Dark {
                let start = x;
                while x < width && colors[y * width + x] == qrcode::Color::Dark {
                    x += 1;
                }
                path.push_str(&format!(
                    "M{} {}h{}v1h-{}z",
                    start + quiet,
                    y + quiet,
                    x - start,
                    x - start
                ));
            } else {
                x += 1;
            }
        }
    }
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{px}\" height=\"{px}\" viewBox=\"0 0 {size} {size}\" \
         shape-rendering=\"crispEdges\"><rect width=\"{size}\" height=\"{size}\" fill=\"#fff\"/><path \
         fill=\"#000\" d=\"{path}\"/></svg>",
        px = size * 4
    );
    Some(format!(
        "data:image/svg+xml;base64,{}",
        data_encoding::BASE64.encode(svg.as_bytes())
    ))
}

/// True for the failures that concern the addressed user: `user_not_found` (never connected, or
/// disconnected) and `no_device` (none of their devices is paired).
pub fn is_user_failure(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::UserNotFound | ErrorKind::NoDevice)
}

/// Maps a failure about user `user` (`what`: what was not done, e.g. "a question"; `then`: what it means
/// for the model): `user_not_found` and `no_device` with the client's message, anything else as
/// [`relay_failure`].
pub fn user_failure(
    relay_url: &str,
    user: &str,
    what: &str,
    then: &str,
    e: Error,
) -> Result<CallToolResult, McpError> {
    let message = match &e {
        Error::Api { message, .. } => message.clone(),
        other => other.to_string(),
    };
    if e.kind() == ErrorKind::UserNotFound {
        return failure(format!(
            "user_not_found: {message}. {then} Connect them with connect_user, or check the externalId with \
             list_users."
        ));
    }
    if e.kind() == ErrorKind::NoDevice {
        return failure(format!(
            "no_device: {message}. User \"{user}\" has no paired device, so the {what} was not sent and \
             nobody can answer for them. {then} Call connect_user again for a new link and give it to them."
        ));
    }
    relay_failure(relay_url, e)
}

fn connect_result(args: &ConnectArgs, link: PairingLink) -> Result<ConnectResult, McpError> {
    let qr_code = qr_data_url(&link.link)
        .ok_or_else(|| McpError::internal_error("the link does not fit in a QR code", None))?;
    Ok(ConnectResult {
        external_id: args.external_id.clone(),
        name: args.name.clone(),
        link: link.link,
        expires_at: link.expires_at.to_string(),
        device_id: link.device_id,
        qr_code,
    })
}

/// `connect_user`'s result: in [`ResultText::Json`] mode the text repeats the JSON without the QR code (it
/// is the link again, for a screen, not for the model).
fn connect_output(result: &ConnectResult, next: String) -> Result<CallToolResult, McpError> {
    let json = to_json(result)?;
    let mode = result_text();
    let mut rendered = render(json.clone(), next, None, mode);
    if mode == ResultText::Json {
        let mut lean = json;
        if let Some(object) = lean.as_object_mut() {
            object.insert(
                "qrCode".into(),
                serde_json::Value::String("(in structuredContent.qrCode)".into()),
            );
        }
        rendered.content.truncate(1);
        rendered.content.push(ContentBlock::text(lean.to_string()));
    }
    Ok(rendered)
}

#[tool_router(router = users_router, vis = "pub(crate)")]
impl PacerelleServer {
    #[tool(
        name = "connect_user",
        input_schema = input_schema::<ConnectArgs>(),
        description = "Partner mode: connect one of your own users (externalId, name) so they can approve \
                       what concerns them on their own phone. Returns a pairing link, its expiry and a QR \
                       code of it (an SVG data URL) to show that user only: opening it in the Pacerelle \
                       app pairs their phone as one of their devices. Then pass userId = externalId to \
                       ask_user or send_notification. Again for a known user: another link (a second phone), \
                       and a disconnected user is connected again. Does not need the lease.",
        output_schema = output_schema::<ConnectResult>(),
        annotations(
            title = "Connect a user",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn connect_user(&self, Args(args): Args<ConnectArgs>) -> Result<CallToolResult, McpError> {
        let branding = (args.accent_color.is_some() || args.icon.is_some()).then(|| Branding {
            accent_color: args.accent_color.clone(),
            icon: args.icon.clone(),
        });
        if let Some(b) = &branding {
            b.validate().map_err(|e| McpError::invalid_params(e, None))?;
        }
        let ttl = args.link_ttl_seconds.map(std::time::Duration::from_secs);
        if let Some(ttl) = ttl {
            pairing::check_ttl(ttl)
                .map_err(|e| McpError::invalid_params(format!("linkTtlSeconds: {e}"), None))?;
        }
        let options = ConnectOptions {
            branding,
            ttl,
            ..ConnectOptions::default()
        };
        let state = &self.state;
        match state
            .client
            .connect_user(&args.external_id, &args.name, options)
            .await
        {
            Ok(link) => {
                let result = connect_result(&args, link)?;
                let next = format!(
                    "Give user \"{}\" this link (or show the QR code) and nobody else: whoever opens it first in \
                     the Pacerelle app answers for them. It expires at {}. Once they opened it, ask them with \
                     ask_user and userId \"{}\"; list_users shows their device as paired.",
                    result.external_id, result.expires_at, result.external_id
                );
                connect_output(&result, next)
            }
            Err(e) => relay_failure(&state.relay_url, e),
        }
    }

    #[tool(
        name = "list_users",
        description = "Partner mode: every user connected with connect_user, disconnected ones included: \
                       externalId, name, status (connected or disconnected), devices (paired, revoked) and \
                       the last answered question addressed to them. Does not need the lease.",
        output_schema = output_schema::<UsersResult>(),
        annotations(
            title = "List the users",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn list_users(&self) -> Result<CallToolResult, McpError> {
        let state = &self.state;
        match state.client.list_users().await {
            Ok(users) => {
                let result = UsersResult {
                    users: users.iter().map(user_view).collect(),
                };
                let next = match result.users.len() {
                    0 => "No user is connected yet: connect_user gives a link for one.".to_string(),
                    1 => "1 user (see users).".to_string(),
                    n => format!("{n} users (see users)."),
                };
                output(&result, next)
            }
            Err(e) => relay_failure(&state.relay_url, e),
        }
    }

    #[tool(
        name = "get_user",
        input_schema = input_schema::<UserArgs>(),
        description = "Partner mode: one user by externalId: name, status (connected or disconnected), \
                       devices (paired, revoked) and the last answered question addressed to them. Does not \
                       need the lease.",
        output_schema = output_schema::<UserView>(),
        annotations(
            title = "Show a user",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn get_user(&self, Args(args): Args<UserArgs>) -> Result<CallToolResult, McpError> {
        let state = &self.state;
        match state.client.get_user(&args.external_id).await {
            Ok(user) => {
                let view = user_view(&user);
                let paired = view.devices.iter().filter(|d| d.paired && !d.revoked).count();
                let next = match view.status {
                    UserStatus::Disconnected => format!(
                        "User \"{}\" is disconnected: connect_user connects them again.",
                        view.external_id
                    ),
                    UserStatus::Connected if paired == 0 => format!(
                        "User \"{}\" has no paired device yet: they must open their link (connect_user gives \
                         a new one).",
                        view.external_id
                    ),
                    UserStatus::Connected => format!(
                        "User \"{}\" is connected with {paired} paired device(s): ask_user with userId \"{}\" \
                         reaches them.",
                        view.external_id, view.external_id
                    ),
                };
                output(&view, next)
            }
            Err(e) => user_failure(&state.relay_url, &args.external_id, "user", "Nothing to show.", e),
        }
    }

    #[tool(
        name = "disconnect_user",
        input_schema = input_schema::<UserArgs>(),
        description = "Partner mode: disconnect a user: every device of theirs is revoked (their answers \
                       never count again and the relay refuses their requests) and they can no longer be \
                       asked or notified. connect_user connects them again with a new link. Disconnecting \
                       twice changes nothing. Does not need the lease.",
        output_schema = output_schema::<UserView>(),
        annotations(
            title = "Disconnect a user",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = true
        )
    )]
    pub async fn disconnect_user(&self, Args(args): Args<UserArgs>) -> Result<CallToolResult, McpError> {
        let state = &self.state;
        match state.client.disconnect_user(&args.external_id).await {
            Ok(user) => {
                let view = user_view(&user);
                let next = format!(
                    "User \"{}\" is disconnected: their {} device(s) are revoked and they can no longer be \
                     asked or notified.",
                    view.external_id,
                    view.devices.len()
                );
                output(&view, next)
            }
            Err(e) => user_failure(
                &state.relay_url,
                &args.external_id,
                "user",
                "Nothing was changed.",
                e,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_becomes_an_svg_data_url_that_decodes() {
        let url = qr_data_url("https://relay.example/pair#v1.abcdefghijklmnopqrstuvwxyz0123456789")
            .expect("a QR code");
        let data = url
            .strip_prefix("data:image/svg+xml;base64,")
            .expect("an SVG data URL");
        let svg =
            String::from_utf8(data_encoding::BASE64.decode(data.as_bytes()).expect("base64")).expect("utf-8");
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"), "{svg}");
        assert!(svg.contains("d=\"M"), "{svg}");
        // It is accepted where the app takes an inline image.
        Branding {
            accent_color: None,
            icon: Some(url.clone()),
        }
        .validate()
        .expect("a valid data URL");
        // Lean enough for a result: well under the 16 KiB an inline icon may take.
        assert!(url.len() < 16 * 1024, "{} bytes", url.len());
    }

    #[test]
    fn a_user_view_says_connected_or_disconnected() {
        let json = serde_json::to_value(UserView {
            external_id: "alice".into(),
            name: "Alice".into(),
            status: UserStatus::Disconnected,
            devices: vec![],
            last_answer: None,
        })
        .expect("json");
        assert_eq!(json["status"], "disconnected");
        assert_eq!(json["externalId"], "alice");
        assert!(json.get("lastAnswer").is_none(), "{json}");
    }
}
