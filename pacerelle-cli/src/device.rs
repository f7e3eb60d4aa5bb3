//! Device-side commands: `device join`, `device info`, `device leave`, `send`, `inbox`, and `status` from
//! either side.

use std::time::Duration;

use anyhow::Result;
use pacerelle_client::{
    Channel, Cursor, DeviceClient, Level, QuestionKind, QuestionState, agent::answer_text,
    core::wire::ItemKind, core::wire::MessageState, core::wire::Status, device::ConversationItem,
    device::Followed, device::OpenedQuestion,
};
use serde::Serialize;

use crate::Global;
use crate::home;
use crate::output;
use crate::secret;

#[derive(Debug, clap::Subcommand)]
pub enum DeviceCommand {
    /// Pair this terminal with an agent, as a phone would, by opening a pairing link.
    ///
    /// The link holds a secret: give it on standard input (`pacerelle device join -`, then paste it, or pipe
    /// it) or in PACERELLE_PAIRING_LINK rather than as an argument, which other users of this computer can read
    /// in the process list.
    Join {
        /// `-` to read the link printed by `pacerelle pair` or `pacerelle up` from standard input
        /// (recommended); left out, the link in PACERELLE_PAIRING_LINK. A link written here works, but is
        /// visible to other users in the process list.
        #[arg(value_name = "LINK|-", env = "PACERELLE_PAIRING_LINK", hide_env_values = true)]
        link: Option<String>,
        /// This device's name, shown to the agent.
        #[arg(long, default_value = "terminal")]
        name: String,
    },
    /// Show this terminal's device: its agent, its id and role, and the fingerprint of its signing key (to
    /// compare with the one an answer-log export shows), with what the relay records.
    Info(AgentArg),
    /// Unpair this terminal from one agent: the relay revokes its credential and the local file is removed
    /// (the pairings with other agents stay).
    Leave(AgentArg),
    /// List the agents this terminal is paired with: agent, device, role, user (Partner mode) and the
    /// agent's presence.
    List,
}

/// `--agent`: which paired agent a device-side command acts through.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArg {
    /// The paired agent, by id or name (see `pacerelle device list`). Needed only when this terminal is
    /// paired with several agents.
    #[arg(long, value_name = "AGENT_ID|NAME")]
    pub agent: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// The task, or `-` to read it from standard input (one trailing line break dropped). At most
    /// 65536 bytes of UTF-8 (64 KiB); longer text is refused before anything is sent.
    #[arg(value_name = "TEXT|-", required_unless_present = "file")]
    text: Option<String>,
    /// Read the task from this file, as it is (at most 65536 bytes of UTF-8).
    #[arg(long, value_name = "PATH", conflicts_with = "text")]
    file: Option<std::path::PathBuf>,
    /// Your own message id, to retry safely (one is drawn otherwise).
    #[arg(long)]
    id: Option<String>,
    /// Send it to this session of the agent (as `pacerelle status` lists them); by default, to whichever
    /// session takes it first.
    #[arg(long, value_name = "NAME")]
    session: Option<String>,
    #[command(flatten)]
    target: AgentArg,
}

#[derive(Debug, clap::Args)]
pub struct InboxArgs {
    /// Keep listening and print new items as they come.
    #[arg(long)]
    follow: bool,
    #[command(flatten)]
    target: AgentArg,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Which credentials to use: the agent's or this terminal's device (default: the agent's if present).
    #[arg(long = "as", value_parser = ["agent", "device"])]
    side: Option<String>,
    /// On the device side, the paired agent, by id or name (needed only when this terminal is paired with
    /// several; implies `--as device`).
    #[arg(long, value_name = "AGENT_ID|NAME")]
    agent: Option<String>,
}

pub async fn run(global: &Global, cmd: DeviceCommand) -> Result<()> {
    match cmd {
        DeviceCommand::Join { link, name } => {
            let link = match link.as_deref() {
                Some("-") => secret::from_stdin("pairing link")?.trim().to_string(),
                Some(link) => link.to_string(),
                None => {
                    return Err(output::invalid_input(
                        "no pairing link: run `pacerelle device join -` and paste it (or pipe it), or set \
                         PACERELLE_PAIRING_LINK",
                    ));
                }
            };
            let device = DeviceClient::join(&link, &name).await?;
            let c = device.credentials();
            // A link of an agent already paired replaces that agent's pairing only; another agent's adds one.
            let before = global.home.pairings()?;
            let replaced = before.iter().find(|p| p.creds.agent_id == c.agent_id);
            let path = global.home.write_pairing(c)?;
            // The earlier device leaves, so no credential of this terminal's is left working at the relay.
            let left = match replaced {
                Some(old) => Some(leave_replaced(global, old).await),
                None => None,
            };
            let paired = before.len() + usize::from(replaced.is_none());
            let fingerprint = device.signing_fingerprint();
            if global.json {
                let mut out = serde_json::json!({
                    "deviceId": c.device_id, "agentId": c.agent_id, "agentName": c.agent_name, "relayUrl": c.relay_url,
                    "signingFingerprint": fingerprint,
                    "replacedDeviceId": replaced.map(|p| p.creds.device_id.as_str()),
                    "replacedDeviceLeft": left.as_ref().map(Result::is_ok),
                    "pairedAgents": paired,
                });
                // Partner mode: the user this device answers for, as the link sealed it.
                if let Some(user) = &c.user {
                    out["user"] = serde_json::to_value(user)?;
                }
                output::json(&out)
            } else {
                println!(
                    "paired with agent \"{}\" ({}) as device {}",
                    c.agent_name, c.agent_id, c.device_id
                );
                if let Some(user) = &c.user {
                    println!("{}", answers_for(user, &c.agent_name));
                }
                if let Some(fingerprint) = fingerprint {
                    println!("signing key: {fingerprint}");
                }
                println!(
                    "credentials and signing key saved in {} (readable by you only)",
                    path.display()
                );
                if let (Some(old), Some(left)) = (replaced, &left) {
                    match left {
                        Ok(()) => println!(
                            "replaced this terminal's earlier pairing with {} (device {}, which left: it is revoked)",
                            c.agent_name, old.creds.device_id
                        ),
                        Err(e) => println!(
                            "replaced this terminal's earlier pairing with {} (device {}); it could not leave ({e}): \
                             the agent still lists it until it is revoked there",
                            c.agent_name, old.creds.device_id
                        ),
                    }
                }
                if paired > 1 {
                    println!(
                        "this terminal is paired with {paired} agents: see `pacerelle device list`; name one with \
                         `--agent` where a command needs it"
                    );
                }
                Ok(())
            }
        }
        DeviceCommand::Info(target) => info(global, target.agent.as_deref()).await,
        DeviceCommand::List => list(global).await,
        DeviceCommand::Leave(target) => {
            let (pairing, device) = home::device_client(global, target.agent.as_deref(), "leave one")?;
            let info = device.leave().await?;
            global.home.remove_pairing(&pairing)?;
            if global.json {
                output::json(&info)
            } else {
                println!(
                    "left {}: device {} ({}) is revoked",
                    pairing.creds.agent_name, info.name, info.device_id
                );
                Ok(())
            }
        }
    }
}

/// Revokes the device of a pairing this terminal replaced (`DELETE /v1/device` with its own credential). A
/// device already revoked counts as gone; any other failure is reported, the new pairing is kept either way.
async fn leave_replaced(global: &Global, old: &home::Pairing) -> std::result::Result<(), String> {
    let device = home::client_for(global, old).map_err(|e| format!("{e:#}"))?;
    match device.leave().await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == pacerelle_client::ErrorKind::DeviceRevoked => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// `pacerelle device info`: the stored credentials (nothing secret) and the relay's record of this device.
async fn info(global: &Global, agent: Option<&str>) -> Result<()> {
    let (_, device) = home::device_client(global, agent, "show its device")?;
    let record = device.info().await?;
    let c = device.credentials();
    let key = device.signing_public_key().map(|k| k.to_b64());
    let fingerprint = device.signing_fingerprint();
    // Whether the relay lists the key this terminal holds (it lists it to the agent, which pins it).
    let listed = match (&key, &record.device.signing_key) {
        (Some(held), Some(listed)) if held == listed => "listed by the relay",
        (Some(_), Some(_)) => "the relay lists ANOTHER key: do not trust this pairing",
        (Some(_), None) => "not listed by the relay yet: registered at the next answer",
        (None, Some(_)) => "the relay lists a key these credentials do not hold: pair again",
        (None, None) => "none yet: one is drawn and registered at the next answer",
    };
    if global.json {
        return output::json(&serde_json::json!({
            "deviceId": c.device_id,
            "name": record.device.name,
            "role": c.role,
            "agentId": c.agent_id,
            "agentName": c.agent_name,
            "relayUrl": c.relay_url,
            "pairedAt": record.device.created_at,
            "signingKey": key,
            "signingFingerprint": fingerprint,
            "relaySigningKey": record.device.signing_key,
            "user": c.user,
        }));
    }
    println!("device:      {} ({})", record.device.name, c.device_id);
    println!("role:        {}", c.role.as_str());
    if let Some(user) = &c.user {
        println!(
            "user:        {} ({}): only the questions addressed to them",
            user.name, user.external_id
        );
    }
    println!("agent:       {} ({})", c.agent_name, c.agent_id);
    println!("relay:       {}", c.relay_url);
    println!("paired:      {}", record.device.created_at);
    match fingerprint {
        Some(fingerprint) => println!("signing key: {fingerprint} ({listed})"),
        None => println!("signing key: {listed}"),
    }
    Ok(())
}

/// `pacerelle device list`: every paired agent with this terminal's device there, and the agent's presence
/// as the device status call reports it (null, with the error, when the relay could not tell).
async fn list(global: &Global) -> Result<()> {
    let pairings = global.home.pairings()?;
    let mut rows = Vec::new();
    for pairing in &pairings {
        let status = match home::client_for(global, pairing) {
            Ok(device) => device.status().await.map_err(anyhow::Error::from),
            Err(e) => Err(e),
        };
        let c = &pairing.creds;
        let (presence, activity, error) = match &status {
            Ok(s) => (
                serde_json::Value::from(s.presence.as_str()),
                serde_json::Value::from(s.activity().as_str()),
                None,
            ),
            Err(e) => (
                serde_json::Value::Null,
                serde_json::Value::Null,
                Some(format!("{e:#}")),
            ),
        };
        rows.push(serde_json::json!({
            "agentId": c.agent_id,
            "agentName": c.agent_name,
            "deviceId": c.device_id,
            "role": c.role,
            "user": c.user,
            "relayUrl": c.relay_url,
            "presence": presence,
            "activity": activity,
            "error": error,
            "file": pairing.path,
        }));
    }
    if global.json {
        return output::json(&rows);
    }
    if rows.is_empty() {
        println!("not paired: run `pacerelle device join -` and paste a link from `pacerelle pair`");
        return Ok(());
    }
    for (pairing, row) in pairings.iter().zip(&rows) {
        let c = &pairing.creds;
        let presence = match (row["activity"].as_str(), row["error"].as_str()) {
            (Some(p), _) => p.to_string(),
            (None, Some(e)) => format!("unknown ({e})"),
            (None, None) => "unknown".to_string(),
        };
        println!("{} ({})", c.agent_name, c.agent_id);
        println!("  device:    {} ({})", c.device_id, c.role.as_str());
        if let Some(user) = &c.user {
            println!("  user:      {} ({})", user.name, user.external_id);
        }
        println!("  relay:     {}", c.relay_url);
        println!("  presence:  {presence}");
    }
    Ok(())
}

/// `answers for Alice (alice) on Acme`: the user a Partner-mode device answers for.
fn answers_for(user: &pacerelle_client::core::pairing::OfferUser, agent_name: &str) -> String {
    format!(
        "answers for {} ({}) on {agent_name}: it sees and answers only the questions addressed to {}",
        user.name, user.external_id, user.name
    )
}

/// Keeps in the device home a signing key that an answer of a device paired before signing keys just
/// registered: the stored credentials gain its seed (the file stays readable by its owner only) and are
/// otherwise written back as they were.
pub fn keep_signing_key(global: &Global, device: &DeviceClient) -> Result<()> {
    let Some(seed) = device.credentials_to_store().signing_seed else {
        return Ok(());
    };
    let agent_id = &device.credentials().agent_id;
    let Some(mut stored) = global
        .home
        .pairings()?
        .into_iter()
        .find(|p| &p.creds.agent_id == agent_id)
    else {
        return Ok(());
    };
    if stored.creds.signing_seed.is_some() {
        return Ok(());
    }
    stored.creds.signing_seed = Some(seed);
    global.home.write_pairing(&stored.creds)?;
    if let Some(fingerprint) = device.signing_fingerprint() {
        eprintln!(
            "this device now signs its answers: signing key {fingerprint} saved in {}",
            stored.path.display()
        );
    }
    Ok(())
}

pub async fn send(global: &Global, args: SendArgs) -> Result<()> {
    let text = crate::text::argument_or_file("the task", args.text, args.file.as_deref())?;
    let (_, device) = home::device_client(global, args.target.agent.as_deref(), "send a task")?;
    let session = args
        .session
        .as_deref()
        .filter(|s| *s != pacerelle_client::core::ids::ANY_SESSION);
    let stored = device.send_to(&text, args.id.as_deref(), session).await?;
    if global.json {
        output::json(
            &serde_json::json!({ "messageId": stored.id, "createdAt": stored.created_at, "created": stored.created }),
        )
    } else {
        println!("{}", stored.id);
        Ok(())
    }
}

/// One conversation line as `--json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ItemOut<'a> {
    id: &'a str,
    kind: ItemKind,
    text: &'a str,
    source_message_id: Option<&'a str>,
    state: Option<MessageState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    question: Option<&'a OpenedQuestion>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    level: Option<Level>,
    /// For an update (shown by `inbox --follow` only): what changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    subject_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject_kind: Option<pacerelle_client::core::wire::SubjectKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject_state: Option<pacerelle_client::core::wire::ItemState>,
    time: pacerelle_client::Timestamp,
    /// With several paired agents (and no `--agent`): the agent the item belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_name: Option<&'a str>,
}

/// The agent an inbox line is labelled with, when the inbox shows several agents' items.
#[derive(Debug, Clone)]
struct Label {
    agent_id: String,
    agent_name: String,
}

fn labelled<'a>(i: &'a ConversationItem, label: Option<&'a Label>) -> ItemOut<'a> {
    ItemOut {
        agent_id: label.map(|l| l.agent_id.as_str()),
        agent_name: label.map(|l| l.agent_name.as_str()),
        ..item_out(i)
    }
}

fn item_out(i: &ConversationItem) -> ItemOut<'_> {
    ItemOut {
        agent_id: None,
        agent_name: None,
        id: &i.id,
        kind: i.kind,
        text: &i.text,
        source_message_id: i.source_message_id.as_deref(),
        state: i.state,
        question: i.question.as_ref(),
        title: i.title.as_deref(),
        level: i.level,
        subject_id: i.update.as_ref().map(|u| u.subject_id.as_str()),
        subject_kind: i.update.as_ref().map(|u| u.subject_kind),
        subject_state: i.update.as_ref().map(|u| u.state),
        time: i.created_at,
    }
}

/// How a question stands, in words: time left while it can be answered.
fn question_state(q: &OpenedQuestion) -> String {
    match q.state {
        QuestionState::Pending if q.is_open() && q.approvals > 1 => format!(
            "pending, {} of {} approvals, {} left",
            q.answers.len(),
            q.approvals,
            output::until(q.expires_at)
        ),
        QuestionState::Pending if q.is_open() => format!("pending, {} left", output::until(q.expires_at)),
        QuestionState::Pending => "expired".into(),
        QuestionState::Answered if q.channel == Some(Channel::Host) => match &q.answer {
            Some(answer) => format!("answered at the computer: {}", answer_text(answer)),
            None => "answered at the computer".into(),
        },
        QuestionState::Answered => match q.answered_by_name.as_ref().or(q.answered_by.as_ref()) {
            Some(by) => format!("answered by {by}"),
            None => "answered".into(),
        },
        QuestionState::Expired => "expired".into(),
        QuestionState::Cancelled => "cancelled".into(),
    }
}

/// How a question's grant offer reads in the inbox: the command that grants, then each scope, numbered.
fn grant_offer_lines(id: &str, offer: &pacerelle_client::core::grant::GrantOffer) -> Vec<String> {
    let durations: Vec<String> = offer.durations.iter().map(|s| duration_word(*s)).collect();
    let mut lines = vec![format!(
        "or allow for {}: pacerelle answer {id} yes --for {} [--scope N]",
        durations.join(" | "),
        durations.last().map(String::as_str).unwrap_or("1h")
    )];
    for (n, scope) in offer.scopes.iter().enumerate() {
        lines.push(format!("  {}. {}", n + 1, scope_words(scope)));
    }
    lines
}

/// What a grant's scope covers, in words: the tool, the command and how it matches, the folder.
pub(crate) fn scope_words(scope: &pacerelle_client::core::grant::GrantScope) -> String {
    use pacerelle_client::core::grant::CommandMatch;
    let what = match (&scope.command, scope.matching) {
        (Some(c), Some(CommandMatch::Prefix)) => format!("{} `{c} …` (and arguments)", scope.tool),
        (Some(c), _) => format!("{} `{c}` exactly", scope.tool),
        (None, _) => format!("{} on files inside the folder", scope.tool),
    };
    format!("{what}, in {}", scope.folder)
}

/// `900` → `15m`, `3600` → `1h`, `90` → `90s`.
fn duration_word(seconds: u64) -> String {
    match seconds {
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn print_item(i: &ConversationItem, label: Option<&Label>) {
    let when = match label {
        Some(l) => format!("{}  [{}]", output::clock(i.created_at), l.agent_name),
        None => output::clock(i.created_at),
    };
    match (i.kind, &i.question) {
        (ItemKind::Message, _) => {
            let state = match i.state {
                Some(MessageState::Sent) => "sent",
                Some(MessageState::Delivered) => "delivered",
                Some(MessageState::Processed) => "processed",
                None => "",
            };
            println!("{when}  you    [{}] {}  ({state})", i.id, i.text);
        }
        (ItemKind::Question, Some(q)) => {
            let kind = match q.kind {
                QuestionKind::YesNo => "yes/no".to_string(),
                QuestionKind::Choice if q.multiple => "choose one or more".to_string(),
                QuestionKind::Choice => "choose one".to_string(),
                QuestionKind::Text => "text".to_string(),
            };
            println!(
                "{when}  agent  [{}] ? {}  ({kind}; {})",
                i.id,
                q.question,
                question_state(q)
            );
            if let Some(details) = &q.details {
                for line in details.lines().take(20) {
                    println!("                {line}");
                }
            }
            for (n, option) in q.options.iter().enumerate() {
                println!("                {}. {option}", n + 1);
            }
            if q.is_open() {
                let hint = match q.kind {
                    QuestionKind::YesNo => "yes|no".to_string(),
                    QuestionKind::Choice => "OPTION…".to_string(),
                    QuestionKind::Text => "--text TEXT".to_string(),
                };
                println!("                answer: pacerelle answer {} {hint}", i.id);
                if let Some(offer) = &q.grants {
                    for line in grant_offer_lines(&i.id, offer) {
                        println!("                {line}");
                    }
                }
            }
        }
        (ItemKind::Notification, _) => {
            let level = match i.level {
                Some(Level::Warning) => "warning",
                Some(Level::Error) => "error",
                Some(Level::Success) => "success",
                _ => "info",
            };
            match &i.title {
                Some(title) => println!("{when}  agent  [{}] ! {level}: {title} — {}", i.id, i.text),
                None => println!("{when}  agent  [{}] ! {level}: {}", i.id, i.text),
            }
        }
        (ItemKind::Update, _) => {
            if let Some(u) = &i.update {
                let by = u
                    .meta
                    .as_ref()
                    .and_then(|m| m.answered_by_name.as_ref().or(m.answered_by.as_ref()))
                    .filter(|_| u.state == pacerelle_client::core::wire::ItemState::Answered)
                    .map(|by| format!(" by {by}"))
                    .unwrap_or_default();
                println!(
                    "{when}  relay  [{}] is now {}{by}",
                    u.subject_id,
                    u.state.as_str()
                );
            }
        }
        _ => {
            let source = i.source_message_id.as_deref().unwrap_or("?");
            println!("{when}  agent  [{}] ↳ {}  {}", i.id, source, i.text);
        }
    }
}

/// Everything a device's conversation holds now, page by page, and the cursor after it.
async fn read_all(
    device: &DeviceClient,
    label: Option<&Label>,
) -> Result<(Vec<ConversationItem>, Option<Cursor>)> {
    let mut cursor: Option<Cursor> = None;
    let mut all = Vec::new();
    loop {
        let page = device.conversation(cursor, Duration::ZERO).await?;
        for r in &page.rejected {
            let of = label.map(|l| format!(" of {}", l.agent_name)).unwrap_or_default();
            eprintln!(
                "warning: item {}{of} did not open (altered or not for this device); skipped",
                r.message_id
            );
        }
        let empty = page.items.is_empty();
        cursor = Some(page.cursor);
        // The listing shows each task and question in its state now: the updates that led there are only
        // followed (`--follow`).
        all.extend(page.items.into_iter().filter(|i| i.kind != ItemKind::Update));
        if empty {
            return Ok((all, cursor));
        }
    }
}

fn emit(json: bool, i: &ConversationItem, label: Option<&Label>) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(&labelled(i, label))?);
    } else {
        print_item(i, label);
    }
    Ok(())
}

/// Prints a device's new items as they come (the client's [`pacerelle_client::device::Follow`]), until a lasting
/// error.
async fn follow(
    json: bool,
    device: DeviceClient,
    cursor: Option<Cursor>,
    label: Option<Label>,
) -> Result<()> {
    let mut follow = device.follow(cursor);
    while let Some(followed) = follow.next().await {
        match followed {
            Followed::Page(page) => page
                .items
                .iter()
                .try_for_each(|i| emit(json, i, label.as_ref()))?,
            Followed::Error {
                error,
                retry_in: Some(pause),
            } => {
                let of = label
                    .as_ref()
                    .map(|l| format!(" ({})", l.agent_name))
                    .unwrap_or_default();
                eprintln!(
                    "relay unreachable{of}, retrying in {:.1} s: {error}",
                    pause.as_secs_f64()
                );
            }
            Followed::Error { error, .. } => return Err(error.into()),
        }
    }
    Ok(())
}

pub async fn inbox(global: &Global, args: InboxArgs) -> Result<()> {
    let pairings = home::pick(global, args.target.agent.as_deref())?;
    if pairings.len() > 1 {
        return inbox_of_several(global, args, pairings).await;
    }
    let (_, device) = home::device_client(global, args.target.agent.as_deref(), "read its inbox")?;
    let (all, cursor) = read_all(&device, None).await?;
    if !args.follow {
        if global.json {
            return output::json(&all.iter().map(item_out).collect::<Vec<_>>());
        }
        if all.is_empty() {
            println!("nothing yet: send a task with `pacerelle send TEXT`");
        }
        all.iter().for_each(|i| print_item(i, None));
        return Ok(());
    }
    all.iter().try_for_each(|i| emit(global.json, i, None))?;
    tokio::select! {
        done = follow(global.json, device, cursor, None) => done,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// `inbox` with several paired agents and no `--agent`: every agent's items, each labelled with its agent,
/// the questions still open first, then the rest by time. An agent whose items cannot be read is named in a
/// warning; the command fails only when none can be read.
async fn inbox_of_several(global: &Global, args: InboxArgs, pairings: Vec<home::Pairing>) -> Result<()> {
    let mut items: Vec<(ConversationItem, usize)> = Vec::new();
    let mut followed = Vec::new();
    let mut last_error = None;
    for pairing in &pairings {
        let label = Label {
            agent_id: pairing.creds.agent_id.clone(),
            agent_name: pairing.creds.agent_name.clone(),
        };
        let read = match home::client_for(global, pairing) {
            Ok(device) => read_all(&device, Some(&label)).await.map(|r| (device, r)),
            Err(e) => Err(e),
        };
        match read {
            Ok((device, (all, cursor))) => {
                let n = followed.len();
                items.extend(all.into_iter().map(|i| (i, n)));
                followed.push((device, cursor, label));
            }
            Err(e) => {
                eprintln!(
                    "warning: the inbox of {} could not be read: {e:#}",
                    pairing.label()
                );
                last_error = Some(e);
            }
        }
    }
    if followed.is_empty()
        && let Some(e) = last_error
    {
        return Err(e);
    }
    let open = |i: &ConversationItem| i.question.as_ref().is_some_and(|q| q.is_open());
    items.sort_by_key(|(i, _)| (!open(i), i.created_at));
    if !args.follow {
        if global.json {
            return output::json(
                &items
                    .iter()
                    .map(|(i, n)| labelled(i, Some(&followed[*n].2)))
                    .collect::<Vec<_>>(),
            );
        }
        if items.is_empty() {
            println!("nothing yet: send a task with `pacerelle send --agent AGENT TEXT`");
        }
        items
            .iter()
            .for_each(|(i, n)| print_item(i, Some(&followed[*n].2)));
        return Ok(());
    }
    items
        .iter()
        .try_for_each(|(i, n)| emit(global.json, i, Some(&followed[*n].2)))?;
    let mut tasks = tokio::task::JoinSet::new();
    for (device, cursor, label) in followed {
        let json = global.json;
        tasks.spawn(async move {
            let name = label.agent_name.clone();
            (name, follow(json, device, cursor, Some(label)).await)
        });
    }
    let mut last_error = None;
    loop {
        tokio::select! {
            done = tasks.join_next() => match done {
                Some(Ok((name, Err(e)))) => {
                    eprintln!("warning: stopped following {name}: {e:#}");
                    last_error = Some(e);
                }
                Some(Ok((_, Ok(())))) => {}
                Some(Err(e)) => return Err(e.into()),
                None => return last_error.map_or(Ok(()), Err),
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

pub async fn status(global: &Global, args: StatusArgs) -> Result<()> {
    let use_agent = match args.side.as_deref() {
        Some("agent") => true,
        Some(_) => false,
        None if args.agent.is_some() => false,
        None => {
            std::env::var_os("PACERELLE_AGENT_TOKEN").is_some()
                || (global.home.read_agent()?.is_some() && global.home.pairings()?.is_empty())
        }
    };
    let (status, fingerprint) = if use_agent {
        (home::agent_client(global)?.status().await?, None)
    } else {
        let (_, device) = home::device_client(global, args.agent.as_deref(), "show its status")?;
        (device.status().await?, device.signing_fingerprint())
    };
    if global.json {
        // The status as the relay gives it, with the one word every surface shows.
        let mut value = serde_json::to_value(&status)?;
        value["activity"] = serde_json::Value::from(status.activity().as_str());
        return output::json(&value);
    }
    print_status(&status);
    if !use_agent {
        match fingerprint {
            Some(fingerprint) => println!("signing key: {fingerprint}"),
            None => println!("signing key: none yet (registered at the next answer)"),
        }
    }
    Ok(())
}

fn print_status(s: &Status) {
    use pacerelle_client::core::wire::{Activity, Presence};
    let activity = match s.activity() {
        Activity::Asking if s.open_questions == 1 => "asking — a question waits for an answer".to_string(),
        Activity::Asking => format!("asking — {} questions wait for an answer", s.open_questions),
        Activity::Working => "working — a task is in progress".into(),
        Activity::Listening => "listening — ready for a task".into(),
        Activity::Offline => "offline — tasks wait on the relay".into(),
    };
    let presence = match s.presence {
        Presence::Offline => "offline — no agent session is connected",
        Presence::Connected => "connected — an agent session is up but not listening",
        Presence::Listening => "listening — the agent is waiting for tasks",
        Presence::Busy => "busy — the agent is working on a task",
        Presence::WaitingConfirmation => "probably waiting for a confirmation on the computer",
    };
    println!("agent:       {} ({})", s.agent.name, s.agent.agent_id);
    println!("activity:    {activity}");
    println!("presence:    {presence}");
    if s.lists_sessions() {
        println!("sessions:");
        for one in &s.sessions {
            let folder = one
                .folder
                .as_deref()
                .map(|f| format!(" in {f}"))
                .unwrap_or_default();
            println!(
                "  {:<12} {}, {}{folder}, since {}",
                one.name,
                one.presence.as_str(),
                one.host,
                one.since
            );
        }
    } else if let Some(h) = &s.session {
        println!("session:     {} since {}", h.host, h.since);
    }
    println!(
        "tasks:       {} waiting, {} in progress, {} processed",
        s.messages.waiting, s.messages.in_progress, s.messages.processed
    );
    if let Some(t) = s.last_checkpoint_at {
        println!("checkpoint:  {t}");
    }
    println!("devices:     {}", s.devices);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::{Answer, Timestamp};

    fn answered(channel: Option<Channel>, by: Option<&str>, answer: Option<Answer>) -> OpenedQuestion {
        OpenedQuestion {
            grants: None,
            approvals: 1,
            answers: Vec::new(),
            question_id: "q1".into(),
            question: "Deploy?".into(),
            kind: QuestionKind::YesNo,
            options: Vec::new(),
            multiple: false,
            details: None,
            state: QuestionState::Answered,
            expires_at: Timestamp(0),
            answered_by: by.map(str::to_string),
            answered_at: Some(Timestamp(0)),
            answered_by_name: by.map(|b| format!("{b}'s phone")),
            answer,
            channel,
            created_at: Timestamp(0),
            digest: String::new(),
            answer_key: None,
        }
    }

    #[test]
    fn a_question_answered_at_the_computer_says_so_with_its_answer() {
        let here = answered(Some(Channel::Host), None, Some(Answer::Yes));
        assert_eq!(question_state(&here), "answered at the computer: yes");
        let unread = answered(Some(Channel::Host), None, None);
        assert_eq!(question_state(&unread), "answered at the computer");
        let phone = answered(Some(Channel::Phone), Some("Ana"), Some(Answer::No));
        assert_eq!(question_state(&phone), "answered by Ana's phone");
    }
}
